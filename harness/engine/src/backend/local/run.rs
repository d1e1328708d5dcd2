//! Playing a scenario on the local control plane: the shared [`Driver`] carries out the plan in
//! real time on [`LocalWorld`] (child processes, in-process fake nodes, per-client proxies), the
//! same [`Observer`] as the sim's watches the API server, and the processes' own words (upstream
//! klog lines, the agents' JSON lines) become leadership events.
//!
//! Time zero is the moment the cluster is ready (every lease held, every node Ready); events are
//! stamped with real milliseconds since then.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::cluster::{Hooks, LocalCluster, Spec, When};
use super::error::LocalError;
use crate::backend::driver::{Exit, World, WorldClock};
use crate::backend::link::LinkState;
use crate::backend::realtime::{self, Interrupt, RealTime};
use crate::backend::{BackendError, EnvironmentError};
use crate::observer::{Command, Observer};
use crate::run::{Backend, Ready};
use kubechaos_core::events::{read_report, EventKind, Recorder, Report};
use kubechaos_core::plan::Plan;
use kubechaos_core::report::live::Progress;
use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::{Action, ApiErrors, LeaseRef, Pos, Scenario};

/// `api-errors` steps that would fail requests admission never sees (reads, and
/// `deletecollection`), which the local backend cannot fail honestly.
fn read_errors(s: &Scenario) -> Vec<(Pos, String)> {
    let admitted = super::webhook::ADMITTED_VERBS;
    s.faults
        .iter()
        .filter_map(|step| {
            let Action::ApiErrors(e) = &step.action else {
                return None;
            };
            let beyond: Vec<&str> = if e.verbs.is_empty() {
                vec!["any verb (no `verbs`)"]
            } else {
                e.verbs
                    .iter()
                    .map(String::as_str)
                    .filter(|v| !admitted.contains(v))
                    .collect()
            };
            (!beyond.is_empty()).then(|| (step.pos, format!(
                "`api-errors` on {}: the local backend makes the real API server answer with errors through an admission webhook, and admission sees writes only; expected `verbs` among `create`, `update`, `patch`, `delete` (or `--backend sim`, which fails reads too)",
                beyond.join(", ")
            )))
        })
        .collect()
}

/// Options of a local run.
#[derive(Clone, Debug, Default)]
pub struct LocalOptions {
    /// Keep the run directory (certificates, kubeconfigs, logs, etcd data) afterwards.
    pub keep: bool,
}

/// Turns what processes print into events: upstream's leader-election log lines
/// (`k8s.io/client-go/tools/leaderelection`, v0.37), the agents' JSON lines
/// ([`JsonLinesReporter`](crate::agent::JsonLinesReporter)), and the lines an agent's
/// `leading:` patterns match.
///
/// One start of a process leads once at a time: a program on client-go that also prints JSON
/// reports says each term twice (client-go's "Successfully acquired lease", then its own
/// `leading-started`), and the second word is the same term, not a second leader. So a
/// `leading-started` of a process's start that already leads that Lease is not recorded again,
/// and a `leading-stopped` ends the term it opened, whichever of its words said it.
pub(crate) struct RecorderHooks {
    recorder: Recorder,
    patterns: LogPatterns,
    /// The run's time zero, for what is told with its wall-clock time ([`When::At`]).
    zero: realtime::Zero,
    /// The open term of each (process, incarnation, lease): the identity it was recorded with.
    terms: std::sync::Mutex<BTreeMap<(String, u32, String), String>>,
    /// Where each incarnation's start, last line and exit were placed (ms), to keep them in
    /// order whatever order they are told in and whatever the grain of their times.
    placed: std::sync::Mutex<BTreeMap<(String, u32), Placed>>,
}

/// Where an incarnation's facts were placed.
#[derive(Clone, Copy, Default)]
struct Placed {
    started: Option<u64>,
    last_line: Option<u64>,
    exited: Option<u64>,
}

impl RecorderHooks {
    pub(crate) fn new(recorder: Recorder, patterns: LogPatterns) -> Self {
        RecorderHooks {
            recorder,
            patterns,
            zero: realtime::Zero::default(),
            terms: std::sync::Mutex::default(),
            placed: std::sync::Mutex::default(),
        }
    }

    /// With the run's time zero, for facts told with their wall-clock time.
    pub(crate) fn with_zero(mut self, zero: realtime::Zero) -> Self {
        self.zero = zero;
        self
    }

    /// When `line`, told at `at` (read from a pipe, or stamped by a container runtime as it read
    /// it), was said: the program's own time where the line carries one (a JSON report's
    /// `time`), else `at`. A runtime stamps a line when it reads it, which on a starved node
    /// can be seconds after the program wrote it. A program's time is believed only within
    /// [`OWN_TIME_BEFORE_MS`] before `at` and never after it (a clock or a zone set wrong is
    /// not taken for evidence).
    fn said_at(&self, line: &str, at: When) -> u64 {
        let told = self.ms(at);
        match program_time(line).map(|own| self.zero.signed_ms_of(own)) {
            Some(own) if own <= told as i64 && told as i64 - own <= OWN_TIME_BEFORE_MS as i64 => {
                own.max(0) as u64
            }
            _ => told,
        }
    }

    /// Milliseconds since time zero of `at` (the earliest it can be).
    fn ms(&self, at: When) -> u64 {
        match at {
            When::Now => self.recorder.now_ms(),
            When::At(t) | When::Second(t) => self.zero.ms_of(t),
        }
    }

    /// How long after [`Self::ms`] `at` can be: a whole second's rest, for a time told to the
    /// second.
    fn within(at: When) -> Option<u64> {
        matches!(at, When::Second(_)).then_some(999)
    }

    /// Place a fact of incarnation `incarnation` of `process` that happened at `t`, in order
    /// with its start and exit: a line within its incarnation's run, an exit after its last
    /// line and before the next incarnation's start, a start after the last incarnation's exit.
    /// Their sources can tell them out of order (a log read through an API server that was
    /// away, an exit told by a status and a start by a runtime) and at a grain that puts two in
    /// one second; the order itself is known.
    fn place(&self, process: &str, incarnation: u32, fact: Fact, t: u64) -> u64 {
        let mut placed = self.placed.lock().expect("placed");
        let get = |p: &BTreeMap<(String, u32), Placed>, n: u32| {
            p.get(&(process.to_owned(), n)).copied().unwrap_or_default()
        };
        let before = incarnation
            .checked_sub(1)
            .map(|n| get(&placed, n))
            .unwrap_or_default();
        let after = get(&placed, incarnation + 1);
        let me = get(&placed, incarnation);
        let not_before = |t: u64, earlier: Option<u64>| earlier.map_or(t, |e| t.max(e + 1));
        let t = match fact {
            Fact::Started => not_before(t, before.exited),
            Fact::Line => {
                let t = not_before(t, me.started.map(|s| s.saturating_sub(1)));
                match me.exited {
                    Some(x) => t.min(x.saturating_sub(1)),
                    None => t,
                }
            }
            Fact::Exited => {
                let t = not_before(t, me.last_line).max(me.started.unwrap_or(0));
                match after.started {
                    Some(next) => t.min(next.saturating_sub(1)),
                    None => t,
                }
            }
        };
        let entry = placed.entry((process.to_owned(), incarnation)).or_default();
        match fact {
            Fact::Started => entry.started = Some(t),
            Fact::Line => entry.last_line = Some(entry.last_line.map_or(t, |l| l.max(t))),
            Fact::Exited => entry.exited = Some(t),
        }
        t
    }

    /// Record a leadership event that incarnation `incarnation` of `process` said at `t`, as
    /// one term per start and Lease (see the type's docs); anything else as it is.
    fn leadership(&self, process: &str, incarnation: u32, e: EventKind, t: u64) {
        let mut terms = self.terms.lock().expect("terms");
        let e = match e {
            EventKind::LeadingStarted { lease, identity } => {
                let key = (process.to_owned(), incarnation, lease.clone());
                if terms.contains_key(&key) {
                    return;
                }
                terms.insert(key, identity.clone());
                EventKind::LeadingStarted { lease, identity }
            }
            EventKind::LeadingStopped {
                lease,
                identity,
                reason,
            } => {
                let key = (process.to_owned(), incarnation, lease.clone());
                let identity = terms.remove(&key).unwrap_or(identity);
                EventKind::LeadingStopped {
                    lease,
                    identity,
                    reason,
                }
            }
            other => other,
        };
        self.recorder.record_from(t, e);
    }
}

/// What a hook is told of an incarnation, for its place in order ([`RecorderHooks::place`]).
#[derive(Clone, Copy)]
enum Fact {
    Started,
    Line,
    Exited,
}

/// The `leading:` patterns of a scenario's agents, and which process is whose.
#[derive(Default)]
pub(crate) struct LogPatterns {
    /// Per agent: its lease, and its `started` and `stopped` patterns.
    agents: BTreeMap<String, (String, regex::Regex, Option<regex::Regex>)>,
    /// Processes of `command` agents (`NAME-i`) and of pod agents (their pods, as they come).
    owner: std::sync::Mutex<BTreeMap<String, String>>,
}

impl LogPatterns {
    /// The patterns of `s`'s agents (validated when it was loaded).
    pub(crate) fn of(s: &Scenario) -> LogPatterns {
        let mut agents = BTreeMap::new();
        let mut owner = BTreeMap::new();
        for a in &s.cluster.agents {
            let Some(l) = &a.leading else { continue };
            let Ok(started) = regex::Regex::new(&l.started) else {
                continue;
            };
            let stopped = l.stopped.as_deref().and_then(|p| regex::Regex::new(p).ok());
            agents.insert(a.name.clone(), (a.lease.to_string(), started, stopped));
            for i in 0..a.replicas {
                owner.insert(process_name(&a.name, i), a.name.clone());
            }
        }
        LogPatterns {
            agents,
            owner: std::sync::Mutex::new(owner),
        }
    }

    /// `None` when `process` belongs to no agent with patterns; otherwise the leadership event
    /// its line (incarnation `incarnation`) stands for, if a pattern matches. For such an agent
    /// the patterns are the one evidence of leadership: its JSON report lines are not read, so
    /// that nothing is counted twice.
    fn event(&self, process: &str, incarnation: u32, line: &str) -> Option<Option<EventKind>> {
        let agent = self.owner.lock().ok()?.get(process)?.clone();
        let (lease, started, stopped) = self.agents.get(&agent)?;
        let identity = format!("{process}_{incarnation}");
        if started.is_match(line) {
            return Some(Some(EventKind::LeadingStarted {
                lease: lease.clone(),
                identity,
            }));
        }
        if stopped.as_ref().is_some_and(|p| p.is_match(line)) {
            let said: String = line.chars().take(200).collect();
            return Some(Some(EventKind::LeadingStopped {
                lease: lease.clone(),
                identity,
                reason: format!("its log said so: {said}"),
            }));
        }
        Some(None)
    }
}

/// How long before a line was told its program's own time may be: a starved runtime or pipe
/// reader is seconds late, not minutes.
const OWN_TIME_BEFORE_MS: u64 = 60_000;

/// The time a line says it was written at, by its program's clock: a JSON report's `time`
/// (RFC 3339).
fn program_time(line: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    if !line.starts_with('{') || !line.contains("\"time\"") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    v.get("event")?;
    v.get("time")?.as_str()?.parse().ok()
}

/// The `lock="NS/NAME"` value of a klog line.
fn klog_lock(line: &str) -> Option<&str> {
    let rest = &line[line.find("lock=\"")? + 6..];
    Some(&rest[..rest.find('"')?])
}

impl Hooks for RecorderHooks {
    fn started(&self, process: &str, incarnation: u32, at: When) {
        let told = self.ms(at);
        let t = self.place(process, incarnation, Fact::Started, told);
        self.recorder.record_within(
            t,
            Self::within(at).map(|w| (told + w).saturating_sub(t)),
            EventKind::ProcessStarted {
                process: process.to_owned(),
                incarnation,
            },
        );
    }

    fn serving(&self, process: &str, incarnation: u32, at: When) {
        self.recorder.record_within(
            self.ms(at),
            None,
            EventKind::ApiServerServing {
                process: process.to_owned(),
                incarnation,
            },
        );
    }

    fn exited(&self, process: &str, incarnation: u32, reason: &str, at: When) {
        let told = self.ms(at);
        let t = self.place(process, incarnation, Fact::Exited, told);
        self.recorder.record_within(
            t,
            Self::within(at).map(|w| (told + w).saturating_sub(t)),
            EventKind::ProcessExited {
                process: process.to_owned(),
                reason: reason.to_owned(),
            },
        );
    }

    fn candidate(&self, agent: &str, pod: &str, process: &str) {
        if let Ok(mut owner) = self.patterns.owner.lock() {
            owner.insert(process.to_owned(), agent.to_owned());
        }
        self.recorder.record(EventKind::CandidatePod {
            agent: agent.to_owned(),
            pod: pod.to_owned(),
            process: process.to_owned(),
        });
    }

    fn note(&self, process: &str, message: &str) {
        self.recorder.record(EventKind::ProcessNote {
            process: process.to_owned(),
            message: message.to_owned(),
        });
    }

    fn line(&self, process: &str, incarnation: u32, line: &str, at: When) {
        let t = self.place(process, incarnation, Fact::Line, self.said_at(line, at));
        let identity = || format!("{process}_{incarnation}");
        if let Some(said) = self.patterns.event(process, incarnation, line) {
            if let Some(e) = said {
                self.leadership(process, incarnation, e, t);
            }
        } else if line.starts_with('{') {
            match read_report(line) {
                Report::Leadership(e) => self.leadership(process, incarnation, e, t),
                Report::Note(message) => self.recorder.record_from(
                    t,
                    EventKind::ProcessNote {
                        process: process.to_owned(),
                        message,
                    },
                ),
                Report::Rejected(error) => self.recorder.record_from(
                    t,
                    EventKind::ReportRejected {
                        process: process.to_owned(),
                        error,
                        line: line.chars().take(300).collect(),
                    },
                ),
                Report::NotAReport => {}
            }
        } else if line.contains("\"Successfully acquired lease\"") {
            if let Some(lock) = klog_lock(line) {
                self.leadership(
                    process,
                    incarnation,
                    EventKind::LeadingStarted {
                        lease: lock.to_owned(),
                        identity: identity(),
                    },
                    t,
                );
            }
        } else if line.contains("\"Failed to renew lease\"") {
            if let Some(lock) = klog_lock(line) {
                self.leadership(
                    process,
                    incarnation,
                    EventKind::LeadingStopped {
                        lease: lock.to_owned(),
                        identity: identity(),
                        reason:
                            "failed to renew the lease within the renew deadline (from its log)"
                                .into(),
                    },
                    t,
                );
            }
        }
    }
}

/// The local world: what the driver does to processes and links, done to real ones.
pub(crate) struct LocalWorld {
    cluster: LocalCluster,
    time: RealTime,
    rt: tokio::runtime::Handle,
    observer: tokio::task::JoinHandle<()>,
    recorder: Recorder,
    commands: mpsc::UnboundedSender<Command>,
    /// Processes that could not be started, and why.
    failed: BTreeMap<String, LocalError>,
    /// What the world could not find out that a step needed (which etcd member leads): the run
    /// stops (through `stop_run`) and ends with this failure, so that a step that could not aim
    /// is not taken for one that found nothing to act on.
    broken: Vec<String>,
    stop_run: Arc<std::sync::atomic::AtomicBool>,
    /// The proxy that holds the observer's reads ($KUBECHAOS_SELF_DELAY), if it is told to.
    _self_delay: Option<super::proxy::Proxy>,
}

impl LocalWorld {
    /// Set the condition of one direction. Traffic flows only between the API servers and their
    /// clients (through each client's proxy, which has a link to each API server) and between
    /// each API server and each etcd member (through a proxy for each pair); any other pair
    /// exchanges nothing, so there is nothing to act on.
    fn set_link(&self, from: &str, to: &str, state: &LinkState) {
        let c = &self.cluster;
        // A client is a process with its own proxy, or a program pod (its proxy is its pod's).
        let client = |name: &str, api: usize, up: bool| match c.proxy(name) {
            Some(p) => p.set_to(api, up, state),
            None => {
                c.containers.set_link(name, api, up, state);
            }
        };
        let etcd = |api: &str, member: &str, up: bool| {
            if let Some(p) = c.etcd_link(api, member) {
                p.set(up, state);
            }
        };
        match (c.api_server(from), c.api_server(to)) {
            (Some(_), Some(_)) => {}
            (Some(_), None) if c.etcd_member(to) => etcd(from, to, true),
            (None, Some(_)) if c.etcd_member(from) => etcd(to, from, false),
            (Some(api), None) => client(to, api, false),
            (None, Some(api)) => client(from, api, true),
            (None, None) => {}
        }
    }
}

impl World for LocalWorld {
    fn clock(&mut self) -> &mut dyn WorldClock {
        &mut self.time
    }

    /// The processes' output is read as it is printed; the Leases are read once more.
    fn drain(&mut self) -> Vec<String> {
        crate::observer::settle(&self.commands, Duration::from_secs(30))
            .into_iter()
            .collect()
    }

    fn stop(&mut self, name: &str, graceful: bool, _hold: crate::backend::driver::Hold) {
        let _runtime = self.rt.enter();
        self.cluster.stop(name, graceful);
    }

    fn start(&mut self, name: &str) {
        // Children are started from this thread (their parent-death signal follows it), with the
        // runtime entered so that their output pumps run on its workers.
        let _runtime = self.rt.enter();
        if let Err(e) = self.cluster.start(name) {
            self.failed.insert(name.to_owned(), e);
        }
    }

    fn exited(&mut self, name: &str) -> Option<Exit> {
        if let Some(e) = self.failed.remove(name) {
            return Some(Exit::Unrecorded(format!(
                "could not start: {}",
                kubechaos_core::error::chain(&e)
            )));
        }
        self.cluster.exited(name).map(Exit::Unrecorded)
    }

    fn link(&mut self, from: &str, to: &str, state: &LinkState) {
        self.set_link(from, to, state);
    }

    /// kubeadm's liveness probe of each API server (`/livez`), as its node's kubelet runs it.
    fn alive(&mut self, name: &str) -> Option<bool> {
        self.cluster.alive(name)
    }

    /// Asked of each member that runs: etcd's status (`/v3/maintenance/status`) names the raft
    /// leader by member ID. A member that answers without a leader is an election going on (no
    /// leader at the time); when no running member answers at all, nobody could be asked, and
    /// the run stops with that failure (it once read as "no leader at the time", and the step
    /// touched nothing while the scenario passed).
    fn etcd_leader(&mut self) -> Option<String> {
        let members = self.cluster.etcd_clients();
        if members.len() < 2 {
            return None;
        }
        let statuses: Vec<(String, EtcdStatus)> = members
            .into_iter()
            .filter(|(name, _)| self.cluster.runs(name))
            .map(|(name, port)| (name, etcd_status(port)))
            .collect();
        if !statuses.is_empty() && statuses.iter().all(|(_, s)| s.is_err()) {
            let why: Vec<String> = statuses
                .iter()
                .filter_map(|(name, s)| s.as_ref().err().map(|e| format!("{name}: {e}")))
                .collect();
            self.broken.push(format!(
                "reading which etcd member leads: no running member answered etcd's status API ({})",
                why.join("; ")
            ));
            self.stop_run
                .store(true, std::sync::atomic::Ordering::SeqCst);
            return None;
        }
        let known: Vec<(String, (String, String))> = statuses
            .into_iter()
            .filter_map(|(name, s)| Some((name, s.ok()??)))
            .collect();
        let leader = known.iter().map(|(_, (_, leader))| leader.clone()).next()?;
        known
            .into_iter()
            .find(|(_, (id, _))| *id == leader)
            .map(|(name, _)| name)
    }

    fn api_errors(&mut self, active: &[(usize, ApiErrors)]) {
        self.cluster.set_api_errors(active);
    }

    fn lease_identity(&mut self, lease: &LeaseRef) -> Option<String> {
        crate::backend::realtime::lease_identity(
            &self.rt,
            &self.cluster.admin,
            &self.recorder,
            lease,
        )
    }

    fn command(&mut self, c: Command) {
        let _ = self.commands.send(c);
    }

    fn containers(
        &mut self,
        group: &crate::fake_node::PodGroup,
        only: Option<&str>,
        op: crate::fake_node::ContainerOp,
    ) -> Vec<String> {
        let _runtime = self.rt.enter();
        self.cluster.containers.act(group, only, op)
    }

    fn pods(&mut self, group: &crate::fake_node::PodGroup) -> Vec<String> {
        self.cluster.containers.pods(group)
    }
}

/// The local control plane as a backend: one started for each run, and stopped after it.
pub struct Local {
    opts: LocalOptions,
    rt: Option<tokio::runtime::Runtime>,
    zero: realtime::Zero,
    dir: std::path::PathBuf,
}

impl Local {
    /// A local control plane with these options.
    pub fn new(opts: LocalOptions) -> Local {
        Local {
            opts,
            rt: None,
            zero: realtime::Zero::default(),
            dir: Default::default(),
        }
    }
}

impl Backend for Local {
    type World = LocalWorld;

    fn name(&self) -> &'static str {
        "local"
    }

    fn check(&self, s: &Scenario) -> Vec<(Pos, String)> {
        let mut problems = crate::backend::built_cluster_check(s, "local");
        problems.extend(crate::backend::missing_programs(s));
        problems.extend(crate::backend::pod_problems(s));
        problems.extend(read_errors(s));
        if s.cluster.manifests.is_empty() {
            for a in s.cluster.agents.iter().filter(|a| a.is_pods()) {
                problems.push((a.pos, format!(
                    "pod agent `{}`: on the local backend its pods come from `cluster.manifests`, and the file has none; expected `manifests: [FILE.yaml]` with a Deployment whose pods the selector matches and whose container has a `command` (or `--backend kube`, where the pods are the cluster's)",
                    a.name
                )));
            }
        }
        use kubechaos_core::scenario::Target;
        for step in &s.faults {
            if let Some(link) = step.action.link() {
                if matches!((&link.a, &link.b), (Target::Etcd(_), Target::Etcd(_))) {
                    problems.push((step.pos, format!("`{}` between etcd members: the local backend carries only the API server's traffic to each member through a proxy, not raft's between members; expected a fault between the API server and etcd (`partition: [api-server, etcd/1]`) or on members (`remove: etcd/1`)", step.action)));
                }
            }
        }
        problems
    }

    fn recorder(&mut self) -> Recorder {
        realtime::recorder(&mut self.zero)
    }

    fn via(&self) -> String {
        "the local processes and proxies".into()
    }

    fn describe(&self, action: &kubechaos_core::scenario::Action) -> (String, String) {
        crate::backend::Means {
            stop: "SIGTERM the process group of",
            kill: "SIGKILL the process group of",
            cut: "the proxy on the link holds every byte (connections stay open, nothing passes)",
            slow: "the proxy on the link",
            errors: "a validating admission webhook that kubechaos serves, called by the real API server for writes",
        }
        .describe(action)
    }

    /// Everything started is stopped if this fails, and after the run whatever happens (a panic
    /// included: dropping the cluster kills its process groups).
    fn start(
        &mut self,
        s: &Scenario,
        _: &Plan,
        recorder: &Recorder,
        progress: &mut dyn Progress,
    ) -> Result<Ready<LocalWorld>, BackendError> {
        let rt = self.rt.insert(realtime::runtime()?);
        // Children are started from this thread, with the runtime entered (see `LocalWorld`).
        let _runtime = rt.enter();
        let interrupt = Interrupt::listen(rt);
        let mut stop_rx = interrupt.rx.clone();

        let spec = Spec::of(s);
        let hooks = Arc::new(
            RecorderHooks::new(recorder.clone(), LogPatterns::of(s)).with_zero(self.zero.clone()),
        );
        let mut say = |l: &str| progress.say(l);
        let keep = self.opts.keep;
        let cluster = rt.block_on(async {
            tokio::select! {
                biased;
                _ = stop_rx.changed() => Err(LocalError::Interrupted),
                c = LocalCluster::up(&spec, keep, hooks, &mut say) => c,
            }
        });
        let cluster = match cluster {
            Ok(c) => c,
            Err(e) => {
                interrupt.stop();
                // A manifest's object the API server refused for what it is: the file is wrong.
                if let Some(problem) = match &e {
                    LocalError::Manifests(m) => m.refusal(),
                    _ => None,
                } {
                    return Err(BackendError::Unsupported {
                        backend: "local",
                        problems: vec![problem],
                    });
                }
                let e = EnvironmentError::Local(e);
                return Err(if interrupt.came() {
                    BackendError::Interrupted {
                        message: kubechaos_core::error::chain(&e),
                        events: Vec::new(),
                    }
                } else {
                    e.into()
                });
            }
        };
        self.dir = cluster.dir.clone();
        let processes = cluster.processes();
        let (zero, epoch) = self.zero.set_now();

        let (tx, rx) = mpsc::unbounded_channel();
        let mut observer = Observer::of(s, recorder.clone(), epoch);
        // The observer reads through a proxy that holds every byte, when kubechaos is told to
        // read late ($KUBECHAOS_SELF_DELAY).
        let (evidence, self_delay) = match crate::kubeclient::self_delay().ok().flatten() {
            Some(d) => {
                let delayed = rt.block_on(async {
                    let config =
                        crate::kubeclient::config(Some(&cluster.admin_kubeconfig), None, None)
                            .await?;
                    crate::kubeclient::delayed(config, d).await
                });
                match delayed {
                    Ok((c, p)) => {
                        progress.say(&format!(
                            "kubechaos reads the cluster through a proxy that holds every byte {} each way (${})",
                            kubechaos_core::scenario::duration::human(d),
                            crate::kubeclient::SELF_DELAY_ENV
                        ));
                        (c, Some(p))
                    }
                    Err(e) => {
                        let _ = rt.block_on(cluster.down());
                        return Err(EnvironmentError::Local(LocalError::Machine {
                            what: "cannot read the cluster through a delaying proxy".to_owned(),
                            source: Some(std::io::Error::other(kubechaos_core::error::chain(&e))),
                        })
                        .into());
                    }
                }
            }
            None => (cluster.admin.clone(), None),
        };
        if self_delay.is_some() {
            observer.reader = Some(evidence);
        }
        let observer = rt.spawn(observer.run(cluster.admin.clone(), rx));
        let time = RealTime::new(zero, interrupt);
        let stop_run = time.flag();
        let world = LocalWorld {
            cluster,
            time,
            rt: rt.handle().clone(),
            observer,
            recorder: recorder.clone(),
            commands: tx,
            failed: BTreeMap::new(),
            broken: Vec::new(),
            stop_run,
            _self_delay: self_delay,
        };
        Ok(Ready { world, processes })
    }

    fn finish(
        &mut self,
        world: LocalWorld,
        _: Duration,
        progress: &mut dyn Progress,
    ) -> Result<String, BackendError> {
        let LocalWorld {
            cluster,
            time,
            observer,
            broken,
            ..
        } = world;
        observer.abort();
        time.stop();
        let rt = self.rt.take().expect("started");
        let kept = {
            let _runtime = rt.enter();
            rt.block_on(cluster.down())
        };
        rt.shutdown_timeout(Duration::from_secs(2));
        match kept {
            Some(d) => progress.say(&format!("kept the run directory {}", d.display())),
            None => progress.say(&format!(
                "stopped every process; removed {}",
                self.dir.display()
            )),
        }
        if !broken.is_empty() {
            return Err(EnvironmentError::Local(LocalError::Machine {
                what: format!("{} (every process was stopped)", broken.join("; ")),
                source: None,
            })
            .into());
        }
        Ok(format!(
            "every process was stopped{}",
            if self.opts.keep {
                ""
            } else {
                " and the run directory removed"
            }
        ))
    }
}

/// How long a member may take to answer its status (a loaded machine running several control
/// planes once took more than a second from all three members at once).
const ETCD_STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// What a member says of raft: its ID and its leader's, none (an election), or why it did not
/// answer.
type EtcdStatus = Result<Option<(String, String)>, String>;

/// A member's ID and its raft leader's, from etcd's JSON gateway on its client `port`
/// (`POST /v3/maintenance/status`): `Ok(None)` when it answers but knows no leader (an
/// election), `Err` when it does not answer.
fn etcd_status(port: u16) -> EtcdStatus {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut conn = std::net::TcpStream::connect_timeout(&addr, ETCD_STATUS_TIMEOUT)
        .map_err(|e| format!("cannot connect to 127.0.0.1:{port}: {e}"))?;
    conn.set_read_timeout(Some(ETCD_STATUS_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "POST /v3/maintenance/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    conn.write_all(request.as_bytes())
        .map_err(|e| format!("cannot ask 127.0.0.1:{port}: {e}"))?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer).map_err(|e| {
        format!(
            "no answer from 127.0.0.1:{port} within {}s: {e}",
            ETCD_STATUS_TIMEOUT.as_secs()
        )
    })?;
    let unreadable = || {
        format!(
            "an answer that is not etcd's status: {}",
            answer.chars().take(200).collect::<String>()
        )
    };
    let body = answer.split_once("\r\n\r\n").ok_or_else(unreadable)?.1;
    // A chunked answer carries its JSON between size lines; the object is what is between the
    // first `{` and the last `}`.
    let (Some(from), Some(to)) = (body.find('{'), body.rfind('}')) else {
        return Err(unreadable());
    };
    let v: serde_json::Value = serde_json::from_str(&body[from..=to]).map_err(|_| unreadable())?;
    let id = v
        .pointer("/header/member_id")
        .and_then(|i| i.as_str())
        .ok_or_else(unreadable)?
        .to_owned();
    Ok(v.get("leader")
        .and_then(|l| l.as_str())
        .filter(|l| *l != "0")
        .map(|leader| (id, leader.to_owned())))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A member that does not answer is an error (the run stops: nobody could be asked), not
    /// "no leader"; one that answers without a leader is an election going on.
    #[test]
    fn an_etcd_member_that_does_not_answer_is_not_one_without_a_leader() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        assert!(etcd_status(port).unwrap_err().contains("cannot connect"));
        let answering = |body: &'static str| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let (mut c, _) = l.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = c.read(&mut buf);
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{body}"
                );
            });
            port
        };
        let electing = answering(r#"{"header":{"member_id":"11"},"leader":"0"}"#);
        assert_eq!(etcd_status(electing), Ok(None));
        let led = answering(r#"{"header":{"member_id":"11"},"leader":"22"}"#);
        assert_eq!(etcd_status(led), Ok(Some(("11".into(), "22".into()))));
        let garbage = answering("nothing of the kind");
        assert!(etcd_status(garbage)
            .unwrap_err()
            .contains("not etcd's status"));
    }

    /// A client-go program that prints JSON reports too says each term twice: client-go's klog
    /// line, then its own report. That is one term of one start, not two leaders (it once failed
    /// `single-leader` on a correct Deployment); its stop, in either words, ends it, and the next
    /// start of the process leads anew.
    #[test]
    fn a_start_that_says_it_leads_twice_leads_once() {
        let yaml = "name: t\ncluster:\n  nodes: 1\n  agents:\n    - {name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}\n";
        let s = kubechaos_core::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let recorder = Recorder::new(|| 0);
        let hooks = RecorderHooks::new(recorder.clone(), LogPatterns::of(&s));
        hooks.candidate("op", "ops/op-1", "op-1");
        let klog = r#"I1130 leaderelection.go:272] "Successfully acquired lease" lock="ops/op""#;
        let json = r#"{"event":"leading-started","lease":"ops/op","identity":"op-1_5e2a"}"#;
        let stop = r#"{"event":"leading-stopped","lease":"ops/op","identity":"op-1_5e2a","reason":"lost"}"#;
        for line in [klog, json, stop, klog, json] {
            hooks.line("op-1", 1, line, When::Now);
        }
        hooks.line("op-1", 2, json, When::Now);
        hooks.line("op-1", 2, klog, When::Now);
        let terms: Vec<(bool, String)> = recorder
            .snapshot()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::LeadingStarted { identity, .. } => Some((true, identity)),
                EventKind::LeadingStopped { identity, .. } => Some((false, identity)),
                _ => None,
            })
            .collect();
        assert_eq!(
            terms,
            [
                (true, "op-1_1".to_owned()),
                (false, "op-1_1".to_owned()),
                (true, "op-1_1".to_owned()),
                (true, "op-1_5e2a".to_owned()),
            ]
        );
    }

    /// The hooks of a run whose recorder reads `now_ms`, with a pod agent `op` and time zero at
    /// a fixed wall-clock time; and that time plus some milliseconds.
    fn pod_agent_hooks(
        now_ms: u64,
    ) -> (
        Recorder,
        RecorderHooks,
        impl Fn(i64) -> k8s_openapi::jiff::Timestamp,
    ) {
        let yaml = "name: t\ncluster:\n  nodes: 1\n  agents:\n    - {name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}\n";
        let s = kubechaos_core::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let recorder = Recorder::new(move || now_ms);
        let wall0: k8s_openapi::jiff::Timestamp = "2026-12-04T10:00:00Z".parse().unwrap();
        let hooks = RecorderHooks::new(recorder.clone(), LogPatterns::of(&s))
            .with_zero(realtime::Zero::at(wall0));
        let at = move |ms: i64| wall0 + k8s_openapi::jiff::SignedDuration::from_millis(ms);
        (recorder, hooks, at)
    }

    /// A restart's exit and start, told in either order and at the same whole second (a pod's
    /// status gives its container's times to the second; once the exit was told after the
    /// start and placed after it, and a correct agent's `leader-reacquired` failed), are placed
    /// exit first; a line the first run wrote, read after both (through an API server that was
    /// away), lands before its run's exit, where it was written.
    #[test]
    fn a_restarts_exit_comes_before_its_start_whatever_the_grain_and_the_order_told() {
        let (recorder, hooks, t) = pod_agent_hooks(60_000);
        let at = |ms: i64| When::At(t(ms));
        hooks.candidate("op", "ops/op-1", "op-1");
        hooks.started("op-1", 1, at(1_000));
        // The restart, told first, then the exit before it: both at 39 s.
        hooks.started("op-1", 2, at(39_000));
        hooks.exited("op-1", 1, "its container restarted", at(39_000));
        // Its first run's last line, written at 39.5 s by the runtime's clock.
        let stop =
            r#"{"event":"leading-stopped","lease":"ops/op","identity":"op-1_x","reason":"lost"}"#;
        hooks.line("op-1", 1, stop, at(39_500));
        let order: Vec<(u64, String)> = recorder
            .snapshot()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ProcessStarted { incarnation, .. } => {
                    Some((e.t_ms, format!("start #{incarnation}")))
                }
                EventKind::ProcessExited { .. } => Some((e.t_ms, "exit".into())),
                EventKind::LeadingStopped { .. } => Some((e.t_ms, "stopped leading".into())),
                _ => None,
            })
            .collect();
        assert_eq!(
            order,
            [
                (1_000, "start #1".to_owned()),
                (38_998, "stopped leading".to_owned()),
                (38_999, "exit".to_owned()),
                (39_000, "start #2".to_owned()),
            ]
        );
    }

    /// A start or exit told by a pod's status (to the whole second) is recorded with the rest
    /// of its second as its interval, counted from where it was placed; one told exactly has
    /// none.
    #[test]
    fn a_time_told_to_the_second_is_recorded_as_an_interval() {
        let (recorder, hooks, t) = pod_agent_hooks(60_000);
        hooks.started("op-1", 1, When::Second(t(1_000)));
        hooks.exited(
            "op-1",
            1,
            "its container restarted",
            When::Second(t(39_000)),
        );
        hooks.started("op-1", 2, When::At(t(39_400)));
        let got: Vec<(u64, Option<u64>)> = recorder
            .snapshot()
            .iter()
            .map(|e| (e.t_ms, e.within_ms))
            .collect();
        assert_eq!(
            got,
            [(1_000, Some(999)), (39_000, Some(999)), (39_400, None)]
        );
    }

    /// A report that carries its program's own `time` is placed there, not where its runtime
    /// stamped it (a starved node reads a pipe seconds late); a time after the stamp, or more
    /// than a minute before it (a clock or a zone set wrong), is not believed.
    #[test]
    fn a_report_is_placed_at_its_programs_own_time_within_reason() {
        let (recorder, hooks, at) = pod_agent_hooks(120_000);
        hooks.candidate("op", "ops/op-1", "op-1");
        hooks.started("op-1", 1, When::At(at(1_000)));
        let report = |own: i64| {
            format!(
                r#"{{"event":"leading-stopped","lease":"ops/op","identity":"op-1_x","reason":"lost","time":"{}"}}"#,
                at(own)
            )
        };
        // Said at 24.3 s, stamped by the runtime at 30.9 s.
        hooks.line("op-1", 1, &report(24_300), When::At(at(30_900)));
        // Said "later" than its stamp, and two minutes before it: the stamp is kept.
        hooks.line("op-1", 1, &report(50_000), When::At(at(40_000)));
        hooks.line("op-1", 1, &report(-80_000), When::At(at(45_000)));
        // Read from a pipe as it was printed (the local backend's own nodes).
        hooks.line("op-1", 1, &report(100_000), When::Now);
        let stops: Vec<u64> = recorder
            .snapshot()
            .into_iter()
            .filter(|e| matches!(e.kind, EventKind::LeadingStopped { .. }))
            .map(|e| e.t_ms)
            .collect();
        assert_eq!(stops, [24_300, 40_000, 45_000, 100_000]);
    }

    /// An agent's `leading:` patterns turn its processes' lines into leadership events (pods once
    /// they are its candidates), and are then its only evidence: its JSON reports are not read;
    /// another agent's JSON reports still are.
    #[test]
    fn leading_patterns_are_an_agents_one_evidence_of_leading() {
        let yaml = "name: t\ncluster:\n  nodes: 1\n  agents:\n    - {name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}, leading: {started: 'Successfully acquired lease', stopped: 'Failed to renew'}}\n    - {name: cmd, replicas: 2, lease: default/cmd, command: [sh]}\n";
        let s = kubechaos_core::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let recorder = Recorder::new(|| 0);
        let hooks = RecorderHooks::new(recorder.clone(), LogPatterns::of(&s));
        let acquired =
            r#"I1130 leaderelection.go:272] "Successfully acquired lease" lock="ops/op""#;
        // Not yet a candidate: a line of an unknown process is only read as upstream's klog.
        hooks.line("op-5d9c-x2x7q", 1, "Successfully acquired lease", When::Now);
        hooks.candidate("op", "ops/op-5d9c-x2x7q", "op-5d9c-x2x7q");
        hooks.line("op-5d9c-x2x7q", 1, acquired, When::Now);
        hooks.line(
            "op-5d9c-x2x7q",
            1,
            r#"{"event":"leading-started","lease":"ops/op","identity":"op-5d9c-x2x7q_9"}"#,
            When::Now,
        );
        hooks.line(
            "op-5d9c-x2x7q",
            2,
            "E1130 Failed to renew lease ops/op",
            When::Now,
        );
        hooks.line(
            "cmd-1",
            1,
            r#"{"event":"leading-started","lease":"default/cmd","identity":"cmd-1_1"}"#,
            When::Now,
        );
        let kinds: Vec<EventKind> = recorder.snapshot().into_iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                EventKind::CandidatePod {
                    agent: "op".into(),
                    pod: "ops/op-5d9c-x2x7q".into(),
                    process: "op-5d9c-x2x7q".into(),
                },
                EventKind::LeadingStarted {
                    lease: "ops/op".into(),
                    identity: "op-5d9c-x2x7q_1".into(),
                },
                EventKind::LeadingStopped {
                    lease: "ops/op".into(),
                    identity: "op-5d9c-x2x7q_2".into(),
                    reason: "its log said so: E1130 Failed to renew lease ops/op".into(),
                },
                EventKind::LeadingStarted {
                    lease: "default/cmd".into(),
                    identity: "cmd-1_1".into(),
                },
            ]
        );
    }
}
