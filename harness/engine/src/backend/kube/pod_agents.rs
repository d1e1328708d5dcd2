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
//! `kill` deletes the pod with no grace period (every cluster: its owner makes another); other
//! steps on its pods are refused before the run (`provider.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::AsyncBufReadExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams};

use crate::backend::local::cluster::Hooks;
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

/// Whether a pod's first container runs, and its restart count.
fn container_state(pod: &Pod) -> (bool, u32, String) {
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
    match status {
        None => (false, 0, name),
        Some(c) => (
            c.state.as_ref().is_some_and(|s| s.running.is_some()),
            c.restart_count.max(0) as u32,
            name,
        ),
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
    Candidate { pod: String, process: String },
    /// Its container runs, as this incarnation.
    Started { process: String, incarnation: u32 },
    /// It no longer runs, and why.
    Exited { process: String, reason: String },
    /// Follow the log of this incarnation of its container.
    Follow {
        process: String,
        container: String,
        incarnation: u32,
    },
}

/// Compare a list of an agent's pods in `namespace` with what was seen of them (`mine`,
/// updated): the changes, in order.
fn changes(namespace: &str, mine: &mut BTreeMap<String, Seen>, pods: &[Pod]) -> Vec<Change> {
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
        if s.running && (deleting || !running) {
            s.running = false;
            out.push(Change::Exited {
                process: name.clone(),
                reason: if deleting {
                    "its pod is being deleted".to_owned()
                } else {
                    why_not_running(pod)
                },
            });
        }
        if s.running && restarts + 1 > s.incarnation {
            s.running = false;
            out.push(Change::Exited {
                process: name.clone(),
                reason: format!("its container restarted (restartCount {restarts})"),
            });
        }
        if running && !deleting && !s.running {
            if s.incarnation == 0 {
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
        if s.running && !present.contains(key) {
            s.running = false;
            out.push(Change::Exited {
                process: process(key).to_owned(),
                reason: "its pod was deleted".to_owned(),
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
                )
            };
            for change in found {
                match change {
                    Change::Candidate { pod, process } => hooks.candidate(&g.name, &pod, &process),
                    Change::Started {
                        process,
                        incarnation,
                    } => hooks.started(&process, incarnation),
                    Change::Exited { process, reason } => hooks.exited(&process, &reason),
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
/// incarnation runs, resuming after the last line seen when the stream breaks.
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
    let current = || {
        seen.lock()
            .ok()
            .and_then(|all| all.get(&agent)?.get(&key).cloned())
            .is_some_and(|s| s.running && s.incarnation == incarnation)
    };
    // The last line's timestamp (RFC 3339, as the kubelet writes it), to resume after it.
    let mut last: Option<String> = None;
    // Said once: its reports and `leading:` lines cannot be read (the kubelet does not serve
    // its log), rather than a silence that looks like a quiet program.
    let mut said = false;
    while current() {
        let params = LogParams {
            container: Some(container.clone()),
            follow: true,
            timestamps: true,
            since_time: last
                .as_deref()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok()),
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
                    &format!("kubechaos cannot follow this pod's log ({e}); its JSON reports and `leading:` lines are not read (still trying)"),
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
                let (stamp, text) = line.split_once(' ').unwrap_or(("", line.as_str()));
                // `sinceTime` is inclusive (to the second): skip what was read already.
                if last.as_deref().is_some_and(|l| stamp <= l) {
                    continue;
                }
                last = Some(stamp.to_owned());
                hooks.line(&name, incarnation, text);
            }
        }
        tokio::time::sleep(LOOK).await;
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
        assert!(changes("ops", &mut mine, &[pod("op-a", true, 0, false)]).is_empty());
        // Restarted between two looks.
        let c = changes("ops", &mut mine, &[pod("op-a", true, 1, false)]);
        assert_eq!(
            c[0],
            Change::Exited {
                process: "op-a".into(),
                reason: "its container restarted (restartCount 1)".into()
            }
        );
        assert_eq!(c[1], started("op-a", 2));
        // Crash-looping, then running again.
        let c = changes("ops", &mut mine, &[pod("op-a", false, 1, false)]);
        assert_eq!(
            c,
            [Change::Exited {
                process: "op-a".into(),
                reason: "its container is waiting (CrashLoopBackOff)".into()
            }]
        );
        let c = changes("ops", &mut mine, &[pod("op-a", true, 2, false)]);
        assert_eq!(c[0], started("op-a", 3));
        // Deleted: being deleted, then gone; its replacement is a new candidate.
        let c = changes("ops", &mut mine, &[pod("op-a", true, 2, true)]);
        assert_eq!(
            c,
            [Change::Exited {
                process: "op-a".into(),
                reason: "its pod is being deleted".into()
            }]
        );
        let c = changes("ops", &mut mine, &[pod("op-c", true, 0, false)]);
        assert_eq!(
            c[0],
            Change::Candidate {
                pod: "ops/op-c".into(),
                process: "op-c".into()
            }
        );
        let mut gone = BTreeMap::new();
        changes("ops", &mut gone, &[pod("op-d", true, 0, false)]);
        assert_eq!(
            changes("ops", &mut gone, &[]),
            [Change::Exited {
                process: "op-d".into(),
                reason: "its pod was deleted".into()
            }]
        );
    }
}
