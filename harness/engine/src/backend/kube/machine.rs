//! The machines of a kind or k3s (k3d) cluster, reached with the docker CLI: each node is a
//! container named as the node. This turns the driver's process operations (stop, start, cut,
//! mend) into docker commands, keeps a ledger of every change still in place, and undoes what
//! is left at the end of a run (or on Ctrl-C).
//!
//! The process names are the driver's: `api-server` and `etcd` (every control-plane node's), or
//! `api-server-N` and `etcd-N` when the scenario counts several, `kube-scheduler-N`,
//! `kube-controller-manager-N` (N = the Nth control-plane node, by name) and the node names.
//!
//! kind runs kubeadm's stacked control plane: each control-plane node runs an API server and an
//! etcd member, and its API server reaches only that member, at `127.0.0.1:2379`; its scheduler
//! and controller-manager reach only that API server (kubeadm writes the node's own address into
//! `scheduler.conf` and `controller-manager.conf`). With several control-plane nodes, the
//! kubelets reach the API servers through kind's load balancer (a container named
//! `CLUSTER-external-load-balancer`, port 6443).

pub(crate) use super::docker::Docker;
use super::docker::CRICTL;
use super::error::DockerError;

use super::pod_agents::PodPlace;
use super::provider::Provider;
use crate::backend::driver::Hold;
use kubechaos_core::scenario::Component;

/// Where kubelet reads static pod manifests (kubeadm, kind).
pub(crate) const MANIFESTS: &str = "/etc/kubernetes/manifests";
/// Where a held manifest waits, outside kubelet's sight.
pub(crate) const HELD: &str = "/etc/kubernetes/kubechaos-held";
/// The comment on every iptables rule kubechaos adds (`iptables -S | grep kubechaos` finds them).
pub(crate) const RULE_COMMENT: &str = "kubechaos";
/// The port the API servers of kind and k3s serve on, on their nodes.
const API_SERVER_PORT: &str = "6443";
/// The label kind puts on its containers: the cluster's name.
const KIND_CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";
/// The client port of kubeadm's etcd, on `127.0.0.1` of its node.
const ETCD_CLIENT_PORT: &str = "2379";
/// Where kubeadm's etcd serves its metrics (`--listen-metrics-urls`), in its node.
const ETCD_METRICS: &str = "http://127.0.0.1:2381/metrics";

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

/// A change still in place, and how to undo it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Change {
    /// A static pod's manifest moved out of kubelet's sight.
    Held { node: String, pod: &'static str },
    /// A static pod's container killed each time its kubelet starts it, by a loop in the node
    /// container, a loop that ends once [`crash_end`] asks it to (see [`crash_loop`]).
    Crashing { node: String, pod: &'static str },
    /// An iptables rule in a node container (the arguments after `-I`/`-D`).
    Rule { node: String, rule: Vec<String> },
    /// A node container paused.
    Paused { node: String },
    /// A k3s server container stopped.
    Stopped { node: String },
}

/// A service of the control plane, on every control-plane node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Service {
    ApiServer,
    Etcd,
}

impl Service {
    /// The TCP ports it serves on its node's address.
    fn ports(self) -> &'static str {
        match self {
            Service::ApiServer => API_SERVER_PORT,
            Service::Etcd => "2379:2380",
        }
    }

    /// Its static pod (kubeadm's manifest name).
    fn pod(self) -> &'static str {
        match self {
            Service::ApiServer => "kube-apiserver",
            Service::Etcd => "etcd",
        }
    }
}

/// The service a process name stands for, and which control-plane node's (by number), or every
/// one's: `api-server`, `api-server-1`, `etcd`, `etcd-2`.
fn service_of(name: &str) -> Option<(Service, Option<usize>)> {
    use crate::backend::driver::{API_SERVER, ETCD};
    [(API_SERVER, Service::ApiServer), (ETCD, Service::Etcd)]
        .into_iter()
        .find_map(|(group, service)| {
            let rest = name.strip_prefix(group)?;
            if rest.is_empty() {
                return Some((service, None));
            }
            Some((service, Some(rest.strip_prefix('-')?.parse().ok()?)))
        })
}

/// One end of a cut, in one node container.
struct End {
    node: String,
    ip: String,
    /// The service it is, if it is not a node.
    service: Option<Service>,
}

/// The machines of a kind or k3s cluster.
pub(crate) struct Machines {
    provider: Provider,
    nodes: Vec<NodeMachine>,
    docker: Docker,
    /// How many API servers and etcd members the scenario names (`api-server-N` and `etcd-N` if
    /// more than one; the check saw that the cluster has that many control-plane nodes).
    api_servers: u32,
    etcd_members: u32,
    /// kind's load balancer in front of several control-plane nodes: its address.
    load_balancer: Option<String>,
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
            api_servers: 1,
            etcd_members: 1,
            load_balancer: None,
            ledger: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Name the API servers and etcd members as a scenario that counts `api_servers` and
    /// `etcd_members` does (the Nth of each is the Nth control-plane node's).
    pub(crate) fn counting(mut self, api_servers: u32, etcd_members: u32) -> Machines {
        self.api_servers = api_servers;
        self.etcd_members = etcd_members;
        self
    }

    /// Before anything is touched: every node of the cluster is a running container that the
    /// docker CLI here knows (kind and k3d name their containers after their nodes). Why not, if
    /// one is not: Docker not installed or not running, or a context whose nodes are machines
    /// elsewhere (a kind cluster made on another host, or no kind cluster at all).
    pub(crate) fn preflight(&self) -> Result<(), String> {
        let mut args = vec![s("inspect"), s("-f"), s("{{.Name}} {{.State.Running}}")];
        args.extend(self.nodes.iter().map(|n| n.name.clone()));
        let out = self.docker.run(&args).map_err(|e| {
            let said = kubechaos_core::error::chain(&e);
            if said.contains("No such object") || said.contains("No such container") {
                format!("{said}: the {} provider reaches the cluster's nodes as containers of the Docker engine on this machine, and these are not (is this a {} cluster made on this machine? API-level faults only: --provider generic)", self.provider.name(), self.provider.name())
            } else {
                said
            }
        })?;
        let stopped: Vec<&str> = out
            .lines()
            .filter_map(|l| l.trim().strip_suffix(" false"))
            .map(|n| n.trim_start_matches('/'))
            .collect();
        if !stopped.is_empty() {
            return Err(format!(
                "node container(s) {} are not running (`docker start` them, or delete and make the cluster again)",
                stopped.join(", ")
            ));
        }
        Ok(())
    }

    /// With several control-plane nodes, kind puts a load balancer in front of their API
    /// servers, and the kubelets reach them through it: find its address (a partition between a
    /// node and the API servers drops the node's packets to it too). Why not, if it is not found.
    pub(crate) fn find_load_balancer(&mut self) -> Result<(), String> {
        let cp = self.control_plane();
        if self.provider != Provider::Kind || cp.len() < 2 {
            return Ok(());
        }
        // kind labels its containers with their cluster's name, and names the load balancer
        // CLUSTER-external-load-balancer.
        let node = cp[0].name.clone();
        let cluster = self
            .docker
            .run(&[
                s("inspect"),
                s("-f"),
                format!("{{{{index .Config.Labels \"{KIND_CLUSTER_LABEL}\"}}}}"),
                node.clone(),
            ])
            .map_err(|e| kubechaos_core::error::chain(&e))?;
        let cluster = cluster.trim();
        if cluster.is_empty() || cluster == "<no value>" {
            return Err(format!(
                "node container {node} carries no {KIND_CLUSTER_LABEL} label, as kind's do"
            ));
        }
        let container = format!("{cluster}-external-load-balancer");
        let out = self
            .docker
            .run(&[
                s("inspect"),
                s("-f"),
                s("{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"),
                container.clone(),
            ])
            .map_err(|e| kubechaos_core::error::chain(&e))?;
        match out.split_whitespace().next() {
            Some(ip) => {
                self.load_balancer = Some(ip.to_owned());
                Ok(())
            }
            None => Err(format!(
                "kind's load balancer {container} has no address on a docker network"
            )),
        }
    }

    /// The etcd member leading raft now (`etcd/leader`): the one whose node's etcd says
    /// `etcd_server_is_leader 1` in its metrics. kind only. A member this run holds down does
    /// not answer; when no other answers either, the reads' failures are kept in `errors` (the
    /// run stops): the step would otherwise say "no leader" where none could be asked.
    pub(crate) fn etcd_leader(&mut self) -> Option<String> {
        if self.provider != Provider::Kind {
            return None;
        }
        let mut failed = Vec::new();
        let mut answered = false;
        for (i, n) in self.control_plane().into_iter().enumerate() {
            let read = self.docker.run(&[
                s("exec"),
                n.name.clone(),
                s("curl"),
                s("-s"),
                s("--max-time"),
                s("2"),
                s(ETCD_METRICS),
            ]);
            match read {
                Ok(out) => {
                    answered = true;
                    if out.lines().any(|l| l.trim() == "etcd_server_is_leader 1") {
                        return Some(kubechaos_core::scenario::member_name(
                            crate::backend::driver::ETCD,
                            i as u32,
                            self.etcd_members,
                        ));
                    }
                }
                Err(_)
                    if self.ledger.iter().any(|c| {
                        matches!(c, Change::Held { node, pod } | Change::Crashing { node, pod }
                            if *node == n.name && *pod == Service::Etcd.pod())
                    }) => {}
                Err(e) => failed.push(format!(
                    "reading which etcd member leads: {}",
                    kubechaos_core::error::chain(&e)
                )),
            }
        }
        if !answered {
            self.errors.extend(failed);
        }
        None
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
        use kubechaos_core::scenario::member_names;
        let mut out = member_names(crate::backend::driver::API_SERVER, self.api_servers);
        if self.provider == Provider::Kind {
            out.extend(member_names(
                crate::backend::driver::ETCD,
                self.etcd_members,
            ));
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

    /// Run a [`crictl_stop`] script in `node`: whether it stopped a container. One that found
    /// none running is no error (it stopped nothing, and says so by `false`); one whose
    /// runtime did not answer is.
    fn exec_stop(&mut self, node: &str, script: String) -> bool {
        match self
            .docker
            .run(&[s("exec"), s(node), s("sh"), s("-c"), script])
        {
            Ok(_) => true,
            Err(DockerError::Failed { status, .. }) if status.code() == Some(NONE_RUNNING) => false,
            Err(e) => {
                self.errors.push(kubechaos_core::error::chain(&e));
                false
            }
        }
    }

    /// The control-plane nodes: every one (`None`), or the Nth.
    fn control_plane_of(&self, which: Option<usize>) -> Vec<&NodeMachine> {
        let cp = self.control_plane();
        match which {
            None => cp,
            Some(i) => cp.get(i).copied().into_iter().collect(),
        }
    }

    /// `(node, static pod)` pairs a process name stands for on kind.
    fn static_pods(&self, name: &str) -> Vec<(String, &'static str)> {
        let cp = self.control_plane();
        match service_of(name) {
            Some((service, which)) => self
                .control_plane_of(which)
                .iter()
                .map(|n| (n.name.clone(), service.pod()))
                .collect(),
            None => Component::ALL
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

    /// The k3s server containers an `api-server` process name stands for.
    fn servers(&self, name: &str) -> Vec<String> {
        let which = service_of(name).and_then(|(_, which)| which);
        self.control_plane_of(which)
            .iter()
            .map(|n| n.name.clone())
            .collect()
    }

    fn is_node(&self, name: &str) -> bool {
        self.nodes.iter().any(|n| n.name == name)
    }

    /// Stop a process: `graceful` or not; `hold`: it stays down until [`Machines::start`], its
    /// pod taken away or its container killed each time it starts (otherwise kubelet restarts
    /// it).
    pub(crate) fn stop(&mut self, name: &str, graceful: bool, hold: Hold) {
        let crashing = hold == Hold::Crashing && !graceful;
        let hold = hold.held();
        if self.is_node(name) {
            if self.docker(vec![s("pause"), s(name)]) {
                self.ledger.push(Change::Paused { node: s(name) });
            }
            return;
        }
        match self.provider {
            Provider::Kind if crashing => {
                for (node, pod) in self.static_pods(name) {
                    // Its manifest stays (its pod and its mirror pod with it): the kubelet starts
                    // it again as it would a process that crashed, and the loop kills it each
                    // time, until [`crash_end`]. (Held aside, a static pod comes back with the
                    // same UID and the kubelet starts it again only from its housekeeping, which
                    // first deletes the orphaned mirror pod: through an API server without etcd
                    // that waits out a timeout, 34 s on kind, before etcd can come back.)
                    if self.exec(&node, crash_loop(HELD, pod)) {
                        self.ledger.push(Change::Crashing {
                            node: node.clone(),
                            pod,
                        });
                        self.exec(&node, format!("for i in $(seq 40); do left=$({CRICTL} ps -q --state running --name '^{pod}$') && [ -z \"$left\" ] && exit 0; sleep 0.5; done; echo '{pod} still runs 20 s after it was killed' >&2; exit 1"));
                    }
                }
            }
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
                    let stop =
                        crictl_stop(&format!("--name '^{pod}$'"), if graceful { 30 } else { 0 });
                    if graceful {
                        script.push_str(&format!("({stop} >/dev/null 2>&1 &)"));
                        if self.exec(&node, script) && hold {
                            self.ledger.push(Change::Held { node, pod });
                        }
                    } else if hold {
                        // The manifest first, in the ledger as soon as it is moved: kubelet then
                        // stops the pod too, and a `crictl stop` racing it may fail ("context
                        // deadline exceeded", seen on kind) where the container is stopping
                        // anyway. What counts is that none runs within 20 s.
                        if self.exec(&node, script.trim_end_matches(" && ").to_owned()) {
                            self.ledger.push(Change::Held {
                                node: node.clone(),
                                pod,
                            });
                            self.exec(&node, format!("{stop} >/dev/null 2>&1; for i in $(seq 40); do left=$({CRICTL} ps -q --state running --name '^{pod}$') && [ -z \"$left\" ] && exit 0; sleep 0.5; done; echo '{pod} still runs 20 s after its manifest was moved out' >&2; exit 1"));
                        }
                    } else {
                        self.exec_stop(&node, stop);
                    }
                }
            }
            Provider::K3s => {
                for node in self.servers(name) {
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
                    .flat_map(|(node, pod)| {
                        [
                            Change::Held {
                                node: node.clone(),
                                pod,
                            },
                            Change::Crashing { node, pod },
                        ]
                    })
                    .collect(),
                _ => self
                    .servers(name)
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
        match service_of(name) {
            Some((service, which)) => self
                .control_plane_of(which)
                .iter()
                .map(|n| End {
                    node: n.name.clone(),
                    ip: n.ip.clone(),
                    service: Some(service),
                })
                .collect(),
            None => self
                .nodes
                .iter()
                .filter(|n| n.name == name)
                .map(|n| End {
                    node: n.name.clone(),
                    ip: n.ip.clone(),
                    service: None,
                })
                .collect(),
        }
    }

    /// The iptables rules (in the sender's container) that drop traffic from `from` to `to`.
    fn rules(&self, from: &str, to: &str) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        let mut push = |node: &str, mut rule: Vec<String>| {
            rule.extend(drop_marked());
            out.push((node.to_owned(), rule));
        };
        for f in self.ends(from) {
            for t in self.ends(to) {
                match (f.service, t.service) {
                    // An API server and its node's etcd member talk over the node's loopback
                    // (kubeadm's stacked etcd); nothing flows between an API server and another
                    // node's member.
                    (Some(a), Some(b)) if a != b => {
                        if f.node == t.node {
                            let port = if b == Service::Etcd {
                                "--dport"
                            } else {
                                "--sport"
                            };
                            push(
                                &f.node,
                                [
                                    "OUTPUT",
                                    "-d",
                                    "127.0.0.1",
                                    "-p",
                                    "tcp",
                                    port,
                                    ETCD_CLIENT_PORT,
                                ]
                                .map(s)
                                .to_vec(),
                            );
                        }
                    }
                    // One network namespace: nothing between them to cut.
                    _ if f.node == t.node => {}
                    _ => {
                        let mut rule = vec![s("OUTPUT"), s("-d"), t.ip.clone()];
                        match (t.service, f.service) {
                            (Some(p), _) => {
                                rule.extend([s("-p"), s("tcp"), s("--dport"), s(p.ports())])
                            }
                            (None, Some(p)) => {
                                rule.extend([s("-p"), s("tcp"), s("--sport"), s(p.ports())])
                            }
                            (None, None) => {}
                        }
                        push(&f.node, rule);
                    }
                }
            }
            // A node reaches the API servers through kind's load balancer, when there is one.
            if let (None, Some((Service::ApiServer, _)), Some(lb)) =
                (f.service, service_of(to), &self.load_balancer)
            {
                push(
                    &f.node,
                    ["OUTPUT", "-d", lb, "-p", "tcp", "--dport", API_SERVER_PORT]
                        .map(s)
                        .to_vec(),
                );
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
    /// its kubelet restarts it. Whether a running container was found and stopped.
    pub(crate) fn kill_pod(&mut self, pod: &PodPlace) -> bool {
        let script = crictl_stop(
            &format!(
                "--state running --label io.kubernetes.pod.namespace={} --label io.kubernetes.pod.name={} --name '^{}$'",
                pod.namespace, pod.name, pod.container
            ),
            0,
        );
        self.exec_stop(&pod.node.clone(), script)
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
            Change::Crashing { node, pod } => self.exec(node, crash_end(HELD, pod)),
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
                } | Change::Crashing {
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
                Change::Crashing { node, pod } => {
                    format!("stopped killing {pod} in {node} (its kubelet starts it again)")
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
            "in each control-plane node container: `crictl stop --timeout 0` its container (SIGKILL), and again each time the kubelet starts it (its manifest stays)".to_owned(),
            "stop killing it (the kubelet starts it after its crash-loop back-off)".to_owned(),
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
                "iptables -I OUTPUT ... -m comment --comment {RULE_COMMENT} -j DROP in the sending node container(s) ({} {} {}: api-server = tcp 6443 of the control-plane nodes and of kind's load balancer, etcd = tcp 2379:2380 of the control-plane nodes; an API server and etcd = tcp 127.0.0.1:2379 in its node, kubeadm's stacked etcd)",
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

/// The exit status of a [`crictl_stop`] script that found no container running.
const NONE_RUNNING: i32 = 3;

/// A shell script (run in a node container) that stops, with `crictl stop --timeout GRACE`,
/// the running containers that `crictl ps FILTER` lists; in a subshell of its own, it fails
/// when `crictl ps` fails (a listing the runtime did not answer is not "nothing to stop") and
/// exits [`NONE_RUNNING`] when none runs.
/// The script that starts, in the background, the loop killing `pod`'s container each time its
/// kubelet starts it (see [`Change::Crashing`]), until a file `<pod>.crash-ends` is in `dir`.
/// While it runs, `<pod>.crashing` in `dir` holds its PID: the loop is its own record in the
/// node, so that `recover --cleanup` ([`end_crash_loops`]) ends one whose run was killed
/// outright. The loop takes both files away as it ends.
fn crash_loop(dir: &str, pod: &str) -> String {
    let ends = format!("{dir}/{pod}.crash-ends");
    let mark = format!("{dir}/{pod}.crashing");
    format!(
        "mkdir -p {dir} && rm -f {ends} && {{ (while [ ! -e {ends} ]; do ids=$({CRICTL} ps -q --state running --name '^{pod}$') && [ -n \"$ids\" ] && {CRICTL} stop --timeout 0 $ids; sleep 0.2; done; rm -f {mark} {ends}) >/dev/null 2>&1 & echo $! > {mark}; }}"
    )
}

/// The script that ends [`crash_loop`]'s loop: done once the loop has ended (it kills nothing
/// after this).
fn crash_end(dir: &str, pod: &str) -> String {
    let ends = format!("{dir}/{pod}.crash-ends");
    format!("touch {ends} && for i in $(seq 100); do [ -e {ends} ] || exit 0; sleep 0.2; done; rm -f {ends}; echo 'the loop killing {pod} did not end within 20 s' >&2; exit 1")
}

/// The script (part of `recover --cleanup`'s, in a node) that ends every [`crash_loop`] left in
/// `dir` by a run killed outright, each as [`crash_end`] does. A mark whose PID runs no such
/// loop (the node container was restarted) is removed. Each line it prints says what it did
/// (`+ `) or could not do (`! `).
pub(crate) fn end_crash_loops(dir: &str) -> String {
    format!(
        "for m in {dir}/*.crashing; do [ -e \"$m\" ] || continue; b=${{m##*/}}; p=${{b%.crashing}}; e={dir}/$p.crash-ends; pid=$(cat \"$m\"); \
         if [ -n \"$pid\" ] && grep -q crash-ends /proc/$pid/cmdline 2>/dev/null; then touch \"$e\"; i=0; while [ -e \"$e\" ] && [ $i -lt 100 ]; do sleep 0.2; i=$((i+1)); done; \
         if [ -e \"$e\" ]; then echo \"! the loop killing $p's container (pid $pid) did not end within 20 s (kill $pid, then rm $m)\"; else echo \"+ stopped killing $p's container (its kubelet starts it again)\"; fi; \
         else rm -f \"$m\" \"$e\"; echo \"+ removed the mark of a loop killing $p that no longer ran\"; fi; done; "
    )
}

fn crictl_stop(filter: &str, grace: u32) -> String {
    format!(
        "(ids=$({CRICTL} ps -q {filter}) || exit 1; [ -n \"$ids\" ] || {{ echo 'no running container matched' >&2; exit {NONE_RUNNING}; }}; {CRICTL} stop --timeout {grace} $ids)"
    )
}

#[cfg(test)]
mod tests {
    use super::super::docker::tests::{stand_in, stand_in_answering};
    use super::*;

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

    /// kind with three control-plane nodes (as kind names them) and a worker.
    fn kind_ha_nodes() -> Vec<NodeMachine> {
        let mut nodes = vec![NodeMachine {
            name: "chaos-worker".into(),
            ip: "172.18.0.5".into(),
            control_plane: false,
        }];
        for (i, suffix) in ["", "2", "3"].into_iter().enumerate() {
            nodes.push(NodeMachine {
                name: format!("chaos-control-plane{suffix}"),
                ip: format!("172.18.0.{}", i + 2),
                control_plane: true,
            });
        }
        nodes
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
        m.stop("api-server", true, Hold::Pod);
        assert!(m.api_server_down());
        m.stop("kube-scheduler-0", false, Hold::No);
        m.start("api-server");
        assert!(!m.api_server_down());
        m.stop("kube-controller-manager-0", false, Hold::Pod);
        let restored = m.restore();
        assert_eq!(
            calls(&log),
            [
                "exec chaos-control-plane sh -c mkdir -p /etc/kubernetes/kubechaos-held && mv /etc/kubernetes/manifests/kube-apiserver.yaml /etc/kubernetes/kubechaos-held/kube-apiserver.yaml && ((ids=$(crictl --timeout 20s ps -q --name '^kube-apiserver$') || exit 1; [ -n \"$ids\" ] || { echo 'no running container matched' >&2; exit 3; }; crictl --timeout 20s stop --timeout 30 $ids) >/dev/null 2>&1 &)",
                "exec chaos-control-plane sh -c (ids=$(crictl --timeout 20s ps -q --name '^kube-scheduler$') || exit 1; [ -n \"$ids\" ] || { echo 'no running container matched' >&2; exit 3; }; crictl --timeout 20s stop --timeout 0 $ids)",
                "exec chaos-control-plane sh -c mv /etc/kubernetes/kubechaos-held/kube-apiserver.yaml /etc/kubernetes/manifests/kube-apiserver.yaml",
                // A hold without grace: the manifest out (the ledger has it), then the container
                // stopped and waited for (kubelet stops it too).
                "exec chaos-control-plane sh -c mkdir -p /etc/kubernetes/kubechaos-held && mv /etc/kubernetes/manifests/kube-controller-manager.yaml /etc/kubernetes/kubechaos-held/kube-controller-manager.yaml",
                "exec chaos-control-plane sh -c (ids=$(crictl --timeout 20s ps -q --name '^kube-controller-manager$') || exit 1; [ -n \"$ids\" ] || { echo 'no running container matched' >&2; exit 3; }; crictl --timeout 20s stop --timeout 0 $ids) >/dev/null 2>&1; for i in $(seq 40); do left=$(crictl --timeout 20s ps -q --state running --name '^kube-controller-manager$') && [ -z \"$left\" ] && exit 0; sleep 0.5; done; echo 'kube-controller-manager still runs 20 s after its manifest was moved out' >&2; exit 1",
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
        m.stop("api-server", false, Hold::Pod);
        m.stop("k3d-ci-agent-0", false, Hold::No);
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
        m.stop("chaos-worker", false, Hold::Pod);
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

    /// Nothing is touched on a cluster whose nodes are no containers here, nor with Docker down:
    /// each says why.
    #[test]
    fn nodes_that_are_not_running_containers_here_are_refused_before_anything() {
        let (_dir, docker, log) = stand_in();
        let m = Machines::new(Provider::Kind, kind_nodes(), docker);
        assert_eq!(m.preflight(), Ok(()));
        assert_eq!(
            calls(&log),
            ["inspect -f {{.Name}} {{.State.Running}} chaos-control-plane chaos-worker"]
        );
        let (_dir, docker, _log) =
            stand_in_answering("echo 'Error: No such object: chaos-control-plane' >&2; exit 1");
        let m = Machines::new(Provider::Kind, kind_nodes(), docker);
        let why = m.preflight().unwrap_err();
        assert!(
            why.contains("No such object: chaos-control-plane")
                && why.contains("is this a kind cluster made on this machine?")
                && why.contains("--provider generic"),
            "{why}"
        );
        let (_dir, docker, _log) =
            stand_in_answering("echo '/chaos-control-plane true'; echo '/chaos-worker false'");
        let m = Machines::new(Provider::Kind, kind_nodes(), docker);
        let why = m.preflight().unwrap_err();
        assert!(
            why.contains("node container(s) chaos-worker are not running"),
            "{why}"
        );
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
                "exec chaos-worker sh -c (ids=$(crictl --timeout 20s ps -q --state running --label io.kubernetes.pod.namespace=ops --label io.kubernetes.pod.name=op-7d9f-abcde --name '^op$') || exit 1; [ -n \"$ids\" ] || { echo 'no running container matched' >&2; exit 3; }; crictl --timeout 20s stop --timeout 0 $ids)".to_owned(),
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

    /// An API server and its node's etcd member talk over that node's loopback (kubeadm's
    /// stacked etcd): a cut between them is a rule there, with one control-plane node (it was
    /// once no rule at all) as with several; nothing is cut between an API server and another
    /// node's member (raft's traffic between members is left alone).
    #[test]
    fn an_api_server_is_cut_off_from_its_etcd_member_on_its_nodes_loopback() {
        let (_dir, docker, log) = stand_in();
        let mut m = Machines::new(Provider::Kind, kind_nodes(), docker);
        m.cut("api-server", "etcd");
        m.cut("etcd", "api-server");
        m.mend("api-server", "etcd");
        let restored = m.restore();
        let rule = |op: &str, port: &str| {
            format!("exec chaos-control-plane iptables {op} OUTPUT -d 127.0.0.1 -p tcp {port} 2379 -m comment --comment kubechaos -j DROP")
        };
        assert_eq!(
            calls(&log),
            [
                rule("-I", "--dport"),
                rule("-I", "--sport"),
                rule("-D", "--dport"),
                rule("-D", "--sport"),
            ]
        );
        assert_eq!(restored.len(), 1, "{restored:?}");

        let (_dir, docker, log) = stand_in();
        let mut m = Machines::new(Provider::Kind, kind_ha_nodes(), docker).counting(3, 3);
        for member in ["etcd-0", "etcd-1", "etcd-2"] {
            m.cut("api-server-1", member);
            m.cut(member, "api-server-1");
        }
        assert_eq!(
            calls(&log),
            [
                "exec chaos-control-plane2 iptables -I OUTPUT -d 127.0.0.1 -p tcp --dport 2379 -m comment --comment kubechaos -j DROP",
                "exec chaos-control-plane2 iptables -I OUTPUT -d 127.0.0.1 -p tcp --sport 2379 -m comment --comment kubechaos -j DROP",
            ]
        );
    }

    /// With several control-plane nodes, `api-server-N`, `etcd-N` and the components' replica N
    /// are the Nth control-plane node's (by name); `api-server` is every node's.
    #[test]
    fn the_nth_api_server_and_etcd_member_are_the_nth_control_plane_nodes() {
        let (_dir, docker, log) = stand_in();
        let mut m = Machines::new(Provider::Kind, kind_ha_nodes(), docker).counting(3, 3);
        assert_eq!(
            m.processes(),
            [
                "api-server-0",
                "api-server-1",
                "api-server-2",
                "etcd-0",
                "etcd-1",
                "etcd-2",
                "kube-scheduler-0",
                "kube-scheduler-1",
                "kube-scheduler-2",
                "kube-controller-manager-0",
                "kube-controller-manager-1",
                "kube-controller-manager-2",
                "chaos-control-plane",
                "chaos-control-plane2",
                "chaos-control-plane3",
                "chaos-worker",
            ]
        );
        m.stop("api-server-1", false, Hold::Pod);
        m.stop("etcd-2", false, Hold::Pod);
        m.start("api-server-1");
        m.restore();
        let held = |node: &str, pod: &str| {
            format!("exec {node} sh -c mkdir -p /etc/kubernetes/kubechaos-held && mv /etc/kubernetes/manifests/{pod}.yaml /etc/kubernetes/kubechaos-held/{pod}.yaml")
        };
        let stopped = |node: &str, pod: &str| {
            format!("exec {node} sh -c (ids=$(crictl --timeout 20s ps -q --name '^{pod}$') || exit 1; [ -n \"$ids\" ] || {{ echo 'no running container matched' >&2; exit 3; }}; crictl --timeout 20s stop --timeout 0 $ids) >/dev/null 2>&1; for i in $(seq 40); do left=$(crictl --timeout 20s ps -q --state running --name '^{pod}$') && [ -z \"$left\" ] && exit 0; sleep 0.5; done; echo '{pod} still runs 20 s after its manifest was moved out' >&2; exit 1")
        };
        let back = |node: &str, pod: &str| {
            format!("exec {node} sh -c mv /etc/kubernetes/kubechaos-held/{pod}.yaml /etc/kubernetes/manifests/{pod}.yaml")
        };
        assert_eq!(
            calls(&log),
            [
                held("chaos-control-plane2", "kube-apiserver"),
                stopped("chaos-control-plane2", "kube-apiserver"),
                held("chaos-control-plane3", "etcd"),
                stopped("chaos-control-plane3", "etcd"),
                back("chaos-control-plane2", "kube-apiserver"),
                back("chaos-control-plane3", "etcd"),
            ]
        );
        // Counted as one (the default), the API server is every node's.
        let (_dir, docker, log) = stand_in();
        let mut m = Machines::new(Provider::Kind, kind_ha_nodes(), docker);
        m.stop("api-server", false, Hold::No);
        assert_eq!(calls(&log).len(), 3);
    }

    /// kind's load balancer is found by its container's name and its address dropped from a
    /// node cut off from the API servers, once for the node; `etcd/leader` is the member whose
    /// metrics say it leads.
    #[test]
    fn a_node_is_cut_off_from_kinds_load_balancer_and_the_etcd_leader_is_read_from_metrics() {
        let (_dir, docker, log) = stand_in_answering(
            r#"case "$1 $2" in
  "inspect -f") case "$*" in
      *chaos-external-load-balancer) echo "172.18.0.9 " ;;
      *"io.x-k8s.kind.cluster"*chaos-control-plane) echo chaos ;;
    esac ;;
  "exec chaos-control-plane3") printf 'etcd_server_has_leader 1\netcd_server_is_leader 1\n' ;;
  "exec "*) printf 'etcd_server_has_leader 1\netcd_server_is_leader 0\n' ;;
esac"#,
        );
        let mut m = Machines::new(Provider::Kind, kind_ha_nodes(), docker).counting(3, 3);
        m.find_load_balancer().unwrap();
        assert_eq!(m.etcd_leader().as_deref(), Some("etcd-2"));
        assert!(m.errors.is_empty(), "{:?}", m.errors);
        for api in ["api-server-0", "api-server-1", "api-server-2"] {
            m.cut("chaos-worker", api);
        }
        let c = calls(&log);
        assert_eq!(
            c[..2],
            [
                r#"inspect -f {{index .Config.Labels "io.x-k8s.kind.cluster"}} chaos-control-plane"#,
                "inspect -f {{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}} chaos-external-load-balancer"
            ]
        );
        assert_eq!(
            c[2],
            "exec chaos-control-plane curl -s --max-time 2 http://127.0.0.1:2381/metrics"
        );
        let cuts: Vec<&String> = c.iter().filter(|l| l.contains("iptables")).collect();
        let rule = |ip: &str| {
            format!("exec chaos-worker iptables -I OUTPUT -d {ip} -p tcp --dport 6443 -m comment --comment kubechaos -j DROP")
        };
        assert_eq!(
            cuts,
            [
                &rule("172.18.0.2"),
                &rule("172.18.0.9"),
                &rule("172.18.0.3"),
                &rule("172.18.0.9"),
                &rule("172.18.0.4"),
                &rule("172.18.0.9"),
            ]
        );
        // Every copy goes at the end.
        assert_eq!(m.restore().len(), 6);
        // One control-plane node: no load balancer to find.
        let (_dir, docker, log) = stand_in();
        let mut single = Machines::new(Provider::Kind, kind_nodes(), docker);
        single.find_load_balancer().unwrap();
        assert!(calls(&log).is_empty());
        // Containers that are not kind's: said, before anything is touched.
        let (_dir, docker, _log) = stand_in();
        let mut other = Machines::new(Provider::Kind, kind_ha_nodes(), docker);
        let why = other.find_load_balancer().unwrap_err();
        assert!(
            why.contains(
                "node container chaos-control-plane carries no io.x-k8s.kind.cluster label"
            ),
            "{why}"
        );
    }

    /// A command that writes more than a pipe holds (an etcd's metrics are hundreds of KB) is
    /// read while it runs: it once waited for a reader until the 60 s timeout killed it.
    #[test]
    fn a_command_with_much_output_is_read_while_it_runs() {
        let (_dir, docker, _log) = stand_in_answering("head -c 1000000 /dev/zero | tr '\\0' x");
        let out = docker.run(&[s("exec"), s("node"), s("curl")]).unwrap();
        assert_eq!(out.len(), 1_000_000);
    }

    /// When no member's metrics can be read, `etcd/leader` is not "no leader at the time": the
    /// failures are kept (the run stops), except a member's that the run holds down itself.
    #[test]
    fn an_etcd_leader_that_cannot_be_read_is_a_failure_not_no_leader() {
        let (_dir, docker, _log) = stand_in_answering("case \"$*\" in *curl*) exit 7 ;; esac");
        let mut m = Machines::new(Provider::Kind, kind_ha_nodes(), docker).counting(3, 3);
        m.stop("etcd-0", false, Hold::Crashing);
        assert_eq!(m.etcd_leader(), None);
        assert_eq!(m.errors.len(), 2, "{:?}", m.errors);
        assert!(
            m.errors[0].starts_with("reading which etcd member leads: ")
                && m.errors[0].contains("exec chaos-control-plane2 curl"),
            "{:?}",
            m.errors
        );
    }

    /// The stop script, run by a real shell against a `crictl` stand-in: it stops what `ps`
    /// lists, and fails where `ps` fails (a runtime too slow to answer) or lists nothing, so
    /// that a kill that stopped nothing is never counted as done.
    #[test]
    fn a_stop_that_stopped_nothing_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = |ps: &str| {
            let crictl = dir.path().join("crictl");
            std::fs::write(
                &crictl,
                format!(
                    "#!/bin/sh\necho \"$*\" >> {0}/calls\ncase \"$*\" in *\" ps \"*) {ps} ;; esac\n",
                    dir.path().display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&crictl, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            let _ = std::fs::remove_file(dir.path().join("calls"));
            let code = std::process::Command::new("sh")
                .arg("-c")
                .arg(crictl_stop("--state running --name '^op$'", 0))
                .env(
                    "PATH",
                    format!(
                        "{}:{}",
                        dir.path().display(),
                        std::env::var("PATH").unwrap()
                    ),
                )
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .code();
            let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap_or_default();
            (code, calls)
        };
        let (code, calls) = run("echo 4f2a; echo 9b1c");
        assert_eq!(code, Some(0));
        assert_eq!(
            calls,
            "--timeout 20s ps -q --state running --name ^op$\n--timeout 20s stop --timeout 0 4f2a 9b1c\n"
        );
        let (code, calls) = run("echo 'context deadline exceeded' >&2; exit 1");
        assert_eq!(code, Some(1));
        assert!(!calls.contains(" stop "), "{calls}");
        let (code, calls) = run("true");
        assert_eq!(code, Some(NONE_RUNNING));
        assert!(!calls.contains(" stop "), "{calls}");
    }

    /// A crash that lasts, run by a real shell against a `crictl` stand-in: the loop kills the
    /// container each time it is started again (the kubelet's restart), and once the end script
    /// returns it kills nothing more (a start after that stays up).
    #[test]
    fn a_crash_that_lasts_kills_each_start_until_it_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().display().to_string();
        let crictl = dir.path().join("crictl");
        std::fs::write(
            &crictl,
            format!("#!/bin/sh\ncase \"$*\" in\n  *\" ps \"*) [ -e {d}/running ] && echo 4f2a ;;\n  *\" stop \"*) rm -f {d}/running; echo killed >> {d}/kills ;;\nesac\nexit 0\n"),
        )
        .unwrap();
        std::fs::set_permissions(&crictl, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let sh = |script: String| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("PATH", format!("{d}:{}", std::env::var("PATH").unwrap()))
                .status()
                .unwrap()
                .code()
        };
        let held = format!("{d}/held");
        let running = dir.path().join("running");
        let kills = || {
            std::fs::read_to_string(dir.path().join("kills"))
                .unwrap_or_default()
                .lines()
                .count()
        };
        let killed_within = |secs: u64| {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
            while running.exists() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            !running.exists()
        };
        std::fs::write(&running, "").unwrap();
        assert_eq!(sh(crash_loop(&held, "etcd")), Some(0));
        assert!(killed_within(10), "the running container was not killed");
        // Its record in the node: the loop's PID.
        let mark = dir.path().join("held/etcd.crashing");
        let pid = std::fs::read_to_string(&mark).expect("the loop's mark");
        assert!(
            std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
            "the mark names no running process: {pid:?}"
        );
        // The kubelet starts it again: killed again.
        std::fs::write(&running, "").unwrap();
        assert!(
            killed_within(10),
            "a container started again was not killed"
        );
        assert_eq!(kills(), 2);
        assert_eq!(sh(crash_end(&held, "etcd")), Some(0));
        assert!(!dir.path().join("held/etcd.crash-ends").exists());
        assert!(!mark.exists(), "the loop's mark outlived it");
        std::fs::write(&running, "").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(800));
        assert!(running.exists(), "killed after the crash ended");
        assert_eq!(kills(), 2);
    }

    /// `recover --cleanup`'s part for crash loops, by a real shell against a `crictl` stand-in:
    /// a loop left running by a run killed outright is ended (a container started after that
    /// stays up), a mark whose process is gone is removed, and each says so.
    #[test]
    fn a_crash_loop_a_killed_run_left_is_ended_by_the_cleanup() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().display().to_string();
        let crictl = dir.path().join("crictl");
        std::fs::write(
            &crictl,
            format!("#!/bin/sh\ncase \"$*\" in\n  *\" ps \"*) [ -e {d}/running ] && echo 4f2a ;;\n  *\" stop \"*) rm -f {d}/running ;;\nesac\nexit 0\n"),
        )
        .unwrap();
        std::fs::set_permissions(&crictl, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let sh = |script: String| {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("PATH", format!("{d}:{}", std::env::var("PATH").unwrap()))
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let held = format!("{d}/held");
        sh(crash_loop(&held, "etcd"));
        // A mark left by a loop that no longer runs (its node container was restarted).
        std::fs::write(format!("{held}/kube-apiserver.crashing"), "999999999\n").unwrap();
        assert_eq!(
            sh(end_crash_loops(&held)),
            "+ stopped killing etcd's container (its kubelet starts it again)\n\
             + removed the mark of a loop killing kube-apiserver that no longer ran\n"
        );
        assert_eq!(
            std::fs::read_dir(&held).unwrap().count(),
            0,
            "a mark or an end file is left"
        );
        let running = dir.path().join("running");
        std::fs::write(&running, "").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(800));
        assert!(running.exists(), "killed after the cleanup ended the loop");
        assert_eq!(
            sh(end_crash_loops(&held)),
            "",
            "run again, it finds nothing"
        );
    }
}
