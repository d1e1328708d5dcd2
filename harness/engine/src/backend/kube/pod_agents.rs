//! Pod agents on an existing cluster (`agents: [{pods: …}]` on `--backend kube`): software
//! already running as pods, which kubechaos follows and does not own.
//!
//! A follower per agent looks at the pods its selector matches every second (a list, so that it
//! carries on the same way before, during and after an API outage: while the API server does not
//! answer, nothing is concluded). What it sees becomes the timeline of processes, named by their
//! pods: a pod seen for the first time is a candidate (`candidate-pod`); its container running
//! is a start (incarnation = `restartCount` + 1); a higher `restartCount` is an exit and a new
//! start; a container no longer running, a pod being deleted or gone is an exit. Each running
//! container's log is followed through the API (`pods/log?follow=true&timestamps=true`, resumed
//! after the last line seen when the stream breaks or stays quiet for 5 s) and its lines go to the same hooks as a local
//! process's: JSON reports and the agent's `leading:` patterns.
//!
//! Everything is placed at the time the node said it happened, not when the API told it: a
//! kubelet goes on running and restarting containers while the API server is away and only its
//! status reports wait, and a log stream can lag on a loaded machine. A line is placed at the
//! kubelet's timestamp (nanoseconds); a start at its container's `startedAt`, an exit at its
//! `finishedAt` (the API gives these to the second), each kept between what is known for sure
//! (an exit is not before the last line its incarnation wrote, nor a start before the exit
//! before it) and the moment the follower learnt it. Before that fix, a correct pod's stop read
//! after an API outage was placed after the outage, and judged as leading through it.
//!
//! `kill` deletes the pod with no grace period (every cluster: its owner makes another); other
//! steps on its pods are refused before the run (`provider.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::AsyncBufReadExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams};

use crate::backend::local::cluster::{Hooks, When};
use kubechaos_core::scenario::Scenario;

/// How often the followers list their pods.
const LOOK: Duration = Duration::from_secs(1);

/// How long a pod's log stream may bring nothing before it is opened again from its last line.
const QUIET: Duration = Duration::from_secs(5);

/// What a follower knows of one pod.
#[derive(Clone, Debug, Default)]
struct Seen {
    /// The incarnation running now (0: none yet).
    incarnation: u32,
    running: bool,
    /// Its log is followed for this incarnation.
    following: u32,
    /// Where it runs, as last seen (kept after it is gone, so that a cut can be mended).
    place: PodPlace,
    /// When its incarnation now (or last) running started, as placed.
    started_at: Option<SystemTime>,
    /// When its last incarnation exited, as its status says (for placing the next start).
    exited_at: Option<SystemTime>,
    /// An incarnation that no longer runs, whose exit its log's follower tells once it has
    /// read that log to its end (so that its exit is not placed before its last lines).
    ending: Option<Ending>,
}

/// An incarnation's end, as a look at its pod saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ending {
    incarnation: u32,
    reason: String,
    /// `finishedAt` from its status, if it said.
    finished: Option<SystemTime>,
}

/// Where a pod runs: what a provider needs to kill its container or cut it off in its node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodPlace {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// Its first container, the one followed.
    pub(crate) container: String,
    /// `spec.nodeName` (empty until scheduled).
    pub(crate) node: String,
    /// `status.podIP` (empty until it has one).
    pub(crate) ip: String,
    /// `spec.hostNetwork`: it shares its node's address.
    pub(crate) host_network: bool,
}

impl PodPlace {
    fn of(namespace: &str, pod: &Pod) -> PodPlace {
        let spec = pod.spec.as_ref();
        PodPlace {
            namespace: namespace.to_owned(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            container: spec
                .and_then(|s| s.containers.first())
                .map(|c| c.name.clone())
                .unwrap_or_default(),
            node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
            ip: pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default(),
            host_network: spec.and_then(|s| s.host_network).unwrap_or(false),
        }
    }
}

/// One pod agent: its pods' namespace and selector.
#[derive(Clone, Debug)]
struct Group {
    name: String,
    namespace: String,
    selector: String,
}

/// The followers of a run's pod agents.
pub(crate) struct PodAgents {
    groups: Vec<Group>,
    /// Per agent, its pods (`NAMESPACE/NAME`) as last seen.
    seen: Arc<Mutex<BTreeMap<String, BTreeMap<String, Seen>>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    client: kube::Client,
}

impl Drop for PodAgents {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl PodAgents {
    /// Followers of `s`'s pod agents, started now; `None` if it has none.
    pub(crate) fn follow(
        s: &Scenario,
        client: &kube::Client,
        hooks: Arc<dyn Hooks>,
    ) -> Option<PodAgents> {
        let groups: Vec<Group> = s
            .cluster
            .agents
            .iter()
            .filter_map(|a| {
                let p = a.pods.as_ref()?;
                Some(Group {
                    name: a.name.clone(),
                    namespace: p.namespace.clone(),
                    selector: p.selector.clone(),
                })
            })
            .collect();
        if groups.is_empty() {
            return None;
        }
        let seen: Arc<Mutex<BTreeMap<String, BTreeMap<String, Seen>>>> = Arc::default();
        let tasks = groups
            .iter()
            .map(|g| {
                tokio::spawn(follow(
                    client.clone(),
                    g.clone(),
                    seen.clone(),
                    hooks.clone(),
                ))
            })
            .collect();
        Some(PodAgents {
            groups,
            seen,
            tasks,
            client: client.clone(),
        })
    }

    /// The agents none of whose pods has run yet: (agent, namespace, selector).
    pub(crate) fn podless(&self) -> Vec<(String, String, String)> {
        let seen = self.seen.lock().expect("pods");
        self.groups
            .iter()
            .filter(|g| {
                seen.get(&g.name)
                    .is_none_or(|pods| pods.values().all(|p| p.incarnation == 0))
            })
            .map(|g| (g.name.clone(), g.namespace.clone(), g.selector.clone()))
            .collect()
    }

    /// The processes (named by their pods) of agent `agent` that run now.
    pub(crate) fn running(&self, agent: &str) -> Vec<String> {
        let seen = self.seen.lock().expect("pods");
        seen.get(agent)
            .map(|pods| {
                pods.iter()
                    .filter(|(_, p)| p.running)
                    .map(|(k, _)| process(k).to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Where agent `agent`'s running pods (or only the one named `only`) are.
    pub(crate) fn running_places(&self, agent: &str, only: Option<&str>) -> Vec<PodPlace> {
        let seen = self.seen.lock().expect("pods");
        seen.get(agent)
            .map(|pods| {
                pods.iter()
                    .filter(|(k, p)| p.running && only.is_none_or(|o| process(k) == o))
                    .map(|(_, p)| p.place.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Where the pod whose process is `name` runs (or ran last), if it is one of a pod agent's.
    pub(crate) fn place(&self, name: &str) -> Option<PodPlace> {
        let seen = self.seen.lock().expect("pods");
        seen.values()
            .flat_map(|pods| pods.iter())
            .find(|(k, _)| process(k) == name)
            .map(|(_, p)| p.place.clone())
    }

    /// `kill` of agent `agent`'s pods (or only the one named `only`) through the API: delete
    /// each with no grace period; its owner makes another. Returns the pods deleted.
    pub(crate) async fn delete(&self, agent: &str, only: Option<&str>) -> Vec<String> {
        let targets: Vec<String> = self
            .running_places(agent, only)
            .into_iter()
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect();
        let mut done = Vec::new();
        for key in targets {
            let (ns, name) = key.split_once('/').unwrap_or(("default", &key));
            let api = Api::<Pod>::namespaced(self.client.clone(), ns);
            match api
                .delete(name, &DeleteParams::default().grace_period(0))
                .await
            {
                Ok(_) => done.push(key),
                Err(e) => {
                    tracing::warn!(pod = %key, error = %e, "kill: the pod could not be deleted")
                }
            }
        }
        done
    }
}

/// The process name of pod `NAMESPACE/NAME`: its name.
fn process(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

/// A pod's first container, as its status says.
struct ContainerNow {
    running: bool,
    restarts: u32,
    name: String,
    /// When its running incarnation started (`state.running.startedAt`).
    started: Option<SystemTime>,
    /// When its last incarnation ended (`state.terminated.finishedAt`, else
    /// `lastState.terminated.finishedAt`).
    finished: Option<SystemTime>,
}

fn container_state(pod: &Pod) -> ContainerNow {
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first());
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let state = status.and_then(|c| c.state.as_ref());
    let running = state.and_then(|s| s.running.as_ref());
    let terminated = |s: Option<&k8s_openapi::api::core::v1::ContainerState>| {
        s.and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.finished_at.as_ref())
            .map(|t| SystemTime::from(t.0))
    };
    ContainerNow {
        running: running.is_some(),
        restarts: status.map_or(0, |c| c.restart_count.max(0) as u32),
        name,
        started: running
            .and_then(|r| r.started_at.as_ref())
            .map(|t| SystemTime::from(t.0)),
        finished: terminated(state)
            .or_else(|| terminated(status.and_then(|c| c.last_state.as_ref()))),
    }
}

/// `at`, kept within `[after, now]` (`Now` when the status gave no time).
fn placed(at: Option<SystemTime>, after: Option<SystemTime>, now: SystemTime) -> When {
    match at {
        None => When::Now,
        Some(at) => When::Wall(at.max(after.unwrap_or(at)).min(now)),
    }
}

/// Why a container that ran no longer runs, as its status says.
fn why_not_running(pod: &Pod) -> String {
    let c = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first());
    let state = c.and_then(|c| c.state.as_ref());
    if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        return format!(
            "its container terminated ({}, exit code {})",
            t.reason.clone().unwrap_or_default(),
            t.exit_code
        );
    }
    if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
        return format!(
            "its container is waiting ({})",
            w.reason.clone().unwrap_or_default()
        );
    }
    "its container is not running".to_owned()
}

/// What a look at an agent's pods tells.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Change {
    /// Pod `pod` (`NAMESPACE/NAME`) runs for the first time: a candidate, as `process`.
    Candidate {
        pod: String,
        process: String,
        at: When,
    },
    /// Its container runs, as this incarnation.
    Started {
        process: String,
        incarnation: u32,
        at: When,
    },
    /// Something the look could not tell (restarts between two looks).
    Note { process: String, message: String },
    /// Follow the log of this incarnation of its container.
    Follow {
        process: String,
        container: String,
        incarnation: u32,
    },
}

/// Compare a list of an agent's pods in `namespace` with what was seen of them (`mine`,
/// updated), at wall-clock time `now`: the changes, in order.
fn changes(
    namespace: &str,
    mine: &mut BTreeMap<String, Seen>,
    pods: &[Pod],
    now: SystemTime,
) -> Vec<Change> {
    let mut out = Vec::new();
    let mut present = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        present.push(key.clone());
        let c = container_state(pod);
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let s = mine.entry(key.clone()).or_default();
        s.place = PodPlace::of(namespace, pod);
        // Its incarnation's end, told by its log's follower once it has read the rest.
        let end = |s: &mut Seen, finished: Option<SystemTime>, reason: String| {
            s.running = false;
            s.exited_at = finished.or(Some(now));
            s.ending = Some(Ending {
                incarnation: s.incarnation,
                reason,
                finished,
            });
        };
        if s.running && (deleting || !c.running) {
            if deleting {
                // (its container may still run out a grace period: the end is when it is seen)
                end(s, None, "its pod is being deleted".to_owned());
            } else {
                end(s, c.finished, why_not_running(pod));
            }
        }
        if s.running && c.restarts + 1 > s.incarnation {
            if c.restarts + 1 > s.incarnation + 1 {
                out.push(Change::Note {
                    process: name.clone(),
                    message: format!(
                        "its container restarted {} times between two looks at it (the API server could not be read meanwhile?): the starts and exits between are not known, only the last",
                        c.restarts + 1 - s.incarnation
                    ),
                });
            }
            end(
                s,
                c.finished,
                format!("its container restarted (restartCount {})", c.restarts),
            );
        }
        if c.running && !deleting && !s.running {
            let at = placed(c.started, s.exited_at, now);
            if s.incarnation == 0 {
                out.push(Change::Candidate {
                    pod: key.clone(),
                    process: name.clone(),
                    at,
                });
            }
            s.incarnation = (c.restarts + 1).max(s.incarnation + 1);
            s.running = true;
            s.started_at = Some(match at {
                When::Wall(t) => t,
                When::Now => now,
            });
            out.push(Change::Started {
                process: name.clone(),
                incarnation: s.incarnation,
                at,
            });
        }
        if s.running && s.following != s.incarnation {
            s.following = s.incarnation;
            out.push(Change::Follow {
                process: name.clone(),
                container: c.name.clone(),
                incarnation: s.incarnation,
            });
        }
    }
    for (key, s) in mine.iter_mut() {
        if s.running && !present.contains(key) {
            s.running = false;
            s.exited_at = Some(now);
            s.ending = Some(Ending {
                incarnation: s.incarnation,
                reason: "its pod was deleted".to_owned(),
                finished: None,
            });
        }
    }
    out
}

/// Follow group `g`'s pods until aborted.
async fn follow(
    client: kube::Client,
    g: Group,
    seen: Arc<Mutex<BTreeMap<String, BTreeMap<String, Seen>>>>,
    hooks: Arc<dyn Hooks>,
) {
    let api = Api::<Pod>::namespaced(client.clone(), &g.namespace);
    let params = ListParams::default().labels(&g.selector);
    loop {
        // While the API server does not answer, nothing is concluded.
        if let Ok(list) = api.list(&params).await {
            let found = {
                let mut all = seen.lock().expect("pods");
                changes(
                    &g.namespace,
                    all.entry(g.name.clone()).or_default(),
                    &list.items,
                    SystemTime::now(),
                )
            };
            for change in found {
                match change {
                    Change::Candidate { pod, process, at } => {
                        hooks.candidate(&g.name, &pod, &process, at)
                    }
                    Change::Started {
                        process,
                        incarnation,
                        at,
                    } => hooks.started(&process, incarnation, at),
                    Change::Note { process, message } => hooks.note(&process, &message),
                    Change::Follow {
                        process,
                        container,
                        incarnation,
                    } => {
                        tokio::spawn(follow_log(
                            api.clone(),
                            process,
                            container,
                            incarnation,
                            seen.clone(),
                            g.name.clone(),
                            g.namespace.clone(),
                            hooks.clone(),
                        ));
                    }
                }
            }
        }
        tokio::time::sleep(LOOK).await;
    }
}

/// Follow the log of incarnation `incarnation` of pod `name`'s container for as long as that
/// incarnation runs, resuming after the last line seen when the stream breaks; then read what
/// it wrote last and tell its exit.
#[allow(clippy::too_many_arguments)]
async fn follow_log(
    api: Api<Pod>,
    name: String,
    container: String,
    incarnation: u32,
    seen: Arc<Mutex<BTreeMap<String, BTreeMap<String, Seen>>>>,
    agent: String,
    namespace: String,
    hooks: Arc<dyn Hooks>,
) {
    let key = format!("{namespace}/{name}");
    let mine = |f: &mut dyn FnMut(&mut Seen)| {
        if let Ok(mut all) = seen.lock() {
            if let Some(s) = all.get_mut(&agent).and_then(|a| a.get_mut(&key)) {
                f(s);
            }
        }
    };
    let current = || {
        let mut yes = false;
        mine(&mut |s| yes = s.running && s.incarnation == incarnation);
        yes
    };
    // When it started, for placing its exit (not before).
    let mut started = None;
    mine(&mut |s| {
        if s.incarnation == incarnation {
            started = s.started_at;
        }
    });
    let mut log = LogReader {
        name: &name,
        incarnation,
        last: None,
        hooks: hooks.as_ref(),
    };
    // Said once: its reports and `leading:` lines cannot be read (the kubelet does not serve
    // its log), rather than a silence that looks like a quiet program.
    let mut said = false;
    while current() {
        let params = log.params(&container, true);
        let opened = api.log_stream(&name, &params).await;
        match &opened {
            // The pod is gone (deleted meanwhile): the next look says so.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) if !said && current() => {
                said = true;
                hooks.note(
                    &name,
                    &format!("kubechaos cannot follow this pod's log ({e}); its JSON reports and `leading:` lines are not read (still trying)"),
                );
            }
            _ => {}
        }
        if let Ok(stream) = opened {
            let mut lines = stream.lines();
            // A stream that stays open but brings nothing (seen on kind: both pods' logs went
            // silent for the rest of a run while the pods went on logging, and a leader's stop
            // was never read) is opened again after a quiet spell, from the last line read:
            // a quiet program costs a request now and then, a stalled stream no evidence.
            while let Ok(Some(Ok(line))) =
                tokio::time::timeout(QUIET, futures::StreamExt::next(&mut lines)).await
            {
                log.read(&line);
            }
        }
        if current() {
            tokio::time::sleep(LOOK).await;
        }
    }
    // It has ended: what it wrote that was not read yet (after an API outage, all of it since),
    // from its container's log if the kubelet still has it: the one before the running one if
    // it was restarted once, its own if it has not been restarted yet.
    let mut restarted = None;
    mine(&mut |s| {
        restarted = (s.incarnation == incarnation + 1)
            .then_some(true)
            .or((s.incarnation == incarnation).then_some(false))
    });
    if let Some(previous) = restarted {
        let params = LogParams {
            previous,
            ..log.params(&container, false)
        };
        if let Ok(text) = api.logs(&name, &params).await {
            for line in text.lines() {
                log.read(line);
            }
        }
    }
    // Its exit: when its status said, not before it started or wrote its last line, nor after
    // now.
    let last = log.last.map(SystemTime::from).max(started);
    let mut told = None;
    mine(&mut |s| {
        if s.ending
            .as_ref()
            .is_some_and(|e| e.incarnation == incarnation)
        {
            let e = s.ending.take().expect("ending");
            told = Some((e.reason, placed(e.finished, last, SystemTime::now())));
        }
    });
    if let Some((reason, at)) = told {
        hooks.exited(&name, &reason, at);
    }
}

/// The lines of one incarnation's log, read once each, placed when the kubelet says they were
/// written.
struct LogReader<'a> {
    name: &'a str,
    incarnation: u32,
    /// The last line's timestamp, to resume after it.
    last: Option<k8s_openapi::jiff::Timestamp>,
    hooks: &'a dyn Hooks,
}

impl LogReader<'_> {
    /// The request for its log (followed or not) from the last line read.
    fn params(&self, container: &str, follow: bool) -> LogParams {
        LogParams {
            container: Some(container.to_owned()),
            follow,
            timestamps: true,
            since_time: self.last,
            ..LogParams::default()
        }
    }

    /// Tell line `line` (`TIMESTAMP TEXT`, as `timestamps=true` gives it) unless it was read
    /// already; returns when it was written.
    fn read(&mut self, line: &str) -> Option<SystemTime> {
        let (stamp, text) = line.split_once(' ').unwrap_or(("", line));
        let written = stamp.parse::<k8s_openapi::jiff::Timestamp>().ok();
        // `sinceTime` is inclusive (to the second): skip what was read already.
        if let (Some(l), Some(w)) = (self.last, written) {
            if w <= l {
                return None;
            }
        }
        if written.is_some() {
            self.last = written;
        }
        let written = written.map(SystemTime::from);
        self.hooks.line(
            self.name,
            self.incarnation,
            text,
            written.map_or(When::Now, When::Wall),
        );
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-11-30T10:00:00Z";

    fn at(secs: u64) -> SystemTime {
        SystemTime::from(T0.parse::<k8s_openapi::jiff::Timestamp>().unwrap())
            + Duration::from_secs(secs)
    }

    fn stamp(secs: u64) -> String {
        k8s_openapi::jiff::Timestamp::try_from(at(secs))
            .unwrap()
            .to_string()
    }

    /// A pod's status: running since `started` (or waiting), `restarts` restarts, the last one
    /// finished at `finished`.
    fn timed(
        name: &str,
        running: bool,
        restarts: i32,
        deleting: bool,
        started: Option<u64>,
        finished: Option<u64>,
    ) -> Pod {
        let mut state = if running {
            serde_json::json!({"running": {}})
        } else {
            serde_json::json!({"waiting": {"reason": "CrashLoopBackOff"}})
        };
        if let (true, Some(t)) = (running, started) {
            state["running"]["startedAt"] = stamp(t).into();
        }
        let last = match finished {
            Some(t) => {
                serde_json::json!({"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": stamp(t)}})
            }
            None => serde_json::json!({}),
        };
        let mut meta = serde_json::json!({"name": name, "namespace": "ops"});
        if deleting {
            meta["deletionTimestamp"] = serde_json::json!("2026-11-30T00:00:00Z");
        }
        serde_json::from_value(serde_json::json!({
            "metadata": meta,
            "spec": {"containers": [{"name": "op"}]},
            "status": {"containerStatuses": [{"name": "op", "image": "", "imageID": "", "ready": running, "restartCount": restarts, "state": state, "lastState": last}]},
        }))
        .unwrap()
    }

    fn pod(name: &str, running: bool, restarts: i32, deleting: bool) -> Pod {
        timed(name, running, restarts, deleting, None, None)
    }

    fn started(process: &str, incarnation: u32) -> Change {
        Change::Started {
            process: process.into(),
            incarnation,
            at: When::Now,
        }
    }

    fn ending(mine: &mut BTreeMap<String, Seen>, key: &str) -> Option<(u32, String)> {
        mine.get_mut(key)?
            .ending
            .take()
            .map(|e| (e.incarnation, e.reason))
    }

    /// A pod's life through the API, as the timeline tells it: first run (a candidate, whose
    /// log is followed), a container restart (an end, told by its log's follower, and the next
    /// incarnation), a crash loop, deletion; pods not running yet are not candidates.
    #[test]
    fn a_pods_status_is_its_processes_starts_and_exits() {
        let now = at(100);
        let mut mine = BTreeMap::new();
        let c = changes(
            "ops",
            &mut mine,
            &[pod("op-a", true, 0, false), pod("op-b", false, 0, false)],
            now,
        );
        assert_eq!(
            c,
            [
                Change::Candidate {
                    pod: "ops/op-a".into(),
                    process: "op-a".into(),
                    at: When::Now,
                },
                started("op-a", 1),
                Change::Follow {
                    process: "op-a".into(),
                    container: "op".into(),
                    incarnation: 1
                },
            ]
        );
        // Nothing new: nothing said.
        assert!(changes("ops", &mut mine, &[pod("op-a", true, 0, false)], now).is_empty());
        // Restarted between two looks.
        let c = changes("ops", &mut mine, &[pod("op-a", true, 1, false)], now);
        assert_eq!(
            ending(&mut mine, "ops/op-a"),
            Some((1, "its container restarted (restartCount 1)".into()))
        );
        assert_eq!(c[0], started("op-a", 2));
        // Restarted twice between two looks: said, since the one between is not known.
        let c = changes("ops", &mut mine, &[pod("op-a", true, 3, false)], now);
        assert!(
            matches!(&c[0], Change::Note { message, .. } if message.contains("restarted 2 times"))
        );
        assert_eq!(c[1], started("op-a", 4));
        ending(&mut mine, "ops/op-a");
        // Crash-looping, then running again.
        let c = changes("ops", &mut mine, &[pod("op-a", false, 3, false)], now);
        assert!(c.is_empty());
        assert_eq!(
            ending(&mut mine, "ops/op-a"),
            Some((4, "its container is waiting (CrashLoopBackOff)".into()))
        );
        let c = changes("ops", &mut mine, &[pod("op-a", true, 4, false)], now);
        assert_eq!(c[0], started("op-a", 5));
        // Deleted: being deleted, then gone; its replacement is a new candidate.
        changes("ops", &mut mine, &[pod("op-a", true, 4, true)], now);
        assert_eq!(
            ending(&mut mine, "ops/op-a"),
            Some((5, "its pod is being deleted".into()))
        );
        let c = changes("ops", &mut mine, &[pod("op-c", true, 0, false)], now);
        assert_eq!(
            c[0],
            Change::Candidate {
                pod: "ops/op-c".into(),
                process: "op-c".into(),
                at: When::Now,
            }
        );
        let mut gone = BTreeMap::new();
        changes("ops", &mut gone, &[pod("op-d", true, 0, false)], now);
        changes("ops", &mut gone, &[], now);
        assert_eq!(
            ending(&mut gone, "ops/op-d"),
            Some((1, "its pod was deleted".into()))
        );
    }

    /// Seen late (the API server was down): a start is placed at its container's `startedAt`,
    /// an end carries its `finishedAt`, and the next start is not placed before that end, nor
    /// anything after the moment it was learnt.
    #[test]
    fn starts_and_ends_are_placed_when_the_node_says_not_when_they_are_seen() {
        let mut mine = BTreeMap::new();
        let c = changes(
            "ops",
            &mut mine,
            &[timed("op-a", true, 0, false, Some(5), None)],
            at(60),
        );
        assert_eq!(
            c[1],
            Change::Started {
                process: "op-a".into(),
                incarnation: 1,
                at: When::Wall(at(5)),
            }
        );
        // Exited at 21 s, restarted at 31 s, both seen at 56 s.
        let c = changes(
            "ops",
            &mut mine,
            &[timed("op-a", true, 1, false, Some(31), Some(21))],
            at(56),
        );
        let e = mine["ops/op-a"].ending.clone().unwrap();
        assert_eq!((e.incarnation, e.finished), (1, Some(at(21))));
        assert_eq!(
            c[0],
            Change::Started {
                process: "op-a".into(),
                incarnation: 2,
                at: When::Wall(at(31)),
            }
        );
        // A status whose start is before the end before it (seconds, truncated), or after now.
        assert_eq!(
            placed(Some(at(20)), Some(at(21)), at(56)),
            When::Wall(at(21))
        );
        assert_eq!(placed(Some(at(70)), None, at(56)), When::Wall(at(56)));
        assert_eq!(placed(None, Some(at(21)), at(56)), When::Now);
    }

    /// What a hook was told of a line, and when.
    #[derive(Default)]
    struct Lines(Mutex<Vec<(String, When)>>);
    impl Hooks for Lines {
        fn line(&self, _process: &str, _incarnation: u32, line: &str, when: When) {
            self.0.lock().unwrap().push((line.to_owned(), when));
        }
    }

    /// A log read again from its last line (`sinceTime` is to the second, and inclusive) tells
    /// each line once, at the kubelet's timestamp, whatever the number of its digits.
    #[test]
    fn a_log_line_is_told_once_when_the_kubelet_says_it_was_written() {
        let hooks = Lines::default();
        let mut log = LogReader {
            name: "op-a",
            incarnation: 1,
            last: None,
            hooks: &hooks,
        };
        let first = "2026-11-30T10:00:05.1Z leading-started";
        let second = "2026-11-30T10:00:05.12Z leading-stopped";
        assert!(log.read(first).is_some());
        assert!(log.read(second).is_some());
        // Read again from 10:00:05: both are old.
        assert!(log.read(first).is_none());
        assert!(log.read(second).is_none());
        assert!(log.read("no stamp").is_none());
        let told = hooks.0.lock().unwrap().clone();
        assert_eq!(told.len(), 3);
        assert_eq!(
            told[1],
            (
                "leading-stopped".to_owned(),
                When::Wall(at(5) + Duration::from_millis(120))
            )
        );
        assert_eq!(told[2].1, When::Now);
    }
}
