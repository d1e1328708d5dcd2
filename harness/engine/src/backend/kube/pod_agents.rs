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
//! Everything is placed when it happened, not when it was read: a line at its runtime
//! timestamp (read after an API outage, it lands where it was written), a start or an exit at
//! its status's `startedAt`/`finishedAt` (to the second). Where the provider reaches the nodes
//! (kind), a pod's starts and exits are its node's runtime's instead ([`super::runtime`]): each
//! run of its container, to the nanosecond, as it happens, whether or not the API server
//! answers; the API then only says which pods are candidates and where they run. At the end of
//! a run each log is read to its end and each node's runtime stream drained ([`PodAgents::drain`]).
//!
//! `kill` deletes the pod with no grace period (every cluster: its owner makes another); other
//! steps on its pods are refused before the run (`provider.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::AsyncBufReadExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams};

use super::runtime::{ContainerRun, NodeRuntimes};
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
    /// Its `metadata.uid` (its containers' label in their node).
    uid: String,
    /// Its starts and exits are told by its node's runtime ([`super::runtime`]), not by its
    /// status.
    by_runtime: bool,
    /// It was told as a candidate.
    candidate: bool,
    /// Per incarnation, the runtime timestamp of the last line of its log read: a stream opened
    /// again (or a last read at the end of the run) goes on after it.
    last_line: BTreeMap<u32, String>,
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
    hooks: Arc<dyn Hooks>,
    /// The nodes' runtimes, where the provider reaches them.
    runtime: Option<Arc<NodeRuntimes>>,
}

impl Drop for PodAgents {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl PodAgents {
    /// Followers of `s`'s pod agents, started now; `None` if it has none. With `runtime`, the
    /// starts and exits of the pods on the nodes it reads are its, at its times.
    pub(crate) fn follow(
        s: &Scenario,
        client: &kube::Client,
        hooks: Arc<dyn Hooks>,
        runtime: Option<Arc<NodeRuntimes>>,
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
                    runtime.clone(),
                ))
            })
            .collect();
        Some(PodAgents {
            groups,
            seen,
            tasks,
            client: client.clone(),
            hooks,
            runtime,
        })
    }

    /// The namespaces of the pod agents' pods (what a runtime follower is to read).
    pub(crate) fn namespaces(s: &Scenario) -> std::collections::BTreeSet<String> {
        s.cluster
            .agents
            .iter()
            .filter_map(|a| Some(a.pods.as_ref()?.namespace.clone()))
            .collect()
    }

    /// At the end of the run (`end`, wall clock): what happened before it and was not read yet
    /// is read, before the timeline is judged. Each node's runtime stream is read up to now and
    /// its facts told; each pod's log is read to its end (lines after `end` are not the run's).
    /// Returns what could not be read, each with why.
    pub(crate) async fn drain(&self, end: k8s_openapi::jiff::Timestamp) -> Vec<String> {
        let mut unread = Vec::new();
        if let Some(rt) = self.runtime.clone() {
            let said = tokio::task::spawn_blocking(move || rt.drain())
                .await
                .unwrap_or_default();
            unread.extend(said);
            for g in &self.groups {
                tell(&g.name, &self.seen, &*self.hooks, |mine| {
                    runtime_step(mine, self.runtime.as_deref())
                });
            }
        }
        // Every pod's log, current incarnation, from its last line read.
        let pods: Vec<(String, String, String, u32, Option<String>)> = {
            let seen = self.seen.lock().expect("pods");
            self.groups
                .iter()
                .flat_map(|g| {
                    seen.get(&g.name)
                        .into_iter()
                        .flat_map(|pods| pods.values())
                        .filter(|p| p.incarnation > 0)
                        .map(|p| {
                            (
                                p.place.namespace.clone(),
                                p.place.name.clone(),
                                p.place.container.clone(),
                                p.incarnation,
                                p.last_line.get(&p.incarnation).cloned(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        for (ns, name, container, incarnation, last) in pods {
            let api = Api::<Pod>::namespaced(self.client.clone(), &ns);
            let params = LogParams {
                container: Some(container),
                timestamps: true,
                since_time: last
                    .as_deref()
                    .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok()),
                ..LogParams::default()
            };
            match tokio::time::timeout(super::runtime::DRAIN, api.logs(&name, &params)).await {
                Ok(Ok(text)) => {
                    for line in text.lines() {
                        let (stamp, said) = line.split_once(' ').unwrap_or((line, ""));
                        let Ok(at) = stamp.parse::<k8s_openapi::jiff::Timestamp>() else {
                            continue;
                        };
                        if at > end || last.as_deref().is_some_and(|l| stamp <= l) {
                            continue;
                        }
                        if !self.read_line(&ns, &name, incarnation, stamp) {
                            continue;
                        }
                        self.hooks.line(&name, incarnation, said, When::At(at));
                    }
                }
                Ok(Err(kube::Error::Api(e))) if e.code == 404 => {}
                Ok(Err(e)) => unread.push(format!(
                    "pod {ns}/{name}: its log could not be read to its end ({e})"
                )),
                Err(_) => unread.push(format!(
                    "pod {ns}/{name}: its log could not be read to its end within {}s",
                    super::runtime::DRAIN.as_secs()
                )),
            }
        }
        unread
    }

    /// Note that the line stamped `stamp` of incarnation `incarnation` of pod `ns/name` was
    /// read; `false` if it (or a later one) was read already.
    fn read_line(&self, ns: &str, name: &str, incarnation: u32, stamp: &str) -> bool {
        read_line(&self.seen, &format!("{ns}/{name}"), incarnation, stamp)
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

    /// Each pod of agent `agent` seen so far, as the local backend says them when its Lease was
    /// not taken: its starts, whether it runs, and the last lines of its log (through the API:
    /// the current container's, else the previous one's).
    pub(crate) async fn report(&self, agent: &str) -> Vec<String> {
        let pods: Vec<(String, Seen)> = {
            let seen = self.seen.lock().expect("pods");
            seen.get(agent)
                .map(|pods| pods.iter().map(|(k, p)| (k.clone(), p.clone())).collect())
                .unwrap_or_default()
        };
        let mut out = Vec::new();
        for (key, p) in pods.into_iter().filter(|(_, p)| p.incarnation > 0) {
            let api = Api::<Pod>::namespaced(self.client.clone(), &p.place.namespace);
            let params = |previous| LogParams {
                container: Some(p.place.container.clone()).filter(|c| !c.is_empty()),
                tail_lines: Some(40),
                previous,
                ..LogParams::default()
            };
            let mut log = api
                .logs(&p.place.name, &params(false))
                .await
                .unwrap_or_default();
            if log.trim().is_empty() && p.incarnation > 1 {
                log = api
                    .logs(&p.place.name, &params(true))
                    .await
                    .unwrap_or_default();
            }
            let tail = crate::backend::local::pods::telling_tail(&log, 3);
            out.push(crate::backend::local::pods::pod_report(
                &key,
                p.incarnation,
                p.running,
                &tail,
            ));
        }
        out
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

/// Whether a pod's first container runs, and its restart count.
fn container_state(pod: &Pod) -> (bool, u32, String) {
    let status = first_status(pod);
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .unwrap_or_default();
    match status {
        None => (false, 0, name),
        Some(c) => (
            c.state.as_ref().is_some_and(|s| s.running.is_some()),
            c.restart_count.max(0) as u32,
            name,
        ),
    }
}

/// The status of a pod's first container.
fn first_status(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
}

/// When the first container's current run started, as its status says (to the second).
fn started_at(pod: &Pod) -> When {
    first_status(pod)
        .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map_or(When::Now, |t| When::Second(t.0))
}

/// When the first container's last run ended, as its status says (to the second): its state if
/// it has ended, else its last state (it runs again, or waits to).
fn finished_at(pod: &Pod) -> When {
    let c = first_status(pod);
    c.and_then(|c| c.state.as_ref()?.terminated.as_ref())
        .or_else(|| c.and_then(|c| c.last_state.as_ref()?.terminated.as_ref()))
        .and_then(|t| t.finished_at.as_ref())
        .map_or(When::Now, |t| When::Second(t.0))
}

/// Why a container that ran no longer runs, as its status says.
fn why_not_running(pod: &Pod) -> String {
    let c = first_status(pod);
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
    Candidate { pod: String, process: String },
    /// Its container runs, as this incarnation, since `at`.
    Started {
        process: String,
        incarnation: u32,
        at: When,
    },
    /// Incarnation `incarnation` no longer runs since `at`, and why.
    Exited {
        process: String,
        incarnation: u32,
        reason: String,
        at: When,
    },
    /// Follow the log of this incarnation of its container.
    Follow {
        process: String,
        container: String,
        incarnation: u32,
    },
}

/// Compare a list of an agent's pods in `namespace` with what was seen of them (`mine`,
/// updated): the changes, in order. A pod on a node whose runtime is read (`runtime`) is only
/// found here (its candidacy, where it runs): its starts and exits are the runtime's
/// ([`runtime_step`]).
fn changes(
    namespace: &str,
    mine: &mut BTreeMap<String, Seen>,
    pods: &[Pod],
    runtime: Option<&NodeRuntimes>,
) -> Vec<Change> {
    let mut out = Vec::new();
    let mut present = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        present.push(key.clone());
        let (running, restarts, container) = container_state(pod);
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let s = mine.entry(key.clone()).or_default();
        s.place = PodPlace::of(namespace, pod);
        s.uid = pod.metadata.uid.clone().unwrap_or_default();
        // (a node whose runtime stopped answering is read no longer: its pods' status tells)
        s.by_runtime = if s.incarnation == 0 {
            runtime.is_some_and(|r| r.reads(&s.place.node))
        } else {
            s.by_runtime && runtime.is_some_and(|r| r.reads(&s.place.node))
        };
        if s.by_runtime {
            let runs = runtime.map(|r| r.runs_of(&s.uid)).unwrap_or_default();
            if !s.candidate && (running || runs.iter().any(|r| r.started.is_some())) {
                s.candidate = true;
                out.push(Change::Candidate {
                    pod: key.clone(),
                    process: name.clone(),
                });
            }
            continue;
        }
        if s.running && (deleting || !running) {
            s.running = false;
            out.push(Change::Exited {
                process: name.clone(),
                incarnation: s.incarnation,
                reason: if deleting {
                    "its pod is being deleted".to_owned()
                } else {
                    why_not_running(pod)
                },
                at: if deleting {
                    When::Now
                } else {
                    finished_at(pod)
                },
            });
        }
        if s.running && restarts + 1 > s.incarnation {
            s.running = false;
            out.push(Change::Exited {
                process: name.clone(),
                incarnation: s.incarnation,
                reason: format!("its container restarted (restartCount {restarts})"),
                at: finished_at(pod),
            });
        }
        if running && !deleting && !s.running {
            if !s.candidate {
                s.candidate = true;
                out.push(Change::Candidate {
                    pod: key.clone(),
                    process: name.clone(),
                });
            }
            s.incarnation = (restarts + 1).max(s.incarnation + 1);
            s.running = true;
            out.push(Change::Started {
                process: name.clone(),
                incarnation: s.incarnation,
                at: started_at(pod),
            });
        }
        if s.running && s.following != s.incarnation {
            s.following = s.incarnation;
            out.push(Change::Follow {
                process: name.clone(),
                container,
                incarnation: s.incarnation,
            });
        }
    }
    for (key, s) in mine.iter_mut() {
        if s.running && !s.by_runtime && !present.contains(key) {
            s.running = false;
            out.push(Change::Exited {
                process: process(key).to_owned(),
                incarnation: s.incarnation,
                reason: "its pod was deleted".to_owned(),
                at: When::Now,
            });
        }
    }
    out
}

/// What the nodes' runtime says of the pods it follows (`mine`, updated) that was not told yet:
/// each run's start and exit, at the runtime's times, in the order of its restart count; and
/// the log of a new incarnation to follow. It goes on while the API server does not answer.
fn runtime_step(mine: &mut BTreeMap<String, Seen>, runtime: Option<&NodeRuntimes>) -> Vec<Change> {
    let Some(runtime) = runtime else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, s) in mine.iter_mut().filter(|(_, s)| {
        s.by_runtime && s.candidate && !s.uid.is_empty() && runtime.reads(&s.place.node)
    }) {
        out.extend(runtime_changes(process(key), s, &runtime.runs_of(&s.uid)));
    }
    out
}

/// The changes that runs `runs` (of pod process `name`, oldest first) make to what was seen of
/// it (`s`, updated). Its incarnation is a run's restart count plus one.
fn runtime_changes(name: &str, s: &mut Seen, runs: &[ContainerRun]) -> Vec<Change> {
    let mut out = Vec::new();
    let mut told = s.incarnation;
    for r in runs.iter().filter(|r| r.container == s.place.container) {
        let incarnation = r.restart_count + 1;
        if incarnation > told {
            let Some(started) = r.started else { continue };
            if s.running {
                // (its exit did not come: it ended before this run began)
                out.push(Change::Exited {
                    process: name.to_owned(),
                    incarnation: told,
                    reason: "its container was started again (its end not told by its node)"
                        .to_owned(),
                    at: When::At(started),
                });
            }
            told = incarnation;
            s.running = true;
            out.push(Change::Started {
                process: name.to_owned(),
                incarnation,
                at: When::At(started),
            });
        }
        if incarnation == told && s.running {
            if let Some((at, status)) = r.exited {
                s.running = false;
                out.push(Change::Exited {
                    process: name.to_owned(),
                    incarnation,
                    reason: format!(
                        "its container exited (exit code {status}, as its node's runtime says)"
                    ),
                    at: When::At(at),
                });
            }
        }
    }
    if told > 0 {
        s.incarnation = told;
    }
    if s.running && s.following != s.incarnation {
        s.following = s.incarnation;
        out.push(Change::Follow {
            process: name.to_owned(),
            container: s.place.container.clone(),
            incarnation: s.incarnation,
        });
    }
    out
}

/// Tell `hooks` the changes that `step` finds in agent `agent`'s pods (following no log).
fn tell(
    agent: &str,
    seen: &Mutex<BTreeMap<String, BTreeMap<String, Seen>>>,
    hooks: &dyn Hooks,
    step: impl FnOnce(&mut BTreeMap<String, Seen>) -> Vec<Change>,
) {
    let found = {
        let mut all = seen.lock().expect("pods");
        step(all.entry(agent.to_owned()).or_default())
    };
    for change in found {
        match change {
            Change::Candidate { pod, process } => hooks.candidate(agent, &pod, &process),
            Change::Started {
                process,
                incarnation,
                at,
            } => hooks.started(&process, incarnation, at),
            Change::Exited {
                process,
                incarnation,
                reason,
                at,
            } => hooks.exited(&process, incarnation, &reason, at),
            Change::Follow { .. } => {}
        }
    }
}

/// Note that the line stamped `stamp` of incarnation `incarnation` of pod `key` was read;
/// `false` if it (or a later one) was read already.
fn read_line(
    seen: &Mutex<BTreeMap<String, BTreeMap<String, Seen>>>,
    key: &str,
    incarnation: u32,
    stamp: &str,
) -> bool {
    let mut all = seen.lock().expect("pods");
    let Some(s) = all.values_mut().find_map(|pods| pods.get_mut(key)) else {
        return true;
    };
    let last = s.last_line.entry(incarnation).or_default();
    if !last.is_empty() && stamp <= last.as_str() {
        return false;
    }
    *last = stamp.to_owned();
    true
}

/// Follow group `g`'s pods until aborted.
async fn follow(
    client: kube::Client,
    g: Group,
    seen: Arc<Mutex<BTreeMap<String, BTreeMap<String, Seen>>>>,
    hooks: Arc<dyn Hooks>,
    runtime: Option<Arc<NodeRuntimes>>,
) {
    let api = Api::<Pod>::namespaced(client.clone(), &g.namespace);
    let params = ListParams::default().labels(&g.selector);
    loop {
        // While the API server does not answer, nothing is concluded from it; what the nodes'
        // runtime says goes on.
        let mut found = Vec::new();
        if let Ok(list) = api.list(&params).await {
            let mut all = seen.lock().expect("pods");
            found = changes(
                &g.namespace,
                all.entry(g.name.clone()).or_default(),
                &list.items,
                runtime.as_deref(),
            );
        }
        {
            let mut all = seen.lock().expect("pods");
            found.extend(runtime_step(
                all.entry(g.name.clone()).or_default(),
                runtime.as_deref(),
            ));
        }
        {
            for change in found {
                match change {
                    Change::Candidate { pod, process } => hooks.candidate(&g.name, &pod, &process),
                    Change::Started {
                        process,
                        incarnation,
                        at,
                    } => hooks.started(&process, incarnation, at),
                    Change::Exited {
                        process,
                        incarnation,
                        reason,
                        at,
                    } => hooks.exited(&process, incarnation, &reason, at),
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
/// incarnation runs, resuming after the last line read when the stream breaks; once it no
/// longer runs, its log is read to its end (the kubelet's previous log of the container, if the
/// next incarnation runs), so that lines it wrote while the API server could not be read are
/// not lost. Each line is told at the runtime's timestamp.
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
    let now_seen = || {
        seen.lock()
            .ok()
            .and_then(|all| all.get(&agent)?.get(&key).cloned())
    };
    let current = || now_seen().is_some_and(|s| s.running && s.incarnation == incarnation);
    // The last line's timestamp (RFC 3339, as the kubelet writes it), to resume after it.
    let last = || {
        now_seen()
            .and_then(|s| s.last_line.get(&incarnation).cloned())
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
    };
    // Tell one line of the stream, unless it was read already (`sinceTime` is to the second).
    let tell = |line: &str| {
        let (stamp, text) = line.split_once(' ').unwrap_or(("", line));
        // Placed at the runtime's timestamp: read late (the API server away, a busy machine),
        // a line is placed where it was written.
        let Ok(at) = stamp.parse::<k8s_openapi::jiff::Timestamp>() else {
            return;
        };
        if read_line(&seen, &key, incarnation, stamp) {
            hooks.line(&name, incarnation, text, When::At(at));
        }
    };
    // Said once: its reports and `leading:` lines cannot be read (the kubelet does not serve
    // its log), rather than a silence that looks like a quiet program.
    let mut said = false;
    // The incarnation whose log the kubelet serves now, as the pod's status says: through an
    // API outage the container may have exited and been started again, and the log opened
    // once the API server answers is then the next incarnation's. Read as this one's, its
    // lines would place this one's exit after lines it never wrote (seen: a leader that exited
    // on its lost lease judged to have led on an expired Lease).
    let served = || async {
        api.get(&name)
            .await
            .ok()
            .and_then(|pod| Some(first_status(&pod)?.restart_count.max(0) as u32 + 1))
    };
    while current() {
        if served().await.is_some_and(|n| n > incarnation) {
            break;
        }
        let params = LogParams {
            container: Some(container.clone()),
            follow: true,
            timestamps: true,
            since_time: last(),
            ..LogParams::default()
        };
        let opened = api.log_stream(&name, &params).await;
        if let Err(kube::Error::Api(s)) = &opened {
            if s.code == 404 {
                // The pod is gone (deleted meanwhile): its follower says so as its exit.
                return;
            }
        }
        if let Err(e) = &opened {
            if !said && current() {
                said = true;
                hooks.note(
                    &name,
                    &format!("kubechaos cannot follow this pod's log ({e}); its JSON reports and `leading:` lines are read once it can (still trying)"),
                );
            }
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
                tell(&line);
            }
        }
        tokio::time::sleep(LOOK).await;
    }
    // It no longer runs: the rest of its log, while the kubelet still serves it (its own, or
    // the previous one of its container once the next incarnation runs).
    let now = match served().await {
        Some(n) => Some(n),
        None => now_seen().map(|s| s.incarnation),
    };
    let previous = match now {
        Some(n) if n == incarnation => false,
        Some(n) if n == incarnation + 1 => true,
        _ => return,
    };
    let params = LogParams {
        container: Some(container.clone()),
        previous,
        timestamps: true,
        since_time: last(),
        ..LogParams::default()
    };
    if let Ok(Ok(text)) = tokio::time::timeout(QUIET * 3, api.logs(&name, &params)).await {
        for line in text.lines() {
            tell(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, running: bool, restarts: i32, deleting: bool) -> Pod {
        let state = if running {
            serde_json::json!({"running": {}})
        } else {
            serde_json::json!({"waiting": {"reason": "CrashLoopBackOff"}})
        };
        let mut meta = serde_json::json!({"name": name, "namespace": "ops"});
        if deleting {
            meta["deletionTimestamp"] = serde_json::json!("2026-11-30T00:00:00Z");
        }
        serde_json::from_value(serde_json::json!({
            "metadata": meta,
            "spec": {"containers": [{"name": "op"}]},
            "status": {"containerStatuses": [{"name": "op", "image": "", "imageID": "", "ready": running, "restartCount": restarts, "state": state}]},
        }))
        .unwrap()
    }

    fn started(process: &str, incarnation: u32) -> Change {
        Change::Started {
            process: process.into(),
            incarnation,
            at: When::Now,
        }
    }

    /// A pod's life through the API, as the timeline tells it: first run (a candidate, whose
    /// log is followed), a container restart (an exit and the next incarnation), a crash loop,
    /// deletion; pods not running yet are not candidates.
    #[test]
    fn a_pods_status_is_its_processes_starts_and_exits() {
        let mut mine = BTreeMap::new();
        let c = changes(
            "ops",
            &mut mine,
            &[pod("op-a", true, 0, false), pod("op-b", false, 0, false)],
            None,
        );
        assert_eq!(
            c,
            [
                Change::Candidate {
                    pod: "ops/op-a".into(),
                    process: "op-a".into()
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
        assert!(changes("ops", &mut mine, &[pod("op-a", true, 0, false)], None).is_empty());
        // Restarted between two looks.
        let c = changes("ops", &mut mine, &[pod("op-a", true, 1, false)], None);
        assert_eq!(
            c[0],
            Change::Exited {
                process: "op-a".into(),
                incarnation: 1,
                reason: "its container restarted (restartCount 1)".into(),
                at: When::Now,
            }
        );
        assert_eq!(c[1], started("op-a", 2));
        // Crash-looping, then running again.
        let c = changes("ops", &mut mine, &[pod("op-a", false, 1, false)], None);
        assert_eq!(
            c,
            [Change::Exited {
                process: "op-a".into(),
                incarnation: 2,
                reason: "its container is waiting (CrashLoopBackOff)".into(),
                at: When::Now,
            }]
        );
        let c = changes("ops", &mut mine, &[pod("op-a", true, 2, false)], None);
        assert_eq!(c[0], started("op-a", 3));
        // Deleted: being deleted, then gone; its replacement is a new candidate.
        let c = changes("ops", &mut mine, &[pod("op-a", true, 2, true)], None);
        assert_eq!(
            c,
            [Change::Exited {
                process: "op-a".into(),
                incarnation: 3,
                reason: "its pod is being deleted".into(),
                at: When::Now,
            }]
        );
        let c = changes("ops", &mut mine, &[pod("op-c", true, 0, false)], None);
        assert_eq!(
            c[0],
            Change::Candidate {
                pod: "ops/op-c".into(),
                process: "op-c".into()
            }
        );
        let mut gone = BTreeMap::new();
        changes("ops", &mut gone, &[pod("op-d", true, 0, false)], None);
        assert_eq!(
            changes("ops", &mut gone, &[], None),
            [Change::Exited {
                process: "op-d".into(),
                incarnation: 1,
                reason: "its pod was deleted".into(),
                at: When::Now,
            }]
        );
    }

    /// A pod on a node whose runtime does not answer `crictl` goes by its status through the
    /// API: it runs, and is followed (on kind, both cores saturated, a leader whose container
    /// the runtime could not list stayed "none of its agent's running pods" for a whole run,
    /// and its leadership was never read).
    #[test]
    fn a_pod_on_a_node_whose_runtime_does_not_answer_goes_by_its_status() {
        let (_dir, docker, _log) = crate::backend::kube::docker::tests::stand_in_answering(
            r#"case "$*" in
  *" ctr -n k8s.io events") exec sleep 60 ;;
  "exec slow crictl "*) exit 1 ;;
  *" ps -a -o json") echo '{"containers":[]}' ;;
esac"#,
        );
        let rt = NodeRuntimes::follow(
            docker,
            vec!["slow".into(), "fine".into()],
            ["ops".to_owned()].into(),
        );
        let on = |node: &str, name: &str| {
            let mut p = pod(name, true, 0, false);
            p.spec.as_mut().unwrap().node_name = Some(node.into());
            p.metadata.uid = Some(format!("uid-{name}"));
            p
        };
        let mut mine = BTreeMap::new();
        let c = changes(
            "ops",
            &mut mine,
            &[on("slow", "op-a"), on("fine", "op-b")],
            Some(&rt),
        );
        let candidate = |name: &str| Change::Candidate {
            pod: format!("ops/{name}"),
            process: name.into(),
        };
        assert_eq!(
            c,
            [
                candidate("op-a"),
                started("op-a", 1),
                Change::Follow {
                    process: "op-a".into(),
                    container: "op".into(),
                    incarnation: 1
                },
                // (its start is for the runtime to tell)
                candidate("op-b"),
            ]
        );
        assert!(runtime_step(&mut mine, Some(&rt)).is_empty());
    }

    /// On kind, a pod's runs are what its node's runtime says, at its times, however long the
    /// API server was away: a crash loop through an outage is each run's start and exit in
    /// order (through the API, only the last run's end would be known), a run not started yet
    /// is not told, and the log of the incarnation that runs is followed.
    #[test]
    fn a_pods_runs_are_what_its_nodes_runtime_says() {
        let t = |s: &str| s.parse::<k8s_openapi::jiff::Timestamp>().unwrap();
        let run = |n: u32, started: Option<&str>, exited: Option<&str>| ContainerRun {
            id: format!("c{n}"),
            pod: "ops/op-a".into(),
            pod_uid: "u".into(),
            container: "op".into(),
            restart_count: n,
            started: started.map(t),
            exited: exited.map(|e| (t(e), 1)),
        };
        let mut s = Seen {
            place: PodPlace {
                container: "op".into(),
                ..PodPlace::default()
            },
            by_runtime: true,
            candidate: true,
            uid: "u".into(),
            ..Seen::default()
        };
        let runs = [
            run(
                0,
                Some("2026-12-04T10:00:00Z"),
                Some("2026-12-04T10:00:21.4Z"),
            ),
            run(
                1,
                Some("2026-12-04T10:00:22.4Z"),
                Some("2026-12-04T10:00:27.1Z"),
            ),
            run(2, None, None),
        ];
        let c = runtime_changes("op-a", &mut s, &runs);
        let told: Vec<String> = c
            .iter()
            .map(|c| match c {
                Change::Started {
                    incarnation, at, ..
                } => format!("start #{incarnation} {at:?}"),
                Change::Exited {
                    incarnation, at, ..
                } => format!("exit #{incarnation} {at:?}"),
                Change::Follow { incarnation, .. } => format!("follow #{incarnation}"),
                Change::Candidate { .. } => "candidate".into(),
            })
            .collect();
        assert_eq!(
            told,
            [
                format!("start #1 {:?}", When::At(t("2026-12-04T10:00:00Z"))),
                format!("exit #1 {:?}", When::At(t("2026-12-04T10:00:21.4Z"))),
                format!("start #2 {:?}", When::At(t("2026-12-04T10:00:22.4Z"))),
                format!("exit #2 {:?}", When::At(t("2026-12-04T10:00:27.1Z"))),
            ]
        );
        assert!(!s.running);
        // The third run starts: told once, and its log followed.
        let runs = [
            runs[0].clone(),
            runs[1].clone(),
            run(2, Some("2026-12-04T10:00:47.2Z"), None),
        ];
        let c = runtime_changes("op-a", &mut s, &runs);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(
            matches!(c[0], Change::Started { incarnation: 3, .. }),
            "{c:?}"
        );
        assert!(
            matches!(c[1], Change::Follow { incarnation: 3, .. }),
            "{c:?}"
        );
        assert!(runtime_changes("op-a", &mut s, &runs).is_empty());
    }
}
