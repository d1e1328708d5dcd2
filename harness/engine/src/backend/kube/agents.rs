//! Agents on an existing cluster (`cluster.agents` on `--backend kube`): processes on this
//! machine, the reference agent or the user's own `command`, with the credentials of the run's
//! kubeconfig context. Each replica reaches the API server through kubechaos's own
//! [`Proxy`], so that a partition between it and the API server cuts it off, as on the local
//! backend; kill, remove and start act on the process, and the driver restarts a killed one
//! after the kubelet's back-off. Nothing of them outlives the run: the processes die with
//! kubechaos (parent-death signal), the kubeconfigs and logs are in a directory that is removed.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::config::{Context, Kubeconfig, NamedContext};
use nix::sys::signal::Signal;
use tokio::process::Child;

use super::error::KubeError;
use super::KubeTarget;
use crate::backend::local::cluster::{agent_exe, AgentGroup, Hooks};
use crate::backend::local::error::LocalError;
use crate::backend::local::pods::{self, signal_group, Isolation};
use crate::backend::local::proxy::Proxy;
use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::Scenario;

/// How long a stopped agent gets to exit before it is killed, when it is started again.
const START_WAIT: Duration = Duration::from_secs(5);

/// The agent processes of a run on an existing cluster.
pub(crate) struct Agents {
    dir: tempfile::TempDir,
    groups: Vec<AgentGroup>,
    /// Process name -> (group index, replica), in start order.
    replicas: BTreeMap<String, (usize, u32)>,
    order: Vec<String>,
    proxies: BTreeMap<String, Proxy>,
    children: BTreeMap<String, Child>,
    stopping: BTreeMap<String, Child>,
    incarnations: BTreeMap<String, u32>,
    hooks: Arc<dyn Hooks>,
    agent_exe: PathBuf,
}

/// The API server of the run's context: its address, and its kubeconfig cut down to that
/// context.
fn api_server(target: &KubeTarget) -> Result<(SocketAddr, String, Kubeconfig), KubeError> {
    let unreachable = |what: String| KubeError::Agents { what };
    let kc =
        crate::kubeclient::read_kubeconfig(target.kubeconfig.as_deref(), target.context.as_deref())
            .map_err(|source| KubeError::Kubeconfig {
                path: target.kubeconfig.clone(),
                source,
            })?;
    let context = target
        .context
        .clone()
        .or_else(|| kc.current_context.clone())
        .ok_or(KubeError::NoContext)?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| unreachable(format!("the kubeconfig has no context `{context}`")))?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .cloned()
        .ok_or_else(|| unreachable(format!("the kubeconfig has no cluster `{}`", ctx.cluster)))?;
    let server = cluster
        .cluster
        .as_ref()
        .and_then(|c| c.server.clone())
        .ok_or_else(|| unreachable(format!("cluster `{}` has no server", ctx.cluster)))?;
    let uri: http::Uri = server
        .parse()
        .map_err(|_| unreachable(format!("the server `{server}` is not a URL")))?;
    let host = uri
        .host()
        .ok_or_else(|| unreachable(format!("the server `{server}` names no host")))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| unreachable(format!("cannot resolve {host}:{port}")))?;
    let user = ctx
        .user
        .as_ref()
        .and_then(|u| kc.auth_infos.iter().find(|a| &a.name == u))
        .cloned();
    let only = Kubeconfig {
        clusters: vec![cluster],
        auth_infos: user.into_iter().collect(),
        contexts: vec![NamedContext {
            name: "kubechaos".into(),
            context: Some(Context {
                namespace: None,
                ..ctx
            }),
            other: Default::default(),
        }],
        current_context: Some("kubechaos".into()),
        ..Kubeconfig::default()
    };
    Ok((addr, host, only))
}

impl Agents {
    /// The agents of scenario `s` on the cluster `target` names, ready to start: a proxy to its
    /// API server and a kubeconfig through it for each replica. `None` without agents.
    pub(crate) async fn prepare(
        s: &Scenario,
        target: &KubeTarget,
        hooks: Arc<dyn Hooks>,
    ) -> Result<Option<Agents>, KubeError> {
        let groups = AgentGroup::of(s);
        if groups.is_empty() {
            return Ok(None);
        }
        let failed = |what: &str| {
            let what = what.to_owned();
            move |e: LocalError| KubeError::Agents {
                what: format!("{what}: {}", kubechaos_core::error::chain(&e)),
            }
        };
        let agent_exe = agent_exe().map_err(failed("no agent program"))?;
        let (addr, host, kubeconfig) = api_server(target)?;
        // Its own directory, marked as this run's: `recover --cleanup` removes it if the run is
        // killed outright (its kubeconfigs hold the cluster's credentials).
        let dir = tempfile::Builder::new()
            .prefix(super::leftovers::AGENTS_DIR)
            .tempdir()
            .and_then(|dir| super::leftovers::mark_own(dir.path()).map(|()| dir))
            .map_err(|e| KubeError::Agents {
                what: format!("cannot create a directory for the agents: {e}"),
            })?;
        let mut agents = Agents {
            dir,
            groups,
            replicas: BTreeMap::new(),
            order: Vec::new(),
            proxies: BTreeMap::new(),
            children: BTreeMap::new(),
            stopping: BTreeMap::new(),
            incarnations: BTreeMap::new(),
            hooks,
            agent_exe,
        };
        for (g, group) in agents.groups.iter().enumerate() {
            for i in 0..group.replicas {
                let name = process_name(&group.name, i);
                let proxy = Proxy::start(addr).map_err(|e| KubeError::Agents {
                    what: format!("cannot start a proxy to {addr}: {e}"),
                })?;
                // The agent connects to the proxy, and checks the API server's certificate
                // against the name it had (`tls-server-name`).
                let mut own = kubeconfig.clone();
                for c in own.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
                    c.server = Some(format!("https://127.0.0.1:{}", proxy.addr.port()));
                    c.tls_server_name.get_or_insert_with(|| host.clone());
                }
                let path = agents.dir.path().join(format!("{name}.kubeconfig"));
                let text = serde_json::to_string_pretty(&own).expect("a kubeconfig serializes");
                std::fs::write(&path, text).map_err(|e| KubeError::Agents {
                    what: format!("cannot write {}: {e}", path.display()),
                })?;
                agents.replicas.insert(name.clone(), (g, i));
                agents.order.push(name.clone());
                agents.proxies.insert(name, proxy);
            }
        }
        Ok(Some(agents))
    }

    /// The agent processes, in start order.
    pub(crate) fn processes(&self) -> Vec<String> {
        self.order.clone()
    }

    /// Whether `name` is one of the agents.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.replicas.contains_key(name)
    }

    /// Start an agent process (with the Tokio runtime entered). A stopped one that has not
    /// exited yet is waited for, then killed, first.
    pub(crate) fn start(&mut self, name: &str) -> Result<(), LocalError> {
        if let Some(child) = self.stopping.remove(name) {
            pods::reap(child, START_WAIT);
        }
        let Some(&(g, replica)) = self.replicas.get(name) else {
            return Err(LocalError::Launch(format!("{name} is not an agent")));
        };
        let inc = self.incarnations.get(name).copied().unwrap_or(0) + 1;
        let kubeconfig = self.dir.path().join(format!("{name}.kubeconfig"));
        let launch = self.groups[g].launch(
            replica,
            name,
            inc,
            &kubeconfig.display().to_string(),
            &self.agent_exe,
        )?;
        let log = self.dir.path().join(format!("{name}.log"));
        let child = pods::spawn(name, inc, &launch, &log, &self.hooks, &Isolation::None)?;
        self.children.insert(name.to_owned(), child);
        self.incarnations.insert(name.to_owned(), inc);
        Ok(())
    }

    /// Stop an agent: SIGTERM (`graceful`, SIGKILL after the grace period) or SIGKILL.
    pub(crate) fn stop(&mut self, name: &str, graceful: bool) {
        if let Some(child) = self.children.remove(name) {
            pods::stop(&child, graceful);
            self.stopping.insert(name.to_owned(), child);
        }
    }

    /// `Some(why)` once a running agent has ended by itself.
    pub(crate) fn exited(&mut self, name: &str) -> Option<String> {
        let log = self.dir.path().join(format!("{name}.log"));
        pods::exited(&mut self.children, name, &log)
    }

    /// Cut (`cut`) or heal the link from agent `name` to the API server (`up`) or back.
    pub(crate) fn link(&self, name: &str, up: bool, cut: bool) {
        if let Some(p) = self.proxies.get(name) {
            p.set_cut(up, cut);
        }
    }

    /// Stop every agent (SIGKILL: nothing of theirs is read again) and remove their directory.
    pub(crate) async fn down(mut self) -> String {
        let mut children: Vec<Child> = std::mem::take(&mut self.children)
            .into_values()
            .chain(std::mem::take(&mut self.stopping).into_values())
            .collect();
        for child in &children {
            signal_group(child, Signal::SIGKILL);
        }
        for child in &mut children {
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        }
        self.proxies.clear();
        let n = self.order.len();
        let _ = self.dir.close();
        format!(
            "stopped {n} agent process{} on this machine",
            if n == 1 { "" } else { "es" }
        )
    }
}
