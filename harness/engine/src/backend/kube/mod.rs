//! The `kube` backend: a cluster that already exists, reached through a kubeconfig context as
//! kubectl reaches it, behind a safety guard.
//!
//! Faults that the API alone can do (`delete-pods`, `recover`, `bind`, and the probe pods of
//! `schedulable`/`unschedulable`) work on every cluster: this is the `generic` provider. Faults
//! that need the machine the cluster runs on (stopping the API server, partitions, killing a
//! component or a node) come from a [`provider`] that reaches the machines: `kind` and `k3s`
//! (k3d), through the docker CLI ([`machine`]). A fault the provider cannot do is refused before
//! anything runs, with the list of what it can do.
//!
//! The run is the same as on the other backends: the shared [`Driver`](super::driver::Driver) plays the plan in real
//! time, the same [`Observer`] watches the API server, the same invariants judge. At the end the
//! cluster is left as it was found: every machine change still in place is undone (manifests
//! moved back, iptables rules removed, containers unpaused or started), the probe pods are
//! deleted, and the `kubechaos` namespace if the run created it; the run says what it restored
//! and what it left (a recovery pod without `cleanup`, which a recovered cluster may still
//! need).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;

use super::driver::{Exit, World, WorldClock};
use super::realtime::{self, Interrupt, RealTime};
use super::BackendError;
use crate::fake_node::{ContainerOp, PodGroup};
use crate::observer::{Command, Observer, PROBE_NAMESPACE};
use crate::run::{Backend, Ready};
use kubechaos_core::events::{fmt_ms, identity_process, EventKind, Recorder};
use kubechaos_core::plan::Plan;
use kubechaos_core::report::live::Progress;
use kubechaos_core::scenario::{Action, LeaseRef, Pos, Scenario, Selector, Target};

mod agents;
#[cfg(feature = "testcontainers")]
pub(crate) mod container;
mod docker;
pub mod error;
pub mod leftovers;
pub(crate) mod machine;
mod pod_agents;
pub(crate) mod provider;
mod runtime;

use agents::Agents;
use error::KubeError;
use machine::{Docker, Machines, NodeMachine};
use pod_agents::PodAgents;
pub use provider::Provider;

/// Which existing cluster, and what may be touched.
#[derive(Clone, Debug, Default)]
pub struct KubeTarget {
    /// The kubeconfig file (default: `$KUBECONFIG`, then `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// The context (default: the kubeconfig's current context).
    pub context: Option<String>,
    /// Contexts allowed besides the disposable ones (`--allow-context`).
    pub allow: Vec<String>,
    /// How the machines are reached (`--provider`).
    pub provider: Provider,
}

/// What the kube backend cannot do with a scenario, with `provider` (before the cluster is
/// read; `auto` checks only what no provider can do).
pub(crate) fn check(s: &Scenario, provider: Provider) -> Vec<(Pos, String)> {
    provider::check(s, provider)
}

/// The context a run would use: `--context`, else the kubeconfig's current context; in a pod
/// with no kubeconfig, [`IN_CLUSTER`](crate::kubeclient::IN_CLUSTER) (its service account).
pub fn resolve_context(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<String, KubeError> {
    use crate::kubeclient::{in_a_pod, IN_CLUSTER};
    if let Some(c) = context {
        if c == IN_CLUSTER && kubeconfig.is_none() && !in_a_pod() {
            return Err(KubeError::NotInAPod);
        }
        return Ok(c.to_owned());
    }
    let kc = match kubeconfig {
        Some(p) => kube::config::Kubeconfig::read_from(p),
        None if in_a_pod() => match kube::config::Kubeconfig::read() {
            Ok(kc) => Ok(kc),
            Err(_) => return Ok(IN_CLUSTER.to_owned()),
        },
        None => kube::config::Kubeconfig::read(),
    }
    .map_err(|source| KubeError::Kubeconfig {
        path: kubeconfig.map(Path::to_owned),
        source,
    })?;
    kc.current_context
        .filter(|c| !c.is_empty())
        .ok_or(KubeError::NoContext)
}

/// The safety guard: only contexts that are obviously disposable, or allowed by name.
pub fn guard(context: &str, allow: &[String]) -> Result<(), KubeError> {
    let disposable = context.starts_with("kind-")
        || context.starts_with("k3d-")
        || context == super::local::cluster::CONTEXT;
    if disposable || allow.iter().any(|a| a == context) {
        Ok(())
    } else {
        Err(KubeError::NotDisposable {
            context: context.to_owned(),
            own: super::local::cluster::CONTEXT,
        })
    }
}

/// The longest the end of a run waits for the observer to read the Leases once more.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// The world of an existing cluster: the API, and the machines if the provider reaches them.
pub(crate) struct KubeWorld {
    time: RealTime,
    rt: tokio::runtime::Handle,
    client: kube::Client,
    commands: mpsc::UnboundedSender<Command>,
    observer: tokio::task::JoinHandle<()>,
    machines: Option<Machines>,
    recorder: kubechaos_core::events::Recorder,
    incarnations: BTreeMap<String, u32>,
    /// Set when a machine command failed: the run stops (its verdicts would mean nothing).
    failed: Arc<AtomicBool>,
    /// The agents, processes on this machine.
    agents: Option<Agents>,
    /// Agents that could not be started, and why.
    agent_failed: BTreeMap<String, crate::backend::local::error::LocalError>,
    /// The followers of the pod agents' pods.
    pod_agents: Option<PodAgents>,
    /// The proxy that holds kubechaos's own reads ($KUBECHAOS_SELF_DELAY), if it is told to.
    _self_delay: Option<crate::backend::local::proxy::Proxy>,
    /// Each API server's or etcd member's watch for the API's first `ok` readiness since it
    /// started (see [`KubeWorld::started`]).
    serving: BTreeMap<String, tokio::task::JoinHandle<()>>,
}

impl KubeWorld {
    /// The agents, if `name` is one of them.
    fn agent(&mut self, name: &str) -> Option<&mut Agents> {
        self.agents.as_mut().filter(|a| a.has(name))
    }

    /// Cut or heal a link: an agent's through its proxy, a pod agent's pod by packet filter
    /// rules in its node, the rest on the machines.
    fn cut_link(&mut self, from: &str, to: &str, cut: bool) {
        use crate::backend::driver::API_SERVER;
        match &self.agents {
            Some(a) if a.has(from) && to == API_SERVER => return a.link(from, true, cut),
            Some(a) if a.has(to) && from == API_SERVER => return a.link(to, false, cut),
            _ => {}
        }
        let pod = |name: &str| self.pod_agents.as_ref().and_then(|p| p.place(name));
        let on_pod = match (from, to) {
            (name, API_SERVER) => pod(name).map(|p| (p, true)),
            (API_SERVER, name) => pod(name).map(|p| (p, false)),
            _ => None,
        };
        match on_pod {
            Some((p, up)) if cut => {
                if let Err(why) = self.machines().cut_pod(&p, up) {
                    self.recorder.record(EventKind::ProcessNote {
                        process: p.name.clone(),
                        message: why,
                    });
                }
            }
            Some((p, up)) => self.machines().mend_pod(&p, up),
            None if cut => self.machines().cut(from, to),
            None => self.machines().mend(from, to),
        }
        self.after();
    }

    fn machines(&mut self) -> &mut Machines {
        self.machines
            .as_mut()
            .expect("machine faults are refused without a provider")
    }

    fn after(&mut self) {
        if self.machines.as_ref().is_some_and(|m| !m.errors.is_empty()) {
            self.failed.store(true, Ordering::SeqCst);
        }
    }

    fn started(&mut self, name: &str) {
        let n = self.incarnations.entry(name.to_owned()).or_insert(0);
        *n += 1;
        let incarnation = *n;
        self.recorder.record(EventKind::ProcessStarted {
            process: name.to_owned(),
            incarnation,
        });
        // An API server or etcd member started: when the API is served again (`/readyz/etcd` through
        // the observer's way to the cluster), as the local backend tells it.
        use crate::backend::driver::API_SERVER;
        let api = if name.starts_with(API_SERVER) {
            (name.to_owned(), incarnation)
        } else if name.starts_with("etcd") {
            (
                API_SERVER.to_owned(),
                self.incarnations.get(API_SERVER).copied().unwrap_or(1),
            )
        } else {
            return;
        };
        let (client, recorder) = (self.client.clone(), self.recorder.clone());
        let task = self.rt.spawn(async move {
            let sent =
                crate::backend::local::cluster::first_ready(&client, || recorder.now_ms()).await;
            recorder.record_within(
                sent,
                None,
                EventKind::ApiServerServing {
                    process: api.0,
                    incarnation: api.1,
                },
            );
        });
        if let Some(old) = self.serving.insert(name.to_owned(), task) {
            old.abort();
        }
    }
}

impl World for KubeWorld {
    fn drain(&mut self) -> Vec<String> {
        let mut unread: Vec<String> = crate::observer::settle(&self.commands, DRAIN_LIMIT)
            .into_iter()
            .collect();
        if let Some(p) = &self.pod_agents {
            unread.extend(
                self.rt
                    .block_on(p.drain(k8s_openapi::jiff::Timestamp::now())),
            );
        }
        unread
    }

    fn clock(&mut self) -> &mut dyn WorldClock {
        &mut self.time
    }
    fn stop(&mut self, name: &str, graceful: bool, hold: crate::backend::driver::Hold) {
        if let Some(a) = self.agent(name) {
            a.stop(name, graceful);
            return;
        }
        if let Some(task) = self.serving.remove(name) {
            task.abort();
        }
        self.machines().stop(name, graceful, hold);
        self.after();
    }
    fn start(&mut self, name: &str) {
        let rt = self.rt.clone();
        if let Some(a) = self.agent(name) {
            // Started from this thread (their parent-death signal follows it), with the runtime
            // entered so that their output pumps run on its workers.
            let _runtime = rt.enter();
            if let Err(e) = a.start(name) {
                self.agent_failed.insert(name.to_owned(), e);
            }
            return;
        }
        self.machines().start(name);
        self.after();
        self.started(name);
    }
    fn exited(&mut self, name: &str) -> Option<Exit> {
        if let Some(e) = self.agent_failed.remove(name) {
            return Some(Exit::Unrecorded(format!(
                "could not start: {}",
                kubechaos_core::error::chain(&e)
            )));
        }
        // The machines' processes are their kubelets' to restart: only agents end here.
        self.agent(name)?.exited(name).map(Exit::Unrecorded)
    }
    fn link(&mut self, from: &str, to: &str, state: &crate::backend::link::LinkState) {
        // Delays and losses are refused before the run (the provider check).
        self.cut_link(from, to, state.cut);
    }
    fn api_errors(&mut self, _: &[(usize, kubechaos_core::scenario::ApiErrors)]) {
        // Refused before the run (the provider check).
    }
    fn etcd_leader(&mut self) -> Option<String> {
        let leader = self.machines.as_mut()?.etcd_leader();
        self.after();
        leader
    }
    fn lease_identity(&mut self, lease: &LeaseRef) -> Option<String> {
        crate::backend::realtime::lease_identity(&self.rt, &self.client, &self.recorder, lease)
    }
    /// A control-plane component's holder identity names its node (`NODE_UUID`): the process is
    /// that component on that node.
    fn holder_process(&self, lease: &LeaseRef, identity: &str) -> String {
        let host = identity_process(identity);
        self.machines
            .as_ref()
            .and_then(|m| m.holder_process(&lease.to_string(), host))
            .unwrap_or_else(|| host.to_owned())
    }
    fn command(&mut self, c: Command) {
        let _ = self.commands.send(c);
    }
    fn containers(&mut self, group: &PodGroup, only: Option<&str>, op: ContainerOp) -> Vec<String> {
        // The check refuses self-hosted scenarios, and every step on a pod agent's pods but
        // `kill`.
        // A provider that reaches the nodes kills the container there (its kubelet restarts
        // it); otherwise the pod is deleted through the API (its owner makes another).
        let (PodGroup::Agent(agent), ContainerOp::Kill, Some(p)) = (group, op, &self.pod_agents)
        else {
            return Vec::new();
        };
        match self.machines.as_mut() {
            Some(m) => {
                let mut killed = Vec::new();
                for place in p.running_places(agent, only) {
                    if m.kill_pod(&place) {
                        killed.push(format!("{}/{}", place.namespace, place.name));
                    }
                }
                self.after();
                killed
            }
            None => self.rt.block_on(p.delete(agent, only)),
        }
    }
    fn pods(&mut self, group: &PodGroup) -> Vec<String> {
        match (group, &self.pod_agents) {
            (PodGroup::Agent(agent), Some(p)) => p.running(agent),
            _ => Vec::new(),
        }
    }
}

/// The provider to use: `--provider`, else the context's name, else the nodes.
fn resolve_provider(target: &KubeTarget, context: &str, nodes: &[Node]) -> (Provider, String) {
    match target.provider {
        Provider::Auto => match Provider::from_context(context) {
            Some(p) => (p, format!("from the context name {context}")),
            None => Provider::from_nodes(nodes),
        },
        // The command line resolves `auto` from the context's name before the run, to check the
        // scenario against that provider early: say so rather than `--provider`.
        p if Provider::from_context(context) == Some(p) => {
            (p, format!("from the context name {context}"))
        }
        p => (p, "set with --provider".to_owned()),
    }
}

/// Whether a scenario goes on without the machines of a provider guessed from the nodes when
/// they cannot be reached (kubechaos in a pod of a kind cluster: the nodes' providerID says kind,
/// and no Docker engine is reachable from the pod): only when nothing named the provider (neither
/// `--provider` nor the context's name) and the scenario's faults are all API-level ones, which
/// `generic` plays.
fn api_only(s: &Scenario, target: &KubeTarget, context: &str, nodes: &[NodeMachine]) -> bool {
    target.provider == Provider::Auto
        && Provider::from_context(context).is_none()
        && check(s, Provider::Generic).is_empty()
        && cluster_check(s, nodes, Provider::Generic).is_empty()
}

/// The nodes as the machines of a provider: InternalIP, control plane by kubeadm's role label
/// (k3s servers carry it too).
fn node_machines(nodes: &[Node]) -> Vec<NodeMachine> {
    nodes
        .iter()
        .map(|n| {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            let ip = n
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
                .map(|a| a.address.clone())
                .unwrap_or_default();
            NodeMachine {
                name: n.metadata.name.clone().unwrap_or_default(),
                ip,
                control_plane: labels.contains_key("node-role.kubernetes.io/control-plane")
                    || labels.contains_key("node-role.kubernetes.io/master"),
            }
        })
        .collect()
}

/// What the scenario asks of this cluster that it does not have: nodes, control-plane nodes,
/// replica numbers (checked once the nodes are read, before anything runs).
pub(crate) fn cluster_check(
    s: &Scenario,
    nodes: &[NodeMachine],
    provider: Provider,
) -> Vec<(Pos, String)> {
    let mut problems = Vec::new();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let cp: Vec<&str> = nodes
        .iter()
        .filter(|n| n.control_plane)
        .map(|n| n.name.as_str())
        .collect();
    let list = |v: &[&str]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    // One API server and (kind: kubeadm's stacked etcd) one etcd member on each control-plane
    // node: a scenario that counts several must count this cluster's.
    let counts = [
        ("api-servers", s.cluster.api_servers, "API server", true),
        (
            "etcd.members",
            s.cluster.etcd.members,
            "etcd member",
            provider == Provider::Kind,
        ),
    ];
    for (key, n, what, counted) in counts {
        if counted && n > 1 && n as usize != cp.len() && provider != Provider::Generic {
            problems.push((s.cluster.topology_pos, format!(
                "`cluster.{key}: {n}`: on {} each control-plane node runs one {what}, and this cluster has {} ({}); expected `cluster.{key}: {}`{}",
                provider.name(), cp.len(), list(&cp), cp.len().max(1),
                if cp.len() <= 1 { " (or none: 1 is the default)" } else { "" }
            )));
        }
    }
    for step in &s.faults {
        // Through kind's load balancer, an API server's answers to a node cannot be stopped one
        // way (they leave the control-plane node for the load balancer, not for the node).
        if let Action::Partition(p) = &step.action {
            if provider == Provider::Kind
                && cp.len() > 1
                && p.oneway
                && matches!((&p.a, &p.b), (Target::ApiServer(_), Target::Node(_)))
            {
                problems.push((step.pos, format!(
                    "`{}`: on kind with several control-plane nodes the nodes reach the API servers through kind's load balancer, and the API servers' packets go to it, not to the node: they cannot be dropped one way; expected a two-way partition, or `{{from: {}, to: {}}}`",
                    step.action, p.b, p.a
                )));
            }
        }
        let mut targets = step.action.targets();
        // An agent's steps are done at its proxy or in its pod's node; the rest of the machine
        // steps act on (or between) the control-plane nodes.
        let on_agent = step
            .action
            .targets()
            .iter()
            .any(|t| matches!(t, Target::Agent(..)));
        if !step.action.is_api_level()
            && !on_agent
            && provider != Provider::Generic
            && cp.is_empty()
        {
            problems.push((step.pos, format!(
                "`{}`: no node of this cluster carries the control-plane role label, so the {} provider cannot find its control plane",
                step.action.key(),
                provider.name()
            )));
        }
        for (i, t) in targets.drain(..).enumerate() {
            let pos = step.target_pos.get(i).copied().unwrap_or(step.pos);
            match t {
                Target::Node(n) if !names.contains(&n.as_str()) => problems.push((
                    pos,
                    format!(
                        "target `node/{n}`: this cluster's nodes are {}; expected one of those",
                        list(&names)
                    ),
                )),
                Target::Node(_) | Target::ApiServer(_) | Target::Etcd(_)
                    if matches!(step.action, Action::Partition(_)) =>
                {
                    let ends: Vec<&NodeMachine> = match t {
                        Target::Node(n) => nodes.iter().filter(|m| &m.name == n).collect(),
                        _ => nodes.iter().filter(|m| m.control_plane).collect(),
                    };
                    for m in ends.iter().filter(|m| m.ip.is_empty()) {
                        problems.push((pos, format!(
                            "target `{t}`: node {} reports no InternalIP address, so no iptables rule can name it",
                            m.name
                        )));
                    }
                }
                Target::Component(c, sel) if provider == Provider::Kind => {
                    let want = s.cluster.components.get(c).map(|c| c.replicas).unwrap_or(0);
                    if want as usize != cp.len() {
                        problems.push((pos, format!(
                            "target `{t}`: on kind each control-plane node runs one {}, and this cluster has {} ({}); expected `cluster.components.{}.replicas: {}`",
                            c.name(), cp.len(), list(&cp), c.name(), cp.len()
                        )));
                    } else if let Selector::Index(i) = sel {
                        if *i as usize >= cp.len() {
                            problems.push((pos, format!(
                                "target `{t}`: replica {i} would be control-plane node {i}, and this cluster has {} ({})",
                                cp.len(), list(&cp)
                            )));
                        }
                    }
                }
                _ => {}
            }
        }
        let node = match &step.action {
            Action::Recover(r) => Some(&r.node),
            Action::Bind(b) => Some(&b.node),
            _ => None,
        };
        if let Some(n) = node.filter(|n| !names.contains(&n.as_str())) {
            problems.push((
                step.pos,
                format!(
                    "`{}` to node `{n}`: this cluster's nodes are {}; expected one of those",
                    step.action.key(),
                    list(&names)
                ),
            ));
        }
    }
    problems
}

/// An existing cluster as a backend (the guard was passed). What a run changed is undone and
/// what it created deleted before it ends.
pub struct Kube {
    target: KubeTarget,
    rt: Option<tokio::runtime::Runtime>,
    zero: realtime::Zero,
    /// Whether the run made the probe pods' namespace (and deletes it at the end).
    created_namespace: bool,
    /// The agents' lease namespaces and Leases the run made (deleted at its end).
    created: (Vec<String>, Vec<LeaseRef>),
    /// The objects of `cluster.manifests` the run created (deleted at its end).
    made: Vec<crate::manifests::Made>,
    /// `--provider k3s-container`: the container started for the run, removed at its end.
    #[cfg(feature = "testcontainers")]
    container: Option<container::K3sContainer>,
}

impl Kube {
    /// The cluster `target` names.
    pub fn new(target: KubeTarget) -> Kube {
        Kube {
            target,
            rt: None,
            zero: realtime::Zero::default(),
            created_namespace: false,
            created: Default::default(),
            made: Vec::new(),
            #[cfg(feature = "testcontainers")]
            container: None,
        }
    }

    /// `--provider k3s-container`: start k3s in a container; the run then plays on it with the
    /// k3s provider, and [`Backend::finish`] removes it.
    #[cfg(feature = "testcontainers")]
    fn start_container(&mut self, progress: &mut dyn Progress) -> Result<KubeTarget, BackendError> {
        progress.say("starting k3s in a container through testcontainers");
        let rt = self.rt.as_ref().expect("runtime");
        let k3s = rt.block_on(container::start())?;
        progress.say(&format!("k3s is up in container {}", k3s.name));
        let target = KubeTarget {
            kubeconfig: Some(k3s.kubeconfig.clone()),
            context: None,
            allow: Vec::new(),
            provider: Provider::K3s,
        };
        self.container = Some(k3s);
        Ok(target)
    }

    /// Without the `testcontainers` feature there is no container to start.
    #[cfg(not(feature = "testcontainers"))]
    fn start_container(&mut self, _: &mut dyn Progress) -> Result<KubeTarget, BackendError> {
        Err(KubeError::NoTestcontainers.into())
    }

    /// Remove the container started for the run, if any.
    fn remove_container(&mut self, _progress: &mut dyn Progress) {
        #[cfg(feature = "testcontainers")]
        if let (Some(k3s), Some(rt)) = (self.container.take(), self.rt.as_ref()) {
            let removed = rt.block_on(k3s.remove());
            _progress.say(&removed);
        }
    }

    /// Reach the cluster `target` names, check what it can do, and start following it.
    fn reach(
        &mut self,
        s: &Scenario,
        target: &KubeTarget,
        recorder: &Recorder,
        progress: &mut dyn Progress,
    ) -> Result<Ready<KubeWorld>, BackendError> {
        let rt = self.rt.as_ref().expect("runtime");
        let api = |what: &str| {
            let what = what.to_owned();
            move |source| KubeError::Api { what, source }
        };
        let config = rt
            .block_on(crate::kubeclient::config(
                target.kubeconfig.as_deref(),
                target.context.as_deref(),
                Some(Duration::from_secs(10)),
            ))
            .map_err(KubeError::from)?;
        let client = kube::Client::try_from(config.clone())
            .map_err(|e| KubeError::from(crate::kubeclient::ClientError::Build(e)))?;
        // What reads the evidence (the observer, the pod agents' followers): through a proxy
        // that holds every byte, when kubechaos is told to read late ($KUBECHAOS_SELF_DELAY).
        let (evidence, self_delay) = match crate::kubeclient::self_delay().ok().flatten() {
            Some(d) => {
                let (c, p) = rt
                    .block_on(crate::kubeclient::delayed(config, d))
                    .map_err(KubeError::from)?;
                progress.say(&format!(
                    "kubechaos reads the cluster through a proxy that holds every byte {} each way (${})",
                    kubechaos_core::scenario::duration::human(d),
                    crate::kubeclient::SELF_DELAY_ENV
                ));
                (c, Some(p))
            }
            None => (client.clone(), None),
        };
        let version = rt
            .block_on(client.apiserver_version())
            .map_err(api("reach the cluster's API server"))?;
        progress.say(&format!(
            "reached the API server (Kubernetes {}.{})",
            version.major, version.minor
        ));

        // Which provider, and what this cluster has: read only, before anything is touched.
        let nodes = rt
            .block_on(Api::<Node>::all(client.clone()).list(&ListParams::default()))
            .map_err(api("list the cluster's nodes"))?
            .items;
        let context = target.context.clone().unwrap_or_default();
        let (mut provider, mut why) = resolve_provider(target, &context, &nodes);
        let found = node_machines(&nodes);
        let mut machines = matches!(provider, Provider::Kind | Provider::K3s).then(|| {
            Machines::new(provider, found.clone(), Docker::default())
                .counting(s.cluster.api_servers, s.cluster.etcd.members)
        });
        let mut unreachable = None;
        if let Some(what) = machines.as_ref().and_then(|m| m.preflight().err()) {
            if api_only(s, target, &context, &found) {
                why = format!(
                    "{why}, but its node containers cannot be reached from here ({what}); this scenario's faults need none of them: API-level faults only"
                );
                provider = Provider::Generic;
                machines = None;
            } else {
                unreachable = Some(what);
            }
        }
        progress.say(&format!("provider: {} ({why})", provider.name()));
        let mut problems = check(s, provider);
        problems.extend(cluster_check(s, &found, provider));
        if !problems.is_empty() {
            return Err(BackendError::Unsupported {
                backend: "kube",
                problems,
            });
        }
        if let Some(what) = unreachable {
            return Err(KubeError::NodeContainers { what }.into());
        }
        if let Some(m) = machines.as_mut() {
            m.find_load_balancer()
                .map_err(|what| KubeError::LoadBalancer { what })?;
        }

        let namespaces = Api::<Namespace>::all(client.clone());
        self.created_namespace = rt
            .block_on(async {
                if namespaces.get_opt(PROBE_NAMESPACE).await?.is_some() {
                    return Ok::<bool, kube::Error>(false);
                }
                let ns: Namespace =
                    serde_json::from_value(json!({"metadata": {"name": PROBE_NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "kubechaos"}}}))
                        .expect("namespace");
                let params = PostParams::default();
                // (409 after a retry: the first try was made after all; it was absent before)
                match crate::kubeclient::patiently(|| namespaces.create(&params, &ns)).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(true),
                    Err(e) => Err(e),
                }
            })
            .map_err(api(&format!(
                "create the namespace {PROBE_NAMESPACE} for probe pods"
            )))?;

        // Ctrl-C from here on stops what was started and removes what was made.
        let interrupt = Interrupt::listen(rt);
        // The agents: processes on this machine, running from before time zero, once their
        // leases' namespaces exist; what the run makes of those (namespaces, Leases) it deletes,
        // and everything, if they do not come up or the run is interrupted meanwhile.
        let hooks = Arc::new(
            crate::backend::local::run::RecorderHooks::new(
                recorder.clone(),
                crate::backend::local::run::LogPatterns::of(s),
            )
            .with_zero(self.zero.clone()),
        );
        let mut agents = match rt.block_on(Agents::prepare(s, target, hooks.clone())) {
            Ok(a) => a,
            Err(e) => {
                interrupt.stop();
                let (_, deleted) =
                    rt.block_on(restore(&client, self.created_namespace, &self.created));
                if let Some(left) = rt.block_on(crate::manifests::gone(deleted, progress)) {
                    progress.say(&left);
                }
                return Err(e.into());
            }
        };
        // Then the scenario's manifests (what does not exist yet) and the pod agents' pods,
        // followed from before time zero; a pod agent none of whose pods runs ends the start.
        let up = match agents.as_mut() {
            Some(a) => {
                progress.say(&format!(
                    "starting {} agent process(es) on this machine, each through its own proxy to the API server",
                    a.processes().len()
                ));
                start_agents(rt, &client, s, a, &mut self.created, &interrupt)
                    .map_err(StartFailure::from)
            }
            None => Ok(()),
        }
        .and_then(|()| {
            // On kind, the pod agents' pods' starts and exits are read in their nodes, as they
            // happen (subscribed now, before the first fault: the runtime's stream has no replay).
            let runtime = match (&machines, provider) {
                (Some(m), Provider::Kind) if s.cluster.agents.iter().any(|a| a.is_pods()) => {
                    Some(Arc::new(runtime::NodeRuntimes::follow(
                        Docker::default(),
                        m.node_names(),
                        PodAgents::namespaces(s),
                    )))
                }
                _ => None,
            };
            let clients = Clients {
                client: &client,
                evidence: &evidence,
            };
            workload(&mut self.made, rt, s, clients, hooks, runtime, &interrupt, progress)
        })
        .and_then(|pods| {
            // Time zero as on every backend: the first check that finds every Lease held.
            rt.block_on(leaders(&client, s, &interrupt, progress))?;
            Ok(pods)
        });
        let pod_agents = match up {
            Ok(p) => p,
            Err(StartFailure {
                why,
                refusal,
                undone,
            }) => {
                // Everything the start made is undone: agents stopped, manifests' objects
                // deleted, Leases, namespaces and the probe namespace removed.
                interrupt.stop();
                let mut said = undone;
                if let Some(a) = agents.take() {
                    said.push(rt.block_on(a.down()));
                }
                let (deleted, mut going) =
                    rt.block_on(crate::manifests::delete(std::mem::take(&mut self.made)));
                said.extend(deleted);
                let (through_api, namespaces) =
                    rt.block_on(restore(&client, self.created_namespace, &self.created));
                said.push(through_api);
                going.extend(namespaces);
                said.extend(rt.block_on(crate::manifests::gone(going, progress)));
                let restored = format!("restored: {}", said.join("; "));
                if let Some(problem) = refusal {
                    progress.say(&restored);
                    return Err(BackendError::Unsupported {
                        backend: "kube",
                        problems: vec![problem],
                    });
                }
                let message = format!("{why}; {restored}");
                return Err(if interrupt.came() {
                    BackendError::Interrupted {
                        message,
                        events: Vec::new(),
                    }
                } else {
                    KubeError::Agents { what: message }.into()
                });
            }
        };

        let (zero, epoch) = self.zero.set_now();
        let (tx, rx) = mpsc::unbounded_channel();
        let mut processes = machines.as_ref().map(|m| m.processes()).unwrap_or_default();
        let machine_processes = processes.clone();
        processes.extend(agents.iter().flat_map(|a| a.processes()));
        let holder_names = machines
            .as_ref()
            .map(|m| {
                let mut names = BTreeMap::new();
                for lease in s.leases().keys() {
                    for n in m.control_plane() {
                        if let Some(p) = m.holder_process(&lease.to_string(), &n.name) {
                            names.insert((lease.to_string(), n.name.clone()), p);
                        }
                    }
                }
                names
            })
            .unwrap_or_default();
        let observer = Observer {
            holder_names,
            reader: self_delay.is_some().then(|| evidence.clone()),
            ..Observer::of(s, recorder.clone(), epoch)
        };
        let observer = rt.spawn(observer.run(client.clone(), rx));
        let time = RealTime::new(zero, interrupt);
        let mut world = KubeWorld {
            failed: time.flag(),
            time,
            rt: rt.handle().clone(),
            client,
            commands: tx,
            observer,
            machines,
            recorder: recorder.clone(),
            incarnations: BTreeMap::new(),
            agents,
            agent_failed: BTreeMap::new(),
            pod_agents,
            _self_delay: self_delay,
            serving: BTreeMap::new(),
        };
        // The machines' processes run from time zero (the observer sees their leases, not them);
        // the agents said their own starts.
        for p in &machine_processes {
            world.started(p);
        }
        Ok(Ready { world, processes })
    }
}

impl Backend for Kube {
    type World = KubeWorld;

    fn name(&self) -> &'static str {
        "kube"
    }

    fn check(&self, s: &Scenario) -> Vec<(Pos, String)> {
        // Agents run on this machine: their programs must be here.
        let mut problems = check(s, self.target.provider);
        problems.extend(crate::backend::missing_programs(s));
        problems.extend(unjudgeable_components(s));
        problems
    }

    fn recorder(&mut self) -> Recorder {
        realtime::recorder(&mut self.zero)
    }

    fn via(&self) -> String {
        self.target.provider.name().to_owned()
    }

    fn describe(&self, action: &Action) -> (String, String) {
        // Agents are processes on this machine, whatever the provider; a pod agent's pods are
        // the provider's to kill and cut off (in their nodes), else deleted through the API.
        if action
            .targets()
            .iter()
            .any(|t| matches!(t, Target::Agent(..)))
        {
            let nodes = matches!(
                self.target.provider,
                Provider::Kind | Provider::K3s | Provider::K3sContainer
            );
            return crate::backend::Means {
                stop: "SIGTERM the agent process on this machine:",
                kill: if nodes {
                    "SIGKILL the agent process on this machine (a pod agent: `crictl stop --timeout 0` its container in its node container, its kubelet restarts it):"
                } else {
                    "SIGKILL the agent process on this machine (a pod agent: delete the pod with no grace period, its owner makes another):"
                },
                cut: if nodes {
                    "kubechaos's proxy holds every byte (a pod agent: iptables DROP rules on the pod's address and the API server's port 6443 in its node container)"
                } else {
                    "kubechaos's proxy holds every byte"
                },
                slow: "(refused on kube)",
                errors: "(refused on kube)",
            }
            .describe(action);
        }
        let provider = self.target.provider;
        machine::describe(provider, action)
            .unwrap_or_else(|| (format!("the {} provider", provider.name()), "—".to_owned()))
    }

    fn start(
        &mut self,
        s: &Scenario,
        _: &Plan,
        recorder: &Recorder,
        progress: &mut dyn Progress,
    ) -> Result<Ready<KubeWorld>, BackendError> {
        let handle = self.rt.insert(realtime::runtime()?).handle().clone();
        let _runtime = handle.enter();
        let target = if self.target.provider == Provider::K3sContainer {
            self.start_container(progress)?
        } else {
            self.target.clone()
        };
        let ready = self.reach(s, &target, recorder, progress);
        if ready.is_err() {
            self.remove_container(progress);
        }
        ready
    }

    fn finish(
        &mut self,
        world: KubeWorld,
        end: Duration,
        progress: &mut dyn Progress,
    ) -> Result<String, BackendError> {
        let KubeWorld {
            time,
            client,
            observer,
            mut machines,
            agents,
            pod_agents,
            serving,
            ..
        } = world;
        drop(pod_agents);
        observer.abort();
        for task in serving.values() {
            task.abort();
        }
        time.stop();
        let rt = self.rt.take().expect("started");
        let handle = rt.handle().clone();
        let _runtime = handle.enter();

        // Leave the cluster as it was found: the agents and the machines first, then what the
        // API holds.
        let mut restored = Vec::new();
        if let Some(a) = agents {
            restored.push(rt.block_on(a.down()));
        }
        let mut errors = Vec::new();
        if let Some(m) = machines.as_mut() {
            let was_down = m.api_server_down();
            let before = m.errors.len();
            restored.extend(m.restore());
            errors = m.errors.clone();
            if was_down && m.errors.len() == before {
                progress.say("waiting for the API server to come back (up to 2m)");
                let back = rt.block_on(async {
                    let deadline = Instant::now() + Duration::from_secs(120);
                    while Instant::now() < deadline {
                        if tokio::time::timeout(Duration::from_secs(5), client.apiserver_version())
                            .await
                            .is_ok_and(|r| r.is_ok())
                        {
                            return true;
                        }
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    false
                });
                if !back {
                    errors
                        .push("the API server did not come back within 2m of restoring it".into());
                }
            }
        }
        let (deleted, mut going) =
            rt.block_on(crate::manifests::delete(std::mem::take(&mut self.made)));
        restored.extend(deleted);
        let (through_api, namespaces) =
            rt.block_on(restore(&client, self.created_namespace, &self.created));
        if restored.is_empty() || through_api != NOTHING_TO_UNDO {
            restored.push(through_api);
        }
        going.extend(namespaces);
        restored.extend(rt.block_on(crate::manifests::gone(going, progress)));
        let restored = format!("restored: {}", restored.join("; "));
        progress.say(&restored);
        self.rt = Some(rt);
        self.remove_container(progress);
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
        if !errors.is_empty() {
            return Err(KubeError::Machine {
                at: fmt_ms(end.as_millis() as u64),
                errors,
                restored,
            }
            .into());
        }
        Ok(restored)
    }
}

/// `single-leader` and `valid-lease-while-leading` on a control-plane component's Lease: on an
/// existing cluster kubechaos reads the Lease but not the components' own words (their logs), so
/// no leadership term of theirs is ever observed and the invariant could only end in `no
/// evidence`. Refused before the run instead (once it passed on nothing, saying "0 leadership
/// terms observed").
fn unjudgeable_components(s: &Scenario) -> Vec<(Pos, String)> {
    use kubechaos_core::scenario::{Component, Invariant};
    s.expect
        .iter()
        .filter_map(|inv| {
            let (lease, min_terms) = match &inv.value {
                Invariant::SingleLeader(i) => (&i.lease, i.min_terms),
                Invariant::ValidLeaseWhileLeading(i) => (&i.lease, i.min_terms),
                Invariant::LeaderReacquired(_)
                | Invariant::Schedulable(_)
                | Invariant::Unschedulable(_)
                | Invariant::Available(_) => return None,
            };
            let component = Component::ALL.into_iter().find(|c| &c.lease() == lease)?;
            (min_terms > 0).then(|| (inv.pos, format!(
                "`{}` on {lease}: on an existing cluster kubechaos reads the Lease but not {}'s own log lines, so it would see no leadership term to judge; expected `leader-reacquired` for that Lease, this invariant on an agent's Lease, or `--backend sim` or `local`",
                inv.value.key(),
                component.name()
            )))
        })
        .collect()
}

/// A run's clients of the cluster: the one that acts, and the one that reads the evidence
/// (through a proxy holding every byte, when kubechaos is told to read late).
#[derive(Clone, Copy)]
struct Clients<'a> {
    client: &'a kube::Client,
    evidence: &'a kube::Client,
}

/// Create the scenario's manifests (noted in `made`) and follow its pod agents until each
/// has a running pod and its Lease is held: why not, if not within [`AGENTS_READY`] (or
/// Ctrl-C came meanwhile).
#[allow(clippy::too_many_arguments)]
fn workload(
    made_here: &mut Vec<crate::manifests::Made>,
    rt: &tokio::runtime::Runtime,
    s: &Scenario,
    Clients { client, evidence }: Clients<'_>,
    hooks: Arc<dyn crate::backend::local::cluster::Hooks>,
    runtime: Option<Arc<runtime::NodeRuntimes>>,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<Option<PodAgents>, StartFailure> {
    if !s.cluster.manifests.is_empty() {
        let (made, found) = rt
            .block_on(crate::manifests::create(client, &s.cluster.manifests))
            .map_err(|e| StartFailure {
                why: kubechaos_core::error::chain(&e),
                refusal: e.refusal(),
                undone: e.undone,
            })?;
        let what: Vec<&str> = made.iter().map(|m| m.what.as_str()).collect();
        progress.say(&format!(
            "created {} object(s) of the manifests{}{}",
            made.len(),
            if what.is_empty() {
                String::new()
            } else {
                format!(": {}", what.join(", "))
            },
            if found.is_empty() {
                String::new()
            } else {
                format!(
                    "; found already there, left as they are: {}",
                    found.join(", ")
                )
            }
        ));
        *made_here = made;
    }
    let Some(pods) = PodAgents::follow(s, evidence, hooks, runtime) else {
        return Ok(None);
    };
    let leases: Vec<LeaseRef> = s
        .cluster
        .agents
        .iter()
        .filter(|a| a.is_pods())
        .map(|a| a.lease.clone())
        .collect();
    progress.say("waiting for the pod agents' pods to run and their Leases to be held");
    let ready = rt.block_on(async {
        let deadline = Instant::now() + AGENTS_READY;
        loop {
            if interrupt.came() {
                return Err("interrupted while waiting for the pod agents' pods".to_owned());
            }
            let mut missing: Vec<String> = pods
                .podless()
                .into_iter()
                .map(|(agent, ns, sel)| {
                    format!("no pod in namespace {ns} matches the selector `{sel}` of agent {agent} and runs")
                })
                .collect();
            for l in &leases {
                if !crate::kubeclient::lease_holder(client, l)
                    .await
                    .is_ok_and(|h| h.is_some())
                {
                    missing.push(format!("nobody holds the Lease {l}"));
                }
            }
            if missing.is_empty() {
                return Ok(Some(pods));
            }
            if Instant::now() > deadline {
                // Every agent's pods ran, and a Lease is not held: what is missing is the
                // workload's doing. Say so with what its pods did and said (as on local).
                if pods.podless().is_empty() {
                    let mut agents = Vec::new();
                    for a in s.cluster.agents.iter().filter(|a| a.is_pods()) {
                        if crate::kubeclient::lease_holder(client, &a.lease)
                            .await
                            .is_ok_and(|h| h.is_some())
                        {
                            continue;
                        }
                        let report = pods.report(&a.name).await;
                        agents.push(
                            crate::kubeclient::lease_not_taken(client, &a.name, &a.lease, &report)
                                .await,
                        );
                    }
                    return Err(format!(
                        "the pod agents' pods ran, but the workload did not take its Lease within {}s:\n    {}",
                        AGENTS_READY.as_secs(),
                        agents.join("\n    ")
                    ));
                }
                return Err(format!(
                    "the pod agents were not ready within {}s: {}",
                    AGENTS_READY.as_secs(),
                    missing.join("; ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    ready.map_err(StartFailure::from)
}

/// Why the agents, the manifests or the pod agents could not start, and, when the API server
/// refused a manifest's object for what it is, where the scenario names it and what to do
/// (the user's input: exit 2).
struct StartFailure {
    why: String,
    refusal: Option<(Pos, String)>,
    /// What the failing step had made and deleted again, a sentence each.
    undone: Vec<String>,
}

impl From<String> for StartFailure {
    fn from(why: String) -> StartFailure {
        StartFailure {
            why,
            refusal: None,
            undone: Vec::new(),
        }
    }
}

/// Make the agents' lease namespaces (noted in `created`), start every agent, and wait until
/// each lease is held: why not, if they did not come up (or Ctrl-C came meanwhile).
fn start_agents(
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
    s: &Scenario,
    agents: &mut Agents,
    created: &mut (Vec<String>, Vec<LeaseRef>),
    interrupt: &Interrupt,
) -> Result<(), String> {
    *created = rt.block_on(own_leases(client, s)).map_err(|e| {
        format!(
            "cannot read or create the agents' lease namespaces: {}",
            kubechaos_core::error::chain(&e)
        )
    })?;
    for name in agents.processes() {
        agents
            .start(&name)
            .map_err(|e| format!("cannot start {name}: {}", kubechaos_core::error::chain(&e)))?;
    }
    let leases: Vec<LeaseRef> = s
        .cluster
        .agents
        .iter()
        .filter(|g| !g.is_pods())
        .map(|g| g.lease.clone())
        .collect();
    let made_leases = created.1.clone();
    rt.block_on(async {
        let deadline = Instant::now() + AGENTS_READY;
        loop {
            if interrupt.came() {
                return Err("interrupted while the agents were starting".to_owned());
            }
            let mut missing = Vec::new();
            for l in &leases {
                if !crate::kubeclient::lease_holder(client, l)
                    .await
                    .is_ok_and(|h| h.is_some())
                {
                    missing.push(l.to_string());
                }
            }
            if missing.is_empty() {
                // The Leases its agents made, labelled as the run's: the record a
                // `recover --cleanup` after a SIGKILL finds. (Before time zero; a holder whose
                // next renewal meets the new resourceVersion renews at its next retry.)
                let own = PatchParams {
                    field_manager: Some(crate::observer::OWN_FIELD_MANAGER.to_owned()),
                    ..PatchParams::default()
                };
                for l in &made_leases {
                    let api = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
                        client.clone(),
                        &l.namespace,
                    );
                    let label = json!({"metadata": {"labels": {
                        crate::manifests::MADE_BY_RUN: "true"
                    }}});
                    if let Err(e) = api
                        .patch(&l.name, &own, &Patch::Merge(&label))
                        .await
                    {
                        tracing::warn!(lease = %l, error = %e, "the Lease could not be labelled as the run's");
                    }
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no agent took lease {} within {}s",
                    missing.join(", "),
                    AGENTS_READY.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
}

/// How long the agents get to take their leases before time zero.
const AGENTS_READY: Duration = Duration::from_secs(60);

/// How long an existing cluster's Leases may go unheld before time zero (a component whose
/// static pod a previous run held back starts again within kubelet's 20 s file check and takes
/// its released Lease at its first try; one whose Lease is expired takes it within a lease
/// duration).
const LEADERS_READY: Duration = Duration::from_secs(120);

/// Wait until every Lease the scenario watches is held (checked every
/// [`crate::kubeclient::READY_POLL`]): time zero on an existing cluster is, as on the sim and
/// the local control plane, the first check that finds them held, so that a run started just
/// after another (whose faults left the scheduler starting again, its Lease released) begins
/// from a control plane whose leaders lead. Why not, if not within [`LEADERS_READY`].
async fn leaders(
    client: &kube::Client,
    s: &Scenario,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<(), String> {
    let leases: Vec<LeaseRef> = s.leases().into_keys().collect();
    let started = Instant::now();
    let mut said = false;
    loop {
        if interrupt.came() {
            return Err("interrupted while waiting for the Leases to be held".to_owned());
        }
        let missing = crate::kubeclient::not_ready(client, &leases, 0).await;
        if missing.is_empty() {
            if said {
                progress.say(&format!(
                    "every Lease held after {}; time zero",
                    fmt_ms(started.elapsed().as_millis() as u64)
                ));
            }
            return Ok(());
        }
        if started.elapsed() > LEADERS_READY {
            // The first of them, to look at as kubectl shows it.
            let look = leases
                .iter()
                .find(|l| missing.contains(&format!("lease {l} not held")))
                .map_or_else(
                    || "kubectl -n NAMESPACE get lease NAME -o yaml".to_owned(),
                    |l| format!("kubectl -n {} get lease {} -o yaml", l.namespace, l.name),
                );
            return Err(format!(
                "{} after {}s: a scenario starts from a control plane whose leaders lead (on every backend); expected each to be held (see who runs it, and when it last renewed: {look})",
                missing.join(", "),
                LEADERS_READY.as_secs()
            ));
        }
        if !said {
            progress.say(&format!(
                "waiting for every Lease to be held before time zero (up to {}s): {}",
                LEADERS_READY.as_secs(),
                missing.join(", ")
            ));
            said = true;
        }
        tokio::time::sleep(crate::kubeclient::READY_POLL).await;
    }
}

/// The agents' lease namespaces the run makes (those missing), and their Leases that do not
/// exist yet (the run's agents make them): what the run deletes at its end.
async fn own_leases(
    client: &kube::Client,
    s: &Scenario,
) -> Result<(Vec<String>, Vec<LeaseRef>), kube::Error> {
    use k8s_openapi::api::coordination::v1::Lease;
    let mut namespaces = Vec::new();
    let mut leases = Vec::new();
    let ns_api = Api::<Namespace>::all(client.clone());
    for g in s.cluster.agents.iter().filter(|g| !g.is_pods()) {
        let ns = &g.lease.namespace;
        if !namespaces.contains(ns) && ns_api.get_opt(ns).await?.is_none() {
            let obj: Namespace = serde_json::from_value(
                json!({"metadata": {"name": ns, "labels": {"app.kubernetes.io/managed-by": "kubechaos"}}}),
            )
            .expect("namespace");
            let params = PostParams::default();
            match crate::kubeclient::patiently(|| ns_api.create(&params, &obj)).await {
                // (409 after a retry: the first try was made after all; it was absent before)
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e),
            }
            namespaces.push(ns.clone());
        }
        if Api::<Lease>::namespaced(client.clone(), ns)
            .get_opt(&g.lease.name)
            .await?
            .is_none()
        {
            leases.push(g.lease.clone());
        }
    }
    Ok((namespaces, leases))
}

/// What [`restore`] says when it had nothing to do.
const NOTHING_TO_UNDO: &str = "nothing to undo through the API";

/// Delete what the run created (probe pods; the namespace if it made it; the agents' Leases and
/// namespaces it made) and say what was restored and what was left; the namespaces deleted are
/// returned, to wait for with [`crate::manifests::gone`].
async fn restore(
    client: &kube::Client,
    created_namespace: bool,
    (namespaces, leases): &(Vec<String>, Vec<LeaseRef>),
) -> (String, Vec<crate::manifests::Made>) {
    let mut deleted = Vec::new();
    let pods = Api::<Pod>::namespaced(client.clone(), PROBE_NAMESPACE);
    let managed = ListParams::default().labels("app.kubernetes.io/managed-by=kubechaos");
    let mut said = Vec::new();
    match pods.list(&managed).await {
        Ok(list) => {
            let names: Vec<String> = list
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            for n in &names {
                let _ = pods
                    .delete(n, &DeleteParams::default().grace_period(0))
                    .await;
            }
            if !names.is_empty() {
                said.push(format!("deleted the probe pods ({})", names.join(", ")));
            }
        }
        Err(e) => said.push(format!("could not list the probe pods to delete them: {e}")),
    }
    if created_namespace {
        match Api::<Namespace>::all(client.clone())
            .delete(PROBE_NAMESPACE, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                said.push(format!(
                    "deleted the namespace {PROBE_NAMESPACE} it created"
                ));
                deleted.push(crate::manifests::Made::namespace(client, PROBE_NAMESPACE));
            }
            Err(e) => said.push(format!(
                "could not delete the namespace {PROBE_NAMESPACE}: {e}"
            )),
        }
    }
    for l in leases {
        let api = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
            client.clone(),
            &l.namespace,
        );
        match api.delete(&l.name, &DeleteParams::default()).await {
            Ok(_) => said.push(format!("deleted the Lease {l} its agents made")),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => said.push(format!("could not delete the Lease {l}: {e}")),
        }
    }
    for ns in namespaces {
        match Api::<Namespace>::all(client.clone())
            .delete(ns, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                said.push(format!("deleted the namespace {ns} it made for its agents"));
                deleted.push(crate::manifests::Made::namespace(client, ns));
            }
            Err(e) => said.push(format!("could not delete the namespace {ns}: {e}")),
        }
    }
    // Recovery pods of steps without cleanup stay: the recovered cluster may need them.
    let recovery = ListParams::default().labels(crate::recover::RECOVERY_LABEL);
    if let Ok(list) = Api::<Pod>::all(client.clone()).list(&recovery).await {
        let left: Vec<String> = list
            .items
            .iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.clone().unwrap_or_default(),
                    p.metadata.name.clone().unwrap_or_default()
                )
            })
            .collect();
        if !left.is_empty() {
            said.push(format!(
                "left running: recovery pod(s) {} (delete them once their workloads are available again)",
                left.join(", ")
            ));
        }
    }
    let said = if said.is_empty() {
        NOTHING_TO_UNDO.to_owned()
    } else {
        said.join("; ")
    };
    (said, deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machines(control_planes: usize) -> Vec<NodeMachine> {
        let mut nodes: Vec<NodeMachine> = (0..control_planes)
            .map(|i| NodeMachine {
                name: format!(
                    "chaos-control-plane{}",
                    if i == 0 {
                        String::new()
                    } else {
                        (i + 1).to_string()
                    }
                ),
                ip: format!("172.18.0.{}", i + 2),
                control_plane: true,
            })
            .collect();
        nodes.push(NodeMachine {
            name: "chaos-worker".into(),
            ip: "172.18.0.9".into(),
            control_plane: false,
        });
        nodes
    }

    /// Every problem of a scenario on a provider, before and after the nodes are read.
    fn problems(yaml: &str, provider: Provider, control_planes: usize) -> Vec<String> {
        let s = kubechaos_core::scenario::parse(std::path::Path::new("ha.yaml"), yaml.as_bytes())
            .expect("parses");
        let mut p = check(&s, provider);
        p.extend(cluster_check(&s, &machines(control_planes), provider));
        p.into_iter()
            .map(|(pos, why)| format!("{pos}: {why}"))
            .collect()
    }

    /// kind runs one API server and one etcd member on each control-plane node: a scenario that
    /// counts several must count this cluster's; what kind cannot aim (one member cut off from
    /// the API servers, a node from one API server behind its load balancer, an API server's
    /// answers to a node one way) is refused with what to write instead; k3s and the generic
    /// provider refuse what they cannot tell or touch.
    #[test]
    fn several_api_servers_and_members_are_checked_against_the_control_plane_nodes() {
        let ha = "name: ha
cluster: {api-servers: 3, etcd: {members: 3}, components: {kube-scheduler: {replicas: 3}}}
faults:
  - {at: 1s, kill: api-server/1}
  - {at: 2s, partition: [api-server/1, etcd], for: 5s}
  - {at: 3s, remove: etcd/leader, for: 5s}
  - {at: 4s, partition: [node/chaos-worker, api-server], for: 1s}
";
        assert_eq!(problems(ha, Provider::Kind, 3), Vec::<String>::new());
        let one = problems(ha, Provider::Kind, 1);
        assert_eq!(one.len(), 2, "{one:?}");
        assert!(one[0].starts_with("2:11: `cluster.api-servers: 3`: on kind each control-plane node runs one API server, and this cluster has 1 (chaos-control-plane); expected `cluster.api-servers: 1` (or none: 1 is the default)"), "{one:?}");
        assert!(
            one[1].contains(
                "`cluster.etcd.members: 3`: on kind each control-plane node runs one etcd member"
            ),
            "{one:?}"
        );

        let aimed = "name: ha
cluster: {api-servers: 3, etcd: {members: 3}}
faults:
  - {at: 1s, partition: [api-server, etcd/2], for: 5s}
  - {at: 2s, partition: [node/chaos-worker, api-server/1], for: 5s}
  - {at: 3s, partition: {from: api-server, to: node/chaos-worker}, for: 5s}
  - {at: 4s, partition: [etcd/0, etcd/1], for: 5s}
";
        let refused = problems(aimed, Provider::Kind, 3);
        assert_eq!(refused.len(), 4, "{refused:?}");
        assert!(refused[0].starts_with("4:5: `partition: [api-server, etcd/2]`: kind runs kubeadm's stacked etcd: each API server reaches only the member on its own node"), "{refused:?}");
        assert!(refused[1].starts_with("5:5: `partition: [node/chaos-worker, api-server/1]`: on kind with several control-plane nodes a node's kubelet reaches the API servers through kind's load balancer"), "{refused:?}");
        assert!(
            refused[2].starts_with("7:5: `partition: [etcd/0, etcd/1]`: between etcd members"),
            "{refused:?}"
        );
        assert!(refused[3].starts_with("6:5: `partition: {from: api-server, to: node/chaos-worker}`: on kind with several control-plane nodes the nodes reach the API servers through kind's load balancer"), "{refused:?}");

        let generic = problems(ha, Provider::Generic, 3);
        assert!(generic.iter().any(|p| p.starts_with("2:11: `cluster.api-servers: 3` and `cluster.etcd.members: 3`: the generic provider reaches only the API")), "{generic:?}");
        let k3s = problems(ha, Provider::K3s, 3);
        assert!(k3s.iter().any(|p| p.starts_with("2:11: `cluster.api-servers: 3` and `cluster.etcd.members: 3`: k3s keeps its datastore inside each server process")), "{k3s:?}");
        assert!(
            k3s.iter().any(|p| p.starts_with(
                "4:5: `kill: api-server/1`: k3s runs each API server inside its server process"
            )),
            "{k3s:?}"
        );
        let k3s_servers = problems(
            "name: ha\ncluster: {api-servers: 3}\nfaults:\n  - {at: 1s, api-server: restart}\n",
            Provider::K3s,
            3,
        );
        assert_eq!(k3s_servers, Vec::<String>::new());
    }

    /// kubechaos in a pod of a kind cluster: the nodes' providerID says kind, no Docker is
    /// reachable from the pod. A scenario of API-level faults goes on as `generic` (the shipped
    /// suite Job's); one that needs the node containers, or a provider named by `--provider` or
    /// the context, is refused for the unreachable containers.
    #[test]
    fn unreachable_machines_of_a_guessed_provider_leave_api_level_scenarios_to_generic() {
        let parse = |yaml: &str| {
            kubechaos_core::scenario::parse(std::path::Path::new("s.yaml"), yaml.as_bytes())
                .expect("parses")
        };
        let api = parse(
            "name: s\ncluster: {nodes: 1}\nfaults:\n  - {at: 1s, delete-pods: {namespace: kube-system, selector: k8s-app=kube-dns}}\n",
        );
        let nodes = parse(
            "name: s\ncluster: {nodes: 1}\nfaults:\n  - {at: 1s, partition: [node/chaos-worker, api-server], for: 5s}\n",
        );
        let target = |provider| KubeTarget {
            kubeconfig: None,
            context: None,
            allow: Vec::new(),
            provider,
        };
        let found = machines(1);
        assert!(api_only(
            &api,
            &target(Provider::Auto),
            "in-cluster",
            &found
        ));
        assert!(!api_only(
            &nodes,
            &target(Provider::Auto),
            "in-cluster",
            &found
        ));
        assert!(!api_only(
            &api,
            &target(Provider::Kind),
            "in-cluster",
            &found
        ));
        assert!(!api_only(
            &api,
            &target(Provider::Auto),
            "kind-chaos",
            &found
        ));
    }

    #[test]
    fn the_guard_lets_only_disposable_or_named_contexts_through() {
        for ok in ["kind-chaos", "k3d-nightly", "kubechaos-local"] {
            assert!(guard(ok, &[]).is_ok(), "{ok}");
        }
        let err = guard("prod-eu-1", &[]).unwrap_err().to_string();
        assert!(
            err.contains("refusing to touch context `prod-eu-1`"),
            "{err}"
        );
        assert!(err.contains("--allow-context prod-eu-1"), "{err}");
        assert!(guard("staging", &["staging".to_owned()]).is_ok());
        assert!(guard("kind", &[]).is_err(), "only the kind- prefix");
    }

    /// The pod kubechaos runs in is a cluster like any other to the guard: allowed by name only.
    /// Outside a pod, `--context in-cluster` is the user's mistake, said as such.
    #[test]
    fn in_cluster_is_guarded_and_only_in_a_pod() {
        use crate::kubeclient::{in_a_pod, IN_CLUSTER};
        let err = guard(IN_CLUSTER, &[]).unwrap_err().to_string();
        assert!(err.contains("--allow-context in-cluster"), "{err}");
        assert!(guard(IN_CLUSTER, &[IN_CLUSTER.to_owned()]).is_ok());
        if in_a_pod() {
            // CI that runs in a pod (GitLab's Kubernetes executor): the context is its own.
            assert_eq!(resolve_context(None, Some(IN_CLUSTER)).unwrap(), IN_CLUSTER);
            assert!(crate::kubeclient::in_cluster_kubeconfig().is_some());
        } else {
            let err = resolve_context(None, Some(IN_CLUSTER)).unwrap_err();
            assert!(matches!(err, KubeError::NotInAPod), "{err}");
            assert!(err.to_string().contains("this is not a pod"), "{err}");
            assert!(crate::kubeclient::in_cluster_kubeconfig().is_none());
        }
        // With a kubeconfig named, `in-cluster` is only a context name in it.
        let file = std::path::Path::new("/nonexistent/kubeconfig");
        assert_eq!(
            resolve_context(Some(file), Some(IN_CLUSTER)).unwrap(),
            IN_CLUSTER
        );
    }
}
