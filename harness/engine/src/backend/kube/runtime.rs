//! What the nodes' container runtime says of the pods' containers, as it happens (kind:
//! containerd in each node container, reached with `docker exec NODE …`): each run's start and
//! exit at the runtime's own time, to the nanosecond, however late kubechaos reads it and
//! whether or not the API server answers meanwhile. Through the API, a pod's status tells the
//! same to the second, and only once its kubelet can post it.
//!
//! - One event stream per node (`ctr -n k8s.io events`: topics `/tasks/start` and `/tasks/exit`,
//!   the init process's `exited_at`), subscribed before the first fault. The stream has no
//!   replay, so what ran before it is read once with `crictl ps -a` and `crictl inspect`.
//!   containerd 1.6 prints `exited_at` as an RFC 3339 string, 1.7 and 2.x as `{seconds, nanos}`:
//!   both are read. A start is stamped with the event's own time, an exit with `exited_at`.
//! - Each container is named once, the first time it is seen, by `crictl inspect`: its pod (the
//!   kubelet's labels), its container and its restart count. Pod sandboxes are no container of
//!   a pod's spec and are left out, and so are the pods of namespaces nobody asked about.
//! - A node whose runtime does not answer `crictl` (each call given 20 s, asked three times: a
//!   node with both cores saturated is slow) is read no longer: a run it cannot name may be a
//!   pod's, so its pods are told by their status through the API from then on, to the second,
//!   and the report says why. A call that failed never reads as "nothing ran".
//! - Facts are kept by container and given out in the order of their times, not of their
//!   arrival (containerd retries a publish that failed: an event can come late).
//! - At the end of a run each stream is drained: a marker is published in each node (a
//!   containerd namespace made and removed at once) and its stream read until the marker comes
//!   (containerd hands a subscriber its events in order), for at most [`DRAIN`]; a node whose
//!   marker did not come is said.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Child, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use super::docker::Docker;
use super::docker::CRICTL;
use super::error::DockerError;

/// The longest the end of a run waits for the nodes' streams to bring what happened before it.
pub(crate) const DRAIN: Duration = Duration::from_secs(15);

/// The kubelet's labels on a pod's containers.
const POD_NAME: &str = "io.kubernetes.pod.name";
const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
const POD_UID: &str = "io.kubernetes.pod.uid";
const CONTAINER_NAME: &str = "io.kubernetes.container.name";
/// The kubelet's annotation: how many times it had restarted the container before this run.
const RESTART_COUNT: &str = "io.kubernetes.container.restartCount";

/// One run of a pod's container, as its node's runtime told it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContainerRun {
    /// The runtime's container id (as a pod's status gives it, after `containerd://`).
    pub(crate) id: String,
    /// `NAMESPACE/NAME` of its pod.
    pub(crate) pod: String,
    /// Its pod's `metadata.uid` (a pod made again under the same name is another).
    pub(crate) pod_uid: String,
    /// Its container's name in the pod's spec.
    pub(crate) container: String,
    /// The kubelet's restart count for this run: its incarnation is this plus one.
    pub(crate) restart_count: u32,
    /// When it started.
    pub(crate) started: Option<Timestamp>,
    /// When it exited, and its exit status.
    pub(crate) exited: Option<(Timestamp, i64)>,
}

/// A line of `ctr events`, as far as kubechaos reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    /// A container's task started.
    Started { id: String, at: Timestamp },
    /// A container's init process exited (an exec's exit is not the container's).
    Exited {
        id: String,
        at: Timestamp,
        status: i64,
    },
    /// A containerd namespace was removed: the drain's marker, by its name.
    Removed(String),
}

/// Read one line of `ctr events`: `TIME NAMESPACE TOPIC JSON`, where TIME is Go's
/// `2026-12-04 18:00:01.123456789 +0000 UTC`.
fn parse(line: &str) -> Option<Seen> {
    let json_at = line.find('{')?;
    let (head, json) = line.split_at(json_at);
    let words: Vec<&str> = head.split_whitespace().collect();
    let topic = words.iter().find(|w| w.starts_with('/'))?;
    let body: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
    let text = |k: &str| body.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    match *topic {
        "/tasks/start" => Some(Seen::Started {
            id: text("container_id")?,
            at: go_time(words.first()?, words.get(1)?, words.get(2)?)?,
        }),
        "/tasks/exit" => {
            let id = text("container_id")?;
            // An exec's exit names its own process id; the init process's is the container's.
            if text("id").is_some_and(|p| p != id) {
                return None;
            }
            Some(Seen::Exited {
                at: proto_time(body.get("exited_at")?)?,
                status: body
                    .get("exit_status")
                    .and_then(|s| s.as_i64())
                    .unwrap_or(0),
                id,
            })
        }
        "/namespaces/delete" => Some(Seen::Removed(text("name")?)),
        _ => None,
    }
}

/// Go's `time.Time.String()` date, clock and offset (`2026-12-04`, `18:00:01.123456789`,
/// `+0000`).
fn go_time(date: &str, clock: &str, offset: &str) -> Option<Timestamp> {
    let (sign, digits) = offset.split_at(1);
    if digits.len() != 4 || !matches!(sign, "+" | "-") {
        return None;
    }
    format!("{date}T{clock}{sign}{}:{}", &digits[..2], &digits[2..])
        .parse()
        .ok()
}

/// A protobuf timestamp as `ctr` prints it: RFC 3339 (containerd 1.6) or `{seconds, nanos}`
/// (1.7, 2.x).
fn proto_time(v: &serde_json::Value) -> Option<Timestamp> {
    match v {
        serde_json::Value::String(s) => s.parse().ok(),
        serde_json::Value::Object(o) => {
            let seconds = o
                .get("seconds")
                .and_then(|s| s.as_i64().or_else(|| s.as_str()?.parse().ok()))?;
            let nanos = o.get("nanos").and_then(|n| n.as_i64()).unwrap_or(0);
            Timestamp::new(seconds, nanos as i32).ok()
        }
        _ => None,
    }
}

/// A container as `crictl inspect` names it: `None` for one that is no pod's container (a
/// sandbox: crictl inspects containers only) or of a namespace not asked about.
fn named(id: &str, inspect: &str, namespaces: &BTreeSet<String>) -> Option<ContainerRun> {
    let doc: serde_json::Value = serde_json::from_str(inspect).ok()?;
    let status = doc.get("status")?;
    let label = |k: &str| status.get("labels")?.get(k)?.as_str().map(str::to_owned);
    let namespace = label(POD_NAMESPACE)?;
    if !namespaces.contains(&namespace) {
        return None;
    }
    let time = |k: &str| {
        status
            .get(k)?
            .as_str()?
            .parse::<Timestamp>()
            .ok()
            // (an unset time is the zero time, 0001-01-01)
            .filter(|t| t.as_second() > 0)
    };
    let exited = time("finishedAt").map(|t| {
        (
            t,
            status.get("exitCode").and_then(|c| c.as_i64()).unwrap_or(0),
        )
    });
    Some(ContainerRun {
        id: id.to_owned(),
        pod: format!("{namespace}/{}", label(POD_NAME)?),
        pod_uid: label(POD_UID)?,
        container: label(CONTAINER_NAME)?,
        restart_count: status
            .get("annotations")
            .and_then(|a| a.get(RESTART_COUNT)?.as_str()?.parse().ok())
            .unwrap_or(0),
        started: time("startedAt"),
        exited,
    })
}

/// What is known, shared by the nodes' readers.
#[derive(Default)]
struct Known {
    /// Every pod container seen, by id.
    runs: BTreeMap<String, ContainerRun>,
    /// Ids seen that are no pod container asked about.
    ignored: BTreeSet<String>,
    /// Drain markers that came, by name.
    markers: BTreeSet<String>,
    /// Nodes whose stream ended or could not start, and why.
    broken: BTreeMap<String, String>,
}

/// The nodes' runtimes, followed.
pub(crate) struct NodeRuntimes {
    docker: Docker,
    nodes: Vec<String>,
    known: Arc<(Mutex<Known>, Condvar)>,
    streams: Mutex<Vec<Child>>,
}

impl NodeRuntimes {
    /// Follow the runtime of every node in `nodes` (kind node containers reached with `docker`)
    /// for the pods of `namespaces`, from now on: what already ran is read first, then each
    /// node's event stream.
    pub(crate) fn follow(
        docker: Docker,
        nodes: Vec<String>,
        namespaces: BTreeSet<String>,
    ) -> NodeRuntimes {
        let known: Arc<(Mutex<Known>, Condvar)> = Arc::default();
        let mut streams = Vec::new();
        let namespaces = Arc::new(namespaces);
        for node in &nodes {
            // The stream first, then what ran before it: nothing falls between the two.
            let child = docker
                .command(&["exec", node, "ctr", "-n", "k8s.io", "events"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn();
            let mut child = match child {
                Ok(c) => c,
                Err(e) => {
                    lock(&known).broken.insert(node.clone(), e.to_string());
                    continue;
                }
            };
            let out = child.stdout.take();
            streams.push(child);
            let (docker, node, known, namespaces) = (
                docker.clone(),
                node.clone(),
                known.clone(),
                namespaces.clone(),
            );
            let _ = std::thread::Builder::new()
                .name(format!("kubechaos-runtime-{node}"))
                .spawn(move || {
                    if let Some(out) = out {
                        for line in std::io::BufReader::new(out).lines() {
                            let Ok(line) = line else { break };
                            if let Some(seen) = parse(&line) {
                                take(&docker, &node, &known, &namespaces, seen);
                            }
                        }
                    }
                    lock(&known)
                        .broken
                        .entry(node.clone())
                        .or_insert_with(|| "its event stream ended".to_owned());
                    known.1.notify_all();
                });
        }
        let me = NodeRuntimes {
            docker,
            nodes,
            known,
            streams: Mutex::new(streams),
        };
        me.read_what_ran(&namespaces);
        me
    }

    /// What ran before the streams: every container of the namespaces asked about, in every
    /// node, as `crictl` lists and inspects it. A node whose runtime could not tell (after
    /// [`TRIES`] asks) is not read here: its pods are told by their status through the API
    /// ([`NodeRuntimes::reads`]), and the report says why.
    fn read_what_ran(&self, namespaces: &BTreeSet<String>) {
        for node in &self.nodes {
            let listed = match ask(&self.docker, node, &["ps", "-a", "-o", "json"]) {
                Ok(out) => serde_json::from_str::<serde_json::Value>(&out)
                    .map_err(|e| format!("`crictl ps -a -o json` gave no JSON: {e}")),
                Err(Untold::Failed(why)) => Err(why),
                Err(Untold::NotFound) => Err("`crictl ps` found no runtime".to_owned()),
            };
            let doc = match listed {
                Ok(doc) => doc,
                Err(why) => {
                    self.lose(node, format!("what ran before could not be listed: {why}"));
                    continue;
                }
            };
            let ids: Vec<String> = doc
                .get("containers")
                .and_then(|c| c.as_array())
                .into_iter()
                .flatten()
                .filter(|c| {
                    c.get("labels")
                        .and_then(|l| l.get(POD_NAMESPACE))
                        .and_then(|n| n.as_str())
                        .is_some_and(|n| namespaces.contains(n))
                })
                .filter_map(|c| c.get("id")?.as_str().map(str::to_owned))
                .collect();
            for id in ids {
                match inspect(&self.docker, node, &id, namespaces) {
                    Ok(Some(run)) => {
                        let mut k = lock(&self.known);
                        // (the stream may have told of it meanwhile: what it told stands)
                        let entry = k.runs.entry(id).or_insert(run.clone());
                        entry.started = entry.started.or(run.started);
                        entry.exited = entry.exited.or(run.exited);
                    }
                    Ok(None) => {}
                    Err(why) => {
                        self.lose(
                            node,
                            format!("a container that ran before could not be named: {why}"),
                        );
                        break;
                    }
                }
            }
        }
    }

    /// Stop reading `node` here, for `why`.
    fn lose(&self, node: &str, why: String) {
        lock(&self.known)
            .broken
            .entry(node.to_owned())
            .or_insert(why);
        self.known.1.notify_all();
    }

    /// Whether pods on `node` are followed here.
    pub(crate) fn reads(&self, node: &str) -> bool {
        self.nodes.iter().any(|n| n == node) && !lock(&self.known).broken.contains_key(node)
    }

    /// Every run known of the pod whose uid is `pod_uid`, oldest first.
    pub(crate) fn runs_of(&self, pod_uid: &str) -> Vec<ContainerRun> {
        let mut runs: Vec<ContainerRun> = lock(&self.known)
            .runs
            .values()
            .filter(|r| r.pod_uid == pod_uid)
            .cloned()
            .collect();
        runs.sort_by_key(|r| (r.restart_count, r.started));
        runs
    }

    /// Read every node's stream up to now: publish a marker in each and wait (at most
    /// [`DRAIN`]) until each has come. Returns the nodes whose stream could not be read to
    /// now, each with why.
    pub(crate) fn drain(&self) -> Vec<String> {
        let marker = format!(
            "kubechaos-drain-{}-{}",
            std::process::id(),
            Timestamp::now().as_millisecond()
        );
        let mut waiting = Vec::new();
        for node in &self.nodes {
            if lock(&self.known).broken.contains_key(node) {
                continue;
            }
            let made = ["create", "remove"].iter().all(|verb| {
                self.docker
                    .run(&[
                        "exec".into(),
                        node.clone(),
                        "ctr".into(),
                        "namespaces".into(),
                        (*verb).into(),
                        marker.clone(),
                    ])
                    .is_ok()
            });
            if made {
                waiting.push(node.clone());
            }
        }
        let deadline = Instant::now() + DRAIN;
        // (each node's stream brings its own node's marker: kept as NODE/NAME)
        let keys: Vec<String> = waiting.iter().map(|n| format!("{n}/{marker}")).collect();
        let mut k = lock(&self.known);
        while !keys.iter().all(|key| k.markers.contains(key)) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            k = self.known.1.wait_timeout(k, left).expect("runtime lock").0;
        }
        let mut unread: Vec<String> = self
            .nodes
            .iter()
            .filter_map(|n| {
                if let Some(why) = k.broken.get(n) {
                    return Some(format!(
                        "{n}: its container runtime is not read ({why}); its pods' starts and exits are their status's, to the second"
                    ));
                }
                (!k.markers.contains(&format!("{n}/{marker}"))).then(|| {
                    format!(
                        "{n}: its runtime's events up to the end did not come within {}s",
                        DRAIN.as_secs()
                    )
                })
            })
            .collect();
        unread.dedup();
        unread
    }
}

impl Drop for NodeRuntimes {
    fn drop(&mut self) {
        if let Ok(mut streams) = self.streams.lock() {
            for c in streams.iter_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn lock(known: &(Mutex<Known>, Condvar)) -> std::sync::MutexGuard<'_, Known> {
    known.0.lock().expect("runtime lock")
}

/// How many times a call to a node's runtime is made before it counts as failed.
const TRIES: u32 = 3;

/// What a node's runtime did not tell.
#[derive(Debug)]
enum Untold {
    /// It has no such container (a pod sandbox, whose events name it as a container: crictl
    /// inspects containers only; or one removed since): nothing to name.
    NotFound,
    /// It did not answer, or failed: why, after [`TRIES`] asks.
    Failed(String),
}

/// `crictl ARGS` in `node` ([`CRICTL`]: with room to answer on a busy node), asked up to
/// [`TRIES`] times: its output, or what it did not tell.
fn ask(docker: &Docker, node: &str, args: &[&str]) -> Result<String, Untold> {
    let command: Vec<String> = ["exec", node]
        .into_iter()
        .chain(CRICTL.split_whitespace())
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect();
    let mut why = String::new();
    for attempt in 1..=TRIES {
        match docker.run(&command) {
            Ok(out) => return Ok(out),
            Err(DockerError::Failed { stderr, .. }) if stderr.contains("code = NotFound") => {
                return Err(Untold::NotFound)
            }
            Err(e) => why = kubechaos_core::error::chain(&e),
        }
        if attempt < TRIES {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    Err(Untold::Failed(format!("{why} ({TRIES} tries)")))
}

/// `crictl inspect ID` in `node`, named ([`named`]): `Ok(None)` for what is no pod container
/// asked about (or no container: a sandbox), `Err` when the runtime did not tell.
fn inspect(
    docker: &Docker,
    node: &str,
    id: &str,
    namespaces: &BTreeSet<String>,
) -> Result<Option<ContainerRun>, String> {
    match ask(docker, node, &["inspect", id]) {
        Ok(out) => Ok(named(id, &out, namespaces)),
        Err(Untold::NotFound) => Ok(None),
        Err(Untold::Failed(why)) => Err(why),
    }
}

/// Take what a node's stream said.
fn take(
    docker: &Docker,
    node: &str,
    known: &(Mutex<Known>, Condvar),
    namespaces: &BTreeSet<String>,
    seen: Seen,
) {
    let id = match &seen {
        Seen::Started { id, .. } | Seen::Exited { id, .. } => id.clone(),
        Seen::Removed(name) => {
            lock(known).markers.insert(format!("{node}/{name}"));
            known.1.notify_all();
            return;
        }
    };
    let unknown = {
        let k = lock(known);
        !k.runs.contains_key(&id) && !k.ignored.contains(&id)
    };
    if unknown {
        let run = inspect(docker, node, &id, namespaces);
        let mut k = lock(known);
        match run {
            Ok(Some(run)) => {
                k.runs.entry(id.clone()).or_insert(run);
            }
            Ok(None) => {
                k.ignored.insert(id.clone());
            }
            Err(why) => {
                // A run it cannot name may be a pod's: what this node's runtime says is no
                // longer the whole story, and its pods go back to their status.
                k.broken
                    .entry(node.to_owned())
                    .or_insert(format!("a container it told of could not be named: {why}"));
                drop(k);
                known.1.notify_all();
                return;
            }
        }
    }
    let mut k = lock(known);
    if let Some(run) = k.runs.get_mut(&id) {
        match seen {
            Seen::Started { at, .. } => run.started = Some(at),
            Seen::Exited { at, status, .. } => run.exited = Some((at, status)),
            Seen::Removed(_) => {}
        }
    }
    known.1.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// `ctr events` lines as containerd 1.6 prints them (Debian's, in the node image: an
    /// RFC 3339 `exited_at`) and as 1.7 and 2.x do (`{seconds, nanos}`); an exec's exit is not
    /// its container's; the drain's marker is a namespace removed.
    #[test]
    fn the_runtimes_events_are_read_in_both_of_containerds_forms() {
        let id = "4f2a";
        assert_eq!(
            parse(&format!(
                "2026-12-04 18:00:01.123456789 +0000 UTC k8s.io /tasks/start {{\"container_id\":\"{id}\",\"pid\":4242}}"
            )),
            Some(Seen::Started {
                id: id.into(),
                at: t("2026-12-04T18:00:01.123456789Z")
            })
        );
        assert_eq!(
            parse(&format!(
                "2026-12-04 18:00:09.5 +0000 UTC k8s.io /tasks/exit {{\"container_id\":\"{id}\",\"id\":\"{id}\",\"pid\":4242,\"exit_status\":137,\"exited_at\":\"2026-12-04T18:00:09.400000001Z\"}}"
            )),
            Some(Seen::Exited {
                id: id.into(),
                at: t("2026-12-04T18:00:09.400000001Z"),
                status: 137
            })
        );
        // 1.7 and 2.x; an exit status of 0 is left out.
        assert_eq!(
            parse(&format!(
                "2026-12-04 18:00:09.5 +0000 UTC k8s.io /tasks/exit {{\"container_id\":\"{id}\",\"id\":\"{id}\",\"pid\":4242,\"exited_at\":{{\"seconds\":1796407209,\"nanos\":400000001}}}}"
            )),
            Some(Seen::Exited {
                id: id.into(),
                at: t("2026-12-04T18:00:09.400000001Z"),
                status: 0
            })
        );
        assert_eq!(
            parse(&format!(
                "2026-12-04 18:00:09.5 +0000 UTC k8s.io /tasks/exit {{\"container_id\":\"{id}\",\"id\":\"exec-1\",\"pid\":7,\"exited_at\":\"2026-12-04T18:00:09Z\"}}"
            )),
            None
        );
        assert_eq!(
            parse("2026-12-04 18:00:10 +0000 UTC kubechaos-drain-1 /namespaces/delete {\"name\":\"kubechaos-drain-1\"}"),
            Some(Seen::Removed("kubechaos-drain-1".into()))
        );
        assert_eq!(
            parse("2026-12-04 18:00:10 +0000 UTC k8s.io /snapshot/prepare {\"key\":\"x\"}"),
            None
        );
    }

    /// A pod's container, as `crictl inspect` names it; a namespace not asked about, and what is
    /// no pod's container, are not named.
    #[test]
    fn a_container_is_named_by_its_kubelet_labels() {
        let inspect = r#"{"status":{"id":"4f2a","state":"CONTAINER_EXITED","startedAt":"2026-12-04T18:00:01.123456789Z","finishedAt":"2026-12-04T18:00:09.4Z","exitCode":137,
            "labels":{"io.kubernetes.pod.name":"op-7d9-x2","io.kubernetes.pod.namespace":"ops","io.kubernetes.pod.uid":"u-1","io.kubernetes.container.name":"op"},
            "annotations":{"io.kubernetes.container.restartCount":"2"}}}"#;
        let ops: BTreeSet<String> = ["ops".to_owned()].into();
        assert_eq!(
            named("4f2a", inspect, &ops),
            Some(ContainerRun {
                id: "4f2a".into(),
                pod: "ops/op-7d9-x2".into(),
                pod_uid: "u-1".into(),
                container: "op".into(),
                restart_count: 2,
                started: Some(t("2026-12-04T18:00:01.123456789Z")),
                exited: Some((t("2026-12-04T18:00:09.4Z"), 137)),
            })
        );
        let running = inspect.replace("2026-12-04T18:00:09.4Z", "0001-01-01T00:00:00Z");
        assert_eq!(named("4f2a", &running, &ops).unwrap().exited, None);
        assert_eq!(
            named("4f2a", inspect, &["kube-system".to_owned()].into()),
            None
        );
        assert_eq!(named("4f2a", "{}", &ops), None);
    }

    /// A node whose runtime does not answer `crictl` is not read as one where nothing ran: it
    /// is read no longer (its pods go by their status) and the end of the run says why; a node
    /// that answers is read, and one with no such container (a pod sandbox's events name it as a
    /// container; crictl inspects containers only) has nothing to name. (Seen on kind with both cores saturated: `crictl`'s 2 s default
    /// passed, the listing was skipped, and a running leader's pod was "none of its agent's
    /// running pods" for the whole run.)
    #[test]
    fn a_runtime_that_does_not_answer_is_not_read_as_nothing_ran() {
        let answer = r#"case "$*" in
  *" ctr -n k8s.io events") exec sleep 60 ;;
  "exec slow crictl --timeout 20s ps -a -o json") echo 'rpc error: code = DeadlineExceeded desc = context deadline exceeded' >&2; exit 1 ;;
  "exec mute crictl --timeout 20s ps -a -o json") echo '{"containers":[{"id":"c1","labels":{"io.kubernetes.pod.namespace":"ops"}}]}' ;;
  "exec mute crictl --timeout 20s inspect c1") exit 1 ;;
  "exec fine crictl --timeout 20s ps -a -o json") echo '{"containers":[{"id":"s1","labels":{"io.kubernetes.pod.namespace":"ops"}}]}' ;;
  "exec fine crictl --timeout 20s inspect s1") echo 'E1205 remote_runtime.go:657] "ContainerStatus from runtime service failed" err="rpc error: code = NotFound desc = an error occurred when try to find container \"s1\": not found"' >&2; exit 1 ;;
  *" ps -a -o json") echo '{"containers":[]}' ;;
  *" ctr namespaces "*) exit 1 ;;
esac"#;
        let (_dir, docker, log) = crate::backend::kube::docker::tests::stand_in_answering(answer);
        let rt = NodeRuntimes::follow(
            docker,
            vec!["slow".into(), "mute".into(), "fine".into()],
            ["ops".to_owned()].into(),
        );
        assert!(!rt.reads("slow"));
        assert!(!rt.reads("mute"));
        // (a sandbox, or a container removed since: the runtime has nothing to name, once)
        assert!(rt.reads("fine"));
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            calls
                .matches("exec fine crictl --timeout 20s inspect s1")
                .count(),
            1
        );
        assert_eq!(
            calls.matches("exec slow crictl --timeout 20s ps").count(),
            TRIES as usize,
            "{calls}"
        );
        let unread = rt.drain();
        assert!(
            unread[0].starts_with(
                "slow: its container runtime is not read (what ran before could not be listed: "
            ) && unread[0].contains("context deadline exceeded")
                && unread[0].ends_with(
                    "(3 tries)); its pods' starts and exits are their status's, to the second"
                ),
            "{unread:?}"
        );
        assert!(
            unread[1].starts_with("mute: its container runtime is not read (a container that ran before could not be named: "),
            "{unread:?}"
        );
    }
}
