//! The fault vocabulary, carried out the same way on every backend: what `kill`, `remove`,
//! `start`, `partition`, `heal`, `api-server: stop` and `for:` mean, how targets like
//! `kube-scheduler/leader` resolve, and the kubelet-like supervisor that restarts processes
//! with back-off. A backend supplies only the [`World`]: the primitive operations on its
//! processes and links.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::fake_node::ContainerOp;
use crate::observer::Command;
use kubechaos_core::events::{EventKind, Recorder};
use kubechaos_core::plan::{undo_of, PlannedKind};
use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::{
    Action, Component, LeaseRef, ProcessOp, Scenario, Selector, Target,
};

/// The API server's process name.
pub const API_SERVER: &str = "api-server";
/// etcd's process name.
pub const ETCD: &str = "etcd";

/// How a process that is no longer running ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The process recorded its own exit (the sim's processes do).
    Recorded,
    /// The world saw it end; the driver records this reason.
    Unrecorded(String),
}

/// The primitive operations of a world (the turmoil simulation, processes on this machine, …).
pub trait World {
    /// Stop a process: `graceful` (SIGTERM) or not (SIGKILL). `hold`: it stays down until
    /// `start`; otherwise the driver's supervisor starts it after the back-off. A world with a
    /// kubelet of its own (an existing cluster) uses `hold` to keep kubelet from restarting it.
    fn stop(&mut self, name: &str, graceful: bool, hold: bool);
    /// Start a process that is not running.
    fn start(&mut self, name: &str);
    /// `Some` once a process the driver believes running has ended by itself.
    fn exited(&mut self, name: &str) -> Option<Exit>;
    /// Drop traffic from `from` to `to` (one direction).
    fn cut(&mut self, from: &str, to: &str);
    /// Let traffic from `from` to `to` flow again.
    fn mend(&mut self, from: &str, to: &str);
    /// The process that holds a Lease now (from its holder identity), if any.
    fn lease_holder(&mut self, lease: &LeaseRef) -> Option<String>;
    /// Hand an API-level action to the observer.
    fn command(&mut self, c: Command);
    /// A self-hosted component's processes are its pods' containers: carry out `op` on those of
    /// component `c` (every pod, or only the pod named `only`). Returns the pods touched.
    fn containers(&mut self, c: Component, only: Option<&str>, op: ContainerOp) -> Vec<String>;
}

/// kubelet's container restart back-off (`pkg/kubelet`: 10s initial, doubling, at most 5 minutes).
pub fn backoff(restarts: u32) -> Duration {
    Duration::from_secs(10u64.saturating_mul(1u64 << restarts.min(5)).min(300))
}

/// The back-off resets after this long running (kubelet: 10 minutes).
pub const BACKOFF_RESET: Duration = Duration::from_secs(600);

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

/// One directed cut made by a step: (step, from, to).
type DirectedCut = (usize, String, String);

/// Carries out a plan on a world and supervises its processes.
pub struct Driver<W: World> {
    /// The world.
    pub world: W,
    recorder: Recorder,
    procs: BTreeMap<String, Supervised>,
    cuts: Vec<DirectedCut>,
    /// What each fault step resolved to, so that `for:` undoes exactly that.
    resolved: BTreeMap<usize, Vec<String>>,
    /// Effects of the step being applied, recorded after the step itself.
    effects: Vec<EventKind>,
}

impl<W: World> Driver<W> {
    /// A driver for processes `names`, all running since time zero.
    pub fn new(world: W, recorder: Recorder, names: impl IntoIterator<Item = String>) -> Self {
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
        Driver {
            world,
            recorder,
            procs,
            cuts: Vec::new(),
            resolved: BTreeMap::new(),
            effects: Vec::new(),
        }
    }

    /// The run's recorder.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Restart what exited or was killed, once its back-off has passed.
    pub fn supervise(&mut self, now: Duration) {
        let names: Vec<String> = self.procs.keys().cloned().collect();
        for name in names {
            let state = self.procs[&name].state;
            match state {
                State::Running => {
                    if let Some(exit) = self.world.exited(&name) {
                        if let Exit::Unrecorded(reason) = exit {
                            self.recorder.record(EventKind::ProcessExited {
                                process: name.clone(),
                                reason,
                            });
                        }
                        self.schedule_restart(&name, now);
                    }
                }
                State::Down(Some(at)) if now >= at => {
                    self.world.start(&name);
                    let p = self.procs.get_mut(&name).expect("known process");
                    p.state = State::Running;
                    p.started_at = now;
                }
                _ => {}
            }
        }
    }

    fn schedule_restart(&mut self, name: &str, now: Duration) {
        let p = self.procs.get_mut(name).expect("known process");
        if now.saturating_sub(p.started_at) >= BACKOFF_RESET {
            p.restarts = 0;
        }
        p.state = State::Down(Some(now + backoff(p.restarts)));
        p.restarts += 1;
    }

    /// Stop a process. `hold`: nothing restarts it until `start`; otherwise the supervisor does.
    fn stop(
        &mut self,
        name: &str,
        reason: &str,
        graceful: bool,
        hold: bool,
        now: Duration,
    ) -> bool {
        let p = self.procs.get_mut(name).expect("known process");
        if p.state != State::Running {
            if hold {
                p.state = State::Down(None);
            }
            return false;
        }
        self.world.stop(name, graceful, hold);
        self.effects.push(EventKind::ProcessExited {
            process: name.to_owned(),
            reason: reason.to_owned(),
        });
        if hold {
            p.state = State::Down(None);
        } else {
            self.schedule_restart(name, now);
        }
        true
    }

    fn start(&mut self, name: &str, now: Duration) -> bool {
        let p = self.procs.get_mut(name).expect("known process");
        if p.state == State::Running {
            return false;
        }
        self.world.start(name);
        p.state = State::Running;
        p.started_at = now;
        true
    }

    /// Process names a target stands for, now.
    fn resolve(&mut self, s: &Scenario, t: &Target) -> Vec<String> {
        let (group, replicas, sel, lease) = match t {
            Target::ApiServer => return vec![API_SERVER.to_owned()],
            Target::Etcd => return vec![ETCD.to_owned()],
            Target::Node(n) => return vec![n.clone()],
            Target::Component(c, sel) => (
                c.name().to_owned(),
                s.cluster.components.get(c).map(|c| c.replicas).unwrap_or(0),
                *sel,
                c.lease(),
            ),
            Target::Agent(name, sel) => match s.cluster.agents.iter().find(|a| &a.name == name) {
                Some(a) => (a.name.clone(), a.replicas, *sel, a.lease.clone()),
                None => return Vec::new(),
            },
        };
        match sel {
            Selector::All => (0..replicas).map(|i| process_name(&group, i)).collect(),
            Selector::Index(i) => vec![process_name(&group, i)],
            Selector::Leader => self
                .world
                .lease_holder(&lease)
                .filter(|h| (0..replicas).any(|i| process_name(&group, i) == *h))
                .into_iter()
                .collect(),
        }
    }

    /// Apply one planned action.
    pub fn apply(&mut self, s: &Scenario, kind: &PlannedKind, now: Duration) {
        match kind {
            PlannedKind::Probe { invariant } => self.world.command(Command::Probe {
                invariant: *invariant,
            }),
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
                let detail = self.undo(s, *step, &f.action, now);
                let undo = undo_of(&f.action)
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
                    API_SERVER
                } else {
                    ETCD
                };
                let done = match op {
                    ProcessOp::Stop => self.stop(name, "stopped", true, true, now),
                    ProcessOp::Crash => self.stop(name, "crashed", false, true, now),
                    ProcessOp::Start => self.start(name, now),
                    ProcessOp::Restart => {
                        self.stop(name, "stopped (restart)", true, true, now);
                        self.start(name, now)
                    }
                };
                if done {
                    touched.push(name.to_owned());
                }
                self.resolved.insert(step, vec![name.to_owned()]);
                describe(&touched, &format!("{name} was already in that state"))
            }
            Action::Kill(Target::Component(c, sel)) | Action::Remove(Target::Component(c, sel))
                if s.cluster.self_hosted =>
            {
                let op = if matches!(action, Action::Remove(_)) {
                    ContainerOp::Remove
                } else {
                    ContainerOp::Kill
                };
                self.pods(*c, *sel, op)
            }
            Action::Start(Target::Component(c, sel)) if s.cluster.self_hosted => {
                self.pods(*c, *sel, ContainerOp::Start)
            }
            Action::Kill(t) | Action::Remove(t) => {
                let hold = matches!(action, Action::Remove(_));
                let names = self.resolve(s, t);
                for n in &names {
                    if self.stop(n, if hold { "removed" } else { "killed" }, false, hold, now) {
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
                for n in self.resolve(s, t) {
                    if self.start(&n, now) {
                        touched.push(n);
                    }
                }
                describe(&touched, "already running")
            }
            Action::Partition(p) => {
                let a = self.resolve(s, &p.a);
                let b = self.resolve(s, &p.b);
                for x in &a {
                    for y in b.iter().filter(|y| *y != x) {
                        let mut directions = vec![(x.clone(), y.clone())];
                        if !p.oneway {
                            directions.push((y.clone(), x.clone()));
                        }
                        for (from, to) in directions {
                            self.world.cut(&from, &to);
                            self.cuts.push((step, from, to));
                        }
                        touched.push(format!("{x} {} {y}", if p.oneway { "->" } else { "<->" }));
                    }
                }
                describe(&touched, "no links matched (no leader at the time)")
            }
            Action::Heal(_) => {
                let steps: BTreeSet<usize> = self.cuts.iter().map(|c| c.0).collect();
                for st in steps {
                    touched.extend(self.heal_step(st));
                }
                describe(&touched, "no partitions were in place")
            }
            Action::DeletePods(d) => {
                self.world.command(Command::DeletePods {
                    namespace: d.namespace.clone(),
                    selector: d.selector.clone(),
                });
                format!("pods in {} matching `{}`", d.namespace, d.selector)
            }
            Action::Recover(r) => {
                self.world.command(Command::Recover {
                    step,
                    pod_from: r.pod_from.clone(),
                    node: r.node.clone(),
                    cleanup: r.cleanup,
                });
                format!(
                    "a pod from {}'s template, bound to {}{}",
                    r.pod_from,
                    r.node,
                    if r.cleanup {
                        "; deleted once the workload is available again"
                    } else {
                        ""
                    }
                )
            }
            Action::Bind(b) => {
                self.world.command(Command::Bind {
                    pod: b.pod.clone(),
                    node: b.node.clone(),
                });
                format!("a Binding of {} to {}", b.pod, b.node)
            }
        }
    }

    /// `kill`, `remove` or `start` on a self-hosted component: its pods' containers.
    fn pods(&mut self, c: Component, sel: Selector, op: ContainerOp) -> String {
        let only = match sel {
            Selector::Leader => match self.world.lease_holder(&c.lease()) {
                Some(holder) => Some(holder),
                None => return "no pod matched (no leader at the time)".into(),
            },
            // The backend's check allows only `all` and `leader` here.
            Selector::All | Selector::Index(_) => None,
        };
        let touched = self.world.containers(c, only.as_deref(), op);
        if touched.is_empty() {
            "no pod's container was in that state".into()
        } else {
            touched.join(", ")
        }
    }

    /// Mend the cuts a step made (those no other active step also made). Returns the links, as
    /// `a <-> b` when both directions were mended and `a -> b` otherwise.
    fn heal_step(&mut self, step: usize) -> Vec<String> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.cuts)
            .into_iter()
            .partition(|c| c.0 == step);
        self.cuts = rest;
        let mut mended: Vec<(String, String)> = Vec::new();
        for (_, from, to) in mine {
            if self.cuts.iter().any(|(_, f, t)| *f == from && *t == to)
                || mended.contains(&(from.clone(), to.clone()))
            {
                continue;
            }
            self.world.mend(&from, &to);
            mended.push((from, to));
        }
        let mut out = Vec::new();
        let mut said: Vec<(String, String)> = Vec::new();
        for (from, to) in &mended {
            if said.contains(&(to.clone(), from.clone())) {
                continue;
            }
            let back = mended.contains(&(to.clone(), from.clone()));
            out.push(format!("{from} {} {to}", if back { "<->" } else { "->" }));
            said.push((from.clone(), to.clone()));
        }
        out
    }

    fn undo(&mut self, s: &Scenario, step: usize, action: &Action, now: Duration) -> String {
        let touched: Vec<String> = match action {
            Action::Remove(Target::Component(c, _)) if s.cluster.self_hosted => {
                self.world.containers(*c, None, ContainerOp::Start)
            }
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
