//! Backends: the world a scenario is played against. They share everything but the world: the
//! plan they carry out, the events they record, and the invariants that judge them.
//!
//! [`driver`] carries out the fault vocabulary for any world;
//! - [`sim`]: a deterministic simulated cluster (turmoil), the default;
//! - [`local`]: a real control plane started on this machine from upstream binaries;
//! - [`kube`]: an existing cluster from a kubeconfig context, behind a safety guard; its
//!   providers reach the machines (kind, k3s) or only the API (generic);
//! - [`realtime`]: what the real-time backends share.

pub(crate) mod api_errors;
pub(crate) mod driver;
pub mod kube;
pub(crate) mod link;
pub mod local;
pub(crate) mod realtime;
pub mod sim;

use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::{Action, Invariant, Pos, ProcessOp, Scenario, Target};

/// Why a backend could not run a scenario.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The scenario asks for something this backend cannot do (exit 2). Each problem has the
    /// position of what asked for it.
    #[error("the {backend} backend cannot run this scenario")]
    Unsupported {
        /// Backend name.
        backend: &'static str,
        /// What it cannot do, and where the scenario asks for it.
        problems: Vec<(Pos, String)>,
    },
    /// The world failed underneath the run (exit 3).
    #[error(transparent)]
    Environment(#[from] EnvironmentError),
    /// The run was stopped by Ctrl-C or SIGTERM (exit 3); everything it started was stopped.
    #[error("{message}")]
    Interrupted {
        /// What was stopped and restored.
        message: String,
        /// The timeline up to the interruption (ending with `run-interrupted`), if the run had
        /// begun; not judged.
        events: Vec<kubechaos_core::events::Event>,
    },
}

/// How the world failed underneath a run, per backend, with its causes.
#[derive(Debug, thiserror::Error)]
pub enum EnvironmentError {
    /// The async runtime of a real-time backend could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The simulation itself failed (a simulated host returned an error or panicked). turmoil's
    /// error is neither `Send` nor `Sync`, so its text is what is kept.
    #[error("the simulation failed: {0}")]
    Simulation(String),
    /// The simulated self-hosted control plane did not come up.
    #[error("the simulated cluster did not start")]
    SimStart(#[source] crate::selfhosted::BootstrapError),
    /// The local control plane did not start; everything it had started was stopped.
    #[error("the local run did not start (everything started was stopped)")]
    Local(#[source] local::error::LocalError),
    /// The kube backend could not reach, read or act on its cluster.
    #[error(transparent)]
    Kube(#[from] kube::error::KubeError),
}

impl From<kube::error::KubeError> for BackendError {
    fn from(e: kube::error::KubeError) -> Self {
        BackendError::Environment(e.into())
    }
}

/// How a world kubechaos builds (sim, local) carries out a fault that is not an API call, and
/// what undoes it, for `--dry-run`: `stop`, `kill` and `cut` say what its primitives do there.
pub(crate) struct Means {
    /// A graceful stop of a process.
    pub(crate) stop: &'static str,
    /// A kill (no graceful shutdown).
    pub(crate) kill: &'static str,
    /// What a partition does to a link.
    pub(crate) cut: &'static str,
    /// Where a delay or a loss is made.
    pub(crate) slow: &'static str,
    /// How the API server is made to answer with errors.
    pub(crate) errors: &'static str,
}

impl Means {
    /// `(how, undone by)` of a world-level fault.
    pub(crate) fn describe(&self, action: &Action) -> (String, String) {
        let (stop, kill, cut, slow) = (self.stop, self.kill, self.cut, self.slow);
        let process = |name: &str, op: ProcessOp| match op {
            ProcessOp::Stop => (format!("{stop} {name}"), format!("start {name} again")),
            ProcessOp::Crash => (format!("{kill} {name}"), format!("start {name} again")),
            ProcessOp::Start => (
                format!("start {name} where it was stopped"),
                "nothing".into(),
            ),
            ProcessOp::Restart => (format!("{stop} {name}, then start it"), "nothing".into()),
        };
        match action {
            Action::ApiServer(op) => process("the API server", *op),
            Action::Etcd(op) => process("etcd", *op),
            Action::Partition(p) => (
                if p.oneway {
                    format!("{cut} from {} to {} (one way)", p.a, p.b)
                } else {
                    format!("{cut} between {} and {} (both ways)", p.a, p.b)
                },
                "the link passes again (`for:` heals this partition only)".into(),
            ),
            Action::Heal(_) => (
                "every link passes again, undelayed and lossless".into(),
                "nothing".into(),
            ),
            Action::Delay(d) => (
                format!(
                    "{slow} holds each message {} (±{}, in order) {}",
                    kubechaos_core::scenario::duration::human(d.latency),
                    kubechaos_core::scenario::duration::human(d.jitter),
                    link_words(&d.link)
                ),
                "the link is undelayed again (`for:` ends this delay only)".into(),
            ),
            Action::Loss(l) => (
                format!(
                    "{slow} loses {:.0}% of the messages {} and delivers each after TCP's retransmission timeout (200 ms, doubling)",
                    l.ratio.get() * 100.0,
                    link_words(&l.link)
                ),
                "the link is lossless again (`for:` ends this loss only)".into(),
            ),
            Action::ApiErrors(e) => (
                format!("{}: matching requests answered {}", self.errors, e),
                "the requests are served again".into(),
            ),
            Action::Kill(t) => (
                format!("{kill} {t} (a self-hosted component or a pod agent: its pods' containers; a node: its heartbeats and pods)"),
                "its supervisor (or its node) restarts it after the kubelet's back-off".into(),
            ),
            Action::Remove(t) => (
                format!("{kill} {t} and hold it down"),
                format!("start {t} again"),
            ),
            Action::Start(t) => (format!("start {t} where it was held down"), "nothing".into()),
            Action::DeletePods(_) | Action::Recover(_) | Action::Bind(_) => {
                ("through the API".into(), "—".into())
            }
        }
    }
}

/// Which of `n` API servers behind one address a client named `client` lands on first, on every
/// backend that runs several (the sim's balancer, the local proxies): replica N of a group
/// (`kube-scheduler-1`, `node-1`: the number its name ends with) lands on API server N modulo
/// their count, as a TCP load balancer spreads long-lived connections; a name without a number
/// lands on the first. A client whose API server does not take the connection moves to the
/// next.
pub(crate) fn landing(client: &str, n: usize) -> usize {
    client
        .rsplit('-')
        .next()
        .and_then(|i| i.parse::<usize>().ok())
        .unwrap_or(0)
        % n.max(1)
}

/// `from A to B (one way)` or `between A and B (both ways)`.
fn link_words(p: &kubechaos_core::scenario::Partition) -> String {
    if p.oneway {
        format!("from {} to {} (one way)", p.a, p.b)
    } else {
        format!("between {} and {} (both ways)", p.a, p.b)
    }
}

/// What the backends that build their own cluster (sim, local) cannot do with a scenario:
/// nodes, Deployments and workloads that their cluster does not have, and faults on
/// self-hosted components that are pods rather than processes.
pub(crate) fn built_cluster_check(s: &Scenario, backend: &str) -> Vec<(Pos, String)> {
    let mut problems = Vec::new();
    let nodes = match s.cluster.nodes {
        0 => "none (cluster.nodes is 0)".to_owned(),
        1 => "only node-0".to_owned(),
        n => format!("node-0 … node-{}", n - 1),
    };
    let known_node = |name: &str| (0..s.cluster.nodes).any(|n| process_name("node", n) == name);
    // The Deployments this cluster has: the self-hosted components'.
    let deployments: Vec<String> = if s.cluster.self_hosted {
        s.cluster
            .components
            .iter()
            .filter(|(_, c)| c.replicas > 0)
            .map(|(c, _)| format!("{}/{}", crate::selfhosted::NAMESPACE, c.name()))
            .collect()
    } else {
        Vec::new()
    };
    let expected_deployments = if deployments.is_empty() {
        format!("the {backend} backend's cluster has Deployments only with `cluster.self-hosted: true` (the components' own)")
    } else {
        format!(
            "the {backend} backend's cluster has {}",
            deployments.join(" and ")
        )
    };
    if s.cluster.self_hosted && s.cluster.nodes == 0 {
        problems.push((s.source.name_pos, "`cluster.self-hosted: true` needs nodes to run the components' pods; expected `cluster.nodes` of 1 or more".to_owned()));
    }
    for step in &s.faults {
        for (i, t) in step.action.targets().into_iter().enumerate() {
            let pos = step.target_pos.get(i).copied().unwrap_or(step.pos);
            match t {
                Target::Node(name) if !known_node(name) => {
                    problems.push((pos, format!(
                        "target `node/{name}`: the {backend} backend's nodes are {nodes}; expected one of those"
                    )));
                }
                Target::Component(c, sel) if s.cluster.self_hosted => {
                    // Any step that names a component's processes names its pods here.
                    let what = if step.action.link().is_some() {
                        Some("a link fault cannot single out a pod (pods share their node's network); name its node instead (`node/node-0`)")
                    } else if let kubechaos_core::scenario::Selector::Index(_) = sel {
                        Some("its pods have no fixed replica numbers; expected `kube-scheduler` (every pod) or `kube-scheduler/leader`")
                    } else {
                        None
                    };
                    if let Some(what) = what {
                        problems.push((pos, format!(
                            "target `{t}`: in a self-hosted cluster {} runs as the pods of a Deployment in kube-system: {what}",
                            c.name()
                        )));
                    }
                }
                _ => {}
            }
        }
        if let Action::Recover(r) = &step.action {
            let (ns, rest) = r.pod_from.split_once('/').unwrap_or(("", &r.pod_from));
            let known = rest
                .split_once('/')
                .and_then(|(kind, name)| {
                    (crate::recover::Kind::parse(kind) == Some(crate::recover::Kind::Deployment))
                        .then(|| format!("{ns}/{name}"))
                })
                .is_some_and(|d| deployments.contains(&d));
            if !known {
                problems.push((step.pos, format!(
                        "`recover.pod-from: {}`: {expected_deployments}; expected one of those as NAMESPACE/deployment/NAME",
                        r.pod_from
                    )));
            }
        }
        if let Some(node) = step.action.node().filter(|n| !known_node(n)) {
            problems.push((step.pos, format!(
                "`{}` to node `{node}`: the {backend} backend's nodes are {nodes}; expected one of those",
                step.action.key()
            )));
        }
    }
    for inv in &s.expect {
        if let Invariant::Available(a) = &inv.value {
            if !deployments.contains(&a.deployment.to_string()) {
                problems.push((inv.pos, format!(
                    "`available: {{deployment: {}}}`: {expected_deployments}; expected one of those",
                    a.deployment
                )));
            }
        }
    }
    problems
}

/// Whether `program` can be run: a path (with a `/`) names a file from the directory kubechaos
/// runs in, a bare name one on `PATH`; either must be an executable file.
fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let file = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        file(std::path::Path::new(program))
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| file(&dir.join(program))))
    }
}

/// What the local backend's nodes could not run of the manifests' pods (a Pod's containers, or
/// the pod template's of a Deployment, StatefulSet, DaemonSet, ReplicaSet or Job), said before
/// the run rather than as a pod that never starts: a `command` whose program is not there
/// (`kubechaos` is this executable), and an environment the nodes do not give (checked by the
/// very function that makes it, [`crate::fake_node::environment`]).
pub(crate) fn pod_problems(s: &Scenario) -> Vec<(Pos, String)> {
    let mut problems = Vec::new();
    for m in &s.cluster.manifests {
        for o in &m.objects {
            let spec = match o.pointer("/spec/template") {
                Some(t) => Some(t.clone()),
                None => (o["kind"] == "Pod").then(|| o.clone()),
            };
            let Some(pod) = spec
                .and_then(|t| serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(t).ok())
            else {
                continue;
            };
            let what = |c: &str| {
                format!(
                    "{} {} in {}: container `{c}`",
                    o["kind"].as_str().unwrap_or("object"),
                    o.pointer("/metadata/name")
                        .and_then(|n| n.as_str())
                        .unwrap_or(""),
                    m.written,
                )
            };
            for c in pod.spec.iter().flat_map(|sp| sp.containers.iter()) {
                let Some(program) = c.command.as_ref().and_then(|cmd| cmd.first()) else {
                    continue;
                };
                if let Err(e) = crate::fake_node::environment(&pod, c) {
                    problems.push((m.pos, format!("{}: {e}", what(&c.name))));
                }
                if program == "kubechaos" || runnable(program) {
                    continue;
                }
                let cwd = std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_else(|_| ".".into());
                problems.push((m.pos, format!(
                    "{} runs `{program}`, which is not an executable file {}; expected the path of a program on this machine (with a `/`, from the directory kubechaos runs in), a name on PATH, or `kubechaos`: the local backend's nodes run a pod's `command` on this machine, the image ignored",
                    what(&c.name),
                    if program.contains('/') { format!("(from {cwd})") } else { "on PATH".to_owned() },
                )));
            }
        }
    }
    problems
}

/// The `command` agents whose program is not there to run (see [`runnable`]). Found before the
/// run, not when its processes fail to start.
pub(crate) fn missing_programs(s: &Scenario) -> Vec<(Pos, String)> {
    let mut problems = Vec::new();
    for a in &s.cluster.agents {
        let Some(program) = a.command.as_ref().and_then(|c| c.first()) else {
            continue;
        };
        let found = runnable(program);
        if !found {
            let cwd = std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| ".".into());
            problems.push((
                a.pos,
                if program.contains('/') {
                    format!("agent `{}`: `{program}` is not an executable file (from {cwd}); expected the path of a program to run, from the directory kubechaos runs in, or a name on PATH", a.name)
                } else {
                    format!("agent `{}`: no executable `{program}` on PATH; expected the path of a program to run (with a `/`, from the directory kubechaos runs in) or a name on PATH", a.name)
                },
            ));
        }
    }
    problems
}
