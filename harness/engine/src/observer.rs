//! The observer: follows a cluster through its API server as an informer does (list, then watch
//! from the list's resourceVersion, resume a broken watch from the last resourceVersion seen,
//! list again when that is too old), records what changed as [`events`](kubechaos_core::events), and
//! carries out the plan's API-level actions (probe pods, `delete-pods`).
//!
//! It only needs a `kube::Client`, so every backend runs the same observer: the sim runs it as
//! the `kubechaos` host (never partitioned or crashed), real backends as a task. It never fails a
//! run: when it loses the API server it says so in the timeline, retries every second, and
//! carries on where it left off.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::mpsc;

use crate::recover::{self, RecoverError, Workload};
use kubechaos_core::events::{EventKind, Recorder};

/// What the observer last recorded of a Lease.
#[derive(Clone, Debug, Default)]
pub(crate) struct LeaseSeen {
    /// Holder, renew time, transitions, duration: what a new version is compared by.
    state: (Option<String>, Option<u64>, u32, Option<u64>),
    /// The resourceVersion of the version last read (an older one is never recorded again).
    version: u64,
}

/// How many past versions of one Lease the observer reads back after its watch broke (a Lease
/// renewed every 2 s writes 150 in 5 minutes, about as far back as kube-apiserver's compaction
/// of etcd leaves them): more is no longer a gap in a watch.
const HISTORY_LIMIT: usize = 1000;

/// How long the observer waits before it tries the API server again.
pub(crate) const RETRY: Duration = Duration::from_secs(1);
/// How long `delete-pods` waits for the deleted pods to be gone (kubectl's default grace period
/// and then some).
pub(crate) const DELETE_WAIT: Duration = Duration::from_secs(60);
/// Namespace of probe pods.
pub(crate) const PROBE_NAMESPACE: &str = "kubechaos";

/// The field manager of kubechaos's own writes to objects it follows (the label on a Lease its
/// agents made): a write of its own is never taken for the holder's.
pub(crate) const OWN_FIELD_MANAGER: &str = "kubechaos";

/// An API-level action for the harness host to carry out.
#[derive(Clone, Debug)]
pub enum Command {
    /// Create the probe pod of invariant `invariant`.
    Probe {
        /// Index in `expect:`.
        invariant: usize,
    },
    /// Delete the pods matching a selector.
    DeletePods {
        /// Namespace.
        namespace: String,
        /// Label selector.
        selector: String,
    },
    /// The `recover` step `step`: create a pod from a workload's template, pre-bound to a node.
    Recover {
        /// Index in `faults:` (names the pod: `NAME-recovery-STEP`).
        step: usize,
        /// `NAMESPACE/KIND/NAME`.
        pod_from: String,
        /// The node.
        node: String,
        /// Delete the pod once the workload is available again.
        cleanup: bool,
    },
    /// Delete recovery pod `pod` once `workload` is available again.
    Cleanup {
        /// The workload.
        workload: Workload,
        /// The recovery pod's name (in the workload's namespace).
        pod: String,
    },
    /// The `bind` step: POST a Binding for a pending pod.
    Bind {
        /// `NAMESPACE/NAME`.
        pod: String,
        /// The node.
        node: String,
    },
    /// The run has ended: read every followed Lease once more (what changed and was not seen
    /// yet is recorded, placed when it was written), then say so on `done`.
    Settle {
        /// Told once the Leases were read (or could not be).
        done: std::sync::mpsc::Sender<()>,
    },
}

/// What became of a command.
enum Outcome {
    /// Carried out (or refused for good, which the timeline says).
    Done,
    /// The API server did not answer: try again in a second.
    Retry,
    /// Carried out; this command follows (it is tried from the next second on).
    Then(Command),
}

/// Whether the API server answered lately, shared by the observer's watches so that losing it
/// and finding it again are each said once.
#[derive(Default)]
struct Reach(std::sync::Mutex<Option<bool>>);

/// The observer/actuator.
#[derive(Clone)]
pub struct Observer {
    /// Where events go.
    pub recorder: Recorder,
    /// The wall-clock time at the start of the run (renew times are recorded relative to it).
    pub epoch: k8s_openapi::jiff::Timestamp,
    /// The Deployments (`NAMESPACE/NAME`) whose availability to record (those `available`
    /// invariants name); their namespaces' pods are followed too.
    pub deployments: std::collections::BTreeSet<String>,
    /// The Leases to record (`NAMESPACE/NAME`); a real cluster holds many others (the API
    /// servers' identity leases, other controllers').
    pub leases: std::collections::BTreeSet<String>,
    /// `timeoutSeconds` of each watch request: the sim's network carries each exchange whole
    /// within a 5s client timeout, so the sim asks for short watches; real API servers stream.
    pub watch_timeout: u32,
    /// Lease holders renamed to the scenario's process names: (lease, host part of the holder
    /// identity) -> process. On kind the scheduler's identity is `NODE_UUID`; its process is
    /// `kube-scheduler-N`. Empty where identities already are process names.
    pub holder_names: BTreeMap<(String, String), String>,
    /// The client that reads (follows) the cluster, where it is not the one that acts: kubechaos
    /// told to read late ($KUBECHAOS_SELF_DELAY) reads through a proxy, and acts at once.
    pub reader: Option<kube::Client>,
    /// What was last recorded of each Lease, shared by its follower and [`Command::Settle`].
    pub(crate) leases_seen: std::sync::Arc<std::sync::Mutex<BTreeMap<String, LeaseSeen>>>,
}

impl Observer {
    /// An observer recording into `recorder` (renew times relative to `epoch`) that follows no
    /// Lease or Deployment yet (set [`Observer::leases`], [`Observer::deployments`]).
    pub fn watching(recorder: Recorder, epoch: k8s_openapi::jiff::Timestamp) -> Observer {
        Observer {
            recorder,
            epoch,
            deployments: Default::default(),
            leases: Default::default(),
            watch_timeout: 60,
            holder_names: BTreeMap::new(),
            reader: None,
            leases_seen: std::sync::Arc::default(),
        }
    }

    /// The observer of a run of `s`: its leases and Deployments, renew times relative to `epoch`,
    /// watches as real API servers serve them (60 s), holder identities as they are.
    pub(crate) fn of(
        s: &kubechaos_core::scenario::Scenario,
        recorder: Recorder,
        epoch: k8s_openapi::jiff::Timestamp,
    ) -> Observer {
        Observer {
            recorder,
            epoch,
            deployments: s.deployments(),
            leases: s.leases().keys().map(|l| l.to_string()).collect(),
            watch_timeout: 60,
            holder_names: BTreeMap::new(),
            reader: None,
            leases_seen: std::sync::Arc::default(),
        }
    }

    /// Run until the world ends (the sim's end, or the task is aborted).
    pub async fn run(self, client: kube::Client, commands: mpsc::UnboundedReceiver<Command>) {
        let reach = Reach::default();
        let (act, client) = (client.clone(), self.reader.clone().unwrap_or(client));
        let leases_storage = Api::<Lease>::all(act.clone());
        let leases = self.follow(
            Api::<Lease>::all(client.clone()),
            &reach,
            Some((&leases_storage, &|this: &Self, l: &Lease| {
                this.lease_version(l)
            })),
            |this, last_write: &mut Option<u64>, s: Seen<'_, Lease>| {
                let mut seen = this.leases_seen.lock().expect("leases seen");
                if let Seen::Listed(_, Some(broke)) = &s {
                    this.relisted(*last_write, broke);
                    for l in broke.missed {
                        this.lease(&mut seen, l);
                    }
                }
                s.each(|l| {
                    // Of every Lease (a real cluster's nodes and API servers renew theirs every
                    // 10 s): when the last write the watch brought was made, about.
                    let renewed = l.spec.as_ref().and_then(|s| s.renew_time.as_ref());
                    if let Some(t) = renewed.map(|t| this.since_start_ms(&t.0)) {
                        *last_write = Some(last_write.map_or(t, |w| w.max(t)));
                    }
                    this.lease(&mut seen, l)
                })
            },
        );
        let nodes = self.follow(
            Api::<Node>::all(client.clone()),
            &reach,
            None,
            |this, seen: &mut BTreeMap<String, (bool, bool)>, s: Seen<'_, Node>| {
                s.each(|n| this.node(seen, n))
            },
        );
        let pods = self.follow(
            Api::<Pod>::namespaced(client.clone(), PROBE_NAMESPACE),
            &reach,
            None,
            |this, seen: &mut BTreeMap<String, String>, s: Seen<'_, Pod>| {
                s.each(|p| this.pod(seen, p))
            },
        );
        // Deployments' availability: their status, confirmed by their pods.
        let workloads = std::sync::Mutex::new(Workloads::default());
        let deployments = async {
            if !self.deployments.is_empty() {
                self.follow(
                    Api::<Deployment>::all(client.clone()),
                    &reach,
                    None,
                    |this, _: &mut (), s: Seen<'_, Deployment>| {
                        let mut w = workloads.lock().expect("workloads");
                        w.deployments(s);
                        this.availability(&mut w);
                    },
                )
                .await;
            }
        };
        let workload_pods = async {
            if !self.deployments.is_empty() {
                self.follow(
                    Api::<Pod>::all(client.clone()),
                    &reach,
                    None,
                    |this, _: &mut (), s: Seen<'_, Pod>| {
                        let mut w = workloads.lock().expect("workloads");
                        w.pods(s);
                        this.availability(&mut w);
                    },
                )
                .await;
            }
        };
        tokio::join!(
            self.act(&act, &client, commands),
            leases,
            nodes,
            pods,
            deployments,
            workload_pods
        );
    }

    /// Carry out commands as they come; retry those the API server did not take every second.
    async fn act(
        &self,
        client: &kube::Client,
        reader: &kube::Client,
        mut commands: mpsc::UnboundedReceiver<Command>,
    ) {
        let mut pending: Vec<Command> = Vec::new();
        loop {
            if pending.is_empty() {
                match commands.recv().await {
                    Some(c) => pending.push(c),
                    None => return std::future::pending().await,
                }
            } else {
                tokio::select! {
                    biased;
                    Some(c) = commands.recv() => pending.push(c),
                    () = tokio::time::sleep(RETRY) => {}
                }
            }
            while let Ok(c) = commands.try_recv() {
                pending.push(c);
            }
            let mut still = Vec::new();
            for c in pending.drain(..) {
                if let Command::Settle { done } = &c {
                    self.settle(reader, &Api::all(client.clone())).await;
                    let _ = done.send(());
                    continue;
                }
                match self.execute(client, &c).await {
                    Outcome::Done => {}
                    Outcome::Retry => still.push(c),
                    Outcome::Then(next) => still.push(next),
                }
            }
            pending = still;
        }
    }

    /// Say in the timeline when the observer loses the API server and when it has it back, at
    /// `at`: for a lost one, when the first request that failed was sent (a list) or failed (a
    /// watch, a long request); for one found again, when it answered.
    fn reach(&self, reach: &Reach, result: Result<(), &kube::Error>, at: u64) {
        let ok = result.is_ok();
        let mut last = reach.0.lock().expect("reach lock");
        let said = *last;
        *last = Some(ok);
        if said == Some(ok) || (said.is_none() && ok) {
            return;
        }
        self.recorder.record_at(
            at,
            EventKind::ApiReach {
                reached: ok,
                error: result.err().map(short),
            },
        );
    }

    /// Follow one resource as an informer does: list, watch from the list's resourceVersion,
    /// resume from the last resourceVersion seen when the watch ends, list again when the
    /// server says that version is too old (410). `record` sees each list whole, and every
    /// object as it changes or goes. Unlike an informer, it loses no write of an object whose
    /// every write is evidence ([`EveryWrite`]): what a list after a broken watch skipped is
    /// read back from the API server's storage ([`histories`]) and handed over with the list.
    async fn follow<K, S>(
        &self,
        api: Api<K>,
        reach: &Reach,
        every_write: EveryWrite<'_, Self, K>,
        record: impl Fn(&Self, &mut S, Seen<'_, K>),
    ) where
        K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
        S: Default,
    {
        let mut seen = S::default();
        let mut from: Option<String> = None;
        // When a watch that broke last delivered anything (read time), until a watch resumed
        // from where it broke delivers again (nothing was missed) or a list follows (what
        // changed in between was not seen one by one: `Seen::Listed`'s second field).
        let mut broke: Option<u64> = None;
        let mut word = self.recorder.now_ms();
        loop {
            // When a list was sent: the API server was lost no later than that, however long
            // the failure took to come back (a connection that hangs rather than closes).
            let asked = self.recorder.now_ms();
            let version = match from.take() {
                Some(v) => v,
                None => match api.list(&ListParams::default()).await {
                    Ok(list) => {
                        self.reach(reach, Ok(()), self.recorder.now_ms());
                        let (missed, unread) = match (broke, every_write) {
                            (Some(_), Some((storage, since_version))) => {
                                let since: Vec<(&K, u64)> = list
                                    .items
                                    .iter()
                                    .filter_map(|o| Some((o, since_version(self, o)?)))
                                    .collect();
                                histories(storage, &since).await
                            }
                            _ => Default::default(),
                        };
                        let broke = broke.take().map(|since_ms| Broke {
                            since_ms,
                            missed: &missed,
                            unread,
                        });
                        record(self, &mut seen, Seen::Listed(&list.items, broke));
                        list.metadata.resource_version.unwrap_or_default()
                    }
                    Err(e) => {
                        self.reach(reach, Err(&e), asked);
                        tokio::time::sleep(RETRY).await;
                        continue;
                    }
                },
            };
            let params = WatchParams::default().timeout(self.watch_timeout);
            let stream = match api.watch(&params, &version).await {
                Ok(stream) => stream,
                Err(e) => {
                    if !is_gone(&e) {
                        // A watch is a long request: it fails when its failure comes.
                        self.reach(reach, Err(&e), self.recorder.now_ms());
                        tokio::time::sleep(RETRY).await;
                        from = Some(version);
                    }
                    continue;
                }
            };
            self.reach(reach, Ok(()), self.recorder.now_ms());
            if broke.is_none() {
                word = self.recorder.now_ms();
            }
            let mut stream = stream.boxed();
            let mut last = Some(version);
            loop {
                let next = stream.try_next().await;
                if let Ok(Some(e)) = &next {
                    if !matches!(e, WatchEvent::Error(_)) {
                        // The watch goes on from where it was: nothing was missed.
                        broke = None;
                        word = self.recorder.now_ms();
                    }
                }
                match next {
                    Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                        last = o.meta().resource_version.clone().or(last);
                        record(self, &mut seen, Seen::Changed(&o));
                    }
                    Ok(Some(WatchEvent::Deleted(o))) => {
                        last = o.meta().resource_version.clone().or(last);
                        record(self, &mut seen, Seen::Deleted(&o));
                    }
                    Ok(Some(WatchEvent::Bookmark(b))) => {
                        last = Some(b.metadata.resource_version);
                    }
                    Ok(Some(WatchEvent::Error(e))) => {
                        if e.code == 410 {
                            last = None;
                        }
                        break;
                    }
                    // The server ended the watch (its timeout, or it went away): resume.
                    Ok(None) | Err(_) => break,
                }
            }
            broke.get_or_insert(word);
            from = last;
        }
    }

    /// Say something in the timeline, as the harness.
    fn note(&self, message: String) {
        self.recorder.record(EventKind::ProcessNote {
            process: "kubechaos".into(),
            message,
        });
    }

    /// Read every Lease once more, recording what changed unseen (the end of a run: what a
    /// slow watch had not brought yet, every write of it, read back from the API server's
    /// storage where it keeps them).
    async fn settle(&self, reader: &kube::Client, storage: &Api<Lease>) {
        let api = Api::<Lease>::all(reader.clone());
        if let Ok(list) = api.list(&ListParams::default()).await {
            let since: Vec<(&Lease, u64)> = list
                .items
                .iter()
                .filter_map(|l| Some((l, self.lease_version(l)?)))
                .collect();
            let (missed, _) = histories(storage, &since).await;
            let mut seen = self.leases_seen.lock().expect("leases seen");
            for l in missed.iter().chain(&list.items) {
                self.lease(&mut seen, l);
            }
        }
    }

    /// For a Lease the run follows, the resourceVersion of the version recorded last (0: none
    /// yet); `None` for the others.
    fn lease_version(&self, l: &Lease) -> Option<u64> {
        let key = key_of(&l.metadata);
        self.leases.contains(&key).then(|| {
            let seen = self.leases_seen.lock().expect("leases seen");
            seen.get(&key).map_or(0, |s| s.version)
        })
    }

    /// The Leases were listed again after their watch broke: say whether every write since was
    /// read back ([`history`]), or from when their changes are known only by the state they
    /// left ([`EventKind::LeasesRelisted`], which the invariants take as a gap in the
    /// evidence). That gap begins at the last write the watch brought (`last_write`, the latest
    /// `renewTime` of the Leases it brought), not at when it was read: a watch read late has
    /// not brought the writes of its last moments.
    fn relisted(&self, last_write: Option<u64>, broke: &Broke<'_, Lease>) {
        let since_ms = last_write.map_or(broke.since_ms, |w| w.min(broke.since_ms));
        if !broke.unread.is_empty() {
            self.recorder.record(EventKind::LeasesRelisted {
                since_ms,
                leases: Some(broke.unread.clone()),
            });
            return;
        }
        self.note(format!(
            "observer: listed the Leases again (their watch could not resume where it broke, at {}); {}",
            kubechaos_core::events::fmt_ms(since_ms),
            match broke.missed.len() {
                0 => "no write of the followed ones was missed".to_owned(),
                1 => "the one write of the followed ones it missed was read back from the API server's storage, placed when it was written".to_owned(),
                n => format!("the {n} writes of the followed ones it missed were read back from the API server's storage, each placed when it was written"),
            }
        ));
    }

    /// Carry out a command.
    async fn execute(&self, client: &kube::Client, c: &Command) -> Outcome {
        match c {
            // (carried out by `act` itself, with the client that reads)
            Command::Settle { .. } => Outcome::Done,
            Command::Probe { invariant } => {
                let name = format!("probe-{invariant}");
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": PROBE_NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "kubechaos"}},
                    "spec": {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]},
                }))
                .expect("probe pod shape");
                match Api::<Pod>::namespaced(client.clone(), PROBE_NAMESPACE)
                    .create(&PostParams::default(), &pod)
                    .await
                {
                    Ok(_) => {
                        self.recorder.record(EventKind::ProbeCreated {
                            invariant: *invariant,
                            pod: format!("{PROBE_NAMESPACE}/{name}"),
                        });
                        Outcome::Done
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "probe pod not created yet");
                        Outcome::Retry
                    }
                }
            }
            Command::DeletePods {
                namespace,
                selector,
            } => {
                // As `kubectl delete pods -l SELECTOR` does: delete, then wait until they are
                // gone (their kubelet stopped their containers and confirmed), so that what
                // follows in the plan sees them gone.
                let api = Api::<Pod>::namespaced(client.clone(), namespace);
                let params = ListParams::default().labels(selector);
                let names: Vec<String> = match api.list(&params).await {
                    Ok(list) => list
                        .items
                        .into_iter()
                        .filter_map(|p| p.metadata.name)
                        .collect(),
                    Err(_) => return Outcome::Retry,
                };
                for name in &names {
                    let _ = api.delete(name, &DeleteParams::default()).await;
                }
                let started = tokio::time::Instant::now();
                loop {
                    let left: Vec<String> = match api.list(&params).await {
                        Ok(list) => list
                            .items
                            .into_iter()
                            .filter_map(|p| p.metadata.name)
                            .filter(|n| names.contains(n))
                            .collect(),
                        Err(_) => names.clone(),
                    };
                    if left.is_empty() {
                        self.note(format!(
                            "delete-pods: {} pod(s) deleted and gone after {:.1}s: {}",
                            names.len(),
                            started.elapsed().as_secs_f64(),
                            if names.is_empty() {
                                "none matched".to_owned()
                            } else {
                                names.join(", ")
                            }
                        ));
                        return Outcome::Done;
                    }
                    if started.elapsed() >= DELETE_WAIT {
                        self.note(format!(
                            "delete-pods: still terminating after {}s: {}",
                            DELETE_WAIT.as_secs(),
                            left.join(", ")
                        ));
                        return Outcome::Done;
                    }
                    tokio::time::sleep(RETRY).await;
                }
            }
            Command::Recover {
                step,
                pod_from,
                node,
                cleanup,
            } => {
                let (ns, kind_name) = pod_from.split_once('/').unwrap_or(("", pod_from));
                let w = match Workload::parse(ns, kind_name) {
                    Ok(w) => w,
                    Err(e) => {
                        self.note(format!("recover: {e}"));
                        return Outcome::Done;
                    }
                };
                let name = format!("{}-recovery-{step}", w.name);
                let pods = Api::<Pod>::namespaced(client.clone(), ns);
                let made = match recover::prepare(client, &w, node, &step.to_string()).await {
                    Ok((_, pod)) => recover::create(client, &pod).await.map(|_| ()),
                    Err(e) => Err(e),
                };
                match made {
                    Ok(()) => {}
                    Err(RecoverError::Refused(e)) => {
                        self.note(format!("recover: refused: {e}"));
                        return Outcome::Done;
                    }
                    // Created by an earlier try whose answer was lost?
                    Err(RecoverError::Cluster { .. })
                        if pods.get_opt(&name).await.ok().flatten().is_some() => {}
                    Err(e @ RecoverError::Cluster { .. }) => {
                        tracing::debug!(error = %kubechaos_core::error::chain(&e), "recovery pod not created yet");
                        return Outcome::Retry;
                    }
                }
                self.note(format!(
                    "recover: created pod {ns}/{name} from {w}'s template, bound to {node}"
                ));
                if *cleanup {
                    Outcome::Then(Command::Cleanup {
                        workload: w,
                        pod: name,
                    })
                } else {
                    Outcome::Done
                }
            }
            Command::Cleanup { workload, pod } => {
                let Ok(recover::Cleanup::Done(available, desired)) =
                    recover::cleanup(client, workload, pod).await
                else {
                    return Outcome::Retry;
                };
                self.note(format!(
                    "recover: {workload} has its pods Ready again ({available}/{desired}); deleted pod {}/{pod}",
                    workload.namespace
                ));
                Outcome::Done
            }
            Command::Bind { pod, node } => {
                let (ns, name) = pod.split_once('/').unwrap_or(("", pod));
                match recover::bind(client, ns, name, node).await {
                    Ok(()) => {
                        self.note(format!("bind: bound pod {pod} to {node}"));
                        Outcome::Done
                    }
                    Err(RecoverError::Refused(e)) => {
                        self.note(format!("bind: refused: {e}"));
                        Outcome::Done
                    }
                    Err(RecoverError::Cluster { .. }) => Outcome::Retry,
                }
            }
        }
    }

    /// The last millisecond of the second that a whole-second time `t` of the API names (a
    /// condition's `lastTransitionTime`), since the start of the run: the latest it can have
    /// happened.
    fn end_of_second(&self, t: &k8s_openapi::jiff::Timestamp) -> u64 {
        self.since_start_ms(t) + 999
    }

    fn since_start_ms(&self, t: &k8s_openapi::jiff::Timestamp) -> u64 {
        let d = t.duration_since(self.epoch);
        d.as_millis().max(0) as u64
    }

    /// `identity` with its host part renamed after [`Observer::holder_names`].
    fn holder_name(&self, lease: &str, identity: String) -> String {
        let (host, rest) = identity.rsplit_once('_').unwrap_or((&identity, ""));
        match self.holder_names.get(&(lease.to_owned(), host.to_owned())) {
            Some(p) if rest.is_empty() => p.clone(),
            Some(p) => format!("{p}_{rest}"),
            None => identity,
        }
    }

    fn lease(&self, seen: &mut BTreeMap<String, LeaseSeen>, l: &Lease) {
        let ns = l.metadata.namespace.clone().unwrap_or_default();
        let key = format!("{ns}/{}", l.metadata.name.clone().unwrap_or_default());
        if !self.leases.contains(&key) {
            return;
        }
        let version = resource_version(l).unwrap_or(0);
        if seen.get(&key).is_some_and(|s| version < s.version) {
            // Older than what was recorded (a watch that brings late what history gave).
            return;
        }
        let spec = l.spec.clone().unwrap_or_default();
        let now = (
            spec.holder_identity
                .clone()
                .filter(|h| !h.is_empty())
                .map(|h| self.holder_name(&key, h)),
            spec.renew_time.as_ref().map(|t| self.since_start_ms(&t.0)),
            spec.lease_transitions.unwrap_or(0).max(0) as u32,
            spec.lease_duration_seconds
                .filter(|s| *s > 0)
                .map(|s| s as u64 * 1000),
        );
        let was = seen.get(&key).map(|s| s.state.clone());
        if was.as_ref() != Some(&now) {
            // Placed when it was written, by the holder's clock (on kind and local, this
            // machine's): when it changed hands, its `acquireTime`; else its `renewTime`. A
            // Lease read late (a slow API server, a busy machine) is placed all the same.
            let changed_hands = was.is_none_or(|was| was.0 != now.0);
            let acquired = spec
                .acquire_time
                .as_ref()
                .map(|t| self.since_start_ms(&t.0));
            let written = if changed_hands {
                acquired.or(now.1)
            } else {
                now.1
            };
            // When the API server took this write, by its clock (a renewal held up on its way
            // reaches it after its `renewTime`): the latest of its managers' times, to the second
            // (kubechaos's own label on a Lease its agents made is no write of theirs).
            let written_ms = l
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .filter(|f| f.manager.as_deref() != Some(OWN_FIELD_MANAGER))
                .filter_map(|f| f.time.as_ref())
                .map(|t| self.since_start_ms(&t.0))
                .max();
            // A write the API server took after the second of its `renewTime` (held up on its
            // way: a cut that healed, a delay) is placed when it was taken: the Lease was not
            // renewed before that, whatever its holder wrote in it. (Its time, to the second,
            // may be up to a second before the write.)
            // (A change of hands is its `acquireTime`, unless this write is the one that made
            // it: then its `renewTime` is the same, and it too was held up.)
            let held = matches!((now.1, written_ms), (Some(r), Some(taken)) if taken > r);
            let written = match written {
                Some(w) if held && (!changed_hands || Some(w) >= now.1) => written_ms,
                w => w,
            };
            let e = EventKind::LeaseObserved {
                lease: key.clone(),
                holder: now.0.clone(),
                renew_ms: now.1,
                transitions: now.2,
                duration_ms: now.3,
                written_ms,
            };
            match written {
                Some(t) => self.recorder.record_from(t, e),
                None => self.recorder.record(e),
            }
            seen.insert(
                key,
                LeaseSeen {
                    state: now,
                    version,
                },
            );
        } else if let Some(s) = seen.get_mut(&key) {
            s.version = version;
        }
    }

    fn node(&self, seen: &mut BTreeMap<String, (bool, bool)>, n: &Node) {
        let name = n.metadata.name.clone().unwrap_or_default();
        let ready = crate::kubeclient::node_ready(n);
        let tainted = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| {
                ts.iter()
                    .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            });
        if seen.get(&name) != Some(&(ready, tainted)) {
            let e = EventKind::NodeObserved {
                node: name.clone(),
                ready,
                tainted,
            };
            // A change of its Ready condition, when its condition says it changed (to the
            // second: the end of that second, no earlier than it could have been); a taint, when
            // it was read.
            let was_ready = seen.get(&name).map(|s| s.0);
            let changed_at = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| self.end_of_second(&t.0));
            match changed_at {
                Some(t) if was_ready.is_some_and(|w| w != ready) => self.recorder.record_from(t, e),
                _ => self.recorder.record(e),
            }
            seen.insert(name, (ready, tainted));
        }
    }

    fn pod(&self, seen: &mut BTreeMap<String, String>, p: &Pod) {
        let key = format!(
            "{PROBE_NAMESPACE}/{}",
            p.metadata.name.clone().unwrap_or_default()
        );
        if let Some(node) = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
        {
            if seen.get(&key) != Some(&node) {
                let e = EventKind::PodBound {
                    pod: key.clone(),
                    node: node.clone(),
                };
                // When its PodScheduled condition says it was bound (to the second: the end of
                // that second, no earlier than it could have been), however late it was read.
                let bound_at = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|cs| {
                        cs.iter()
                            .find(|c| c.type_ == "PodScheduled" && c.status == "True")
                    })
                    .and_then(|c| c.last_transition_time.as_ref())
                    .map(|t| self.end_of_second(&t.0));
                match bound_at {
                    Some(t) => self.recorder.record_from(t, e),
                    None => self.recorder.record(e),
                }
                seen.insert(key, node);
            }
        }
    }

    /// Record the availability of the Deployments of interest that changed.
    fn availability(&self, w: &mut Workloads) {
        for key in &self.deployments {
            let Some((selector, desired, reported)) = w.deployments.get(key) else {
                continue;
            };
            let ns = key.split_once('/').map(|(ns, _)| ns).unwrap_or_default();
            let ready_pods = w
                .pods
                .values()
                .filter(|(pod_ns, labels, ready)| {
                    *ready
                        && pod_ns == ns
                        && !selector.is_empty()
                        && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
                })
                .count() as u32;
            let now = (*reported.min(&ready_pods), *desired, *reported, ready_pods);
            if w.said.get(key) != Some(&now) {
                self.recorder.record(EventKind::DeploymentObserved {
                    deployment: key.clone(),
                    available: now.0,
                    desired: now.1,
                    reported: now.2,
                    ready_pods: now.3,
                });
                w.said.insert(key.clone(), now);
            }
        }
    }
}

/// Ask the observer behind `commands` to read every Lease once more ([`Command::Settle`]) and
/// wait for it, at most `limit` (blocking: the end of a real-time run). Returns what stayed
/// unread, if it did not answer in time.
pub(crate) fn settle(commands: &mpsc::UnboundedSender<Command>, limit: Duration) -> Option<String> {
    let (done, wait) = std::sync::mpsc::channel();
    if commands.send(Command::Settle { done }).is_err() {
        return Some("the observer had stopped: the Leases were not read once more".to_owned());
    }
    wait.recv_timeout(limit).err().map(|_| {
        format!(
            "the Leases could not be read once more within {}s",
            limit.as_secs()
        )
    })
}

/// What a watch saw: a whole list, an object as it is now, or an object that went.
enum Seen<'a, K> {
    /// A whole list; after a watch that could not be resumed, with what is known of the writes
    /// in between.
    Listed(&'a [K], Option<Broke<'a, K>>),
    Changed(&'a K),
    Deleted(&'a K),
}

/// The objects of a followed resource whose every write is evidence (the followed Leases): the
/// resourceVersion recorded of each last (0: none yet; `None` for the others), and where their
/// past is read (through the client that acts, not the one told to read late: it is placed
/// when it was written all the same, and read late, one version after the other, it would
/// hold up the following for long).
type EveryWrite<'a, O, K> = Option<(&'a Api<K>, &'a (dyn Fn(&O, &K) -> Option<u64> + Sync))>;

/// What a list after a broken watch says of the writes the watch did not bring.
struct Broke<'a, K> {
    /// When the watch last delivered anything (read time).
    since_ms: u64,
    /// The versions of the objects whose every write is evidence that were written after the
    /// one last recorded and before the listed one, oldest first, read back from the API
    /// server's storage.
    missed: &'a [K],
    /// The objects (`NAMESPACE/NAME`) whose versions could not be read back: what changed of
    /// them since `since_ms` is known only by the state it left.
    unread: Vec<String>,
}

impl<K> Seen<'_, K> {
    /// Each object that is there (deletions ignored).
    fn each(self, mut f: impl FnMut(&K)) {
        match self {
            Seen::Listed(all, _) => all.iter().for_each(f),
            Seen::Changed(o) => f(o),
            Seen::Deleted(_) => {}
        }
    }
}

/// The Deployments and pods the `available` invariants need: a Deployment's pods are those its
/// selector's `matchLabels` select in its namespace; a pod counts while Ready and not being
/// deleted.
#[derive(Default)]
struct Workloads {
    /// `NAMESPACE/NAME` -> (matchLabels, `spec.replicas`, `status.availableReplicas`).
    deployments: BTreeMap<String, (BTreeMap<String, String>, u32, u32)>,
    /// `NAMESPACE/NAME` -> (namespace, labels, Ready and not being deleted).
    pods: BTreeMap<String, (String, BTreeMap<String, String>, bool)>,
    /// What was last recorded: (available, desired, reported, ready pods).
    said: BTreeMap<String, (u32, u32, u32, u32)>,
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default()
    )
}

impl Workloads {
    fn deployments(&mut self, s: Seen<'_, Deployment>) {
        let entry = |d: &Deployment| {
            let spec = d.spec.clone();
            (
                spec.selector.match_labels.unwrap_or_default(),
                spec.replicas.unwrap_or(1).max(0) as u32,
                d.status
                    .as_ref()
                    .and_then(|s| s.available_replicas)
                    .unwrap_or(0)
                    .max(0) as u32,
            )
        };
        match s {
            Seen::Listed(all, _) => {
                self.deployments = all
                    .iter()
                    .map(|d| (key_of(&d.metadata), entry(d)))
                    .collect();
            }
            Seen::Changed(d) => {
                self.deployments.insert(key_of(&d.metadata), entry(d));
            }
            Seen::Deleted(d) => {
                self.deployments.remove(&key_of(&d.metadata));
            }
        }
    }

    fn pods(&mut self, s: Seen<'_, Pod>) {
        let entry = |p: &Pod| {
            let ready = p.metadata.deletion_timestamp.is_none() && crate::kubeclient::pod_ready(p);
            (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.labels.clone().unwrap_or_default(),
                ready,
            )
        };
        match s {
            Seen::Listed(all, _) => {
                self.pods = all
                    .iter()
                    .map(|p| (key_of(&p.metadata), entry(p)))
                    .collect();
            }
            Seen::Changed(p) => {
                self.pods.insert(key_of(&p.metadata), entry(p));
            }
            Seen::Deleted(p) => {
                self.pods.remove(&key_of(&p.metadata));
            }
        }
    }
}

/// An error in a few words: the API's own message for a `Status`.
fn short(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        e => e.to_string(),
    }
}

/// An object's resourceVersion as a number (etcd's revision of its last write).
fn resource_version<K: Resource>(o: &K) -> Option<u64> {
    o.meta().resource_version.as_deref()?.parse().ok()
}

/// The versions of `o` written after resourceVersion `after` (0: since it was made) and before
/// its own, oldest first, as the API server's storage still holds them: a list at an exact
/// resourceVersion reads etcd's past (kube-apiserver takes `resourceVersionMatch=Exact` to
/// etcd when its watch cache does not hold that version), and each read gives the version
/// before the one asked from. An informer's list after a broken watch skips these; for a Lease
/// each is a renewal or a change of hands that happened. `Err` when the storage no longer
/// holds them (410 after etcd's compaction), the server does not read its past (it answers
/// with a version no older), or it does not answer.
async fn history<K>(api: &Api<K>, o: &K, after: u64) -> Result<Vec<K>, ()>
where
    K: Resource + Clone + Debug + DeserializeOwned,
{
    let mut at = resource_version(o).ok_or(())?;
    let name = o.meta().name.clone().unwrap_or_default();
    let fields = match &o.meta().namespace {
        Some(ns) => format!("metadata.name={name},metadata.namespace={ns}"),
        None => format!("metadata.name={name}"),
    };
    let mut past = Vec::new();
    while at > after + 1 {
        if past.len() == HISTORY_LIMIT {
            return Err(());
        }
        let params = ListParams::default()
            .fields(&fields)
            .at(&(at - 1).to_string())
            .matching(kube::api::VersionMatch::Exact);
        let list = api.list(&params).await.map_err(|_| ())?;
        // Nothing: it did not exist then.
        let Some(before) = list.items.into_iter().next() else {
            break;
        };
        let version = resource_version(&before).ok_or(())?;
        if version >= at {
            return Err(());
        }
        if version <= after {
            break;
        }
        at = version;
        past.push(before);
    }
    past.reverse();
    Ok(past)
}

/// How long the observer reads back the writes its watch missed ([`histories`]) before it
/// gives up and says the gap: it does not follow anything meanwhile.
const HISTORY_BUDGET: Duration = Duration::from_secs(20);

/// [`history`] of each object since the resourceVersion given with it, read side by side within
/// [`HISTORY_BUDGET`]: every version read back, and the objects (`NAMESPACE/NAME`) whose
/// versions could not be.
async fn histories<K>(api: &Api<K>, since: &[(&K, u64)]) -> (Vec<K>, Vec<String>)
where
    K: Resource + Clone + Debug + DeserializeOwned,
{
    let reads = futures::future::join_all(since.iter().map(|(o, after)| history(api, o, *after)));
    let Ok(read) = tokio::time::timeout(HISTORY_BUDGET, reads).await else {
        return (
            Vec::new(),
            since.iter().map(|(o, _)| key_of(o.meta())).collect(),
        );
    };
    let mut missed = Vec::new();
    let mut unread = Vec::new();
    for ((o, _), r) in since.iter().zip(read) {
        match r {
            Ok(past) => missed.extend(past),
            Err(()) => unread.push(key_of(o.meta())),
        }
    }
    (missed, unread)
}

/// Whether an error is the server's "too old resource version".
fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
}

#[cfg(test)]
mod tests {
    //! The observer's reading of what it sees, without a cluster: objects as the watches hand
    //! them over, events as the recorder keeps them.

    use super::*;
    use serde_json::json;

    fn observer() -> Observer {
        Observer {
            recorder: Recorder::new(|| 0),
            epoch: "2026-01-01T00:00:00Z".parse().unwrap(),
            deployments: ["kube-system/kube-scheduler".to_owned()].into(),
            leases: ["kube-system/kube-scheduler".to_owned()].into(),
            watch_timeout: 60,
            holder_names: BTreeMap::new(),
            reader: None,
            leases_seen: std::sync::Arc::default(),
        }
    }

    fn kinds(o: &Observer) -> Vec<EventKind> {
        o.recorder.snapshot().into_iter().map(|e| e.kind).collect()
    }

    fn lease(name: &str, holder: &str, renew: &str, transitions: i32) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"namespace": "kube-system", "name": name},
            "spec": {"holderIdentity": holder, "renewTime": renew,
                     "leaseTransitions": transitions, "leaseDurationSeconds": 15}
        }))
        .unwrap()
    }

    /// A renewal that the API server took after its `renewTime` (its `managedFields` say when,
    /// to the second) carries that time; one taken within its second does not.
    #[test]
    fn a_renewal_taken_late_carries_when_the_api_server_took_it() {
        let written_by = |renew: &str, taken: &[(&str, &str)]| {
            let o = observer();
            let mut l = lease("kube-scheduler", "node-0_ab12", renew, 0);
            l.metadata.managed_fields = Some(
                taken
                    .iter()
                    .map(|(manager, time)| {
                        serde_json::from_value(json!({
                            "manager": manager, "operation": "Update",
                            "apiVersion": "coordination.k8s.io/v1", "time": time
                        }))
                        .unwrap()
                    })
                    .collect(),
            );
            o.lease(&mut BTreeMap::new(), &l);
            match &kinds(&o)[0] {
                EventKind::LeaseObserved { written_ms, .. } => *written_ms,
                other => panic!("{other:?}"),
            }
        };
        let written = |renew: &str, taken: &str| written_by(renew, &[("kube-scheduler", taken)]);
        assert_eq!(
            written("2026-01-01T00:00:12.300000Z", "2026-01-01T00:00:18Z"),
            Some(18_000)
        );
        // kubechaos's own label on the Lease, written after the holder's renewal, is no renewal.
        assert_eq!(
            written_by(
                "2026-01-01T00:00:12.300000Z",
                &[
                    ("kube-scheduler", "2026-01-01T00:00:12Z"),
                    (OWN_FIELD_MANAGER, "2026-01-01T00:00:13Z")
                ]
            ),
            Some(12_000)
        );
        assert_eq!(
            written("2026-01-01T00:00:12.300000Z", "2026-01-01T00:00:12Z"),
            Some(12_000)
        );
    }

    /// A Lease of interest is recorded when it changes, with its renew time relative to the
    /// run's start; one seen again unchanged, and the Leases of nobody's interest, are not.
    #[test]
    fn leases_are_recorded_once_per_change_and_only_those_judged() {
        let o = observer();
        let mut seen = BTreeMap::new();
        let l = lease(
            "kube-scheduler",
            "node-0_ab12",
            "2026-01-01T00:00:02.500000Z",
            0,
        );
        o.lease(&mut seen, &l);
        o.lease(&mut seen, &l);
        o.lease(
            &mut seen,
            &lease("other", "x", "2026-01-01T00:00:03.000000Z", 0),
        );
        o.lease(
            &mut seen,
            &lease("kube-scheduler", "", "2026-01-01T00:00:04.000000Z", 1),
        );
        assert_eq!(
            kinds(&o),
            [
                EventKind::LeaseObserved {
                    lease: "kube-system/kube-scheduler".into(),
                    holder: Some("node-0_ab12".into()),
                    renew_ms: Some(2500),
                    transitions: 0,
                    duration_ms: Some(15_000),
                    written_ms: None,
                },
                EventKind::LeaseObserved {
                    lease: "kube-system/kube-scheduler".into(),
                    holder: None,
                    renew_ms: Some(4000),
                    transitions: 1,
                    duration_ms: Some(15_000),
                    written_ms: None,
                },
            ]
        );
    }

    /// A Lease read late (a slow API server, a busy machine: here 10 s after its start) is
    /// placed when it was written, by its own times: when it changed hands, its `acquireTime`;
    /// a renewal by the same holder, its `renewTime`. When it was read is kept beside.
    #[test]
    fn a_lease_read_late_is_placed_when_it_was_written() {
        let o = Observer {
            recorder: Recorder::new(|| 10_000),
            ..observer()
        };
        let mut seen = BTreeMap::new();
        let written = |holder: &str, acquired: &str, renewed: &str| -> Lease {
            serde_json::from_value(json!({
                "metadata": {"namespace": "kube-system", "name": "kube-scheduler"},
                "spec": {"holderIdentity": holder, "acquireTime": acquired, "renewTime": renewed,
                         "leaseTransitions": 0, "leaseDurationSeconds": 15}
            }))
            .unwrap()
        };
        o.lease(
            &mut seen,
            &written(
                "a_1",
                "2026-01-01T00:00:01.000000Z",
                "2026-01-01T00:00:02.500000Z",
            ),
        );
        o.lease(
            &mut seen,
            &written(
                "a_1",
                "2026-01-01T00:00:01.000000Z",
                "2026-01-01T00:00:04.500000Z",
            ),
        );
        o.lease(
            &mut seen,
            &written(
                "b_1",
                "2026-01-01T00:00:07.000000Z",
                "2026-01-01T00:00:07.000000Z",
            ),
        );
        let placed: Vec<(u64, Option<u64>)> = o
            .recorder
            .snapshot()
            .iter()
            .map(|e| (e.t_ms, e.read_ms))
            .collect();
        assert_eq!(
            placed,
            [
                (1000, Some(10_000)),
                (4500, Some(10_000)),
                (7000, Some(10_000))
            ]
        );
    }

    /// Holder identities are renamed to the scenario's process names where the provider says
    /// whose host is whose (kind's control-plane nodes); the rest of the identity stays.
    #[test]
    fn holder_identities_take_the_process_names_they_stand_for() {
        let mut o = observer();
        o.holder_names.insert(
            (
                "kube-system/kube-scheduler".into(),
                "chaos-control-plane".into(),
            ),
            "kube-scheduler-0".into(),
        );
        let l = "kube-system/kube-scheduler";
        assert_eq!(
            o.holder_name(l, "chaos-control-plane_7f3e".into()),
            "kube-scheduler-0_7f3e"
        );
        assert_eq!(
            o.holder_name(l, "chaos-control-plane".into()),
            "kube-scheduler-0"
        );
        assert_eq!(o.holder_name(l, "elsewhere_1".into()), "elsewhere_1");
        assert_eq!(
            o.holder_name("default/other", "chaos-control-plane_1".into()),
            "chaos-control-plane_1"
        );
    }

    /// A node is recorded when its readiness or its NoSchedule/NoExecute taints change.
    #[test]
    fn nodes_are_recorded_when_ready_or_tainted_changes() {
        let o = observer();
        let mut seen = BTreeMap::new();
        let node = |ready: &str, taints: serde_json::Value| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": "node-0"},
                "spec": {"taints": taints},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}
            }))
            .unwrap()
        };
        o.node(&mut seen, &node("True", json!([])));
        o.node(&mut seen, &node("True", json!([])));
        o.node(
            &mut seen,
            &node("True", json!([{"key": "x", "effect": "PreferNoSchedule"}])),
        );
        o.node(&mut seen, &node("False", json!([])));
        o.node(
            &mut seen,
            &node(
                "False",
                json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
            ),
        );
        let said: Vec<(bool, bool)> = kinds(&o)
            .into_iter()
            .map(|k| match k {
                EventKind::NodeObserved { ready, tainted, .. } => (ready, tainted),
                k => panic!("{k:?}"),
            })
            .collect();
        assert_eq!(said, [(true, false), (false, false), (false, true)]);
    }

    /// A probe pod is recorded once it is bound, once per node it is bound to.
    #[test]
    fn probe_pods_are_recorded_when_bound() {
        let o = observer();
        let mut seen = BTreeMap::new();
        let pod = |node: Option<&str>| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": "probe-1"},
                "spec": {"containers": [{"name": "c"}], "nodeName": node}
            }))
            .unwrap()
        };
        o.pod(&mut seen, &pod(None));
        o.pod(&mut seen, &pod(Some("node-1")));
        o.pod(&mut seen, &pod(Some("node-1")));
        assert_eq!(
            kinds(&o),
            [EventKind::PodBound {
                pod: format!("{PROBE_NAMESPACE}/probe-1"),
                node: "node-1".into(),
            }]
        );
    }

    /// A Deployment is available as far as both its status and its own Ready pods say: pods
    /// being deleted, not Ready, in another namespace or not selected do not count (its status
    /// is stale while no controller-manager runs).
    #[test]
    fn availability_counts_only_the_deployments_own_ready_pods() {
        let o = observer();
        let mut w = Workloads::default();
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"namespace": "kube-system", "name": "kube-scheduler"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"component": "kube-scheduler"}},
                     "template": {}},
            "status": {"availableReplicas": 2}
        }))
        .unwrap();
        let pod = |name: &str, ns: &str, label: &str, ready: &str, deleting: bool| -> Pod {
            let mut meta = json!({"namespace": ns, "name": name, "labels": {"component": label}});
            if deleting {
                meta["deletionTimestamp"] = json!("2026-01-01T00:00:01Z");
            }
            serde_json::from_value(json!({
                "metadata": meta,
                "spec": {"containers": [{"name": "c"}]},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}
            }))
            .unwrap()
        };
        let pods = [
            pod("a", "kube-system", "kube-scheduler", "True", false),
            pod("b", "kube-system", "kube-scheduler", "True", true),
            pod("c", "kube-system", "kube-scheduler", "False", false),
            pod("d", "default", "kube-scheduler", "True", false),
            pod("e", "kube-system", "other", "True", false),
        ];
        w.deployments(Seen::Listed(std::slice::from_ref(&deployment), None));
        w.pods(Seen::Listed(&pods, None));
        o.availability(&mut w);
        o.availability(&mut w);
        let second = pod("f", "kube-system", "kube-scheduler", "True", false);
        w.pods(Seen::Changed(&second));
        o.availability(&mut w);
        w.pods(Seen::Deleted(&pods[0]));
        o.availability(&mut w);
        let said: Vec<(u32, u32, u32, u32)> = kinds(&o)
            .into_iter()
            .map(|k| match k {
                EventKind::DeploymentObserved {
                    available,
                    desired,
                    reported,
                    ready_pods,
                    ..
                } => (available, desired, reported, ready_pods),
                k => panic!("{k:?}"),
            })
            .collect();
        assert_eq!(said, [(1, 2, 2, 1), (2, 2, 2, 2), (1, 2, 2, 1)]);
    }

    /// Losing the API server and finding it again are each said once; a first answer says
    /// nothing.
    #[test]
    fn reaching_the_api_server_is_said_when_it_changes() {
        let o = observer();
        let reach = Reach::default();
        let lost = kube::Error::Api(
            kube::core::Status::failure("etcdserver: request timed out", "InternalError")
                .with_code(500)
                .boxed(),
        );
        o.reach(&reach, Ok(()), 0);
        o.reach(&reach, Err(&lost), 20_000);
        o.reach(&reach, Err(&lost), 21_000);
        o.reach(&reach, Ok(()), 40_000);
        o.reach(&reach, Ok(()), 41_000);
        let notes: Vec<String> = kinds(&o)
            .into_iter()
            .map(|k| match k {
                EventKind::ApiReach { reached, error } => {
                    kubechaos_core::events::api_reach_text(reached, error.as_deref())
                }
                k => panic!("{k:?}"),
            })
            .collect();
        assert_eq!(
            notes,
            [
                "observer: cannot reach the API server (500 InternalError: etcdserver: request timed out); retrying every second",
                "observer: reached the API server again",
            ]
        );
    }
}
