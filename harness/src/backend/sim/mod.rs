//! The simulated cluster: a turmoil simulation in which every component talks HTTP to a
//! simulated API server through a real kube-rs `Client`.
//!
//! Hosts: `api-server`, `etcd` (its availability gates the API server), one per component
//! replica (`kube-scheduler-0`, …), one per agent replica, one per fake node (`node-0`, …), and
//! `kubechaos` (the observer). The driver steps the simulation, applies the plan at its virtual
//! times, and supervises processes like the kubelet does for static pods: a process that exits
//! or is killed is restarted after a back-off of 10s, doubling to 5 minutes, reset after 10
//! minutes of running (`pkg/kubelet` `backOffPeriod`/`MaxContainerBackOff`).
//!
//! A run is a pure function of (scenario, seed, version): every source of randomness is seeded
//! (turmoil's network, the electors' jitter), maps iterate in order, and time is virtual.

pub mod apiserver;
pub mod controller_manager;
pub mod net;
pub mod node;
pub mod process;
pub mod scheduler;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc;

use self::apiserver::ApiServer;
use self::net::SimTransport;
use self::process::{Proc, RecorderReporter};
use self::store::{Store, RESOURCES};
use super::BackendError;
use crate::clock::{Clock, SimClock};
use crate::events::{identity_process, Event, EventKind, Recorder};
use crate::observer::{Command, Observer};
use crate::plan::{Plan, PlannedKind};
use crate::scenario::validate::process_name;
use crate::scenario::{Action, AgentMode, Invariant, Pos, ProcessOp, Scenario, Selector, Target};

/// Default virtual milliseconds per simulation step (see [`SimOptions::tick`]).
pub const DEFAULT_TICK_MS: u64 = 20;

/// Options of a simulated run.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Seeds every random choice. Same seed, same run.
    pub seed: u64,
    /// Virtual time per simulation step. Default 20ms: network messages and timers resolve at
    /// this granularity.
    pub tick: Duration,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            seed: 1,
            tick: Duration::from_millis(DEFAULT_TICK_MS),
        }
    }
}

/// The simulated wall-clock time at the start of every run.
pub fn epoch() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("valid epoch")
}

/// What the sim cannot do (yet), with where the scenario asks for it.
pub fn check(s: &Scenario) -> Vec<(Pos, String)> {
    let mut problems = Vec::new();
    if s.cluster.self_hosted {
        problems.push((s.source.name_pos, "`cluster.self-hosted: true` is not yet supported by the sim (it comes with the disaster-recovery work); expected `self-hosted: false`".to_owned()));
    }
    for a in &s.cluster.agents {
        if a.command.is_some() {
            problems.push((a.pos, format!("agent `{}` runs a `command`; the sim can only run the reference agent (`mode:`); run your own program with `--backend local`", a.name)));
        }
    }
    for step in &s.faults {
        match &step.action {
            Action::Recover(_) | Action::Bind(_) => problems.push((
                step.pos,
                format!(
                "`{}` is not yet supported by the sim (it comes with the disaster-recovery work)",
                step.action.key()
            ),
            )),
            _ => {}
        }
        for (i, t) in step.action.targets().into_iter().enumerate() {
            if let Target::Node(name) = t {
                let known = (0..s.cluster.nodes).any(|n| process_name("node", n) == *name);
                if !known {
                    let pos = step.target_pos.get(i).copied().unwrap_or(step.pos);
                    problems.push((pos, format!(
                        "target `node/{name}`: the simulated cluster's nodes are {}; expected one of those",
                        match s.cluster.nodes {
                            0 => "none (cluster.nodes is 0)".to_owned(),
                            1 => "only node-0".to_owned(),
                            n => format!("node-0 … node-{}", n - 1),
                        }
                    )));
                }
            }
        }
    }
    for inv in &s.expect {
        if let Invariant::Available(a) = &inv.value {
            problems.push((inv.pos, format!(
                "`available: {{deployment: {}}}`: the simulated cluster has no Deployments without `self-hosted: true`, which the sim does not support yet",
                a.deployment
            )));
        }
    }
    problems
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    /// Down; restarted by the supervisor at the given time, or held down (None) until `start`.
    Down(Option<Duration>),
}

struct Supervised {
    state: State,
    restarts: u32,
    started_at: Duration,
}

/// kubelet's container restart back-off.
fn backoff(restarts: u32) -> Duration {
    Duration::from_secs(10u64.saturating_mul(1u64 << restarts.min(5)).min(300))
}

/// Reset the back-off after this long running.
const BACKOFF_RESET: Duration = Duration::from_secs(600);

struct Driver<'a> {
    sim: turmoil::Sim<'a>,
    recorder: Recorder,
    now_ms: Arc<AtomicU64>,
    procs: BTreeMap<String, Supervised>,
    /// Active partitions: (step, from, to, oneway).
    partitions: Vec<(usize, String, String, bool)>,
    /// What each fault step resolved to (so `for:` undoes exactly that).
    resolved: BTreeMap<usize, Vec<String>>,
    store: Arc<Mutex<Store>>,
    etcd_ok: Arc<AtomicBool>,
    commands: mpsc::UnboundedSender<Command>,
    /// Effects of the step being applied, recorded after the step itself.
    effects: Vec<EventKind>,
}

/// Play a validated scenario's plan on a fresh simulated cluster. Returns the recorded timeline.
pub fn run(s: &Scenario, plan: &Plan, opts: &SimOptions) -> Result<Vec<Event>, BackendError> {
    let now_ms = Arc::new(AtomicU64::new(0));
    let driver_now = now_ms.clone();
    let recorder = Recorder::new(move || {
        turmoil::sim_elapsed()
            .map(|d| d.as_millis() as u64)
            .unwrap_or_else(|| driver_now.load(Ordering::SeqCst))
    });
    recorder.record_at(
        0,
        EventKind::RunStarted {
            scenario: s.name.clone(),
            backend: "sim".into(),
            seed: opts.seed,
            version: env!("CARGO_PKG_VERSION").into(),
            duration_ms: plan.duration.as_millis() as u64,
        },
    );

    let mut sim = turmoil::Builder::new()
        .simulation_duration(plan.duration + Duration::from_secs(3600))
        .tick_duration(opts.tick)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(10))
        .rng_seed(opts.seed)
        .build();

    let clock: Arc<dyn Clock> = Arc::new(SimClock { epoch: epoch() });
    let store = Arc::new(Mutex::new(Store::default()));
    let etcd_ok = Arc::new(AtomicBool::new(true));
    let proc_of = |name: &str| Proc::new(name, recorder.clone(), clock.clone(), opts.seed);
    let mut names = Vec::new();

    // etcd: a process whose only effect is whether the API server can reach it.
    let etcd = proc_of("etcd");
    sim.host("etcd", move || {
        let p = etcd.clone();
        async move {
            p.start();
            std::future::pending::<()>().await;
            Ok(())
        }
    });
    names.push("etcd".to_owned());

    let api = Arc::new(ApiServer {
        store: store.clone(),
        etcd_ok: etcd_ok.clone(),
        clock: clock.clone(),
    });
    let api_proc = proc_of("api-server");
    sim.host(net::API_HOST, move || {
        let p = api_proc.clone();
        let api = api.clone();
        async move {
            p.start();
            api.serve().await
        }
    });
    names.push(net::API_HOST.to_owned());

    for i in 0..s.cluster.nodes {
        let p = proc_of(&process_name("node", i));
        names.push(p.name.clone());
        sim.host(p.name.clone(), move || {
            let p = p.clone();
            async move {
                node::run(p).await;
                Ok(())
            }
        });
    }
    for (component, spec) in &s.cluster.components {
        for i in 0..spec.replicas {
            let p = proc_of(&process_name(component.name(), i));
            names.push(p.name.clone());
            let component = *component;
            sim.host(p.name.clone(), move || {
                let p = p.clone();
                async move {
                    match component {
                        crate::scenario::Component::KubeScheduler => scheduler::run(p).await,
                        crate::scenario::Component::KubeControllerManager => {
                            controller_manager::run(p).await
                        }
                    }
                    Ok(())
                }
            });
        }
    }
    for group in &s.cluster.agents {
        for i in 0..group.replicas {
            let p = proc_of(&process_name(&group.name, i));
            names.push(p.name.clone());
            let lease = group.lease.clone();
            let mode = group.mode.unwrap_or(AgentMode::Correct);
            sim.host(p.name.clone(), move || {
                let p = p.clone();
                let lease = lease.clone();
                async move {
                    let inc = p.start();
                    let note_proc = p.clone();
                    crate::agent::run(crate::agent::AgentParams {
                        client: p.client(),
                        namespace: lease.namespace.clone(),
                        name: lease.name.clone(),
                        identity: p.identity(inc),
                        mode,
                        clock: p.clock.clone(),
                        rng: p.rng(inc),
                        reporter: Arc::new(RecorderReporter(p.recorder.clone())),
                        note: Box::new(move |m| note_proc.note(m)),
                    })
                    .await;
                    Ok(())
                }
            });
        }
    }

    let (tx, rx) = mpsc::unbounded_channel();
    let rx = std::cell::RefCell::new(Some(rx));
    let observer_recorder = recorder.clone();
    let watch_deployments = s
        .expect
        .iter()
        .any(|i| matches!(i.value, Invariant::Available(_)));
    sim.host("kubechaos", move || {
        let rx = rx
            .borrow_mut()
            .take()
            .expect("the observer host is never restarted");
        let obs = Observer {
            recorder: observer_recorder.clone(),
            epoch: epoch(),
            watch_deployments,
        };
        async move {
            obs.run(SimTransport::client(process::REQUEST_TIMEOUT), rx)
                .await;
            Ok(())
        }
    });

    let procs = names
        .into_iter()
        .map(|n| {
            (
                n,
                Supervised {
                    state: State::Running,
                    restarts: 0,
                    started_at: Duration::ZERO,
                },
            )
        })
        .collect();
    let mut driver = Driver {
        sim,
        recorder: recorder.clone(),
        now_ms,
        procs,
        partitions: Vec::new(),
        resolved: BTreeMap::new(),
        store,
        etcd_ok,
        commands: tx,
        effects: Vec::new(),
    };

    let mut next = 0;
    loop {
        let now = driver.sim.elapsed();
        driver
            .now_ms
            .store(now.as_millis() as u64, Ordering::SeqCst);
        while next < plan.actions.len() && plan.actions[next].at <= now {
            driver.apply(s, &plan.actions[next].kind, now);
            next += 1;
        }
        driver.supervise(now);
        if now >= plan.duration {
            break;
        }
        driver
            .sim
            .step()
            .map_err(|e| BackendError::Environment(format!("the simulation failed: {e}")))?;
    }
    let end = plan.duration.as_millis() as u64;
    driver.recorder.record_at(end, EventKind::RunEnded {});
    Ok(driver.recorder.snapshot())
}

impl Driver<'_> {
    fn supervise(&mut self, now: Duration) {
        let names: Vec<String> = self.procs.keys().cloned().collect();
        for name in names {
            let running = self.sim.is_host_running(name.as_str());
            let p = self.procs.get_mut(&name).expect("known process");
            match p.state {
                State::Running if !running => {
                    // Exited on its own (it recorded why).
                    if now.saturating_sub(p.started_at) >= BACKOFF_RESET {
                        p.restarts = 0;
                    }
                    p.state = State::Down(Some(now + backoff(p.restarts)));
                    p.restarts += 1;
                }
                State::Down(Some(at)) if now >= at => {
                    self.sim.bounce(name.as_str());
                    p.state = State::Running;
                    p.started_at = now;
                }
                _ => {}
            }
        }
        self.update_etcd();
    }

    fn update_etcd(&self) {
        let etcd_up = self
            .procs
            .get("etcd")
            .is_some_and(|p| p.state == State::Running);
        let cut = self.partitions.iter().any(|(_, a, b, _)| {
            (a == "etcd" && b == net::API_HOST) || (a == net::API_HOST && b == "etcd")
        });
        self.etcd_ok.store(etcd_up && !cut, Ordering::SeqCst);
    }

    /// Stop a process. `hold`: nothing restarts it until `start`; otherwise the supervisor does.
    fn stop(&mut self, name: &str, reason: &str, hold: bool, now: Duration) -> bool {
        let p = self.procs.get_mut(name).expect("known process");
        if p.state != State::Running {
            if hold {
                p.state = State::Down(None);
            }
            return false;
        }
        self.sim.crash(name);
        self.effects.push(EventKind::ProcessExited {
            process: name.to_owned(),
            reason: reason.to_owned(),
        });
        if hold {
            p.state = State::Down(None);
        } else {
            if now.saturating_sub(p.started_at) >= BACKOFF_RESET {
                p.restarts = 0;
            }
            p.state = State::Down(Some(now + backoff(p.restarts)));
            p.restarts += 1;
        }
        true
    }

    fn start(&mut self, name: &str, now: Duration) -> bool {
        let p = self.procs.get_mut(name).expect("known process");
        if p.state == State::Running {
            return false;
        }
        self.sim.bounce(name);
        p.state = State::Running;
        p.started_at = now;
        true
    }

    /// Process names a target stands for, now.
    fn resolve(&self, s: &Scenario, t: &Target) -> Vec<String> {
        let group = |name: &str,
                     replicas: u32,
                     sel: &Selector,
                     lease: &crate::scenario::LeaseRef|
         -> Vec<String> {
            match sel {
                Selector::All => (0..replicas).map(|i| process_name(name, i)).collect(),
                Selector::Index(i) => vec![process_name(name, *i)],
                Selector::Leader => {
                    let store = self.store.lock().expect("store lock");
                    let holder = store
                        .get(&RESOURCES[2], &lease.namespace, &lease.name)
                        .and_then(|l| l.pointer("/spec/holderIdentity"))
                        .and_then(|h| h.as_str())
                        .map(|h| identity_process(h).to_owned());
                    holder
                        .filter(|h| (0..replicas).any(|i| process_name(name, i) == *h))
                        .into_iter()
                        .collect()
                }
            }
        };
        match t {
            Target::ApiServer => vec![net::API_HOST.to_owned()],
            Target::Etcd => vec!["etcd".to_owned()],
            Target::Node(n) => vec![n.clone()],
            Target::Component(c, sel) => {
                let replicas = s.cluster.components.get(c).map(|c| c.replicas).unwrap_or(0);
                group(c.name(), replicas, sel, &c.lease())
            }
            Target::Agent(name, sel) => match s.cluster.agents.iter().find(|a| &a.name == name) {
                Some(a) => group(&a.name, a.replicas, sel, &a.lease),
                None => Vec::new(),
            },
        }
    }

    fn apply(&mut self, s: &Scenario, kind: &PlannedKind, now: Duration) {
        match kind {
            PlannedKind::Probe { invariant } => {
                let _ = self.commands.send(Command::Probe {
                    invariant: *invariant,
                });
            }
            PlannedKind::Fault { step } => {
                let f = &s.faults[*step];
                let detail = self.fault(s, *step, &f.action, now);
                self.recorder.record(EventKind::FaultApplied {
                    step: *step,
                    id: f.id.clone(),
                    action: f.action.to_string(),
                    undo: false,
                    detail,
                });
            }
            PlannedKind::Undo { step } => {
                let f = &s.faults[*step];
                let detail = self.undo(*step, &f.action, now);
                let undo = crate::plan::undo_of(&f.action)
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                self.recorder.record(EventKind::FaultApplied {
                    step: *step,
                    id: f.id.clone(),
                    action: format!("{undo} (undoing `{}` after its `for`)", f.action),
                    undo: true,
                    detail,
                });
            }
        }
        for effect in std::mem::take(&mut self.effects) {
            self.recorder.record(effect);
        }
        self.update_etcd();
    }

    fn fault(&mut self, s: &Scenario, step: usize, action: &Action, now: Duration) -> String {
        let mut touched = Vec::new();
        let describe = |touched: &[String], none: &str| {
            if touched.is_empty() {
                none.to_owned()
            } else {
                touched.join(", ")
            }
        };
        match action {
            Action::ApiServer(op) | Action::Etcd(op) => {
                let name = if matches!(action, Action::ApiServer(_)) {
                    net::API_HOST
                } else {
                    "etcd"
                };
                let done = match op {
                    ProcessOp::Stop => self.stop(name, "stopped", true, now),
                    ProcessOp::Crash => self.stop(name, "crashed", true, now),
                    ProcessOp::Start => self.start(name, now),
                    ProcessOp::Restart => {
                        self.stop(name, "stopped (restart)", true, now);
                        self.start(name, now)
                    }
                };
                if done {
                    touched.push(name.to_owned());
                }
                self.resolved.insert(step, vec![name.to_owned()]);
                describe(&touched, &format!("{name} was already in that state"))
            }
            Action::Kill(t) | Action::Remove(t) => {
                let hold = matches!(action, Action::Remove(_));
                let names = self.resolve(s, t);
                for n in &names {
                    if self.stop(n, if hold { "removed" } else { "killed" }, hold, now) {
                        touched.push(n.clone());
                    }
                }
                self.resolved.insert(step, names.clone());
                if names.is_empty() {
                    format!("no process matched `{t}` (no leader at the time)")
                } else {
                    describe(&touched, "already down")
                }
            }
            Action::Start(t) => {
                let names = self.resolve(s, t);
                for n in &names {
                    if self.start(n, now) {
                        touched.push(n.clone());
                    }
                }
                describe(&touched, "already running")
            }
            Action::Partition(p) => {
                let a = self.resolve(s, &p.a);
                let b = self.resolve(s, &p.b);
                for x in &a {
                    for y in &b {
                        if x == y {
                            continue;
                        }
                        if p.oneway {
                            self.sim.partition_oneway(x.as_str(), y.as_str());
                            touched.push(format!("{x} -> {y}"));
                        } else {
                            self.sim.partition(x.as_str(), y.as_str());
                            touched.push(format!("{x} <-> {y}"));
                        }
                        self.partitions.push((step, x.clone(), y.clone(), p.oneway));
                    }
                }
                describe(&touched, "no links matched (no leader at the time)")
            }
            Action::Heal(_) => {
                let all: BTreeSet<usize> = self.partitions.iter().map(|p| p.0).collect();
                for st in all {
                    touched.extend(self.heal_step(st));
                }
                describe(&touched, "no partitions were in place")
            }
            Action::DeletePods(d) => {
                let _ = self.commands.send(Command::DeletePods {
                    namespace: d.namespace.clone(),
                    selector: d.selector.clone(),
                });
                format!("pods in {} matching `{}`", d.namespace, d.selector)
            }
            Action::Recover(_) | Action::Bind(_) => unreachable!("rejected by sim::check"),
        }
    }

    fn heal_step(&mut self, step: usize) -> Vec<String> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.partitions)
            .into_iter()
            .partition(|p| p.0 == step);
        self.partitions = rest;
        let mut healed = Vec::new();
        for (_, a, b, oneway) in mine {
            let still_cut = self
                .partitions
                .iter()
                .any(|(_, x, y, _)| (x == &a && y == &b) || (!oneway && x == &b && y == &a));
            if still_cut {
                continue;
            }
            if oneway {
                self.sim.repair_oneway(a.as_str(), b.as_str());
                healed.push(format!("{a} -> {b}"));
            } else {
                self.sim.repair(a.as_str(), b.as_str());
                healed.push(format!("{a} <-> {b}"));
            }
        }
        healed
    }

    fn undo(&mut self, step: usize, action: &Action, now: Duration) -> String {
        let touched: Vec<String> = match action {
            Action::Partition(_) => self.heal_step(step),
            Action::ApiServer(_) | Action::Etcd(_) | Action::Remove(_) => {
                let names = self.resolved.get(&step).cloned().unwrap_or_default();
                names.into_iter().filter(|n| self.start(n, now)).collect()
            }
            _ => Vec::new(),
        };
        if touched.is_empty() {
            "nothing left to undo".into()
        } else {
            touched.join(", ")
        }
    }
}
