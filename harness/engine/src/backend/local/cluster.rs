//! A real control plane on this machine: upstream etcd, kube-apiserver, kube-scheduler and
//! kube-controller-manager as child processes, agents as child processes, fake nodes that
//! heartbeat like KWOK's; certificates, kubeconfigs, data and logs in one run directory. This is
//! the one launcher behind `kubechaos cluster up` and `--backend local`.
//!
//! Every child runs as `setpriv --pdeathsig KILL -- unshare --uts -- sh -c 'hostname NAME; exec BIN …'`,
//! in its own process group:
//! - the parent-death signal kills it if kubechaos itself dies, even by SIGKILL, so no run leaves
//!   a process behind;
//! - its own UTS namespace gives it the hostname `NAME` (`kube-scheduler-1`), so the identity that
//!   upstream writes into the Lease (`hostname_uuid`) says which replica holds it, in the same
//!   `PROCESS_x` shape as the sim (this needs root: `unshare --uts` needs CAP_SYS_ADMIN);
//! - its own process group keeps a terminal's Ctrl-C away from it: kubechaos stops it, in order.
//!
//! Every client of the API server (component replicas, agents, fake nodes) reaches it through its
//! own [`Proxy`], and the API server reaches etcd through one, so that a partition can cut any one
//! link. kubectl and the harness's observer talk to the API server directly.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use nix::sys::signal::Signal;
use serde_json::json;
use tokio::process::Child;

use super::build;
use super::error::LocalError;
use super::pki::{self, Pki};
pub use super::pods::PodAgent;
use super::pods::{self, signal_group, Launch, LocalContainers, PodEnvironment};
pub use super::pods::{Hooks, Quiet, When};
use super::proxy::Proxy;
use super::runs::RunRecord;
use crate::backend::driver::{API_SERVER, ETCD};
use crate::clock::SystemClock;
use crate::observer::PROBE_NAMESPACE;
use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::{AgentMode, Component, LeaseRef, Manifest, Scenario};

/// What an agent replica runs.
#[derive(Clone, Debug)]
pub(crate) enum AgentRun {
    /// The reference agent (`kubechaos agent`) in this mode.
    Reference(AgentMode),
    /// The user's own program.
    Command(Vec<String>),
}

/// A group of leader-elected agent replicas.
#[derive(Clone, Debug)]
pub struct AgentGroup {
    /// Group name; replicas are `NAME-0`, … .
    pub(crate) name: String,
    /// Replicas.
    pub(crate) replicas: u32,
    /// The Lease they compete for.
    pub(crate) lease: LeaseRef,
    /// What each replica runs.
    pub(crate) run: AgentRun,
}

/// What to start.
#[derive(Clone, Debug, Default)]
pub struct Spec {
    /// What it is for, shown by `kubechaos cluster status` (`cluster up`, `scenario api-restart`).
    pub purpose: String,
    /// Fake nodes `node-0` … .
    pub nodes: u32,
    /// Replicas per component.
    pub components: BTreeMap<Component, u32>,
    /// Agent groups.
    pub agents: Vec<AgentGroup>,
    /// The components run as Deployments, their pods run by the fake nodes
    /// ([`crate::selfhosted`]), rather than as processes of their own.
    pub self_hosted: bool,
    /// Pod agents: their candidates are the pods (of the manifests) their selectors match.
    pub pod_agents: Vec<(PodAgent, LeaseRef)>,
    /// Objects applied once the control plane is up, before time zero.
    pub manifests: Vec<Manifest>,
    /// Serve the `api-errors` admission webhook and register it with the API server.
    pub api_errors: bool,
    /// etcd members, one cluster (0 or 1: one member, named `etcd`).
    pub etcd_members: u32,
    /// API servers behind one address (0 or 1: one, named `api-server`).
    pub api_servers: u32,
}

impl AgentGroup {
    /// The groups a scenario's `cluster.agents` asks for.
    pub(crate) fn of(s: &Scenario) -> Vec<AgentGroup> {
        s.cluster
            .agents
            .iter()
            .filter(|a| !a.is_pods())
            .map(|a| AgentGroup {
                name: a.name.clone(),
                replicas: a.replicas,
                lease: a.lease.clone(),
                run: match &a.command {
                    Some(cmd) => AgentRun::Command(cmd.clone()),
                    None => AgentRun::Reference(a.mode.unwrap_or(AgentMode::Correct)),
                },
            })
            .collect()
    }

    /// How to start incarnation `inc` of replica `replica` (process `name`), reaching the API
    /// server with `kubeconfig`; `agent_exe` runs the reference agent. Its identity is
    /// `NAME_INC`, given in `KUBECHAOS_IDENTITY` beside `KUBECONFIG`, `KUBECHAOS_LEASE` and
    /// `KUBECHAOS_REPLICA`.
    pub(crate) fn launch(
        &self,
        replica: u32,
        name: &str,
        inc: u32,
        kubeconfig: &str,
        agent_exe: &Path,
    ) -> Result<Launch, LocalError> {
        let identity = format!("{name}_{inc}");
        let env = vec![
            ("KUBECONFIG".to_owned(), kubeconfig.to_owned()),
            ("KUBECHAOS_IDENTITY".to_owned(), identity.clone()),
            ("KUBECHAOS_LEASE".to_owned(), self.lease.to_string()),
            ("KUBECHAOS_REPLICA".to_owned(), replica.to_string()),
        ];
        Ok(match &self.run {
            AgentRun::Reference(mode) => (
                agent_exe.to_path_buf(),
                vec![
                    "agent".into(),
                    format!("--kubeconfig={kubeconfig}"),
                    format!("--lease={}", self.lease),
                    format!("--identity={identity}"),
                    format!("--mode={}", mode.name()),
                ],
                env,
            ),
            AgentRun::Command(cmd) => {
                let (bin, args) = cmd.split_first().ok_or_else(|| {
                    LocalError::Launch(format!("agent {} has an empty command", self.name))
                })?;
                (PathBuf::from(bin), args.to_vec(), env)
            }
        })
    }
}

impl Spec {
    /// What a scenario's `cluster:` asks for.
    pub(crate) fn of(s: &Scenario) -> Spec {
        Spec {
            purpose: format!("scenario {}", s.name),
            nodes: s.cluster.nodes,
            components: s
                .cluster
                .components
                .iter()
                .map(|(c, spec)| (*c, spec.replicas))
                .collect(),
            agents: AgentGroup::of(s),
            self_hosted: s.cluster.self_hosted,
            pod_agents: s
                .cluster
                .agents
                .iter()
                .filter_map(|a| {
                    let p = a.pods.as_ref()?;
                    Some((
                        PodAgent {
                            name: a.name.clone(),
                            namespace: p.namespace.clone(),
                            // Validated when the scenario was loaded.
                            selector: kubechaos_core::selector::parse(&p.selector).ok()?,
                        },
                        a.lease.clone(),
                    ))
                })
                .collect(),
            manifests: s.cluster.manifests.clone(),
            api_errors: s
                .faults
                .iter()
                .any(|f| matches!(f.action, kubechaos_core::scenario::Action::ApiErrors(_))),
            etcd_members: s.cluster.etcd.members,
            api_servers: s.cluster.api_servers,
        }
    }

    /// The API servers' process names (`api-server`, or `api-server-0` … when there are
    /// several), as the scenario names them.
    pub(crate) fn api_server_names(&self) -> Vec<String> {
        kubechaos_core::scenario::member_names(API_SERVER, self.api_servers)
    }

    /// The etcd members' process names (`etcd`, or `etcd-0` … when there are several), as the
    /// scenario names them.
    pub(crate) fn etcd_names(&self) -> Vec<String> {
        kubechaos_core::scenario::member_names(ETCD, self.etcd_members)
    }

    /// Every process, in start order: etcd, the API servers, components (unless self-hosted:
    /// then they are pods), agents, nodes.
    pub(crate) fn processes(&self) -> Vec<String> {
        let mut names = self.etcd_names();
        names.extend(self.api_server_names());
        names.extend(self.clients().into_iter().map(|(n, _)| n));
        names
    }

    /// Every client of the API server, with what it is.
    fn clients(&self) -> Vec<(String, Kind)> {
        let mut out = Vec::new();
        for (c, replicas) in self.components.iter().filter(|_| !self.self_hosted) {
            for i in 0..*replicas {
                out.push((process_name(c.name(), i), Kind::Component(*c)));
            }
        }
        for (g, group) in self.agents.iter().enumerate() {
            for i in 0..group.replicas {
                out.push((process_name(&group.name, i), Kind::Agent(g, i)));
            }
        }
        for i in 0..self.nodes {
            out.push((process_name("node", i), Kind::Node));
        }
        out
    }

    /// Every lease that must be held before the cluster counts as ready.
    fn leases(&self) -> Vec<LeaseRef> {
        let mut out = self.control_plane_leases();
        out.extend(self.pod_agents.iter().map(|(_, l)| l.clone()));
        out
    }

    /// The Leases of what kubechaos starts itself: components and `command`/reference agents
    /// (not the pods of the scenario's manifests).
    fn control_plane_leases(&self) -> Vec<LeaseRef> {
        let mut out: Vec<LeaseRef> = self
            .components
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(c, _)| c.lease())
            .collect();
        out.extend(self.agents.iter().map(|a| a.lease.clone()));
        out
    }
}

/// What a process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Member index.
    Etcd(u32),
    /// Index among the API servers.
    ApiServer(u32),
    Component(Component),
    /// Group index and replica.
    Agent(usize, u32),
    Node,
}

/// The context name written into kubeconfigs.
pub(crate) const CONTEXT: &str = "kubechaos-local";

/// How long `up` waits for the control plane to be ready.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// How long `start` waits for a stopped process that has not exited yet before it kills it: the
/// plan says when the process runs again, and it must not slip by a long shutdown.
pub(crate) const START_WAIT: Duration = Duration::from_secs(3);

/// How long after the manifests are applied a pod agent's first pod must have started: a
/// Deployment's pods are made, bound and started within a few seconds.
const POD_AGENT_WAIT: Duration = Duration::from_secs(30);

/// Per-request timeout of the fake nodes' clients (a partitioned node's request must end).
const NODE_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What [`LocalCluster::keep_running`] knows of each process: how many times it was started
/// again, when it is due to start (while it is down), and since when it runs.
#[derive(Default)]
pub struct Restarts(BTreeMap<String, (u32, Option<Instant>, Instant)>);

/// A running local control plane. Dropping it kills every child.
pub struct LocalCluster {
    tempdir: Option<tempfile::TempDir>,
    /// The run directory.
    pub dir: PathBuf,
    /// kubeconfig of the admin identity (for kubectl and the harness): straight to the API
    /// server, or with several to the admin's balancer.
    pub admin_kubeconfig: PathBuf,
    /// A client as admin, through the same way.
    pub(crate) admin: kube::Client,
    /// A client as admin straight to each API server, for its readiness.
    direct: Vec<kube::Client>,
    spec: Spec,
    bins: PathBuf,
    agent_exe: PathBuf,
    pki: Pki,
    ports: Ports,
    advertise: IpAddr,
    kinds: BTreeMap<String, Kind>,
    /// Each client's links to the API servers (one proxy that balances among them).
    proxies: BTreeMap<String, Proxy>,
    /// Each API server's link to each etcd member: (API server, member).
    etcd_links: BTreeMap<(String, String), Proxy>,
    /// With several API servers: the admin's (kubectl's, the observer's) balancer, which sends a
    /// new connection to a ready API server, and the health check that keeps its view.
    balancer: Option<(Proxy, tokio::task::JoinHandle<()>)>,
    /// Each API server's last answer to kubeadm's liveness probe (`/livez`), kept by a task that
    /// asks it every [`LIVEZ_PERIOD`] (see [`LocalCluster::alive`]).
    liveness: BTreeMap<
        String,
        (
            Arc<std::sync::atomic::AtomicBool>,
            tokio::task::JoinHandle<()>,
        ),
    >,
    /// Each API server's watch for its first `ok` readiness since it (or an etcd member) was
    /// started again (see [`LocalCluster::watch_serving`]).
    serving: BTreeMap<String, tokio::task::JoinHandle<()>>,
    hooks: Arc<dyn Hooks>,
    children: BTreeMap<String, Child>,
    /// Signalled to stop, not yet reaped.
    stopping: BTreeMap<String, Child>,
    incarnations: BTreeMap<String, u32>,
    nodes: BTreeMap<String, tokio::task::JoinHandle<()>>,
    /// What the fake nodes run for their pods.
    pub(crate) containers: Arc<LocalContainers>,
    /// Where the API server reads the pods' logs (kept for as long as the cluster runs).
    _kubelet: super::kubelet::Kubelet,
    /// The `api-errors` webhook, if the run has such steps.
    webhook: Option<super::webhook::Webhook>,
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for task in self.nodes.values() {
            task.abort();
        }
        if let Some((_, health)) = &self.balancer {
            health.abort();
        }
        for (_, task) in self.liveness.values() {
            task.abort();
        }
        for task in self.serving.values() {
            task.abort();
        }
        self.containers.kill_all();
        for child in self.children.values().chain(self.stopping.values()) {
            signal_group(child, Signal::SIGKILL);
        }
    }
}

#[derive(Clone, Debug)]
struct Ports {
    /// Each etcd member's client and peer ports.
    etcd: Vec<(u16, u16)>,
    /// Each API server's port.
    api: Vec<u16>,
}

/// A port on 127.0.0.1 that nothing listens on, for a child to bind a moment later. It is taken
/// below the kernel's ephemeral range (`ip_local_port_range`): a port the kernel hands out to
/// every outgoing connection on the machine can be taken in that moment (seen with eight local
/// control planes at once: kube-apiserver failed with "address already in use"), a random port
/// below it only by another program that picks ports the same way.
fn free_port() -> Result<u16, LocalError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low);
    if high > low + 1000 {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ (u64::from(std::process::id()) << 32)
            ^ SEQUENCE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        let mut x = seed | 1;
        for _ in 0..64 {
            // xorshift64: enough to spread the tries of concurrent runs.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let port = low + (x % u64::from(high - low)) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| LocalError::Machine {
            what: "cannot find a free port on 127.0.0.1".to_owned(),
            source: Some(e),
        })
}

/// A non-loopback IPv4 address of this machine: kube-apiserver rejects a loopback
/// `--advertise-address`. Nothing connects to it (the API server binds 127.0.0.1 only).
fn advertise_address() -> Result<IpAddr, LocalError> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    let mut prev = "";
    for line in trie.lines() {
        if line.contains("/32 host LOCAL") {
            if let Some(ip) = prev
                .split_whitespace()
                .last()
                .and_then(|s| s.parse::<IpAddr>().ok())
            {
                if !ip.is_loopback() {
                    return Ok(ip);
                }
            }
        }
        prev = line;
    }
    Err(LocalError::Machine {
        what: "this machine has no non-loopback IPv4 address, and kube-apiserver rejects a loopback --advertise-address".to_owned(),
        source: None,
    })
}

/// The program that runs reference agents: this executable (`kubechaos agent`), unless
/// `KUBECHAOS_EXE` names another.
pub(crate) fn agent_exe() -> Result<PathBuf, LocalError> {
    match std::env::var_os("KUBECHAOS_EXE") {
        Some(p) => Ok(PathBuf::from(p)),
        None => std::env::current_exe().map_err(|e| LocalError::Machine {
            what: "cannot find the kubechaos executable to run agents".to_owned(),
            source: Some(e),
        }),
    }
}

impl LocalCluster {
    /// Build (once) and start a control plane; returns when the API is ready, every lease
    /// (components, agents) is held and every node is Ready. `keep`: leave the run directory
    /// after `down`. Processes started after this (restarts) need the Tokio runtime entered.
    pub async fn up(
        spec: &Spec,
        keep: bool,
        hooks: Arc<dyn Hooks>,
        say: &mut dyn FnMut(&str),
    ) -> Result<LocalCluster, LocalError> {
        let pins = build::Pins::embedded()?;
        let bins = build::ensure(&pins, say)?;
        let agent_exe = if spec.agents.is_empty() && spec.manifests.is_empty() {
            // Pods made later (`cluster up` used as an existing cluster) may run `kubechaos`.
            agent_exe().unwrap_or_default()
        } else {
            agent_exe()?
        };
        let tempdir = tempfile::Builder::new()
            .prefix("kubechaos-")
            .tempdir()
            .map_err(LocalError::file(
                "create",
                std::env::temp_dir().join("kubechaos-*"),
            ))?;
        let dir = tempdir.path().to_path_buf();
        let advertise = advertise_address()?;
        let pki = pki::generate(
            &dir.join("pki"),
            &["127.0.0.1".parse().expect("ip"), advertise],
        )?;
        std::fs::create_dir_all(dir.join("logs"))
            .map_err(LocalError::file("create", dir.join("logs")))?;
        // Different ports, two per etcd member and one per API server (each is free, but nothing
        // holds them until the children bind).
        let members = spec.etcd_names();
        let apis = spec.api_server_names();
        let mut chosen: Vec<u16> = Vec::new();
        while chosen.len() < 2 * members.len() + apis.len() {
            let p = free_port()?;
            if !chosen.contains(&p) {
                chosen.push(p);
            }
        }
        let ports = Ports {
            etcd: chosen[..2 * members.len()]
                .chunks(2)
                .map(|c| (c[0], c[1]))
                .collect(),
            api: chosen[2 * members.len()..].to_vec(),
        };
        let local = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let api_addrs: Vec<SocketAddr> = ports.api.iter().map(|p| local(*p)).collect();
        let proxy_error = |e| LocalError::Machine {
            what: "cannot start a proxy on 127.0.0.1".to_owned(),
            source: Some(e),
        };
        // Several API servers: kubectl and the observer (not part of the system under test)
        // reach them through a balancer that sends each new connection to one that is ready
        // (`/readyz`, which fails when it cannot reach etcd), as a load balancer with health
        // checks does, and resets the connections to one that stops being ready.
        let balancer = if apis.len() > 1 {
            let health: Arc<Vec<std::sync::atomic::AtomicBool>> =
                Arc::new(apis.iter().map(|_| true.into()).collect());
            let p =
                Proxy::balance(api_addrs.clone(), 0, Some(health.clone())).map_err(proxy_error)?;
            Some((p, health))
        } else {
            None
        };
        let server = match &balancer {
            Some((p, _)) => format!("https://127.0.0.1:{}", p.addr.port()),
            None => format!("https://127.0.0.1:{}", ports.api[0]),
        };
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        write_file(
            &admin_kubeconfig,
            &pki::kubeconfig(&pki, "admin", &server, CONTEXT)?,
        )?;

        let mut kinds = BTreeMap::new();
        for (i, a) in apis.iter().enumerate() {
            kinds.insert(a.clone(), Kind::ApiServer(i as u32));
        }
        for (i, m) in members.iter().enumerate() {
            kinds.insert(m.clone(), Kind::Etcd(i as u32));
        }
        let mut proxies = BTreeMap::new();
        // Each API server reaches each etcd member through a proxy of its own: the link
        // between them.
        let mut etcd_links = BTreeMap::new();
        for a in &apis {
            for (m, (client, _)) in members.iter().zip(&ports.etcd) {
                etcd_links.insert(
                    (a.clone(), m.clone()),
                    Proxy::start(local(*client)).map_err(proxy_error)?,
                );
            }
        }
        for (name, kind) in spec.clients() {
            let first = crate::backend::landing(&name, api_addrs.len());
            let p = Proxy::balance(api_addrs.clone(), first, None).map_err(proxy_error)?;
            let identity = match kind {
                Kind::Component(c) => c.name(),
                _ => "admin",
            };
            let via = format!("https://127.0.0.1:{}", p.addr.port());
            write_file(
                &dir.join(format!("{name}.kubeconfig")),
                &pki::kubeconfig(&pki, identity, &via, CONTEXT)?,
            )?;
            proxies.insert(name.clone(), p);
            kinds.insert(name, kind);
        }
        if spec.self_hosted {
            // Each node's own /etc/kubernetes for the components' pods (see `pods`).
            for i in 0..spec.nodes {
                let node = process_name("node", i);
                let etc = pods::node_root(&dir, &node).join("etc/kubernetes");
                std::fs::create_dir_all(&etc).map_err(LocalError::file("create", &etc))?;
                let via = format!("https://127.0.0.1:{}", proxies[&node].addr.port());
                for (c, file) in [
                    (Component::KubeScheduler, "scheduler.conf"),
                    (Component::KubeControllerManager, "controller-manager.conf"),
                ] {
                    write_file(
                        &etc.join(file),
                        &pki::kubeconfig(&pki, c.name(), &via, CONTEXT)?,
                    )?;
                }
                let link = etc.join("pki");
                if !link.exists() {
                    std::os::unix::fs::symlink(&pki.dir, &link)
                        .map_err(LocalError::file("link", &link))?;
                }
            }
        }
        let record = RunRecord {
            pid: std::process::id(),
            purpose: spec.purpose.clone(),
            kubeconfig: admin_kubeconfig.clone(),
            keep,
        };
        write_file(
            &dir.join(RunRecord::FILE),
            &serde_json::to_string_pretty(&record).expect("record"),
        )?;
        let admin = client_for(&admin_kubeconfig, None).await?;
        // Straight to each API server, for its readiness (one: the admin's client is that).
        let mut direct = vec![admin.clone()];
        if balancer.is_some() {
            direct.clear();
            for (a, port) in apis.iter().zip(&ports.api) {
                let path = dir.join(format!("admin-{a}.kubeconfig"));
                let url = format!("https://127.0.0.1:{port}");
                write_file(&path, &pki::kubeconfig(&pki, "admin", &url, CONTEXT)?)?;
                direct.push(client_for(&path, Some(HEALTH_TIMEOUT)).await?);
            }
        }
        let kubelet = super::kubelet::Kubelet::start(&dir)?;
        let webhook = if spec.api_errors {
            Some(super::webhook::Webhook::start()?)
        } else {
            None
        };
        let containers = Arc::new(LocalContainers::new(
            bins.clone(),
            dir.clone(),
            hooks.clone(),
            PodEnvironment {
                apis: api_addrs.clone(),
                ca: pki.cert("ca"),
                kubechaos: agent_exe.clone(),
                agents: spec.pod_agents.iter().map(|(a, _)| a.clone()).collect(),
                kubelet_port: Some(kubelet.port),
            },
        ));
        let mut cluster = LocalCluster {
            tempdir: if keep {
                // Detach it: the directory outlives this run.
                let _ = tempdir.keep();
                None
            } else {
                Some(tempdir)
            },
            dir,
            admin_kubeconfig,
            admin,
            direct,
            spec: spec.clone(),
            bins,
            agent_exe,
            pki,
            ports,
            advertise,
            kinds,
            proxies,
            etcd_links,
            balancer: None,
            liveness: BTreeMap::new(),
            serving: BTreeMap::new(),
            hooks,
            children: BTreeMap::new(),
            stopping: BTreeMap::new(),
            incarnations: BTreeMap::new(),
            nodes: BTreeMap::new(),
            containers,
            _kubelet: kubelet,
            webhook,
        };
        let started = Instant::now();
        say(&format!(
            "starting etcd and kube-apiserver ({})",
            cluster.dir.display()
        ));
        for m in cluster.spec.etcd_names() {
            cluster.start(&m)?;
        }
        for a in &apis {
            cluster.start(a)?;
        }
        cluster.wait_api(started).await?;
        if let Some((p, health)) = balancer {
            let check = health_check(cluster.direct.clone(), health, p.links.clone());
            cluster.balancer = Some((p, tokio::spawn(check)));
        }
        for (a, port) in apis.iter().zip(cluster.ports.api.clone()) {
            // Straight to its port, as the kubelet on its node asks it: through no link.
            let mut config = crate::kubeclient::config(
                Some(&cluster.admin_kubeconfig),
                None,
                Some(LIVEZ_TIMEOUT),
            )
            .await?;
            config.cluster_url = format!("https://127.0.0.1:{port}").parse().expect("a URL");
            let client =
                kube::Client::try_from(config).map_err(crate::kubeclient::ClientError::Build)?;
            let live = Arc::new(std::sync::atomic::AtomicBool::new(true));
            let task = tokio::spawn(liveness(client, live.clone()));
            cluster.liveness.insert(a.clone(), (live, task));
        }
        cluster.prepare().await?;
        say(&format!(
            "API ready after {:.1}s; starting {}{} agent(s) and {} fake node(s)",
            started.elapsed().as_secs_f64(),
            if spec.self_hosted { "" } else { "components, " },
            spec.agents.iter().map(|a| a.replicas).sum::<u32>(),
            spec.nodes
        ));
        for (name, _) in spec.clients() {
            cluster.start(&name)?;
        }
        if spec.self_hosted {
            let components: BTreeMap<Component, u32> = spec.components.clone();
            let admin = cluster.admin.clone();
            let limit = READY_TIMEOUT.saturating_sub(started.elapsed());
            let phases: Mutex<Vec<String>> = Mutex::default();
            let hear = |m: &str| phases.lock().expect("phases").push(m.to_owned());
            let boot = crate::selfhosted::bootstrap(&admin, &components, spec.nodes, limit, &hear);
            tokio::pin!(boot);
            // Say each phase as it comes, and notice a child that died meanwhile.
            loop {
                tokio::select! {
                    r = &mut boot => { r?; break; }
                    () = tokio::time::sleep(Duration::from_millis(250)) => {}
                }
                for m in phases.lock().expect("phases").drain(..) {
                    say(&format!("{m} ({:.1}s)", started.elapsed().as_secs_f64()));
                }
                cluster.check_alive().await?;
            }
            for m in phases.lock().expect("phases").drain(..) {
                say(&format!("{m} ({:.1}s)", started.elapsed().as_secs_f64()));
            }
        }
        if !spec.manifests.is_empty() {
            let applied = crate::manifests::apply(&cluster.admin, &spec.manifests)
                .await
                .map_err(|e| LocalError::Manifests(Box::new(e)))?;
            say(&format!(
                "applied {} object(s) of {} manifest(s) ({:.1}s): {}",
                applied.len(),
                spec.manifests.len(),
                started.elapsed().as_secs_f64(),
                applied.join(", ")
            ));
        }
        let pods_due = Instant::now() + POD_AGENT_WAIT;
        cluster.wait_ready(started, pods_due).await?;
        say(&format!(
            "ready after {:.1}s: leases held, {} node(s) Ready",
            started.elapsed().as_secs_f64(),
            spec.nodes
        ));
        Ok(cluster)
    }

    /// Objects the run needs before anything else starts: the probe pods' namespace and
    /// `default`, each with its default ServiceAccount (the ServiceAccount admission plugin
    /// refuses pods without one, and the controller-manager that would create it may be down or
    /// not have run yet), and the agents' namespaces.
    async fn prepare(&self) -> Result<(), LocalError> {
        let mut namespaces = vec![PROBE_NAMESPACE.to_owned()];
        namespaces.extend(self.spec.agents.iter().map(|a| a.lease.namespace.clone()));
        let ns_api = Api::<Namespace>::all(self.admin.clone());
        let params = PostParams::default();
        for ns in namespaces {
            if ns_api.get_opt(&ns).await.ok().flatten().is_some() {
                continue;
            }
            let obj: Namespace =
                serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
            match crate::kubeclient::patiently(|| ns_api.create(&params, &obj)).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(source) => {
                    return Err(LocalError::Api {
                        object: format!("namespace {ns}"),
                        source,
                    })
                }
            }
        }
        let sa: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("sa");
        // `default` too: the cluster is ready before the controller-manager's first pass would
        // make its ServiceAccount, and `kubectl run` or `kubechaos recover` there needs it.
        let mut sa_namespaces = vec![PROBE_NAMESPACE, "default"];
        if self.spec.self_hosted {
            // The components' pods, made before any controller-manager runs.
            sa_namespaces.push(crate::selfhosted::NAMESPACE);
        }
        for ns in sa_namespaces {
            let api = Api::<ServiceAccount>::namespaced(self.admin.clone(), ns);
            match crate::kubeclient::patiently(|| api.create(&params, &sa)).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(source) => {
                    return Err(LocalError::Api {
                        object: format!("the default ServiceAccount in {ns}"),
                        source,
                    })
                }
            }
        }
        if let Some(webhook) = &self.webhook {
            use kube::api::{DynamicObject, GroupVersionKind};
            let gvk = GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
            );
            let resource = kube::api::ApiResource::from_gvk(&gvk);
            let obj: DynamicObject =
                serde_json::from_value(webhook.configuration()).expect("configuration");
            let api = Api::<DynamicObject>::all_with(self.admin.clone(), &resource);
            crate::kubeclient::patiently(|| api.create(&params, &obj))
                .await
                .map_err(|source| LocalError::Api {
                    object: format!(
                        "the ValidatingWebhookConfiguration {}",
                        super::webhook::CONFIGURATION
                    ),
                    source,
                })?;
        }
        Ok(())
    }

    /// The `api-errors` rules in effect from now on (the scenario has such steps, so the
    /// webhook runs).
    pub(crate) fn set_api_errors(&self, active: &[(usize, kubechaos_core::scenario::ApiErrors)]) {
        if let Some(w) = &self.webhook {
            w.set(active);
        }
    }

    /// The command line of incarnation `inc` of a child process, and its extra environment.
    fn argv(&self, name: &str, inc: u32) -> Result<Launch, LocalError> {
        let d = &self.dir;
        let p = &self.pki;
        let s = |p: PathBuf| p.display().to_string();
        let ports = &self.ports;
        let kubeconfig = s(d.join(format!("{name}.kubeconfig")));
        let kind = *self
            .kinds
            .get(name)
            .ok_or_else(|| LocalError::Launch(format!("unknown process {name}")))?;
        Ok(match kind {
            Kind::Etcd(i) => {
                let (client, peer) = ports.etcd[i as usize];
                let peer = format!("http://127.0.0.1:{peer}");
                let client = format!("http://127.0.0.1:{client}");
                // One member keeps the name and data directory it always had.
                let member = |i: usize| {
                    if ports.etcd.len() == 1 {
                        "kubechaos".to_owned()
                    } else {
                        format!("{ETCD}-{i}")
                    }
                };
                let initial: Vec<String> = ports
                    .etcd
                    .iter()
                    .enumerate()
                    .map(|(j, (_, p))| format!("{}=http://127.0.0.1:{p}", member(j)))
                    .collect();
                let data = if ports.etcd.len() == 1 {
                    d.join("etcd")
                } else {
                    d.join(format!("{ETCD}-{i}"))
                };
                (
                    self.bins.join("etcd"),
                    vec![
                        format!("--name={}", member(i as usize)),
                        format!("--data-dir={}", s(data)),
                        format!("--listen-client-urls={client}"),
                        format!("--advertise-client-urls={client}"),
                        format!("--listen-peer-urls={peer}"),
                        format!("--initial-advertise-peer-urls={peer}"),
                        format!("--initial-cluster={}", initial.join(",")),
                        "--initial-cluster-state=new".into(),
                        "--log-level=warn".into(),
                    ],
                    Vec::new(),
                )
            }
            Kind::ApiServer(i) => {
                let mut args = vec![
                    format!(
                        "--etcd-servers={}",
                        self.spec
                            .etcd_names()
                            .into_iter()
                            .map(|m| {
                                let link = &self.etcd_links[&(name.to_owned(), m)];
                                format!("http://127.0.0.1:{}", link.addr.port())
                            })
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", ports.api[i as usize]),
                    format!("--advertise-address={}", self.advertise),
                    format!("--tls-cert-file={}", s(p.cert("apiserver"))),
                    format!("--tls-private-key-file={}", s(p.key("apiserver"))),
                    format!("--client-ca-file={}", s(p.cert("ca"))),
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                    format!("--service-account-key-file={}", s(p.sa_pub())),
                    format!("--service-account-signing-key-file={}", s(p.key("sa"))),
                    "--service-cluster-ip-range=10.96.0.0/16".into(),
                    "--authorization-mode=Node,RBAC".into(),
                    // The admission plugin taints every new Node `not-ready` until the
                    // node-lifecycle controller's first pass, about 5 s after it leads, removes
                    // it. The fake nodes register Ready, before time zero, so the taint would
                    // only hold back the start; the sim's API server does not model it either.
                    "--disable-admission-plugins=TaintNodesByCondition".into(),
                    "--allow-privileged=true".into(),
                    "--profiling=false".into(),
                    "--v=1".into(),
                ];
                if ports.api.len() > 1 {
                    // Every API server advertises this machine's one address, each with its own
                    // port: the default (`lease`) reconciler of the `kubernetes` Service's
                    // endpoints would have them rewrite its port in turn. Nothing here reaches
                    // the API through that Service (pods are given their proxy's address).
                    args.push("--endpoint-reconciler-type=none".into());
                }
                (self.bins.join("kube-apiserver"), args, Vec::new())
            }
            Kind::Component(c) => {
                let mut args = vec![
                    format!("--kubeconfig={kubeconfig}"),
                    format!("--authentication-kubeconfig={kubeconfig}"),
                    format!("--authorization-kubeconfig={kubeconfig}"),
                    "--leader-elect=true".into(),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", free_port()?),
                    "--v=1".into(),
                ];
                if c == Component::KubeControllerManager {
                    args.extend([
                        // As kubeadm's manifest: with both CA files given, its delegated
                        // authentication reads no ConfigMap at start, so one started while the
                        // API server cannot answer waits in leader election instead of exiting
                        // ("unable to load configmap based request-header-client-ca-file"), as
                        // on kind's nodes (the sim's model says what was seen).
                        format!("--client-ca-file={}", s(p.cert("ca"))),
                        format!(
                            "--requestheader-client-ca-file={}",
                            s(p.cert("front-proxy-ca"))
                        ),
                        format!("--service-account-private-key-file={}", s(p.key("sa"))),
                        format!("--root-ca-file={}", s(p.cert("ca"))),
                        format!("--cluster-signing-cert-file={}", s(p.cert("ca"))),
                        format!("--cluster-signing-key-file={}", s(p.key("ca"))),
                        // As kubeadm: each controller acts as its own service account, so the
                        // RBAC bootstrap policy grants it what it needs.
                        "--use-service-account-credentials=true".into(),
                    ]);
                }
                (self.bins.join(c.name()), args, Vec::new())
            }
            Kind::Agent(g, replica) => {
                self.spec.agents[g].launch(replica, name, inc, &kubeconfig, &self.agent_exe)?
            }
            Kind::Node => return Err(LocalError::Launch(format!("{name} is not a child process"))),
        })
    }

    /// The process names, in start order.
    pub(crate) fn processes(&self) -> Vec<String> {
        self.spec.processes()
    }

    /// Start a process by name (`etcd`, `api-server`, `kube-scheduler-0`, `agent-1`, `node-0`).
    /// A process that was stopped and has not exited yet is waited for (and killed after
    /// [`START_WAIT`]) first, so that it frees its ports and files.
    pub(crate) fn start(&mut self, name: &str) -> Result<(), LocalError> {
        self.reap(name);
        let inc = self.incarnations.get(name).copied().unwrap_or(0) + 1;
        if self.kinds.get(name) == Some(&Kind::Node) {
            let kubeconfig = self.dir.join(format!("{name}.kubeconfig"));
            let node = name.to_owned();
            let containers = self.containers.clone();
            self.nodes.insert(
                name.to_owned(),
                tokio::spawn(async move {
                    match client_for(&kubeconfig, Some(NODE_REQUEST_TIMEOUT)).await {
                        Ok(client) => {
                            crate::fake_node::run(client, &node, &SystemClock, containers.as_ref())
                                .await
                        }
                        Err(e) => {
                            tracing::error!(node = %node, error = %kubechaos_core::error::chain(&e), "fake node cannot start")
                        }
                    }
                }),
            );
            self.hooks.started(name, inc, When::Now);
        } else {
            let launch = self.argv(name, inc)?;
            let log = self.log(name);
            let child = pods::spawn(
                name,
                inc,
                &launch,
                &log,
                &self.hooks,
                &pods::Isolation::OwnHostname,
            )?;
            self.children.insert(name.to_owned(), child);
        }
        self.incarnations.insert(name.to_owned(), inc);
        match self.kinds.get(name) {
            Some(Kind::ApiServer(_)) => self.watch_serving(name, true),
            Some(Kind::Etcd(_)) => {
                let apis: Vec<String> = self
                    .kinds
                    .iter()
                    .filter(|(a, k)| matches!(k, Kind::ApiServer(_)) && self.runs(a))
                    .map(|(a, _)| a.clone())
                    .collect();
                for a in apis {
                    self.watch_serving(&a, false);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Watch API server `api` (its start running now) until its etcd readiness check
    /// (`/readyz/etcd`, straight to it) first answers `ok`, every [`SERVING_PERIOD`], and tell the hooks then,
    /// at the time that check was sent: when the API is served again after it (`again`: a new
    /// start of it) or an etcd member was started. A watch still going for it is kept, unless
    /// this is a new start of it; a stop of it ends its watch.
    fn watch_serving(&mut self, api: &str, again: bool) {
        let Some(Kind::ApiServer(i)) = self.kinds.get(api) else {
            return;
        };
        if let Some(task) = self.serving.get(api) {
            if !again && !task.is_finished() {
                return;
            }
            task.abort();
        }
        let client = self.direct[(*i as usize).min(self.direct.len() - 1)].clone();
        let (hooks, name) = (self.hooks.clone(), api.to_owned());
        let inc = self.incarnations.get(api).copied().unwrap_or(1);
        let task = tokio::spawn(async move {
            let sent = first_ready(&client, k8s_openapi::jiff::Timestamp::now).await;
            hooks.serving(&name, inc, When::At(sent));
        });
        self.serving.insert(api.to_owned(), task);
    }

    /// Stop a process: SIGTERM (`graceful`) or SIGKILL to its process group. Returns at once;
    /// [`LocalCluster::start`] waits for it to be gone.
    pub(crate) fn stop(&mut self, name: &str, graceful: bool) {
        if let Some(task) = self.serving.remove(name) {
            task.abort();
        }
        if let Some(task) = self.nodes.remove(name) {
            task.abort();
            self.containers.node_stopped(name);
            return;
        }
        if let Some(child) = self.children.remove(name) {
            pods::stop(&child, graceful);
            self.stopping.insert(name.to_owned(), child);
        }
    }

    /// Wait (blocking) for a stopped process to be gone.
    fn reap(&mut self, name: &str) {
        if let Some(child) = self.stopping.remove(name) {
            pods::reap(child, START_WAIT);
        }
    }

    /// For a cluster kept up with nothing playing on it (`kubechaos cluster up`): start again,
    /// after the kubelet's back-off, every process that ended by itself, as a kubelet restarts a
    /// static pod's container (upstream's scheduler and controller-manager exit when they lose
    /// their Lease, and a real cluster has them back). Call it every second or so; returns what
    /// to say.
    pub fn keep_running(&mut self, restarts: &mut Restarts) -> Vec<String> {
        let now = Instant::now();
        let mut said = Vec::new();
        for name in self.processes() {
            let (count, due, since) = restarts.0.entry(name.clone()).or_insert((0, None, now));
            match *due {
                None => {
                    if let Some(why) = self.exited(&name) {
                        // A process that ran long enough starts again with a short back-off.
                        if now.duration_since(*since) > crate::backoff::BACKOFF_RESET {
                            *count = 0;
                        }
                        let wait = crate::backoff::backoff(*count);
                        *count += 1;
                        *due = Some(now + wait);
                        said.push(format!(
                            "{name} {why}; starting it again in {}",
                            kubechaos_core::scenario::duration::human(wait)
                        ));
                    }
                }
                Some(at) if now >= at => {
                    *due = None;
                    *since = now;
                    match self.start(&name) {
                        Ok(()) => said.push(format!("started {name} again")),
                        Err(e) => said.push(format!(
                            "could not start {name} again: {}",
                            kubechaos_core::error::chain(&e)
                        )),
                    }
                }
                Some(_) => {}
            }
        }
        said
    }

    /// What kubeadm's liveness probe of `name` answers now, for an API server: its `/livez`,
    /// which fails while its etcd does not answer (its `etcd` check). The last answer of the
    /// task that asks it every [`LIVEZ_PERIOD`]: the driver's probe, every 10 s, must not wait
    /// on an API server that is slow to answer. `None` for the other processes: kubeadm probes
    /// its other static pods too, but no model here (the sim's neither) has their probes fail
    /// while the process runs on.
    pub(crate) fn alive(&self, name: &str) -> Option<bool> {
        use std::sync::atomic::Ordering::SeqCst;
        self.liveness.get(name).map(|(live, _)| live.load(SeqCst))
    }

    /// `Some(why)` once a running process has ended by itself.
    pub(crate) fn exited(&mut self, name: &str) -> Option<String> {
        if let Some(task) = self.nodes.get(name) {
            return task.is_finished().then(|| "exited".to_owned());
        }
        let log = self.log(name);
        pods::exited(&mut self.children, name, &log)
    }

    /// Whether `name` is an etcd member.
    pub(crate) fn etcd_member(&self, name: &str) -> bool {
        matches!(self.kinds.get(name), Some(Kind::Etcd(_)))
    }

    /// Each etcd member's name and client port (not its proxy's: for kubechaos's own questions).
    /// Whether process `name` runs now (started and not stopped by the run).
    pub(crate) fn runs(&self, name: &str) -> bool {
        self.children.contains_key(name)
    }

    pub(crate) fn etcd_clients(&self) -> Vec<(String, u16)> {
        self.spec
            .etcd_names()
            .into_iter()
            .zip(self.ports.etcd.iter().map(|(c, _)| *c))
            .collect()
    }

    /// The proxy of a client process: its links to the API servers.
    pub(crate) fn proxy(&self, name: &str) -> Option<&Proxy> {
        self.proxies.get(name)
    }

    /// The proxy on API server `api`'s link to etcd member `member`.
    pub(crate) fn etcd_link(&self, api: &str, member: &str) -> Option<&Proxy> {
        self.etcd_links.get(&(api.to_owned(), member.to_owned()))
    }

    /// The index of API server `name` (`api-server`, `api-server-1`), if it is one.
    pub(crate) fn api_server(&self, name: &str) -> Option<usize> {
        match self.kinds.get(name) {
            Some(Kind::ApiServer(i)) => Some(*i as usize),
            _ => None,
        }
    }

    /// The last lines of a process's log, for error messages.
    fn log_tail(&self, name: &str, lines: usize) -> String {
        pods::log_tail(&self.log(name), lines)
    }

    /// A process's log.
    fn log(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }

    async fn check_alive(&mut self) -> Result<(), LocalError> {
        let mut dead = Vec::new();
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                dead.push((name.clone(), status));
            }
        }
        for (name, status) in dead {
            let log_tail = pods::exit_log_tail(&self.log(&name), 8).await;
            // A component's port is chosen free, but another run on this machine can bind it
            // before the component does (seen in CI with eight control planes at once): its next
            // start chooses another port. Up to three starts; etcd and the API server keep theirs.
            let component = matches!(self.kinds.get(&name), Some(Kind::Component(_)));
            let starts = self.incarnations.get(&name).copied().unwrap_or(0);
            if component && starts < 3 && log_tail.contains("address already in use") {
                self.start(&name)?;
                continue;
            }
            return Err(LocalError::Exited {
                process: name,
                status,
                log_tail,
            });
        }
        Ok(())
    }

    /// Wait until every API server is ready.
    async fn wait_api(&mut self, started: Instant) -> Result<(), LocalError> {
        let names = self.spec.api_server_names();
        let mut waiting: Vec<usize> = (0..names.len()).collect();
        loop {
            self.check_alive().await?;
            let mut still = Vec::new();
            for i in waiting {
                if !ready(&self.direct[i]).await {
                    still.push(i);
                }
            }
            waiting = still;
            if waiting.is_empty() {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(LocalError::ApiNotReady {
                    waited: READY_TIMEOUT,
                    log_tail: self.log_tail(&names[waiting[0]], 8),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait until every lease is held and every node is Ready; a pod agent none of whose pods
    /// has run by `pods_due` ends the wait at once (its selector matches nothing the manifests
    /// make).
    async fn wait_ready(&mut self, started: Instant, pods_due: Instant) -> Result<(), LocalError> {
        loop {
            self.check_alive().await?;
            let mut missing =
                crate::kubeclient::not_ready(&self.admin, &self.spec.leases(), self.spec.nodes)
                    .await;
            let mut podless = false;
            // A pod agent needs pods of its own, whoever holds its Lease.
            for (a, _) in &self.spec.pod_agents {
                if !self.containers.ran_any(&a.name) {
                    podless = true;
                    missing.push(format!(
                        "no pod in namespace {} matching the selector of agent {} ran; expected `cluster.manifests` to make pods with those labels whose container has a `command`",
                        a.namespace, a.name
                    ));
                }
            }
            if missing.is_empty() {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT || (podless && Instant::now() > pods_due) {
                // The control plane is up and its own Leases held: what is missing is the
                // workload's. Say so, with what its pods did.
                let control_plane_ready = !podless
                    && crate::kubeclient::not_ready(
                        &self.admin,
                        &self.spec.control_plane_leases(),
                        self.spec.nodes,
                    )
                    .await
                    .is_empty();
                if control_plane_ready {
                    return Err(LocalError::WorkloadNotReady {
                        waited: started.elapsed(),
                        agents: self.workload_diagnosis().await,
                    });
                }
                return Err(LocalError::NotReady {
                    waited: started.elapsed(),
                    missing,
                });
            }
            tokio::time::sleep(crate::kubeclient::READY_POLL).await;
        }
    }

    /// For each pod agent whose Lease nobody holds: which Leases its namespace has instead (a
    /// program that takes another Lease than the scenario names), and each of its pods' starts
    /// and last log lines (a missing Role's 403, a port already bound).
    async fn workload_diagnosis(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (a, lease) in &self.spec.pod_agents {
            if crate::kubeclient::lease_holder(&self.admin, lease)
                .await
                .is_ok_and(|h| h.is_some())
            {
                continue;
            }
            let pods = self.containers.report(&a.name);
            out.push(crate::kubeclient::lease_not_taken(&self.admin, &a.name, lease, &pods).await);
        }
        out
    }

    /// Stop everything: children (SIGTERM, then SIGKILL after 5s), node heartbeats, proxies;
    /// remove the run directory unless it is kept. Returns the directory when kept.
    pub async fn down(mut self) -> Option<PathBuf> {
        for (_, task) in std::mem::take(&mut self.nodes) {
            task.abort();
        }
        if let Some((_, health)) = &self.balancer {
            health.abort();
        }
        for (_, (_, task)) in std::mem::take(&mut self.liveness) {
            task.abort();
        }
        for (_, task) in std::mem::take(&mut self.serving) {
            task.abort();
        }
        let mut children: Vec<Child> = std::mem::take(&mut self.children)
            .into_values()
            .chain(std::mem::take(&mut self.stopping).into_values())
            .chain(self.containers.take_all())
            .collect();
        // A run directory that is removed needs no graceful shutdown: nothing of it is read
        // again (kube-apiserver alone drains its watches for several seconds). One that is kept
        // gets it, so that etcd's data and the logs end cleanly.
        let kept = self.tempdir.is_none();
        let signal = if kept {
            Signal::SIGTERM
        } else {
            Signal::SIGKILL
        };
        for child in &children {
            signal_group(child, signal);
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        for child in &mut children {
            if tokio::time::timeout_at(deadline, child.wait())
                .await
                .is_err()
            {
                signal_group(child, Signal::SIGKILL);
                let _ = child.wait().await;
            }
        }
        self.proxies.clear();
        self.etcd_links.clear();
        self.balancer = None;
        match self.tempdir.take() {
            Some(t) => {
                let _ = t.close();
                None
            }
            None => Some(self.dir.clone()),
        }
    }
}

/// How long a readiness question to one API server may take: its `/readyz` answers within its
/// etcd check's own timeout (2 s), even when it cannot reach etcd.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(3);

/// How often an API server started again (or whose etcd was) is asked whether it is ready,
/// until it is ([`first_ready`]): when it served again is known to this.
const SERVING_PERIOD: Duration = Duration::from_millis(250);

/// Ask the API server behind `client` whether it answers and reaches etcd (`GET /readyz/etcd`,
/// the one check of `/readyz` that says so) every [`SERVING_PERIOD`] until it says `ok`; returns
/// when the question that got it was sent, as `now` tells the time (the one before got no
/// `ok`). Not all of `/readyz`: it waits also for the post-start hooks, and kube-apiserver
/// served Lease writes 2.5 s before it said `ok` on this machine.
pub(crate) async fn first_ready<T>(client: &kube::Client, now: impl Fn() -> T) -> T {
    loop {
        let sent = now();
        if answers_ok(client, "/readyz/etcd", HEALTH_TIMEOUT).await {
            return sent;
        }
        tokio::time::sleep(SERVING_PERIOD).await;
    }
}

/// How often the admin's balancer asks each API server whether it is ready.
const HEALTH_PERIOD: Duration = Duration::from_millis(500);

/// Whether the API server behind `client` says it is ready (`GET /readyz`).
async fn ready(client: &kube::Client) -> bool {
    answers_ok(client, "/readyz", HEALTH_TIMEOUT).await
}

/// Whether the API server behind `client` answers `GET PATH` (a health endpoint) with `ok`
/// within `timeout`: the connection refused, an error or no answer in time is a no, as the
/// kubelet's HTTP probes count them.
async fn answers_ok(client: &kube::Client, path: &str, timeout: Duration) -> bool {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    matches!(
        tokio::time::timeout(timeout, client.request_text(req)).await,
        Ok(Ok(text)) if text.trim() == "ok"
    )
}

/// kubeadm's liveness probe of kube-apiserver (v1.37): `GET /livez` on the API server's own
/// address, failed when it does not answer `ok` within 15 s (`timeoutSeconds`). Its period,
/// failures and grace period are the driver's ([`crate::backoff::LIVENESS`]).
const LIVEZ_TIMEOUT: Duration = Duration::from_secs(15);

/// How often each API server's `/livez` is asked: the driver's probe takes the last answer, at
/// most this old (plus the time the question took).
const LIVEZ_PERIOD: Duration = Duration::from_secs(1);

/// Ask one API server's `/livez` every [`LIVEZ_PERIOD`] and keep its last answer in `live`
/// (the connection refused while it is down or starting: a failure).
async fn liveness(client: kube::Client, live: Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::Ordering::SeqCst;
    loop {
        live.store(answers_ok(&client, "/livez", LIVEZ_TIMEOUT).await, SeqCst);
        tokio::time::sleep(LIVEZ_PERIOD).await;
    }
}

/// The admin's balancer's health check: every [`HEALTH_PERIOD`], ask each API server whether it
/// is ready, and keep `health` to the answers; an API server that stops being ready has the
/// balancer's connections to it reset (`links`, one per API server), so that the next request
/// goes to one that is.
async fn health_check(
    direct: Vec<kube::Client>,
    health: Arc<Vec<std::sync::atomic::AtomicBool>>,
    links: Vec<Arc<super::proxy::Link>>,
) {
    use std::sync::atomic::Ordering::SeqCst;
    loop {
        let answers = futures::future::join_all(direct.iter().map(ready)).await;
        for (i, now) in answers.into_iter().enumerate() {
            let was = health[i].swap(now, SeqCst);
            if was && !now {
                links[i].reset_all();
            }
        }
        tokio::time::sleep(HEALTH_PERIOD).await;
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), LocalError> {
    std::fs::write(path, text).map_err(LocalError::file("write", path))
}

/// A kube-rs client from a kubeconfig file, with an optional per-request timeout.
pub(crate) async fn client_for(
    path: &Path,
    timeout: Option<Duration>,
) -> Result<kube::Client, crate::kubeclient::ClientError> {
    crate::kubeclient::client(Some(path), None, timeout).await
}
