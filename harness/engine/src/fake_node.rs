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
//! - its containers are tended from the pods it last saw, not from the API server: while the API
//!   server is away (stopped, or the node cut off from it) a container that exits is restarted
//!   after the back-off all the same, and only the status it reports waits, as the kubelet's pod
//!   workers and its status manager are apart (`pkg/kubelet`: the pod workers run from the pod
//!   config's last state; the status manager retries its updates).
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

/// What a pod's container runs.
#[derive(Clone, Debug)]
pub(crate) enum Workload {
    /// A control-plane component (its image is upstream's) with the container's arguments.
    Component(Component, Vec<String>),
    /// The container's own `command` (local backend: a program on this machine, the image
    /// ignored), with what a pod gets.
    Program(Program),
}

/// A program a pod runs, with what the kubelet would give it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Program {
    /// `command` then `args`, `$(VAR)` references expanded.
    pub(crate) argv: Vec<String>,
    /// The container's environment (`value` and the downward API's `fieldRef`), in order.
    pub(crate) env: Vec<(String, String)>,
    /// `workingDir`, if set.
    pub(crate) working_dir: Option<String>,
    /// The pod's labels (which pod agent it belongs to).
    pub(crate) labels: BTreeMap<String, String>,
    /// A service-account token bound to the pod (TokenRequest), for
    /// `/var/run/secrets/kubernetes.io/serviceaccount/token`.
    pub(crate) token: String,
}

/// The IP a pod whose program runs on this machine reports (`status.podIP`): the loopback of
/// its own network namespace, the one address it has (the local backend's pods reach nothing
/// but the API server).
pub(crate) const PROGRAM_POD_IP: &str = "127.0.0.1";

/// Where a node agent runs containers: tasks on the sim, child processes on the local backend.
/// Containers are named by their pod (`NAMESPACE/NAME`); their process is named by the pod's
/// name, so that the Lease identity (`hostname_x`, and a pod's hostname is its name) says which
/// pod leads.
pub(crate) trait Containers: Send + Sync {
    /// Start the process of pod `pod` (`NAMESPACE/NAME`) on node `node`. An error means it did
    /// not start (the agent retries after the back-off).
    fn start(&self, node: &str, pod: &str, workload: &Workload) -> Result<(), ContainerError>;
    /// Stop the process of pod `pod` (gracefully); its exit is recorded as `reason`.
    fn stop(&self, pod: &str, reason: &str);
    /// Whether the process of pod `pod` runs.
    fn running(&self, pod: &str) -> bool;
    /// Whether the harness holds pod `pod`'s process down (a `remove` step): its node does not
    /// start it until a `start` step lets it.
    fn held(&self, pod: &str) -> bool;
    /// The port on 127.0.0.1 where the pods' logs are served as the kubelet serves them, if
    /// anywhere: the node reports it (and `InternalIP` 127.0.0.1) so that the API server's
    /// `pods/log` reaches it.
    fn kubelet_port(&self) -> Option<u16> {
        None
    }
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

/// Whose pods a step acts on: a self-hosted component's, or a pod agent's (by group name).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PodGroup {
    /// The pods of a self-hosted component.
    Component(Component),
    /// The pods of the pod agent of that name (`agents: [{name, pods: …}]`).
    Agent(String),
}

impl std::fmt::Display for PodGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PodGroup::Component(c) => write!(f, "{c}"),
            PodGroup::Agent(a) => write!(f, "agent/{a}"),
        }
    }
}

/// What a backend's containers know of the pods they ran: each pod's node and group, and
/// which are held down (`remove`). The sim's and the local backend's containers keep one each.
#[derive(Default)]
pub(crate) struct PodBook {
    known: BTreeMap<String, (String, Option<PodGroup>)>,
    held: BTreeSet<String>,
}

impl PodBook {
    /// Pod `pod` was started on `node`, one of `group`'s (or of none).
    pub(crate) fn started(&mut self, pod: &str, node: &str, group: Option<PodGroup>) {
        self.known.insert(pod.to_owned(), (node.to_owned(), group));
    }

    /// The pods of `group` started so far and not gone.
    pub(crate) fn of(&self, group: &PodGroup) -> Vec<String> {
        self.known
            .iter()
            .filter(|(_, (_, g))| g.as_ref() == Some(group))
            .map(|(p, _)| p.clone())
            .collect()
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

    /// Carry out `op` on `group`'s pods (or only `only`) in the book: returns (pods to stop,
    /// pods touched) and holds or releases them.
    pub(crate) fn plan(
        &mut self,
        group: &PodGroup,
        only: Option<&str>,
        op: ContainerOp,
        running: impl Fn(&str) -> bool,
    ) -> (Vec<String>, Vec<String>) {
        let known: BTreeMap<String, PodGroup> = self
            .known
            .iter()
            .filter_map(|(p, (_, g))| Some((p.clone(), g.clone()?)))
            .collect();
        plan_op(&known, &mut self.held, running, group, only, op)
    }
}

/// Which pods a [`ContainerOp`] touches: every known pod of `group`, or only `only`.
/// `known`: each pod (`NAMESPACE/NAME`) and its group; `held`: the pods held down.
/// Returns (pods to stop, pods touched), and updates `held`.
fn plan_op(
    known: &BTreeMap<String, PodGroup>,
    held: &mut BTreeSet<String>,
    running: impl Fn(&str) -> bool,
    group: &PodGroup,
    only: Option<&str>,
    op: ContainerOp,
) -> (Vec<String>, Vec<String>) {
    let mine = known
        .iter()
        .filter(|(pod, g)| *g == group && only.is_none_or(|o| pod.rsplit('/').next() == Some(o)));
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

/// A pod bound to this node, as the node agent last saw it: what its container runs and how
/// that container fares. Kept between looks at the API server, as the kubelet keeps its pods
/// (its pod config holds the last pods its watch delivered): the containers are tended from it
/// whether the API server answers or not.
struct Bound {
    /// The pod's first container (the one the agent runs).
    container: k8s_openapi::api::core::v1::Container,
    /// What the container runs; `None` for a pod that runs nothing (reported Running, as KWOK
    /// does), and for a program whose launch is not made yet (its token comes from the API
    /// server: [`program_of`]).
    workload: Option<Workload>,
    /// A program of the user's (its pod reports [`PROGRAM_POD_IP`]).
    program: bool,
    state: Container,
}

impl Bound {
    /// Whether the container runs something: a control-plane component or a program of the
    /// user's (whose launch may not be made yet).
    fn runs(&self) -> bool {
        self.program || self.workload.is_some()
    }
}

/// Heartbeat as node `name` and run its pods until the future is dropped.
///
/// Two loops, as the kubelet's parts are: one talks to the API server (the Node's heartbeat, the
/// pods bound here, their status), the other tends the containers every [`POD_SYNC`] (a
/// container that exits is restarted after the back-off) from what the first last saw. So a
/// container's exit and its restart do not wait for the API server: while it is away (stopped,
/// or this node cut off from it), the pods run on and only their status waits.
pub(crate) async fn run(
    client: kube::Client,
    name: &str,
    clock: &dyn Clock,
    containers: &dyn Containers,
) {
    let pods: std::sync::Mutex<BTreeMap<String, Bound>> = std::sync::Mutex::default();
    let api = async {
        let mut next_heartbeat = tokio::time::Instant::now();
        loop {
            if tokio::time::Instant::now() >= next_heartbeat {
                if let Err(e) = heartbeat(&client, name, clock, containers.kubelet_port()).await {
                    tracing::debug!(node = %name, error = %e, "heartbeat failed");
                }
                next_heartbeat = tokio::time::Instant::now() + RENEW_INTERVAL;
            }
            if let Err(e) = sync_pods(&client, name, containers, &pods).await {
                tracing::debug!(node = %name, error = %e, "pod sync failed");
            }
            tokio::time::sleep(POD_SYNC).await;
        }
    };
    let tend_loop = async {
        loop {
            tokio::time::sleep(POD_SYNC).await;
            tend(name, containers, &mut pods.lock().expect("pods"));
        }
    };
    tokio::join!(api, tend_loop);
}

/// Look after every container of the pods bound here (no API server involved): one that exited
/// by itself is restarted after the kubelet's back-off (`restartPolicy: Always`); one not
/// running, not held down and due is started.
fn tend(node: &str, containers: &dyn Containers, pods: &mut BTreeMap<String, Bound>) {
    let now = tokio::time::Instant::now();
    for (key, pod) in pods.iter_mut().filter(|(_, p)| p.runs()) {
        let st = &mut pod.state;
        if st.up && !containers.running(key) {
            // It exited by itself: the kubelet restarts it after a back-off.
            st.up = false;
            if st.started.is_some_and(|s| now - s >= BACKOFF_RESET) {
                st.restarts = 0;
            }
            st.next_start = Some(now + backoff(st.restarts as u32));
            st.restarts += 1;
        }
        let Some(workload) = &pod.workload else {
            continue;
        };
        if !st.up && !containers.held(key) && st.next_start.is_none_or(|t| now >= t) {
            match containers.start(node, key, workload) {
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
    }
}

/// One look at the pods bound to node `node` through the API server (see the module docs):
/// new pods are taken on, deleted ones stopped and confirmed, and each one's status reported.
async fn sync_pods(
    client: &kube::Client,
    node: &str,
    containers: &dyn Containers,
    pods: &std::sync::Mutex<BTreeMap<String, Bound>>,
) -> Result<(), kube::Error> {
    let all = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let mut present = BTreeSet::new();
    let mut mine = Vec::new();
    for pod in all
        .items
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
    {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = format!("{ns}/{name}");
        if pod.metadata.deletion_timestamp.is_some() {
            if pods.lock().expect("pods").remove(&key).is_some() {
                containers.stop(&key, "pod deleted: container stopped by its node");
            }
            let _ = Api::<Pod>::namespaced(client.clone(), &ns)
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await;
            continue;
        }
        present.insert(key.clone());
        let needs_program = {
            let mut known = pods.lock().expect("pods");
            let bound = known.entry(key.clone()).or_insert_with(|| bound(pod));
            // Its token is asked for when its start is due (after a failed ask, the back-off).
            let due = bound
                .state
                .next_start
                .is_none_or(|t| tokio::time::Instant::now() >= t);
            bound.program && bound.workload.is_none() && due
        };
        if needs_program {
            let container = pods.lock().expect("pods")[&key].container.clone();
            let made = program_of(client, pod, &container).await;
            let mut known = pods.lock().expect("pods");
            if let Some(bound) = known.get_mut(&key) {
                match made {
                    Ok(program) => bound.workload = Some(Workload::Program(program)),
                    Err(e) => {
                        tracing::warn!(pod = %key, error = %kubechaos_core::error::chain(e.as_ref()), "container did not start");
                        let st = &mut bound.state;
                        st.next_start =
                            Some(tokio::time::Instant::now() + backoff(st.restarts as u32));
                        st.restarts += 1;
                    }
                }
            }
        }
        mine.push((key, pod));
    }
    let statuses: Vec<_> = {
        let mut known = pods.lock().expect("pods");
        let gone: Vec<String> = known
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            known.remove(&key);
            containers.stop(&key, "pod deleted: container stopped by its node");
        }
        tend(node, containers, &mut known);
        mine.into_iter()
            .filter_map(|(key, pod)| {
                let b = known.get(&key)?;
                let ready = !b.runs() || (b.state.up && containers.running(&key));
                Some((pod, b.container.clone(), ready, b.state.restarts, b.program))
            })
            .collect()
    };
    for (pod, container, ready, restarts, program) in statuses {
        let api = Api::<Pod>::namespaced(
            client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        report_status(&api, pod, &container, ready, restarts, program).await;
    }
    Ok(())
}

/// A pod newly bound here: what its first container runs.
fn bound(pod: &Pod) -> Bound {
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .cloned()
        .unwrap_or_default();
    let component = container.image.as_deref().and_then(component_of_image);
    let program = component.is_none() && container.command.as_ref().is_some_and(|c| !c.is_empty());
    let workload = component.map(|c| {
        let mut argv = container.command.clone().unwrap_or_default();
        argv.extend(container.args.clone().unwrap_or_default());
        // The command names the binary; the node runs the component's own.
        Workload::Component(c, argv.into_iter().skip(1).collect())
    });
    Bound {
        program,
        workload,
        container,
        state: Container::default(),
    }
}

/// Report a pod Running, Ready or not, when its status says otherwise. `container`: its first
/// (the one the agent runs).
async fn report_status(
    api: &Api<Pod>,
    pod: &Pod,
    container: &k8s_openapi::api::core::v1::Container,
    ready: bool,
    restarts: i32,
    program: bool,
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
    let ip = program.then_some(PROGRAM_POD_IP);
    if status.phase.as_deref() == Some("Running")
        && status.pod_ip.as_deref() == ip
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
    let mut st = json!({
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
    });
    if let Some(ip) = ip {
        st["podIP"] = json!(ip);
        st["podIPs"] = json!([{"ip": ip}]);
        st["hostIP"] = json!(ip);
    }
    p.status = Some(serde_json::from_value(st).expect("pod status shape"));
    let name = pod.metadata.name.clone().unwrap_or_default();
    if let Err(e) = api.replace_status(&name, &PostParams::default(), &p).await {
        tracing::debug!(pod = %name, error = %e, "pod status not reported");
    }
}

/// What the kubelet gives a container that runs its own `command`: its environment (plain
/// values and the downward API), `$(VAR)` references expanded in the command, and a token of the
/// pod's service account bound to the pod (TokenRequest, one hour: longer than any run).
async fn program_of(
    client: &kube::Client,
    pod: &Pod,
    container: &k8s_openapi::api::core::v1::Container,
) -> Result<Program, ContainerError> {
    let env = environment(pod, container)?;
    let mut argv = container.command.clone().unwrap_or_default();
    argv.extend(container.args.clone().unwrap_or_default());
    let argv = argv.iter().map(|a| expand(a, &env)).collect();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".to_owned());
    let request: k8s_openapi::api::authentication::v1::TokenRequest =
        serde_json::from_value(json!({
            "spec": {
                "audiences": [],
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod.metadata.name,
                    "uid": pod.metadata.uid,
                },
            },
        }))
        .expect("token request shape");
    let answer = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &ns)
        .create_token_request(&sa, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("cannot get a token of service account {ns}/{sa}: {e}"))?;
    let token = answer
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            format!("the token request of service account {ns}/{sa} was answered without a token")
        })?;
    Ok(Program {
        argv,
        env,
        working_dir: container.working_dir.clone(),
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        token,
    })
}

/// A container's environment as the kubelet makes it: `value`s (with `$(VAR)` references to
/// earlier variables expanded) and the downward API's `fieldRef`s. Anything else (Secrets,
/// ConfigMaps, resources, `envFrom`) is refused by name, rather than left out.
pub(crate) fn environment(
    pod: &Pod,
    container: &k8s_openapi::api::core::v1::Container,
) -> Result<Vec<(String, String)>, ContainerError> {
    if container.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err("`envFrom` is not supported by the local backend's nodes; expected `env` entries with `value` or `valueFrom.fieldRef`".into());
    }
    let meta = &pod.metadata;
    let mut out: Vec<(String, String)> = Vec::new();
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) => expand(v, &out),
            (None, None) => String::new(),
            (None, Some(from)) => {
                let Some(field) = from.field_ref.as_ref() else {
                    return Err(format!("env `{}`: only `valueFrom.fieldRef` is supported by the local backend's nodes (not Secrets, ConfigMaps or resources); expected `value` or `fieldRef`", var.name).into());
                };
                let path = field.field_path.as_str();
                let keyed = |prefix: &str, map: &Option<BTreeMap<String, String>>| {
                    path.strip_prefix(prefix)
                        .and_then(|r| r.strip_suffix("']"))
                        .map(|k| {
                            map.as_ref()
                                .and_then(|m| m.get(k))
                                .cloned()
                                .unwrap_or_default()
                        })
                };
                match path {
                    "metadata.name" => meta.name.clone().unwrap_or_default(),
                    "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
                    "metadata.uid" => meta.uid.clone().unwrap_or_default(),
                    "spec.nodeName" => pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(),
                    "spec.serviceAccountName" => pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.service_account_name.clone())
                        .unwrap_or_else(|| "default".into()),
                    "status.podIP" | "status.podIPs" | "status.hostIP" | "status.hostIPs" => {
                        PROGRAM_POD_IP.to_owned()
                    }
                    _ => match keyed("metadata.labels['", &meta.labels)
                        .or_else(|| keyed("metadata.annotations['", &meta.annotations))
                    {
                        Some(v) => v,
                        None => {
                            return Err(format!("env `{}`: field `{path}` is not one the downward API gives; expected metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'], metadata.annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.podIP or status.hostIP", var.name).into())
                        }
                    },
                }
            }
        };
        out.push((var.name.clone(), value));
    }
    Ok(out)
}

/// Expand `$(VAR)` references to `env`, as the kubelet does in `command`, `args` and `env`
/// values: an unknown reference stays as written, `$$` is a literal `$`.
fn expand(text: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(close) = after.strip_prefix('(').and_then(|r| r.find(')')) {
            let name = &after[1..1 + close];
            match env.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => out.push_str(&rest[i..i + 2 + close + 1]),
            }
            rest = &after[close + 2..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn ready_node(name: &str, clock: &dyn Clock, kubelet_port: Option<u16>) -> Node {
    let now = clock.wall().to_string();
    let mut node = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"}},
        "spec": {},
        // Room for pods, as KWOK's default node reports: the scheduler's NodeResourcesFit
        // filter counts pods against `allocatable.pods` even when they request nothing.
        "status": {"capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                   "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                                   "lastHeartbeatTime": now, "lastTransitionTime": now}]},
    });
    if let Some(port) = kubelet_port {
        node["status"]["addresses"] = json!([{"type": "InternalIP", "address": "127.0.0.1"}]);
        node["status"]["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": port}});
    }
    serde_json::from_value(node).expect("node shape")
}

/// One heartbeat: register or re-report the Node as Ready, renew its Lease.
pub(crate) async fn heartbeat(
    client: &kube::Client,
    name: &str,
    clock: &dyn Clock,
    kubelet_port: Option<u16>,
) -> Result<(), kube::Error> {
    let nodes = Api::<Node>::all(client.clone());
    match nodes.get_opt(name).await? {
        None => {
            let created = nodes
                .create(
                    &PostParams::default(),
                    &ready_node(name, clock, kubelet_port),
                )
                .await?;
            // The status sent on create is dropped by the status subresource rules; report it.
            let mut n = created;
            n.status = ready_node(name, clock, kubelet_port).status;
            nodes
                .replace_status(name, &PostParams::default(), &n)
                .await?;
        }
        Some(n) => {
            let ready = crate::kubeclient::node_ready(&n);
            if !ready {
                let mut n = n;
                n.status = ready_node(name, clock, kubelet_port).status;
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
    fn references_expand_as_the_kubelet_expands_them() {
        let env = vec![
            ("POD".to_owned(), "op-1".to_owned()),
            ("NS".to_owned(), "ops".to_owned()),
        ];
        assert_eq!(expand("--id=$(POD).$(NS)", &env), "--id=op-1.ops");
        assert_eq!(expand("$(MISSING)/$$(POD)/$", &env), "$(MISSING)/$(POD)/$");
        assert_eq!(expand("$(POD", &env), "$(POD");
    }

    #[test]
    fn the_downward_api_fills_the_environment_and_the_rest_is_refused_by_name() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "op-1", "namespace": "ops", "uid": "u1", "labels": {"app": "op"}},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c"}]},
        }))
        .unwrap();
        let c: k8s_openapi::api::core::v1::Container = serde_json::from_value(json!({
            "name": "c",
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "ID", "value": "$(POD_NAME)@$(IP)"},
            ],
        }))
        .unwrap();
        let env = environment(&pod, &c).unwrap();
        assert_eq!(env[0], ("POD_NAME".into(), "op-1".into()));
        assert_eq!(env[1], ("APP".into(), "op".into()));
        assert_eq!(env[3], ("ID".into(), "op-1@127.0.0.1".into()));
        let secret: k8s_openapi::api::core::v1::Container = serde_json::from_value(json!({
            "name": "c",
            "env": [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        }))
        .unwrap();
        let e = environment(&pod, &secret).unwrap_err().to_string();
        assert!(e.contains("env `PASSWORD`"), "{e}");
    }

    #[test]
    fn remove_holds_every_pod_of_a_component_and_start_lets_them_go() {
        let s = PodGroup::Component(Component::KubeScheduler);
        let cm = PodGroup::Component(Component::KubeControllerManager);
        let known = BTreeMap::from([
            ("kube-system/s-a".to_owned(), s.clone()),
            ("kube-system/s-b".to_owned(), s.clone()),
            ("kube-system/cm-a".to_owned(), cm.clone()),
            ("ops/op-1".to_owned(), PodGroup::Agent("op".into())),
        ]);
        let mut held = BTreeSet::new();
        let running = |p: &str| p != "kube-system/s-b";
        let (stop, touched) = plan_op(&known, &mut held, running, &s, None, ContainerOp::Remove);
        assert_eq!(stop, vec!["kube-system/s-a"]);
        assert_eq!(touched, vec!["kube-system/s-a", "kube-system/s-b"]);
        assert_eq!(held.len(), 2);
        // Kill touches only what runs, holds nothing; `only` picks one pod by name.
        let mut none = BTreeSet::new();
        let (stop, _) = plan_op(
            &known,
            &mut none,
            |_| true,
            &cm,
            Some("cm-a"),
            ContainerOp::Kill,
        );
        assert_eq!(stop, vec!["kube-system/cm-a"]);
        assert!(none.is_empty());
        let (stop, touched) = plan_op(&known, &mut held, running, &s, None, ContainerOp::Start);
        assert!(stop.is_empty());
        assert_eq!(touched.len(), 2);
        assert!(held.is_empty());
    }
}
