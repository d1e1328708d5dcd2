//! A fake node, as KWOK plays one, with a node agent that plays the kubelet for the pods bound
//! to it:
//! - it registers a Node with Ready=True and renews its Lease in `kube-node-lease` every 10s
//!   (kubelet's default: a quarter of the 40s lease duration). When the Node's Ready condition is
//!   not True (the node lifecycle controller marked it Unknown while the node was cut off), it
//!   reports Ready=True again, as the kubelet's status update does. It reports room for 110 pods.
//! - every second it looks at the pods bound to it (`spec.nodeName`). A pod whose container uses
//!   a known control-plane image ([`crate::selfhosted::component_of_image`]) is run, through
//!   [`Containers`], as that component's process with the container's arguments; the pod is
//!   reported Running, and Ready while its process runs. A process that exits is restarted with
//!   the kubelet's back-off (`restartPolicy: Always`), counted in `restartCount`. Other pods run
//!   nothing and are reported Running and Ready, as KWOK does.
//! - a pod being deleted (`deletionTimestamp`) has its process stopped (SIGTERM, as the kubelet)
//!   and is then deleted for good (grace period 0): the kubelet's confirmation that the API
//!   server waits for. A pod that is gone has its process stopped.
//!
//! The sim runs it over turmoil (pods' processes are tasks of the node's host, so they share its
//! network); the local backend against the real API server (pods' processes are real binaries).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::backoff::{backoff, BACKOFF_RESET};
use crate::clock::Clock;
use crate::selfhosted::component_of_image;
use kubechaos_core::scenario::Component;

/// Interval between lease renewals (kubelet default).
pub(crate) const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// `leaseDurationSeconds` of node leases (kubelet default).
pub(crate) const LEASE_SECONDS: i32 = 40;

/// How often the node agent looks at its pods.
pub(crate) const POD_SYNC: Duration = Duration::from_secs(1);

/// Why a container did not start: the runner's own error (the local backend's
/// [`crate::backend::local::error::LocalError`]).
pub(crate) type ContainerError = Box<dyn std::error::Error + Send + Sync>;

/// Where a node agent runs containers: tasks on the sim, child processes on the local backend.
/// Containers are named by their pod (`NAMESPACE/NAME`); their process is named by the pod's
/// name, so that the Lease identity (`hostname_x`, and a pod's hostname is its name) says which
/// pod leads.
pub(crate) trait Containers: Send + Sync {
    /// Start the process of pod `pod` (`NAMESPACE/NAME`) on node `node`: `component` with
    /// `args`. An error means it did not start (the agent retries after the back-off).
    fn start(
        &self,
        node: &str,
        pod: &str,
        component: Component,
        args: &[String],
    ) -> Result<(), ContainerError>;
    /// Stop the process of pod `pod` (gracefully); its exit is recorded as `reason`.
    fn stop(&self, pod: &str, reason: &str);
    /// Whether the process of pod `pod` runs.
    fn running(&self, pod: &str) -> bool;
    /// Whether the harness holds pod `pod`'s process down (a `remove` step): its node does not
    /// start it until a `start` step lets it.
    fn held(&self, pod: &str) -> bool;
}

/// What a `kill`, `remove` or `start` step does to a self-hosted component, whose processes
/// are its pods' containers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ContainerOp {
    /// Stop the containers (SIGKILL); their nodes restart them with back-off, as after a crash.
    Kill,
    /// Stop the containers and keep them stopped (they are lost for good: a broken image, a
    /// dead runtime); the pods stay, Running and not Ready.
    Remove,
    /// Let removed containers run again.
    Start,
}

/// What a backend's containers know of the pods they ran: each pod's node and component, and
/// which are held down (`remove`). The sim's and the local backend's containers keep one each.
#[derive(Default)]
pub(crate) struct PodBook {
    known: BTreeMap<String, (String, Component)>,
    held: BTreeSet<String>,
}

impl PodBook {
    /// Pod `pod` was started on `node` as `c`.
    pub(crate) fn started(&mut self, pod: &str, node: &str, c: Component) {
        self.known.insert(pod.to_owned(), (node.to_owned(), c));
    }

    /// Pod `pod` is gone: no later step acts on it.
    pub(crate) fn forget(&mut self, pod: &str) {
        self.known.remove(pod);
        self.held.remove(pod);
    }

    /// Whether pod `pod`'s container is held down.
    pub(crate) fn held(&self, pod: &str) -> bool {
        self.held.contains(pod)
    }

    /// The pods started on `node`.
    pub(crate) fn on_node(&self, node: &str) -> Vec<String> {
        self.known
            .iter()
            .filter(|(_, (n, _))| n == node)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Carry out `op` on component `c`'s pods (or only `only`) in the book: returns (pods to
    /// stop, pods touched) and holds or releases them.
    pub(crate) fn plan(
        &mut self,
        c: Component,
        only: Option<&str>,
        op: ContainerOp,
        running: impl Fn(&str) -> bool,
    ) -> (Vec<String>, Vec<String>) {
        let known: BTreeMap<String, Component> = self
            .known
            .iter()
            .map(|(p, (_, c))| (p.clone(), *c))
            .collect();
        plan_op(&known, &mut self.held, running, c, only, op)
    }
}

/// Which pods a [`ContainerOp`] touches: every known pod of component `c`, or only `only`.
/// `known`: each pod (`NAMESPACE/NAME`) and its component; `held`: the pods held down.
/// Returns (pods to stop, pods touched), and updates `held`.
fn plan_op(
    known: &BTreeMap<String, Component>,
    held: &mut BTreeSet<String>,
    running: impl Fn(&str) -> bool,
    c: Component,
    only: Option<&str>,
    op: ContainerOp,
) -> (Vec<String>, Vec<String>) {
    let mine = known.iter().filter(|(pod, comp)| {
        **comp == c && only.is_none_or(|o| pod.rsplit('/').next() == Some(o))
    });
    let mut stop = Vec::new();
    let mut touched = Vec::new();
    for (pod, _) in mine {
        match op {
            ContainerOp::Kill | ContainerOp::Remove => {
                let was_running = running(pod);
                let newly_held = op == ContainerOp::Remove && held.insert(pod.clone());
                if was_running {
                    stop.push(pod.clone());
                }
                if was_running || newly_held {
                    touched.push(pod.clone());
                }
            }
            ContainerOp::Start => {
                if held.remove(pod) {
                    touched.push(pod.clone());
                }
            }
        }
    }
    (stop, touched)
}

/// What the node agent remembers about a container it runs.
#[derive(Default)]
struct Container {
    restarts: i32,
    /// It was started and has not been seen to exit.
    up: bool,
    started: Option<tokio::time::Instant>,
    /// Not before this (restart back-off).
    next_start: Option<tokio::time::Instant>,
}

/// Heartbeat as node `name` and run its pods until the future is dropped.
pub(crate) async fn run(
    client: kube::Client,
    name: &str,
    clock: &dyn Clock,
    containers: &dyn Containers,
) {
    let mut pods: BTreeMap<String, Container> = BTreeMap::new();
    let mut next_heartbeat = tokio::time::Instant::now();
    loop {
        if tokio::time::Instant::now() >= next_heartbeat {
            if let Err(e) = heartbeat(&client, name, clock).await {
                tracing::debug!(node = %name, error = %e, "heartbeat failed");
            }
            next_heartbeat = tokio::time::Instant::now() + RENEW_INTERVAL;
        }
        if let Err(e) = sync_pods(&client, name, containers, &mut pods).await {
            tracing::debug!(node = %name, error = %e, "pod sync failed");
        }
        tokio::time::sleep(POD_SYNC).await;
    }
}

/// One look at the pods bound to node `node` (see the module docs).
async fn sync_pods(
    client: &kube::Client,
    node: &str,
    containers: &dyn Containers,
    state: &mut BTreeMap<String, Container>,
) -> Result<(), kube::Error> {
    let all = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let now = tokio::time::Instant::now();
    let mut present = BTreeSet::new();
    for pod in all
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
    {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = format!("{ns}/{name}");
        let api = Api::<Pod>::namespaced(client.clone(), &ns);
        if pod.metadata.deletion_timestamp.is_some() {
            if state.remove(&key).is_some() {
                containers.stop(&key, "pod deleted: container stopped by its node");
            }
            let _ = api
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await;
            continue;
        }
        present.insert(key.clone());
        let container = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .cloned()
            .unwrap_or_default();
        let component = container.image.as_deref().and_then(component_of_image);
        let (ready, restarts) = match component {
            None => (true, 0),
            Some(c) => {
                let st = state.entry(key.clone()).or_default();
                if st.up && !containers.running(&key) {
                    // It exited by itself: the kubelet restarts it after a back-off.
                    st.up = false;
                    if st.started.is_some_and(|s| now - s >= BACKOFF_RESET) {
                        st.restarts = 0;
                    }
                    st.next_start = Some(now + backoff(st.restarts as u32));
                    st.restarts += 1;
                }
                if !st.up && !containers.held(&key) && st.next_start.is_none_or(|t| now >= t) {
                    let mut argv = container.command.clone().unwrap_or_default();
                    argv.extend(container.args.clone().unwrap_or_default());
                    // The command names the binary; the node runs the component's own.
                    let args: Vec<String> = argv.into_iter().skip(1).collect();
                    match containers.start(node, &key, c, &args) {
                        Ok(()) => {
                            st.up = true;
                            st.started = Some(now);
                        }
                        Err(e) => {
                            tracing::warn!(pod = %key, error = %kubechaos_core::error::chain(e.as_ref()), "container did not start");
                            st.next_start = Some(now + backoff(st.restarts as u32));
                            st.restarts += 1;
                        }
                    }
                }
                (st.up && containers.running(&key), st.restarts)
            }
        };
        report_status(&api, pod, &container, ready, restarts).await;
    }
    let gone: Vec<String> = state
        .keys()
        .filter(|k| !present.contains(*k))
        .cloned()
        .collect();
    for key in gone {
        state.remove(&key);
        containers.stop(&key, "pod deleted: container stopped by its node");
    }
    Ok(())
}

/// Report a pod Running, Ready or not, when its status says otherwise. `container`: its first
/// (the one the agent runs).
async fn report_status(
    api: &Api<Pod>,
    pod: &Pod,
    container: &k8s_openapi::api::core::v1::Container,
    ready: bool,
    restarts: i32,
) {
    let status = pod.status.clone().unwrap_or_default();
    let said_ready = status
        .conditions
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status == "True");
    let said_restarts = status
        .container_statuses
        .as_ref()
        .and_then(|cs| cs.first())
        .map(|c| c.restart_count);
    if status.phase.as_deref() == Some("Running")
        && said_ready == Some(ready)
        && said_restarts.unwrap_or(0) == restarts
    {
        return;
    }
    let flag = if ready { "True" } else { "False" };
    let start = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let mut p = pod.clone();
    p.status = Some(
        serde_json::from_value(json!({
            "phase": "Running",
            "startTime": start,
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "ContainersReady", "status": flag},
                {"type": "Ready", "status": flag},
            ],
            "containerStatuses": [{
                "name": container.name,
                "image": container.image.clone().unwrap_or_default(),
                "imageID": "",
                "ready": ready,
                "restartCount": restarts,
                "started": ready,
                "state": if ready { json!({"running": {}}) } else { json!({"waiting": {"reason": "CrashLoopBackOff"}}) },
            }],
        }))
        .expect("pod status shape"),
    );
    let name = pod.metadata.name.clone().unwrap_or_default();
    if let Err(e) = api.replace_status(&name, &PostParams::default(), &p).await {
        tracing::debug!(pod = %name, error = %e, "pod status not reported");
    }
}

fn ready_node(name: &str, clock: &dyn Clock) -> Node {
    let now = clock.wall().to_string();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"}},
        "spec": {},
        // Room for pods, as KWOK's default node reports: the scheduler's NodeResourcesFit
        // filter counts pods against `allocatable.pods` even when they request nothing.
        "status": {"capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                   "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                                   "lastHeartbeatTime": now, "lastTransitionTime": now}]},
    }))
    .expect("node shape")
}

/// One heartbeat: register or re-report the Node as Ready, renew its Lease.
pub(crate) async fn heartbeat(
    client: &kube::Client,
    name: &str,
    clock: &dyn Clock,
) -> Result<(), kube::Error> {
    let nodes = Api::<Node>::all(client.clone());
    match nodes.get_opt(name).await? {
        None => {
            let created = nodes
                .create(&PostParams::default(), &ready_node(name, clock))
                .await?;
            // The status sent on create is dropped by the status subresource rules; report it.
            let mut n = created;
            n.status = ready_node(name, clock).status;
            nodes
                .replace_status(name, &PostParams::default(), &n)
                .await?;
        }
        Some(n) => {
            let ready = crate::kubeclient::node_ready(&n);
            if !ready {
                let mut n = n;
                n.status = ready_node(name, clock).status;
                nodes
                    .replace_status(name, &PostParams::default(), &n)
                    .await?;
            }
        }
    }
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
    let now = MicroTime(clock.wall());
    match leases.get_opt(name).await? {
        None => {
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "kube-node-lease"},
            }))
            .expect("lease shape");
            let lease = Lease {
                spec: Some(LeaseSpec {
                    holder_identity: Some(name.to_owned()),
                    lease_duration_seconds: Some(LEASE_SECONDS),
                    renew_time: Some(now),
                    ..LeaseSpec::default()
                }),
                ..lease
            };
            leases.create(&PostParams::default(), &lease).await?;
        }
        Some(mut lease) => {
            if let Some(spec) = lease.spec.as_mut() {
                spec.renew_time = Some(now);
            }
            leases.replace(name, &PostParams::default(), &lease).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_holds_every_pod_of_a_component_and_start_lets_them_go() {
        let known = BTreeMap::from([
            ("kube-system/s-a".to_owned(), Component::KubeScheduler),
            ("kube-system/s-b".to_owned(), Component::KubeScheduler),
            (
                "kube-system/cm-a".to_owned(),
                Component::KubeControllerManager,
            ),
        ]);
        let mut held = BTreeSet::new();
        let running = |p: &str| p != "kube-system/s-b";
        let (stop, touched) = plan_op(
            &known,
            &mut held,
            running,
            Component::KubeScheduler,
            None,
            ContainerOp::Remove,
        );
        assert_eq!(stop, vec!["kube-system/s-a"]);
        assert_eq!(touched, vec!["kube-system/s-a", "kube-system/s-b"]);
        assert_eq!(held.len(), 2);
        // Kill touches only what runs, holds nothing; `only` picks one pod by name.
        let mut none = BTreeSet::new();
        let (stop, _) = plan_op(
            &known,
            &mut none,
            |_| true,
            Component::KubeControllerManager,
            Some("cm-a"),
            ContainerOp::Kill,
        );
        assert_eq!(stop, vec!["kube-system/cm-a"]);
        assert!(none.is_empty());
        let (stop, touched) = plan_op(
            &known,
            &mut held,
            running,
            Component::KubeScheduler,
            None,
            ContainerOp::Start,
        );
        assert!(stop.is_empty());
        assert_eq!(touched.len(), 2);
        assert!(held.is_empty());
    }
}
