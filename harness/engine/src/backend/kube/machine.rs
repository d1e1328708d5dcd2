//! The machines of a kind or k3s (k3d) cluster, reached with the docker CLI: each node is a
//! container named as the node. This turns the driver's process operations (stop, start, cut,
//! mend) into docker commands, keeps a ledger of every change still in place, and undoes what
//! is left at the end of a run (or on Ctrl-C).
//!
//! The process names are the driver's: `api-server`, `etcd`, `kube-scheduler-N`,
//! `kube-controller-manager-N` (N = the Nth control-plane node, by name) and the node names.

use super::error::DockerError;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::pod_agents::PodPlace;
use super::provider::Provider;
use kubechaos_core::scenario::Component;

/// Where kubelet reads static pod manifests (kubeadm, kind).
pub(crate) const MANIFESTS: &str = "/etc/kubernetes/manifests";
/// Where a held manifest waits, outside kubelet's sight.
pub(crate) const HELD: &str = "/etc/kubernetes/kubechaos-held";
/// The comment on every iptables rule kubechaos adds (`iptables -S | grep kubechaos` finds them).
pub(crate) const RULE_COMMENT: &str = "kubechaos";
/// The port the API servers of kind and k3s serve on, on their nodes.
const API_SERVER_PORT: &str = "6443";
/// How long one docker command may take.
const DOCKER_TIMEOUT: Duration = Duration::from_secs(60);

/// A node of the cluster, as the API lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeMachine {
    /// Node name = container name.
    pub(crate) name: String,
    /// InternalIP.
    pub(crate) ip: String,
    /// It runs the control plane (kind: kubeadm's static pods; k3s: a server).
    pub(crate) control_plane: bool,
}

/// The docker CLI (`$KUBECHAOS_DOCKER`, else `docker` on PATH).
#[derive(Clone, Debug)]
pub(crate) struct Docker {
    program: PathBuf,
}

impl Default for Docker {
    fn default() -> Self {
        Docker {
            program: std::env::var_os("KUBECHAOS_DOCKER")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("docker")),
        }
    }
}

impl Docker {
    /// The CLI at `program` (tests: a stand-in).
    #[cfg(test)]
    pub(crate) fn at(program: impl Into<PathBuf>) -> Docker {
        Docker {
            program: program.into(),
        }
    }

    /// Run `docker ARGS`; its stdout, or what went wrong.
    pub(crate) fn run(&self, args: &[String]) -> Result<String, DockerError> {
        let shown = format!("docker {}", args.join(" "));
        let spawn = || {
            std::process::Command::new(&self.program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        };
        // A program just written cannot be run while a process forked meanwhile still holds
        // its write descriptor (ETXTBSY, until that process execs): try again for a moment.
        let mut tries = 0;
        let mut child = loop {
            match spawn() {
                Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                r => {
                    break r.map_err(|source| DockerError::Spawn {
                        program: self.program.clone(),
                        source,
                    })?
                }
            }
        };
        let deadline = Instant::now() + DOCKER_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(DockerError::Timeout {
                        shown,
                        limit: DOCKER_TIMEOUT,
                    });
                }
            }
        }
        let out = child
            .wait_with_output()
            .map_err(|source| DockerError::Output {
                shown: shown.clone(),
                source,
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(DockerError::Failed {
                shown,
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }
}

/// A change still in place, and how to undo it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Change {
    /// A static pod's manifest moved out of kubelet's sight.
    Held { node: String, pod: &'static str },
    /// An iptables rule in a node container (the arguments after `-I`/`-D`).
    Rule { node: String, rule: Vec<String> },
    /// A node container paused.
    Paused { node: String },
    /// A k3s server container stopped.
    Stopped { node: String },
}

/// One end of a cut, in one node container.
struct End {
    node: String,
    ip: String,
    /// The TCP ports the end serves (api-server, etcd), if it is a service rather than a node.
    ports: Option<&'static str>,
}

/// The machines of a kind or k3s cluster.
pub(crate) struct Machines {
    provider: Provider,
    nodes: Vec<NodeMachine>,
    docker: Docker,
    ledger: Vec<Change>,
    /// Every docker command that failed, in order.
    pub(crate) errors: Vec<String>,
}

fn s(x: &str) -> String {
    x.to_owned()
}

/// The end of every rule kubechaos adds: marked as its own, dropping what it matches.
fn drop_marked() -> [String; 6] {
    ["-m", "comment", "--comment", RULE_COMMENT, "-j", "DROP"].map(s)
}

impl Machines {
    /// The machines of `nodes` (sorted by name), reached with `docker`.
    pub(crate) fn new(provider: Provider, mut nodes: Vec<NodeMachine>, docker: Docker) -> Machines {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Machines {
            provider,
            nodes,
            docker,
            ledger: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// The control-plane nodes, by name.
    pub(crate) fn control_plane(&self) -> Vec<&NodeMachine> {
        self.nodes.iter().filter(|n| n.control_plane).collect()
    }

    /// Every node's name.
    pub(crate) fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// The process names the driver may touch: the control plane's and the nodes'.
    pub(crate) fn processes(&self) -> Vec<String> {
        let mut out = vec![s(crate::backend::driver::API_SERVER)];
        if self.provider == Provider::Kind {
            out.push(s(crate::backend::driver::ETCD));
            for c in Component::ALL {
                for i in 0..self.control_plane().len() {
                    out.push(kubechaos_core::scenario::validate::process_name(
                        c.name(),
                        i as u32,
                    ));
                }
            }
        }
        out.extend(self.node_names());
        out
    }

    /// The process a lease holder's host stands for: the component on that control-plane node.
    pub(crate) fn holder_process(&self, lease: &str, host: &str) -> Option<String> {
        let c = Component::ALL
            .into_iter()
            .find(|c| c.lease().to_string() == lease)?;
        let i = self.control_plane().iter().position(|n| n.name == host)?;
        Some(kubechaos_core::scenario::validate::process_name(
            c.name(),
            i as u32,
        ))
    }

    fn docker(&mut self, args: Vec<String>) -> bool {
        match self.docker.run(&args) {
            Ok(_) => true,
            Err(e) => {
                self.errors.push(kubechaos_core::error::chain(&e));
                false
            }
        }
    }

    fn exec(&mut self, node: &str, script: String) -> bool {
        self.docker(vec![s("exec"), s(node), s("sh"), s("-c"), script])
    }

    /// `(node, static pod)` pairs a process name stands for on kind.
    fn static_pods(&self, name: &str) -> Vec<(String, &'static str)> {
        let cp = self.control_plane();
        let all = |pod| cp.iter().map(|n| (n.name.clone(), pod)).collect();
        match name {
            crate::backend::driver::API_SERVER => all("kube-apiserver"),
            crate::backend::driver::ETCD => all("etcd"),
            _ => Component::ALL
                .into_iter()
                .find_map(|c| {
                    let i: usize = name
                        .strip_prefix(c.name())?
                        .strip_prefix('-')?
                        .parse()
                        .ok()?;
                    Some(vec![(cp.get(i)?.name.clone(), c.name())])
                })
                .unwrap_or_default(),
        }
    }

    fn servers(&self) -> Vec<String> {
        self.control_plane()
            .iter()
            .map(|n| n.name.clone())
            .collect()
    }

    fn is_node(&self, name: &str) -> bool {
        self.nodes.iter().any(|n| n.name == name)
    }

    /// Stop a process: `graceful` or not; `hold`: it stays down until [`Machines::start`]
    /// (otherwise kubelet restarts it).
    pub(crate) fn stop(&mut self, name: &str, graceful: bool, hold: bool) {
        if self.is_node(name) {
            if self.docker(vec![s("pause"), s(name)]) {
                self.ledger.push(Change::Paused { node: s(name) });
            }
            return;
        }
        match self.provider {
            Provider::Kind => {
                for (node, pod) in self.static_pods(name) {
                    let mut script = String::new();
                    if hold {
                        script.push_str(&format!(
                            "mkdir -p {HELD} && mv {MANIFESTS}/{pod}.yaml {HELD}/{pod}.yaml && "
                        ));
                    }
                    // Graceful: in the background, so that a slow shutdown does not hold the
                    // run up (kubelet also stops a pod whose manifest is gone).
                    let stop = format!(
                        "crictl ps -q --name '^{pod}$' | xargs -r crictl stop --timeout {}",
                        if graceful { 30 } else { 0 }
                    );
                    if graceful {
                        script.push_str(&format!("({stop} >/dev/null 2>&1 &)"));
                    } else {
                        script.push_str(&stop);
                    }
                    if self.exec(&node, script) && hold {
                        self.ledger.push(Change::Held { node, pod });
                    }
                }
            }
            Provider::K3s => {
                for node in self.servers() {
                    let args = if graceful {
                        vec![s("stop"), s("-t"), s("30"), node.clone()]
                    } else {
                        vec![s("kill"), node.clone()]
                    };
                    if self.docker(args) {
                        self.ledger.push(Change::Stopped { node });
                    }
                }
            }
            Provider::Generic | Provider::Auto | Provider::K3sContainer => {}
        }
    }

    /// Start a process that was stopped (kubelet restarts what was only killed: nothing to do).
    pub(crate) fn start(&mut self, name: &str) {
        let held: Vec<Change> = if self.is_node(name) {
            vec![Change::Paused { node: s(name) }]
        } else {
            match self.provider {
                Provider::Kind => self
                    .static_pods(name)
                    .into_iter()
                    .map(|(node, pod)| Change::Held { node, pod })
                    .collect(),
                _ => self
                    .servers()
                    .into_iter()
                    .map(|node| Change::Stopped { node })
                    .collect(),
            }
        };
        for c in held {
            if let Some(i) = self.ledger.iter().position(|l| *l == c) {
                if self.undo(&c) {
                    self.ledger.remove(i);
                }
            }
        }
    }

    fn ends(&self, name: &str) -> Vec<End> {
        let service = match name {
            crate::backend::driver::API_SERVER => Some(API_SERVER_PORT),
            crate::backend::driver::ETCD => Some("2379:2380"),
            _ => None,
        };
        match service {
            Some(ports) => self
                .control_plane()
                .iter()
                .map(|n| End {
                    node: n.name.clone(),
                    ip: n.ip.clone(),
                    ports: Some(ports),
                })
                .collect(),
            None => self
                .nodes
                .iter()
                .filter(|n| n.name == name)
                .map(|n| End {
                    node: n.name.clone(),
                    ip: n.ip.clone(),
                    ports: None,
                })
                .collect(),
        }
    }

    /// The iptables rules (in the sender's container) that drop traffic from `from` to `to`.
    fn rules(&self, from: &str, to: &str) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        for f in self.ends(from) {
            for t in self.ends(to) {
                if f.node == t.node {
                    // One network namespace: nothing between them to cut.
                    continue;
                }
                let mut rule = vec![s("OUTPUT"), s("-d"), t.ip.clone()];
                match (t.ports, f.ports) {
                    (Some(p), _) => rule.extend([s("-p"), s("tcp"), s("--dport"), s(p)]),
                    (None, Some(p)) => rule.extend([s("-p"), s("tcp"), s("--sport"), s(p)]),
                    (None, None) => {}
                }
                rule.extend(drop_marked());
                out.push((f.node.clone(), rule));
            }
        }
        out
    }

    fn iptables(&mut self, node: &str, op: &str, rule: &[String]) -> bool {
        let mut args = vec![s("exec"), s(node), s("iptables"), s(op)];
        args.extend(rule.iter().cloned());
        self.docker(args)
    }

    /// Drop traffic from `from` to `to`.
    pub(crate) fn cut(&mut self, from: &str, to: &str) {
        for (node, rule) in self.rules(from, to) {
            if self.iptables(&node, "-I", &rule) {
                self.ledger.push(Change::Rule { node, rule });
            }
        }
    }

    /// The iptables rules, in the node container `pod` runs in, that drop its traffic to the API
    /// server (`up`) or the API server's to it. Its requests, to the API server's port once the
    /// `kubernetes` Service's address is translated, pass that node's INPUT chain (the API server
    /// runs on that node) or FORWARD (on another); the answers pass OUTPUT or FORWARD.
    fn pod_rules(pod: &PodPlace, up: bool) -> Vec<Vec<String>> {
        let (chains, matching) = if up {
            (["INPUT", "FORWARD"], ["-s", "--dport"])
        } else {
            (["OUTPUT", "FORWARD"], ["-d", "--sport"])
        };
        chains
            .into_iter()
            .map(|chain| {
                let mut rule = vec![
                    s(chain),
                    s(matching[0]),
                    pod.ip.clone(),
                    s("-p"),
                    s("tcp"),
                    s(matching[1]),
                    s(API_SERVER_PORT),
                ];
                rule.extend(drop_marked());
                rule
            })
            .collect()
    }

    /// Drop a pod's traffic to the API server (`up`) or the API server's to it. A pod on its
    /// node's network, or without a node or address yet, cannot be singled out: why, if so.
    pub(crate) fn cut_pod(&mut self, pod: &PodPlace, up: bool) -> Result<(), String> {
        if pod.host_network {
            return Err(format!("pod {}/{} uses its node's network (hostNetwork): cutting it off would cut node {} off too, so nothing was cut", pod.namespace, pod.name, pod.node));
        }
        if pod.node.is_empty() || pod.ip.is_empty() {
            return Err(format!(
                "pod {}/{} has no node or no address yet, so nothing was cut",
                pod.namespace, pod.name
            ));
        }
        for rule in Self::pod_rules(pod, up) {
            if self.iptables(&pod.node, "-I", &rule) {
                self.ledger.push(Change::Rule {
                    node: pod.node.clone(),
                    rule,
                });
            }
        }
        Ok(())
    }

    /// Let a pod's traffic to the API server (`up`) or the API server's to it flow again.
    pub(crate) fn mend_pod(&mut self, pod: &PodPlace, up: bool) {
        for rule in Self::pod_rules(pod, up) {
            let c = Change::Rule {
                node: pod.node.clone(),
                rule,
            };
            if let Some(i) = self.ledger.iter().position(|l| *l == c) {
                if self.undo(&c) {
                    self.ledger.remove(i);
                }
            }
        }
    }

    /// Kill a pod's container in its node container (`crictl stop --timeout 0`: SIGKILL);
    /// its kubelet restarts it. Whether the command ran.
    pub(crate) fn kill_pod(&mut self, pod: &PodPlace) -> bool {
        let script = format!(
            "crictl ps -q --state running --label io.kubernetes.pod.namespace={} --label io.kubernetes.pod.name={} --name '^{}$' | xargs -r crictl stop --timeout 0",
            pod.namespace, pod.name, pod.container
        );
        self.exec(&pod.node.clone(), script)
    }

    /// Let traffic from `from` to `to` flow again.
    pub(crate) fn mend(&mut self, from: &str, to: &str) {
        for (node, rule) in self.rules(from, to) {
            let c = Change::Rule { node, rule };
            if let Some(i) = self.ledger.iter().position(|l| *l == c) {
                if self.undo(&c) {
                    self.ledger.remove(i);
                }
            }
        }
    }

    fn undo(&mut self, c: &Change) -> bool {
        match c {
            Change::Held { node, pod } => {
                self.exec(node, format!("mv {HELD}/{pod}.yaml {MANIFESTS}/{pod}.yaml"))
            }
            Change::Rule { node, rule } => self.iptables(&node.clone(), "-D", &rule.clone()),
            Change::Paused { node } => self.docker(vec![s("unpause"), node.clone()]),
            Change::Stopped { node } => self.docker(vec![s("start"), node.clone()]),
        }
    }

    /// Whether a change that brings the API server back is still in place.
    pub(crate) fn api_server_down(&self) -> bool {
        self.ledger.iter().any(|c| {
            matches!(
                c,
                Change::Held {
                    pod: "kube-apiserver" | "etcd",
                    ..
                } | Change::Stopped { .. }
            )
        })
    }

    /// Undo every change still in place, newest first. Says what it restored, and what it could
    /// not (with the command that would).
    pub(crate) fn restore(&mut self) -> Vec<String> {
        let mut said = Vec::new();
        while let Some(c) = self.ledger.pop() {
            let what = match &c {
                Change::Held { node, pod } => {
                    format!("moved {pod}.yaml back into {node}'s {MANIFESTS}")
                }
                Change::Rule { node, rule } => {
                    format!("removed the iptables rule `{}` in {node}", rule.join(" "))
                }
                Change::Paused { node } => format!("unpaused {node}"),
                Change::Stopped { node } => format!("started {node} again"),
            };
            if self.undo(&c) {
                said.push(what);
            } else {
                said.push(format!(
                    "could NOT undo: {what} (see the error above; do it by hand)"
                ));
            }
        }
        said
    }
}

/// How a provider carries out a process operation, for `--dry-run` (no node names needed).
pub(crate) fn describe(
    provider: Provider,
    action: &kubechaos_core::scenario::Action,
) -> Option<(String, String)> {
    use kubechaos_core::scenario::{Action, ProcessOp, Target};
    let kind_static = |pod: &str, op: ProcessOp| {
        match op {
        ProcessOp::Stop => (
            format!("in each control-plane node container: mv {MANIFESTS}/{pod}.yaml {HELD}/ (kubelet stops the pod) and `crictl stop --timeout 30` its container"),
            format!("mv it back into {MANIFESTS} (kubelet starts it)"),
        ),
        ProcessOp::Crash => (
            format!("in each control-plane node container: mv {MANIFESTS}/{pod}.yaml {HELD}/ and `crictl stop --timeout 0` its container (SIGKILL)"),
            format!("mv it back into {MANIFESTS}"),
        ),
        ProcessOp::Start => (
            format!("mv {HELD}/{pod}.yaml back into {MANIFESTS} where it was held"),
            "nothing".to_owned(),
        ),
        ProcessOp::Restart => (
            format!("in each control-plane node container: mv {MANIFESTS}/{pod}.yaml out, `crictl stop` its container, mv it back"),
            "nothing".to_owned(),
        ),
    }
    };
    let node_op = |n: &str, start: bool| {
        if start {
            (format!("docker unpause {n}"), "nothing".to_owned())
        } else {
            (format!("docker pause {n}"), format!("docker unpause {n}"))
        }
    };
    let provider = match provider {
        Provider::K3sContainer => Provider::K3s,
        p => p,
    };
    let kind = provider == Provider::Kind;
    Some(match action {
        Action::ApiServer(op) => match provider {
            Provider::Kind => kind_static("kube-apiserver", *op),
            Provider::K3s => match op {
                ProcessOp::Stop => ("docker stop -t 30 on each k3s server container".into(), "docker start it".into()),
                ProcessOp::Crash => ("docker kill on each k3s server container".into(), "docker start it".into()),
                ProcessOp::Start => ("docker start the stopped server containers".into(), "nothing".into()),
                ProcessOp::Restart => ("docker stop -t 30, then docker start, each k3s server container".into(), "nothing".into()),
            },
            Provider::Auto | Provider::Generic | Provider::K3sContainer => return None,
        },
        Action::Etcd(op) if kind => kind_static("etcd", *op),
        Action::Etcd(_) => return None,
        Action::Kill(Target::Node(n)) | Action::Remove(Target::Node(n)) => node_op(n, false),
        Action::Start(Target::Node(n)) => node_op(n, true),
        Action::Kill(t) if kind => (
            format!("`crictl stop --timeout 0` the container of {t} in its control-plane node (kubelet restarts it)"),
            "kubelet restarts it".into(),
        ),
        Action::Remove(t) if kind => (
            format!("mv the static pod manifest of {t} out of {MANIFESTS} in its control-plane node and `crictl stop --timeout 0` its container"),
            format!("mv it back into {MANIFESTS}"),
        ),
        Action::Start(t) if kind => (
            format!("mv the held manifest of {t} back into {MANIFESTS}"),
            "nothing".into(),
        ),
        Action::Kill(_) | Action::Remove(_) | Action::Start(_) => return None,
        Action::Partition(p) => (
            format!(
                "iptables -I OUTPUT ... -m comment --comment {RULE_COMMENT} -j DROP in the sending node container(s) ({} {} {}: api-server = tcp 6443, etcd = tcp 2379:2380 of the control-plane nodes)",
                p.a,
                if p.oneway { "->" } else { "<->" },
                p.b
            ),
            "iptables -D the same rules".into(),
        ),
        Action::Heal(_) => ("iptables -D every rule a partition added".into(), "nothing".into()),
        // Refused before the run (the provider check).
        Action::Delay(_) | Action::Loss(_) | Action::ApiErrors(_) => return None,
        // Through the API: the dry run describes them itself.
        Action::DeletePods(_) | Action::Recover(_) | Action::Bind(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recording stand-in for the docker CLI: appends its arguments, one call a line, to a log.
    pub(crate) fn stand_in() -> (tempfile::TempDir, Docker, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("docker.log");
        let bin = dir.path().join("docker");
        std::fs::write(
            &bin,
            format!(
                "#!/bin/sh\n[ \"$1\" = __ready ] && exit 0\nprintf '%s\\n' \"$*\" >> {}\n",
                log.display()
            ),
        )
        .expect("stand-in");
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        // A child forked by a test on another thread while the script was open for writing
        // holds it open until it execs: running it then fails with ETXTBSY. Wait for that to pass.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::process::Command::new(&bin)
            .arg("__ready")
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(Instant::now() < deadline, "the docker stand-in never ran");
            std::thread::sleep(Duration::from_millis(10));
        }
        (dir, Docker::at(bin), log)
    }

    fn kind_nodes() -> Vec<NodeMachine> {
        vec![
            NodeMachine {
                name: "chaos-worker".into(),
                ip: "172.18.0.3".into(),
                control_plane: false,
            },
            NodeMachine {
                name: "chaos-control-plane".into(),
                ip: "172.18.0.2".into(),
                control_plane: true,
            },
        ]
    }

    fn calls(log: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn kind_holds_a_static_pod_by_moving_its_manifest_and_restores_it() {
        let (_dir, docker, log) = stand_in();
        let mut m = Machines::new(Provider::Kind, kind_nodes(), docker);
        assert_eq!(
            m.processes(),
            [
                "api-server",
                "etcd",
                "kube-scheduler-0",
                "kube-controller-manager-0",
                "chaos-control-plane",
                "chaos-worker"
            ]
        );
        m.stop("api-server", true, true);
        assert!(m.api_server_down());
        m.stop("kube-scheduler-0", false, false);
        m.start("api-server");
        assert!(!m.api_server_down());
        m.stop("kube-controller-manager-0", false, true);
        let restored = m.restore();
        assert_eq!(
            calls(&log),
            [
                "exec chaos-control-plane sh -c mkdir -p /etc/kubernetes/kubechaos-held && mv /etc/kubernetes/manifests/kube-apiserver.yaml /etc/kubernetes/kubechaos-held/kube-apiserver.yaml && (crictl ps -q --name '^kube-apiserver$' | xargs -r crictl stop --timeout 30 >/dev/null 2>&1 &)",
                "exec chaos-control-plane sh -c crictl ps -q --name '^kube-scheduler$' | xargs -r crictl stop --timeout 0",
                "exec chaos-control-plane sh -c mv /etc/kubernetes/kubechaos-held/kube-apiserver.yaml /etc/kubernetes/manifests/kube-apiserver.yaml",
                "exec chaos-control-plane sh -c mkdir -p /etc/kubernetes/kubechaos-held && mv /etc/kubernetes/manifests/kube-controller-manager.yaml /etc/kubernetes/kubechaos-held/kube-controller-manager.yaml && crictl ps -q --name '^kube-controller-manager$' | xargs -r crictl stop --timeout 0",
                "exec chaos-control-plane sh -c mv /etc/kubernetes/kubechaos-held/kube-controller-manager.yaml /etc/kubernetes/manifests/kube-controller-manager.yaml",
            ]
        );
        assert_eq!(restored, ["moved kube-controller-manager.yaml back into chaos-control-plane's /etc/kubernetes/manifests"]);
        assert!(m.errors.is_empty(), "{:?}", m.errors);
    }

    #[test]
    fn partitions_are_iptables_rules_in_the_sending_node_and_heal_removes_them() {
        let (_dir, docker, log) = stand_in();
        let mut m = Machines::new(Provider::Kind, kind_nodes(), docker);
        m.cut("chaos-worker", "api-server");
        m.cut("api-server", "chaos-worker");
        // The control-plane node and the API server share a network namespace: nothing to cut.
        m.cut("chaos-control-plane", "api-server");
        m.mend("chaos-worker", "api-server");
        let restored = m.restore();
        assert_eq!(
            calls(&log),
            [
                "exec chaos-worker iptables -I OUTPUT -d 172.18.0.2 -p tcp --dport 6443 -m comment --comment kubechaos -j DROP",
                "exec chaos-control-plane iptables -I OUTPUT -d 172.18.0.3 -p tcp --sport 6443 -m comment --comment kubechaos -j DROP",
                "exec chaos-worker iptables -D OUTPUT -d 172.18.0.2 -p tcp --dport 6443 -m comment --comment kubechaos -j DROP",
                "exec chaos-control-plane iptables -D OUTPUT -d 172.18.0.3 -p tcp --sport 6443 -m comment --comment kubechaos -j DROP",
            ]
        );
        assert_eq!(restored.len(), 1, "{restored:?}");
    }

    #[test]
    fn k3s_stops_its_server_containers_and_pauses_nodes() {
        let (_dir, docker, log) = stand_in();
        let nodes = vec![
            NodeMachine {
                name: "k3d-ci-server-0".into(),
                ip: "172.19.0.2".into(),
                control_plane: true,
            },
            NodeMachine {
                name: "k3d-ci-agent-0".into(),
                ip: "172.19.0.3".into(),
                control_plane: false,
            },
        ];
        let mut m = Machines::new(Provider::K3s, nodes, docker);
        assert_eq!(
            m.processes(),
            ["api-server", "k3d-ci-agent-0", "k3d-ci-server-0"]
        );
        m.stop("api-server", false, true);
        m.stop("k3d-ci-agent-0", false, false);
        m.start("api-server");
        let restored = m.restore();
        assert_eq!(
            calls(&log),
            [
                "kill k3d-ci-server-0",
                "pause k3d-ci-agent-0",
                "start k3d-ci-server-0",
                "unpause k3d-ci-agent-0",
            ]
        );
        assert_eq!(restored, ["unpaused k3d-ci-agent-0"]);
    }

    #[test]
    fn a_failed_docker_command_is_kept_and_its_change_is_not_in_the_ledger() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("docker");
        std::fs::write(
            &bin,
            "#!/bin/sh\necho 'Error response from daemon: No such container' >&2\nexit 1\n",
        )
        .expect("write");
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let mut m = Machines::new(Provider::Kind, kind_nodes(), Docker::at(&bin));
        m.stop("chaos-worker", false, true);
        assert!(m.restore().is_empty());
        assert_eq!(m.errors.len(), 1);
        assert!(
            m.errors[0].contains("docker pause chaos-worker")
                && m.errors[0].contains("No such container"),
            "{}",
            m.errors[0]
        );
        let missing = Docker::at(dir.path().join("nowhere"))
            .run(&["ps".into()])
            .unwrap_err();
        let missing = kubechaos_core::error::chain(&missing);
        assert!(missing.contains("need the docker CLI"), "{missing}");
    }

    #[test]
    fn lease_holders_are_named_after_their_control_plane_node() {
        let (_dir, docker, _log) = stand_in();
        let m = Machines::new(Provider::Kind, kind_nodes(), docker);
        assert_eq!(
            m.holder_process("kube-system/kube-scheduler", "chaos-control-plane")
                .as_deref(),
            Some("kube-scheduler-0")
        );
        assert_eq!(
            m.holder_process("kube-system/kube-controller-manager", "chaos-control-plane")
                .as_deref(),
            Some("kube-controller-manager-0")
        );
        assert_eq!(
            m.holder_process("kube-system/kube-scheduler", "chaos-worker"),
            None
        );
        assert_eq!(
            m.holder_process("default/agent-lock", "chaos-control-plane"),
            None
        );
    }

    /// A pod agent's pod is cut off by rules on its own address in its node container (both
    /// chains a packet can take there), mended exactly, and whatever is left goes at the end;
    /// its kill is its container's, by its labels. A pod on its node's network is refused.
    #[test]
    fn a_pod_is_cut_off_in_its_node_and_killed_by_crictl() {
        let (_dir, docker, log) = stand_in();
        let mut m = Machines::new(Provider::Kind, kind_nodes(), docker);
        let pod = PodPlace {
            namespace: "ops".into(),
            name: "op-7d9f-abcde".into(),
            container: "op".into(),
            node: "chaos-worker".into(),
            ip: "10.244.1.7".into(),
            host_network: false,
        };
        m.cut_pod(&pod, true).unwrap();
        m.cut_pod(&pod, false).unwrap();
        m.mend_pod(&pod, true);
        assert!(m.kill_pod(&pod));
        let restored = m.restore();
        let host = PodPlace {
            host_network: true,
            ..pod.clone()
        };
        let refused = m.cut_pod(&host, true).unwrap_err();
        assert!(refused.contains("hostNetwork"), "{refused}");
        let rule = |op: &str, chain: &str, rest: &str| {
            format!("exec chaos-worker iptables {op} {chain} {rest} -m comment --comment kubechaos -j DROP")
        };
        let up = "-s 10.244.1.7 -p tcp --dport 6443";
        let down = "-d 10.244.1.7 -p tcp --sport 6443";
        assert_eq!(
            calls(&log),
            [
                rule("-I", "INPUT", up),
                rule("-I", "FORWARD", up),
                rule("-I", "OUTPUT", down),
                rule("-I", "FORWARD", down),
                rule("-D", "INPUT", up),
                rule("-D", "FORWARD", up),
                "exec chaos-worker sh -c crictl ps -q --state running --label io.kubernetes.pod.namespace=ops --label io.kubernetes.pod.name=op-7d9f-abcde --name '^op$' | xargs -r crictl stop --timeout 0".to_owned(),
                rule("-D", "FORWARD", down),
                rule("-D", "OUTPUT", down),
            ]
        );
        assert_eq!(restored.len(), 2, "{restored:?}");
        assert!(
            restored[0].starts_with("removed the iptables rule `FORWARD -d 10.244.1.7"),
            "{restored:?}"
        );
    }
}
