//! Providers: how kubechaos reaches the machines of an existing cluster, for the faults that the
//! API alone cannot do.
//!
//! - `generic`: the API only (`delete-pods`, `recover`, `bind`, probe pods). Every cluster.
//! - `kind`: the docker CLI against kind's node containers. The control plane is kubeadm's static
//!   pods: a component is stopped for good by moving its manifest out of
//!   `/etc/kubernetes/manifests` (kubelet stops it) and started by moving it back; it is killed
//!   with `crictl stop` in the node (kubelet restarts it); partitions are iptables rules inside
//!   the node containers; a node is stopped with `docker pause`.
//! - `k3s`: k3s in containers (k3d). k3s runs the API server, scheduler, controller-manager and
//!   datastore inside one server process, so `api-server: stop|crash|start|restart` stops or
//!   starts the server container (all of them, and the server node's kubelet, together), and the
//!   scheduler or controller-manager cannot be stopped alone; partitions and node stops work as
//!   on kind.
//!
//! - `k3s-container`: k3s in a container that kubechaos starts itself through testcontainers
//!   (the `testcontainers` cargo feature, for machines with a Docker engine), then as `k3s`.
//!
//! The provider is detected from the context name (`kind-*`, `k3d-*`) or the nodes (a
//! `kind://` providerID; a `+k3s` kubelet version), or named with `--provider`.

use k8s_openapi::api::core::v1::Node;

use kubechaos_core::scenario::{Action, Partition, Pos, Scenario, Selector, Target};

/// Which provider, as `--provider` names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Provider {
    /// From the context name, else from the cluster's nodes.
    #[default]
    Auto,
    /// The API only.
    Generic,
    /// kind: the docker CLI against the node containers.
    Kind,
    /// k3s in containers (k3d): the docker CLI against the server and agent containers.
    K3s,
    /// k3s in a container that kubechaos starts through testcontainers and removes at the end
    /// (the `testcontainers` feature; needs a Docker engine); then as `k3s`.
    K3sContainer,
}

impl Provider {
    /// As `--provider` names it.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Auto => "auto",
            Provider::Generic => "generic",
            Provider::Kind => "kind",
            Provider::K3s => "k3s",
            Provider::K3sContainer => "k3s-container",
        }
    }

    /// The provider a context's name gives away; `None` if the nodes must tell.
    pub fn from_context(context: &str) -> Option<Provider> {
        if context.starts_with("kind-") {
            Some(Provider::Kind)
        } else if context.starts_with("k3d-") {
            Some(Provider::K3s)
        } else if context == crate::backend::local::cluster::CONTEXT {
            // kubechaos's own control plane: its processes are the local backend's to touch.
            Some(Provider::Generic)
        } else {
            None
        }
    }

    /// The provider the cluster's nodes give away, and why.
    pub(crate) fn from_nodes(nodes: &[Node]) -> (Provider, String) {
        for n in nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            if let Some(id) = n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
                if id.starts_with("kind://") {
                    return (Provider::Kind, format!("node {name} has providerID {id}"));
                }
            }
            let kubelet = n
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.kubelet_version.clone())
                .unwrap_or_default();
            if kubelet.contains("+k3s") {
                if name.starts_with("k3d-") {
                    return (
                        Provider::K3s,
                        format!("node {name} runs k3s ({kubelet}) in a k3d container"),
                    );
                }
                return (
                    Provider::Generic,
                    format!("node {name} runs k3s ({kubelet}) but not in a k3d container: machine faults on a k3s host need kubechaos on that host, which is not built; API-level faults only"),
                );
            }
        }
        (
            Provider::Generic,
            "no node says kind or k3s: API-level faults only".to_owned(),
        )
    }

    /// What this provider can do, one line each.
    pub(crate) fn can(self) -> Vec<&'static str> {
        let mut out = vec![
            "delete-pods, recover, bind (and the probe pods of schedulable/unschedulable): through the API",
            "kill, remove, start of agent/NAME[/N|/leader], and partitions between an agent and api-server (agents run on this machine, through kubechaos's own proxy)",
        ];
        match self {
            Provider::Generic | Provider::Auto => out.push(
                "kill of a pod agent's pods (agent/NAME[/leader]): the pod is deleted with no grace period, its owner makes another",
            ),
            Provider::Kind | Provider::K3s | Provider::K3sContainer => out.extend([
                "kill of a pod agent's pods (agent/NAME[/leader]): `crictl stop --timeout 0` of its container in its node container, its kubelet restarts it",
                "partitions between a pod agent's pods and api-server (iptables on the pod's address in its node container)",
            ]),
        }
        match self {
            Provider::Kind => out.extend([
                "api-server and etcd: stop, crash, start, restart (the static pods of every control-plane node); with several control-plane nodes, api-server/N and etcd/N are the Nth node's (kill, remove, start) and etcd/leader the member whose metrics say it leads",
                "kill, remove, start of kube-scheduler and kube-controller-manager (replica N = the Nth control-plane node by name; /leader)",
                "kill, remove, start of node/NAME (docker pause, unpause)",
                "partition and heal between node/NAME, api-server and etcd (iptables in the node containers; a node's packets to kind's load balancer too), and between api-server[/N] and etcd (iptables on the node's loopback: kubeadm's stacked etcd)",
            ]),
            Provider::K3s | Provider::K3sContainer => out.extend([
                "api-server: stop, crash, start, restart (the k3s server containers: API server, scheduler, controller-manager, datastore and the server's kubelet together)",
                "kill, remove, start of node/NAME (docker pause, unpause)",
                "partition and heal between node/NAME and api-server (iptables in the node containers)",
            ]),
            Provider::Generic | Provider::Auto => {}
        }
        out
    }

    /// Why this provider cannot do `action`, if it cannot.
    fn refusal(self, action: &Action) -> Option<String> {
        match action {
            // Through the API, on every cluster (healing needs a machine only if a partition did).
            Action::DeletePods(_) | Action::Recover(_) | Action::Bind(_) | Action::Heal(_) => None,
            Action::Delay(_) | Action::Loss(_) => Some(format!(
                "`{}` needs a delaying proxy or `tc netem` on the link, and the kube backend has neither on an existing cluster's links yet; expected `partition` (or `--backend sim`/`local`, which delay and lose traffic on their links)",
                action.key()
            )),
            Action::ApiErrors(_) => Some(
                "the kube backend cannot make an existing cluster's API server answer with errors without changing the cluster (an admission webhook or a proxy in front of it); expected `--backend local` or `sim`".to_owned(),
            ),
            Action::ApiServer(_) => self.refusal_on(&Target::API_SERVER, false),
            Action::Etcd(_) => self.refusal_on(&Target::ETCD, false),
            // Agents are processes on this machine, whatever the provider.
            Action::Kill(Target::Agent(..))
            | Action::Remove(Target::Agent(..))
            | Action::Start(Target::Agent(..)) => None,
            Action::Kill(t) | Action::Remove(t) | Action::Start(t) => self.refusal_on(t, false),
            Action::Partition(p) if p.reset => Some(
                "a partition with `mode: reset` is carried out on sim and local; on kube a partition drops packets (iptables DROP rules, or kubechaos's proxy holding them); expected `mode: hold` (the default)".to_owned(),
            ),
            Action::Partition(p) => match (&p.a, &p.b) {
                (Target::Agent(..), Target::ApiServer(Selector::All))
                | (Target::ApiServer(Selector::All), Target::Agent(..)) => {
                    None
                }
                (Target::Agent(..), _) | (_, Target::Agent(..)) => Some(
                    "an agent reaches only the API server, through kubechaos's proxy: a partition with an agent is between it and `api-server`".to_owned(),
                ),
                _ => [&p.a, &p.b]
                    .into_iter()
                    .find_map(|t| self.refusal_on(t, true)),
            },
        }
    }

    /// Why this provider cannot stop, start or (`partition`) cut off `t` on its machines.
    fn refusal_on(self, t: &Target, partition: bool) -> Option<String> {
        match (self, t) {
            (Provider::Auto, _) => None,
            (Provider::Generic, _) => Some(
                "it needs the machine the cluster runs on, and the generic provider has only the API"
                    .to_owned(),
            ),
            (_, Target::Agent(..)) => None,
            (Provider::Kind, Target::Component(c, _)) if partition => Some(format!(
                "on kind, {} shares its node container's network with every other component of that node, so a partition cannot single it out; partition its node (`node/NAME`) instead",
                c.name()
            )),
            (Provider::Kind, _) => None,
            (Provider::K3s | Provider::K3sContainer, Target::Component(c, _)) => Some(format!(
                "k3s runs {} inside its server process: it cannot be stopped alone; the nearest fault is `api-server: restart`, which restarts the API server, scheduler and controller-manager together",
                c.name()
            )),
            (Provider::K3s | Provider::K3sContainer, Target::Etcd(_)) => Some(
                "k3s keeps its datastore inside the server process: use `api-server`".to_owned(),
            ),
            (Provider::K3s | Provider::K3sContainer, Target::ApiServer(Selector::Index(_))) => Some(
                "k3s runs each API server inside its server process, with the scheduler, controller-manager and datastore: one of them cannot be stopped or cut off alone; expected `api-server` (every server) or `node/NAME` (one server's container paused)".to_owned(),
            ),
            (Provider::K3s | Provider::K3sContainer, Target::ApiServer(_) | Target::Node(_)) => None,
        }
    }
}

/// What `provider` cannot do with a scenario (before the cluster is read). With `Auto`, only
/// what no provider can do.
pub(crate) fn check(s: &Scenario, provider: Provider) -> Vec<(Pos, String)> {
    let can = provider
        .can()
        .iter()
        .map(|l| format!("\n      - {l}"))
        .collect::<String>();
    let mut problems = Vec::new();
    let pod_agent = |t: &Target| matches!(t, Target::Agent(name, _) if s.cluster.agents.iter().any(|a| &a.name == name && a.is_pods()));
    for step in &s.faults {
        // A pod agent's pods are the cluster's own (their owner's): kubechaos kills one (every
        // cluster) and cuts one off from the API server (a provider that reaches its node).
        let on_pods = match &step.action {
            Action::Kill(t) if pod_agent(t) => Some(None),
            Action::Remove(t) | Action::Start(t) if pod_agent(t) => Some(Some(
                "a pod agent's pods belong to their owner (a Deployment, …): `kill` kills one and its kubelet or owner brings it back; holding one down would change your workload, so `remove` and `start` are refused; expected `kill`".to_owned(),
            )),
            Action::Partition(p) if pod_agent(&p.a) || pod_agent(&p.b) => {
                let other = if pod_agent(&p.a) { &p.b } else { &p.a };
                Some(if *other != Target::API_SERVER {
                    Some(format!("a pod agent's pods are cut off from the API server only (the traffic kubechaos can single out in their node); expected `partition: [{}, api-server]`", if pod_agent(&p.a) { &p.a } else { &p.b }))
                } else if provider == Provider::Generic {
                    Some("cutting one pod off needs packet filter rules in its node, and the generic provider has only the API (kind and k3d nodes are reached with the docker CLI; `--backend local` runs your pods with their own proxies); expected `kill` of its pods, or faults through the API".to_owned())
                } else {
                    None
                })
            }
            _ => None,
        };
        if let Some(refused) = on_pods {
            if let Some(why) = refused {
                problems.push((step.pos, format!("`{}`: {why}", step.action)));
            }
            continue;
        }
        let refused = match &step.action {
            Action::Partition(p) => ha_partition_refusal(s, provider, p),
            _ => None,
        }
        .or_else(|| provider.refusal(&step.action));
        if let Some(why) = refused {
            problems.push((
                step.pos,
                format!(
                    "`{}`: {why}; the {} provider can do:{can}",
                    step.action,
                    provider.name()
                ),
            ));
        }
    }
    if s.cluster.self_hosted {
        problems.push((s.source.name_pos, "`cluster.self-hosted: true` describes a cluster that kubechaos builds (sim, local); an existing cluster is what it is: expected no `self-hosted` on `--backend kube`".to_owned()));
    }
    if let Some(why) = topology_refusal(s, provider) {
        problems.push((s.cluster.topology_pos, why));
    }
    problems
}

/// What a provider cannot tell of the scenario's API servers and etcd members. The counts
/// themselves are checked against the control-plane nodes once they are read
/// ([`super::cluster_check`]).
fn topology_refusal(s: &Scenario, provider: Provider) -> Option<String> {
    let (api, members) = (s.cluster.api_servers, s.cluster.etcd.members);
    let said = match (api > 1, members > 1) {
        (true, true) => {
            format!("`cluster.api-servers: {api}` and `cluster.etcd.members: {members}`")
        }
        (true, false) => format!("`cluster.api-servers: {api}`"),
        (false, true) => format!("`cluster.etcd.members: {members}`"),
        (false, false) => return None,
    };
    match provider {
        Provider::Generic => Some(format!("{said}: the generic provider reaches only the API, and cannot tell how many API servers and etcd members the cluster runs nor touch one of them; expected the defaults (1) on this cluster, or a provider that reaches its machines (kind)")),
        Provider::K3s | Provider::K3sContainer if members > 1 => Some(format!("{said}: k3s keeps its datastore inside each server process (embedded etcd, SQLite or an external database): kubechaos cannot tell or touch its members; expected no `cluster.etcd` on k3s (`cluster.api-servers` counts the k3s servers)")),
        _ => None,
    }
}

/// Why a provider cannot carry out a partition with a meaning of its own on a cluster of several
/// API servers or etcd members, if it cannot.
fn ha_partition_refusal(s: &Scenario, provider: Provider, p: &Partition) -> Option<String> {
    let ends = [(&p.a, &p.b), (&p.b, &p.a)];
    if matches!((&p.a, &p.b), (Target::Etcd(_), Target::Etcd(_))) {
        return Some("between etcd members: kubechaos cuts raft's traffic between members on no backend (the sim models a member as up or down); expected a fault between the API servers and etcd (`partition: [api-server/1, etcd]`) or on a member (`remove: etcd/1`)".to_owned());
    }
    if provider != Provider::Kind {
        return None;
    }
    if ends.iter().any(|(x, y)| {
        matches!(x, Target::ApiServer(_))
            && matches!(y, Target::Etcd(Selector::Index(_) | Selector::Leader))
    }) {
        return Some("kind runs kubeadm's stacked etcd: each API server reaches only the member on its own node (at 127.0.0.1:2379), so cutting one member off from the API servers would leave that node's API server without etcd, where on sim and local every API server keeps the other members; expected `partition: [api-server/N, etcd]` (API server N cut off from etcd) or `remove: etcd/N`".to_owned());
    }
    if s.cluster.api_servers > 1
        && ends.iter().any(|(x, y)| {
            matches!(x, Target::Node(_)) && matches!(y, Target::ApiServer(Selector::Index(_)))
        })
    {
        return Some("on kind with several control-plane nodes a node's kubelet reaches the API servers through kind's load balancer, which hands each connection to any of them, so a partition between a node and one API server cannot be aimed; expected `partition: [node/NAME, api-server]`".to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: serde_json::Value) -> Node {
        serde_json::from_value(json).expect("node")
    }

    #[test]
    fn the_provider_is_told_by_the_context_or_the_nodes() {
        assert_eq!(Provider::from_context("kind-chaos"), Some(Provider::Kind));
        assert_eq!(Provider::from_context("k3d-nightly"), Some(Provider::K3s));
        assert_eq!(
            Provider::from_context("kubechaos-local"),
            Some(Provider::Generic)
        );
        assert_eq!(Provider::from_context("ci-cluster"), None);
        let kind = node(
            serde_json::json!({"metadata": {"name": "chaos-control-plane"}, "spec": {"providerID": "kind://docker/chaos/chaos-control-plane"}}),
        );
        assert_eq!(Provider::from_nodes(&[kind]).0, Provider::Kind);
        let k3d = node(
            serde_json::json!({"metadata": {"name": "k3d-ci-server-0"}, "status": {"nodeInfo": {"kubeletVersion": "v1.33.4+k3s1", "architecture": "", "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "", "osImage": "", "systemUUID": ""}}}),
        );
        assert_eq!(Provider::from_nodes(&[k3d]).0, Provider::K3s);
        let host = node(
            serde_json::json!({"metadata": {"name": "edge-1"}, "status": {"nodeInfo": {"kubeletVersion": "v1.33.4+k3s1", "architecture": "", "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "", "osImage": "", "systemUUID": ""}}}),
        );
        let (p, why) = Provider::from_nodes(&[host]);
        assert_eq!(p, Provider::Generic);
        assert!(why.contains("not in a k3d container"), "{why}");
        assert_eq!(Provider::from_nodes(&[]).0, Provider::Generic);
    }

    /// A pod agent's pods: killed on every cluster; cut off from the API server where a
    /// provider reaches their nodes, and only from the API server; never held down.
    #[test]
    fn a_pod_agents_pods_are_cut_off_where_a_provider_reaches_their_nodes() {
        let s = kubechaos_core::scenario::parse(
            std::path::Path::new("t.yaml"),
            b"name: t
cluster:
  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}]
faults:
  - {at: 1s, partition: {from: agent/op/leader, to: api-server}, for: 2s}
  - {at: 5s, kill: agent/op/leader}
  - {at: 6s, partition: [agent/op, etcd]}
  - {at: 7s, remove: agent/op}
",
        )
        .unwrap();
        let said = |p: Provider| {
            check(&s, p)
                .into_iter()
                .map(|(pos, why)| format!("{pos}: {why}"))
                .collect::<Vec<_>>()
        };
        for p in [Provider::Kind, Provider::K3s, Provider::Auto] {
            let problems = said(p);
            assert_eq!(problems.len(), 2, "{problems:?}");
            assert!(problems[0].starts_with("7:5: `partition: [agent/op, etcd]`: a pod agent's pods are cut off from the API server only"), "{problems:?}");
            assert!(
                problems[1].starts_with("8:5: `remove: agent/op`"),
                "{problems:?}"
            );
        }
        let generic = said(Provider::Generic);
        assert_eq!(generic.len(), 3, "{generic:?}");
        assert!(
            generic[0].starts_with("5:5: `partition: {from: agent/op/leader, to: api-server}")
                && generic[0].contains("the generic provider has only the API"),
            "{generic:?}"
        );
    }
}
