//! The fault vocabulary, carried out the same way on every backend: what `kill`, `remove`,
//! `start`, `partition`, `heal`, `api-server: stop` and `for:` mean, how targets like
//! `kube-scheduler/leader` resolve, and the kubelet-like supervisor that restarts processes
//! with back-off. A backend supplies only the [`World`]: the primitive operations on its
//! processes and links.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::link::{Effect, LinkState};
use crate::backoff::{backoff, BACKOFF_RESET};
use crate::fake_node::{ContainerOp, PodGroup};
use crate::observer::Command;
use kubechaos_core::events::{identity_process, EventKind, Recorder};
use kubechaos_core::plan::PlannedKind;
use kubechaos_core::scenario::duration::human;
use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::{
    holder_pod, Action, AgentSpec, ApiErrors, LeaseRef, ProcessOp, Scenario, Selector, Target,
};

/// The API server's process name.
pub(crate) const API_SERVER: &str = "api-server";
/// etcd's process name.
pub(crate) const ETCD: &str = "etcd";

/// How a process that is no longer running ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// The process recorded its own exit (the sim's processes do).
    Recorded,
    /// The world saw it end; the driver records this reason.
    Unrecorded(String),
}

/// A world's time: the simulation's steps, or the wall clock's ticks
/// ([`super::realtime::RealTime`], which every real-time world shares).
pub(crate) trait WorldClock {
    /// Time since the run's time zero: the simulation's (virtual) or the wall clock's.
    fn now(&mut self) -> Duration;
    /// Let time pass until the driver looks again: one simulation step, or a real-time tick.
    fn advance(&mut self) -> Result<(), super::BackendError>;
    /// Whether time is real, with a person watching it pass: only then is the live view told
    /// what the run does and where it is.
    fn real_time(&self) -> bool;
    /// Whether the run must end before its planned end (Ctrl-C, SIGTERM, or a failure underneath
    /// that makes the rest meaningless).
    fn interrupted(&self) -> bool {
        false
    }
}

/// Whether a stopped process stays down until `start`, and how. Worlds without a kubelet of
/// their own keep both held kinds down the same way (nothing starts the process again); on an
/// existing cluster they differ as a static pod's way down does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Not held: the supervisor (or the cluster's kubelet) starts it again after its back-off
    /// (`kill`).
    No,
    /// Its pod is taken away until `start` (`stop`, `remove`): the kubelet stops the pod and
    /// forgets it, as when an operator moves a static pod's manifest out.
    Pod,
    /// Its pod stays, and its process dies each time it starts, until `start` (`crash` with a
    /// `for:`): a crash that lasts. Once it ends, the kubelet starts the process again after
    /// the crash-loop back-off it has reached, as it does for any process that kept crashing.
    Crashing,
}

impl Hold {
    /// Whether the process stays down until `start`.
    pub(crate) fn held(self) -> bool {
        self != Hold::No
    }
}

/// The primitive operations of a world (the turmoil simulation, processes on this machine, …),
/// and its clock.
pub(crate) trait World {
    /// Its time.
    fn clock(&mut self) -> &mut dyn WorldClock;
    /// Stop a process: `graceful` (SIGTERM) or not (SIGKILL). `hold`: whether it stays down
    /// until `start`, and how a world with a kubelet of its own (an existing cluster) keeps its
    /// kubelet from starting it again; with [`Hold::No`] the driver's supervisor starts it after
    /// the back-off.
    fn stop(&mut self, name: &str, graceful: bool, hold: Hold);
    /// Start a process that is not running.
    fn start(&mut self, name: &str);
    /// `Some` once a process the driver believes running has ended by itself.
    fn exited(&mut self, name: &str) -> Option<Exit>;
    /// What the liveness probe of a running process would answer now, for a process the
    /// world's kubelet probes ([`crate::backoff::LIVENESS`]: kubeadm's on kube-apiserver,
    /// `/livez`, which fails while its etcd does not answer); `None` for one it does not probe,
    /// or where a real kubelet probes it (an existing cluster).
    fn alive(&mut self, _name: &str) -> Option<bool> {
        None
    }
    /// Set the condition of the link from `from` to `to` (one direction): cut, slowed, or
    /// healthy again (`LinkState::default()`), as [`super::link`] models it.
    fn link(&mut self, from: &str, to: &str, state: &LinkState);
    /// The `api-errors` steps in effect now (none: the API server serves every request).
    fn api_errors(&mut self, active: &[(usize, ApiErrors)]);
    /// The holder identity of a Lease now, as written in it, if any.
    fn lease_identity(&mut self, lease: &LeaseRef) -> Option<String>;
    /// The etcd member leading raft now (`etcd/leader`), if any: a world with one member has
    /// none to elect (validation refuses the target there).
    fn etcd_leader(&mut self) -> Option<String> {
        None
    }
    /// The process a holder identity of `lease` stands for: `NAME_INCARNATION` and upstream's
    /// `HOSTNAME_UUID` by the part before the `_`. A world whose processes are named otherwise
    /// (an existing cluster's control-plane nodes) maps it.
    fn holder_process(&self, _lease: &LeaseRef, identity: &str) -> String {
        identity_process(identity).to_owned()
    }
    /// Hand an API-level action to the observer.
    fn command(&mut self, c: Command);
    /// A self-hosted component's or a pod agent's processes are its pods' containers: carry out
    /// `op` on those of `group` (every pod, or only the pod named `only`). Returns the pods
    /// touched.
    fn containers(&mut self, group: &PodGroup, only: Option<&str>, op: ContainerOp) -> Vec<String>;
    /// The processes (named by their pods) of `group`'s pods that run now.
    fn pods(&mut self, group: &PodGroup) -> Vec<String>;
    /// The run has ended: read what happened before now and was not read yet (a pod's log read
    /// through an API server that was slow, a node's runtime events on their way), within a
    /// bounded wait, so that the timeline is judged whole. Returns what stayed unread, each with
    /// why. A world that reads everything as it happens (the sim's) has nothing to read.
    fn drain(&mut self) -> Vec<String> {
        Vec::new()
    }
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
    /// Its liveness probe, as the kubelet runs it (for a process the world probes).
    probe: Probe,
}

/// The kubelet's liveness probe of one container, since it last started.
#[derive(Clone, Copy, Debug, Default)]
struct Probe {
    /// The next probe's time.
    next: Duration,
    /// Failures in a row.
    failures: u32,
    /// Failed too often: the kubelet stopped it (SIGTERM), and kills it then (its grace period
    /// over; a kube-apiserver without etcd waits on it with its requests to the end).
    kill_at: Option<Duration>,
}

impl Probe {
    fn since(started_at: Duration) -> Probe {
        Probe {
            next: started_at + crate::backoff::LIVENESS.initial_delay,
            ..Probe::default()
        }
    }
}

/// A pod agent's Lease held by an identity that names none of its running pods.
fn held_by_none(lease: &LeaseRef, holder: &str, agent: &AgentSpec) -> String {
    let how = match &agent.identity {
        Some(p) => format!("its `identity` pattern `{p}` does not capture the name of one of them from it"),
        None => "an identity that is not its pod's name (`PODNAME` or `PODNAME_…`) needs the agent's `identity` pattern".to_owned(),
    };
    format!("the Lease {lease} is held by `{holder}`, which is none of agent {}'s running pods: {how}, or the holder is not one of its pods", agent.name)
}

/// One step's effect on one direction of a link: (step, from, to, effect).
type DirectedEffect = (usize, String, String, Effect);

/// Carries out a plan on a world and supervises its processes.
pub(crate) struct Driver<W: World> {
    /// The world.
    pub(crate) world: W,
    recorder: Recorder,
    procs: BTreeMap<String, Supervised>,
    /// The link faults in effect.
    links: Vec<DirectedEffect>,
    /// The condition of each link direction as the world was last told it.
    link_states: BTreeMap<(String, String), LinkState>,
    /// The `api-errors` steps in effect.
    api_errors: Vec<(usize, ApiErrors)>,
    /// What each fault step resolved to, so that `for:` undoes exactly that.
    resolved: BTreeMap<usize, Vec<String>>,
    /// Effects of the step being applied, recorded after the step itself.
    effects: Vec<EventKind>,
    /// The holder identity of each Lease the step being applied asked about: read once per
    /// step, so that what it touched and the words for what it did not rest on one reading.
    holders: BTreeMap<LeaseRef, Option<String>>,
}

impl<W: World> Driver<W> {
    /// A driver for processes `names`, all running since time zero.
    pub(crate) fn new(
        world: W,
        recorder: Recorder,
        names: impl IntoIterator<Item = String>,
    ) -> Self {
        let procs = names
            .into_iter()
            .map(|n| {
                (
                    n,
                    Supervised {
                        state: State::Running,
                        restarts: 0,
                        started_at: Duration::ZERO,
                        probe: Probe::since(Duration::ZERO),
                    },
                )
            })
            .collect();
        Driver {
            world,
            recorder,
            procs,
            links: Vec::new(),
            link_states: BTreeMap::new(),
            api_errors: Vec::new(),
            resolved: BTreeMap::new(),
            effects: Vec::new(),
            holders: BTreeMap::new(),
        }
    }

    /// The run's recorder.
    pub(crate) fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The world, once the run is over.
    pub(crate) fn into_world(self) -> W {
        self.world
    }

    /// Restart what exited or was killed, once its back-off has passed.
    pub(crate) fn supervise(&mut self, now: Duration) {
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
                    } else {
                        self.probe(&name, now);
                    }
                }
                State::Down(Some(at)) if now >= at => {
                    self.world.start(&name);
                    let p = self.procs.get_mut(&name).expect("known process");
                    p.state = State::Running;
                    p.started_at = now;
                    p.probe = Probe::since(now);
                }
                _ => {}
            }
        }
    }

    /// The kubelet's liveness probe of a running process, as kubeadm configures it
    /// ([`crate::backoff::LIVENESS`]): after `failure_threshold` failures in a row the kubelet
    /// stops the container and, its grace period over, kills it; it starts it again at once,
    /// with no back-off (the kubelet kills and starts it in one sync of the pod, and backs off
    /// only from a container found exited).
    fn probe(&mut self, name: &str, now: Duration) {
        let probe = self.procs[name].probe;
        if let Some(at) = probe.kill_at {
            if now >= at {
                self.world.stop(name, false, Hold::No);
                self.recorder.record(EventKind::ProcessExited {
                    process: name.to_owned(),
                    reason: format!(
                        "killed by the kubelet: its liveness probe failed {} times in a row ({} apart), and its grace period of {} is over",
                        crate::backoff::LIVENESS.failure_threshold,
                        human(crate::backoff::LIVENESS.period),
                        human(crate::backoff::LIVENESS.grace)
                    ),
                });
                let p = self.procs.get_mut(name).expect("known process");
                p.state = State::Down(Some(now + crate::backoff::RELIST));
            }
            return;
        }
        if now < probe.next {
            return;
        }
        let Some(alive) = self.world.alive(name) else {
            return;
        };
        let p = self.procs.get_mut(name).expect("known process");
        p.probe.next = now + crate::backoff::LIVENESS.period;
        p.probe.failures = if alive { 0 } else { p.probe.failures + 1 };
        if p.probe.failures >= crate::backoff::LIVENESS.failure_threshold {
            p.probe.kill_at = Some(now + crate::backoff::LIVENESS.grace);
            self.recorder.record(EventKind::ProcessNote {
                process: name.to_owned(),
                message: format!(
                    "its liveness probe failed {} times in a row: the kubelet stops it (SIGTERM), and kills it in {} if it has not exited",
                    p.probe.failures,
                    human(crate::backoff::LIVENESS.grace)
                ),
            });
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
        hold: Hold,
        now: Duration,
    ) -> bool {
        let p = self.procs.get_mut(name).expect("known process");
        if p.state != State::Running {
            if hold.held() {
                p.state = State::Down(None);
            }
            return false;
        }
        self.world.stop(name, graceful, hold);
        self.effects.push(EventKind::ProcessExited {
            process: name.to_owned(),
            reason: reason.to_owned(),
        });
        if hold.held() {
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
        p.probe = Probe::since(now);
        true
    }

    /// Process names a target stands for, now.
    fn resolve(&mut self, s: &Scenario, t: &Target) -> Vec<String> {
        let (group, replicas, sel, lease) = match t {
            Target::ApiServer(sel) | Target::Etcd(sel) => {
                let names = if matches!(t, Target::ApiServer(_)) {
                    s.cluster.api_server_names()
                } else {
                    s.cluster.etcd_names()
                };
                return match sel {
                    Selector::All => names,
                    Selector::Index(i) => names.into_iter().skip(*i as usize).take(1).collect(),
                    Selector::Leader => self.world.etcd_leader().into_iter().collect(),
                };
            }
            Target::Node(n) => return vec![n.clone()],
            Target::Component(c, sel) => (
                c.name().to_owned(),
                s.cluster.components.get(c).map(|c| c.replicas).unwrap_or(0),
                *sel,
                c.lease(),
            ),
            Target::Agent(name, sel) => match s.cluster.agents.iter().find(|a| &a.name == name) {
                Some(a) if a.is_pods() => {
                    let pods = self.world.pods(&PodGroup::Agent(a.name.clone()));
                    return match sel {
                        Selector::Leader => self.leader_pod(a, &pods).into_iter().collect(),
                        // Validation refuses replica numbers of pod agents.
                        Selector::All | Selector::Index(_) => pods,
                    };
                }
                Some(a) => (a.name.clone(), a.replicas, *sel, a.lease.clone()),
                None => return Vec::new(),
            },
        };
        match sel {
            Selector::All => (0..replicas).map(|i| process_name(&group, i)).collect(),
            Selector::Index(i) => vec![process_name(&group, i)],
            Selector::Leader => self
                .lease_holder(&lease)
                .filter(|h| (0..replicas).any(|i| process_name(&group, i) == *h))
                .into_iter()
                .collect(),
        }
    }

    /// The identity that holds a Lease now, if any, as the world says it once per step.
    fn lease_identity(&mut self, lease: &LeaseRef) -> Option<String> {
        if let Some(h) = self.holders.get(lease) {
            return h.clone();
        }
        let h = self.world.lease_identity(lease);
        self.holders.insert(lease.clone(), h.clone());
        h
    }

    /// The process that holds a Lease now, if any.
    fn lease_holder(&mut self, lease: &LeaseRef) -> Option<String> {
        let identity = self.lease_identity(lease)?;
        Some(self.world.holder_process(lease, &identity))
    }

    /// Of a pod agent's `pods` (process names, named by their pods), the one holding its Lease
    /// now ([`holder_pod`]).
    fn leader_pod(&mut self, agent: &AgentSpec, pods: &[String]) -> Option<String> {
        let identity = self.lease_identity(&agent.lease)?;
        holder_pod(agent.identity_pattern().as_ref(), &identity, pods).cloned()
    }

    /// Why a `/leader` target matched nothing: nobody held the Lease, or (a pod agent) its
    /// holder's identity names none of the agent's running pods: said, so that a step that
    /// touched nothing is not mistaken for one that did.
    fn why_no_leader(&mut self, s: &Scenario, targets: &[&Target]) -> String {
        for t in targets {
            let Target::Agent(name, Selector::Leader) = t else {
                continue;
            };
            let Some(a) = s
                .cluster
                .agents
                .iter()
                .find(|a| &a.name == name && a.is_pods())
            else {
                continue;
            };
            if let Some(h) = self.lease_identity(&a.lease) {
                return held_by_none(&a.lease, &h, a);
            }
        }
        "no leader at the time".into()
    }

    /// Whose pods a target on pod-run processes stands for: a self-hosted component's, or a pod
    /// agent's. `None` for processes kubechaos runs itself.
    fn pod_group(s: &Scenario, t: &Target) -> Option<(PodGroup, Selector, LeaseRef)> {
        match t {
            Target::Component(c, sel) if s.cluster.self_hosted => {
                Some((PodGroup::Component(*c), *sel, c.lease()))
            }
            Target::Agent(name, sel) => s
                .cluster
                .agents
                .iter()
                .find(|a| &a.name == name && a.is_pods())
                .map(|a| (PodGroup::Agent(a.name.clone()), *sel, a.lease.clone())),
            _ => None,
        }
    }

    /// Apply one planned action.
    pub(crate) fn apply(&mut self, s: &Scenario, kind: &PlannedKind, now: Duration) {
        self.holders.clear();
        match kind {
            PlannedKind::Probe { invariant } => self.world.command(Command::Probe {
                invariant: *invariant,
            }),
            PlannedKind::Fault { step } => {
                let f = &s.faults[*step];
                let detail = self.fault(s, *step, &f.action, now);
                // The directions this step acts on (its own, in the order applied).
                let links = self
                    .links
                    .iter()
                    .filter(|l| l.0 == *step)
                    .map(|(_, from, to, _)| [from.clone(), to.clone()])
                    .collect();
                self.recorder.record(EventKind::FaultApplied {
                    step: *step,
                    id: f.id.clone(),
                    action: f.action.to_string(),
                    undo: false,
                    detail,
                    links,
                });
            }
            PlannedKind::Undo { step } => {
                let f = &s.faults[*step];
                let detail = self.undo(s, *step, &f.action, now);
                let undo = f.action.undo_text().unwrap_or_default();
                self.recorder.record(EventKind::FaultApplied {
                    step: *step,
                    id: f.id.clone(),
                    action: format!("{undo} (undoing `{}` after its `for`)", f.action),
                    undo: true,
                    detail,
                    links: Vec::new(),
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
                let names = if matches!(action, Action::ApiServer(_)) {
                    s.cluster.api_server_names()
                } else {
                    s.cluster.etcd_names()
                };
                for name in &names {
                    let done = match op {
                        ProcessOp::Stop => self.stop(name, "stopped", true, Hold::Pod, now),
                        ProcessOp::Crash => self.stop(name, "crashed", false, Hold::Crashing, now),
                        ProcessOp::Start => self.start(name, now),
                        ProcessOp::Restart => {
                            self.stop(name, "stopped (restart)", true, Hold::Pod, now);
                            self.start(name, now)
                        }
                    };
                    if done {
                        touched.push(name.clone());
                    }
                }
                self.resolved.insert(step, names.clone());
                describe(
                    &touched,
                    &format!("{} already in that state", names.join(", ")),
                )
            }
            Action::Kill(t) | Action::Remove(t) | Action::Start(t)
                if Self::pod_group(s, t).is_some() =>
            {
                let (group, sel, lease) = Self::pod_group(s, t).expect("a pod group");
                let op = match action {
                    Action::Remove(_) => ContainerOp::Remove,
                    Action::Start(_) => ContainerOp::Start,
                    _ => ContainerOp::Kill,
                };
                self.pods(s, &group, sel, &lease, op)
            }
            Action::Kill(t) | Action::Remove(t) => {
                let (reason, hold) = match action {
                    Action::Remove(_) => ("removed", Hold::Pod),
                    _ => ("killed", Hold::No),
                };
                let names = self.resolve(s, t);
                for n in &names {
                    if self.stop(n, reason, false, hold, now) {
                        touched.push(n.clone());
                    }
                }
                self.resolved.insert(step, names.clone());
                if names.is_empty() {
                    format!("no process matched `{t}` ({})", self.why_no_leader(s, &[t]))
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
            Action::Partition(_) | Action::Delay(_) | Action::Loss(_) => {
                let p = action.link().expect("a link fault");
                let effect = Effect::of(action).expect("a link fault");
                let a = self.resolve(s, &p.a);
                let b = self.resolve(s, &p.b);
                let why = if a.is_empty() || b.is_empty() {
                    self.why_no_leader(s, &[&p.a, &p.b])
                } else {
                    String::new()
                };
                for x in &a {
                    for y in b.iter().filter(|y| *y != x) {
                        let mut directions = vec![(x.clone(), y.clone())];
                        if !p.oneway {
                            directions.push((y.clone(), x.clone()));
                        }
                        for (from, to) in directions {
                            self.links.push((step, from.clone(), to.clone(), effect));
                            self.update_link(&from, &to);
                        }
                        touched.push(format!("{x} {} {y}", if p.oneway { "->" } else { "<->" }));
                    }
                }
                describe(&touched, &format!("no links matched ({why})"))
            }
            Action::Heal(_) => {
                let steps: BTreeSet<usize> = self.links.iter().map(|c| c.0).collect();
                for st in steps {
                    touched.extend(self.heal_step(st));
                }
                describe(&touched, "no partitions, delays or losses were in place")
            }
            Action::ApiErrors(e) => {
                self.api_errors.push((step, e.clone()));
                self.world.api_errors(&self.api_errors);
                format!(
                    "the API server answers {} of the matching requests with {}{}",
                    if e.ratio.is_whole() {
                        "all".to_owned()
                    } else {
                        format!("{:.0}%", e.ratio.get() * 100.0)
                    },
                    e.status,
                    e.retry_after
                        .map(|r| format!(" (Retry-After: {})", r.as_secs()))
                        .unwrap_or_default()
                )
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

    /// `kill`, `remove` or `start` on a self-hosted component or a pod agent: its pods'
    /// containers.
    fn pods(
        &mut self,
        s: &Scenario,
        group: &PodGroup,
        sel: Selector,
        lease: &LeaseRef,
        op: ContainerOp,
    ) -> String {
        let only = match sel {
            Selector::Leader => {
                let pods = self.world.pods(group);
                let agent = match group {
                    PodGroup::Agent(name) => s.cluster.agents.iter().find(|a| &a.name == name),
                    PodGroup::Component(_) => None,
                };
                let leader = match agent {
                    Some(a) => self.leader_pod(a, &pods),
                    None => self.lease_holder(lease),
                };
                match (leader, agent) {
                    (Some(pod), _) => Some(pod),
                    (None, Some(a)) => match self.lease_identity(lease) {
                        Some(h) => {
                            return format!("no pod matched ({})", held_by_none(lease, &h, a))
                        }
                        None => return "no pod matched (no leader at the time)".into(),
                    },
                    (None, None) => return "no pod matched (no leader at the time)".into(),
                }
            }
            // The backend's check and validation allow only `all` and `leader` here.
            Selector::All | Selector::Index(_) => None,
        };
        let touched = self.world.containers(group, only.as_deref(), op);
        if touched.is_empty() {
            "no pod's container was in that state".into()
        } else {
            touched.join(", ")
        }
    }

    /// Tell the world the condition of the link from `from` to `to`, as the link faults in
    /// effect make it.
    /// Returns whether it changed.
    fn update_link(&mut self, from: &str, to: &str) -> bool {
        let state = LinkState::of(
            self.links
                .iter()
                .filter(|(_, f, t, _)| f == from && t == to)
                .map(|(.., e)| e),
        );
        let key = (from.to_owned(), to.to_owned());
        if self.link_states.get(&key).cloned().unwrap_or_default() == state {
            return false;
        }
        self.world.link(from, to, &state);
        self.link_states.insert(key, state);
        true
    }

    /// End the link faults a step made (a direction that other steps still act on keeps their
    /// effects). Returns the links that changed, as `a <-> b` when both directions did and
    /// `a -> b` otherwise.
    fn heal_step(&mut self, step: usize) -> Vec<String> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.links)
            .into_iter()
            .partition(|c| c.0 == step);
        self.links = rest;
        let mut mended: Vec<(String, String)> = Vec::new();
        for (_, from, to, _) in mine {
            if mended.contains(&(from.clone(), to.clone())) || !self.update_link(&from, &to) {
                continue;
            }
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
            Action::Remove(t) if Self::pod_group(s, t).is_some() => {
                let (group, ..) = Self::pod_group(s, t).expect("a pod group");
                self.world.containers(&group, None, ContainerOp::Start)
            }
            Action::Partition(_) | Action::Delay(_) | Action::Loss(_) => self.heal_step(step),
            Action::ApiErrors(_) => {
                let before = self.api_errors.len();
                self.api_errors.retain(|(st, _)| *st != step);
                if self.api_errors.len() == before {
                    Vec::new()
                } else {
                    self.world.api_errors(&self.api_errors);
                    vec!["the matching requests are served again".to_owned()]
                }
            }
            Action::ApiServer(_) | Action::Etcd(_) | Action::Remove(_) => {
                let names = self.resolved.get(&step).cloned().unwrap_or_default();
                names.into_iter().filter(|n| self.start(n, now)).collect()
            }
            // Validation refuses `for:` on these (`Action::undo` is None).
            Action::Heal(_)
            | Action::Kill(_)
            | Action::Start(_)
            | Action::DeletePods(_)
            | Action::Recover(_)
            | Action::Bind(_) => Vec::new(),
        };
        if touched.is_empty() {
            "nothing left to undo".into()
        } else {
            touched.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use kubechaos_core::events::Event;
    use kubechaos_core::plan::Plan;

    /// A world that does nothing but write down what the driver asked of it.
    #[derive(Default)]
    struct Fake {
        calls: Vec<String>,
        /// Processes that end by themselves at the next `exited`.
        exiting: BTreeSet<String>,
        /// The holder of every Lease.
        holder: Option<String>,
        /// The pods of every pod group.
        pods: Vec<String>,
        /// What the liveness probe of each probed process answers.
        alive: BTreeMap<String, bool>,
    }

    impl WorldClock for Fake {
        fn now(&mut self) -> Duration {
            Duration::ZERO
        }
        fn advance(&mut self) -> Result<(), crate::backend::BackendError> {
            Ok(())
        }
        fn real_time(&self) -> bool {
            false
        }
    }

    impl World for Fake {
        fn clock(&mut self) -> &mut dyn WorldClock {
            self
        }
        fn stop(&mut self, name: &str, graceful: bool, hold: Hold) {
            self.calls
                .push(format!("stop {name} graceful={graceful} hold={hold:?}"));
        }
        fn start(&mut self, name: &str) {
            self.calls.push(format!("start {name}"));
        }
        fn exited(&mut self, name: &str) -> Option<Exit> {
            self.exiting
                .remove(name)
                .then(|| Exit::Unrecorded("exit status 1".into()))
        }
        fn alive(&mut self, name: &str) -> Option<bool> {
            self.alive.get(name).copied()
        }
        fn link(&mut self, from: &str, to: &str, state: &LinkState) {
            if state.cut {
                self.calls.push(format!("cut {from}->{to}"));
            } else if *state == LinkState::default() {
                self.calls.push(format!("mend {from}->{to}"));
            } else {
                self.calls.push(format!(
                    "slow {from}->{to} {:?}±{:?} loss {:.2}",
                    state.latency, state.jitter, state.loss
                ));
            }
        }
        fn api_errors(&mut self, active: &[(usize, ApiErrors)]) {
            let steps: Vec<usize> = active.iter().map(|(s, _)| *s).collect();
            self.calls.push(format!("api-errors {steps:?}"));
        }
        fn lease_identity(&mut self, _: &LeaseRef) -> Option<String> {
            self.holder.clone()
        }
        fn command(&mut self, c: Command) {
            self.calls.push(format!("command {c:?}"));
        }
        fn containers(
            &mut self,
            group: &PodGroup,
            only: Option<&str>,
            op: ContainerOp,
        ) -> Vec<String> {
            self.calls
                .push(format!("containers {group} {only:?} {op:?}"));
            vec![format!("{group}-pod")]
        }
        fn pods(&mut self, _: &PodGroup) -> Vec<String> {
            self.pods.clone()
        }
    }

    fn scenario(faults: &str) -> Scenario {
        let yaml = format!(
            "name: t\ncluster:\n  nodes: 2\n  components: {{kube-scheduler: {{replicas: 2}}}}\n  agents: [{{name: a, replicas: 2, lease: default/a}}]\nfaults:\n{faults}"
        );
        kubechaos_core::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).expect("valid")
    }

    fn driver(world: Fake) -> Driver<Fake> {
        let names = [
            "etcd",
            "api-server",
            "node-0",
            "node-1",
            "kube-scheduler-0",
            "kube-scheduler-1",
            "a-0",
            "a-1",
        ];
        Driver::new(
            world,
            Recorder::new(|| 0),
            names.iter().map(|n| n.to_string()),
        )
    }

    /// A plan being played, a second at a time.
    struct Player {
        plan: Plan,
        next: usize,
        now: Duration,
    }

    impl Player {
        fn new(s: &Scenario) -> Player {
            Player {
                plan: Plan::new(s),
                next: 0,
                now: Duration::ZERO,
            }
        }

        /// Apply every planned action at its time and supervise, each second until `until`.
        fn until(&mut self, d: &mut Driver<Fake>, s: &Scenario, until: Duration) {
            while self.now <= until {
                while self.next < self.plan.actions.len()
                    && self.plan.actions[self.next].at <= self.now
                {
                    d.apply(s, &self.plan.actions[self.next].kind, self.now);
                    self.next += 1;
                }
                d.supervise(self.now);
                self.now += Duration::from_secs(1);
            }
        }
    }

    /// Play `s` from the start until `until`.
    fn play(d: &mut Driver<Fake>, s: &Scenario, until: Duration) -> Player {
        let mut p = Player::new(s);
        p.until(d, s, until);
        p
    }

    fn faults(events: &[Event]) -> Vec<(String, String)> {
        events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::FaultApplied { action, detail, .. } => {
                    Some((action.clone(), detail.clone()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_killed_process_is_restarted_at_once_and_a_crash_loop_backs_off_further() {
        let s = scenario("  - {at: 1s, kill: kube-scheduler/1}\n");
        let mut d = driver(Fake::default());
        play(&mut d, &s, Duration::from_millis(1_900));
        assert_eq!(
            d.world.calls,
            ["stop kube-scheduler-1 graceful=false hold=No"],
            "not restarted before the kubelet's relist sees the exit"
        );
        d.supervise(Duration::from_secs(2));
        assert_eq!(d.world.calls.last().unwrap(), "start kube-scheduler-1");
        // It exits by itself at once: now the kubelet backs off, 10s.
        d.world.exiting.insert("kube-scheduler-1".into());
        d.supervise(Duration::from_secs(3));
        d.supervise(Duration::from_millis(13_900));
        assert_eq!(d.world.calls.len(), 2, "{:?}", d.world.calls);
        d.supervise(Duration::from_secs(14));
        assert_eq!(d.world.calls.last().unwrap(), "start kube-scheduler-1");
        // And again: 20s.
        d.world.exiting.insert("kube-scheduler-1".into());
        d.supervise(Duration::from_secs(15));
        d.supervise(Duration::from_millis(35_900));
        assert_eq!(d.world.calls.len(), 3, "{:?}", d.world.calls);
        d.supervise(Duration::from_secs(36));
        assert_eq!(d.world.calls.last().unwrap(), "start kube-scheduler-1");
        let exits: Vec<String> = d
            .recorder()
            .snapshot()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ProcessExited { process, reason } => {
                    Some(format!("{process}: {reason}"))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            exits,
            [
                "kube-scheduler-1: killed",
                "kube-scheduler-1: exit status 1",
                "kube-scheduler-1: exit status 1"
            ]
        );
    }

    #[test]
    fn a_process_failing_its_liveness_probe_is_killed_after_its_grace_period_and_started_at_once() {
        let mut d = driver(Fake::default());
        d.world.alive.insert("api-server".into(), false);
        let step = |d: &mut Driver<Fake>, from: u64, to: u64| {
            for ms in (from..=to).step_by(100) {
                d.supervise(Duration::from_millis(ms));
            }
        };
        // Probes at 10 s, 20 s, …; one success between resets the count.
        step(&mut d, 0, 30_000);
        d.world.alive.insert("api-server".into(), true);
        step(&mut d, 30_100, 40_000);
        d.world.alive.insert("api-server".into(), false);
        // Failures at 50 s … 120 s: the eighth at 120 s, the kill 30 s later.
        step(&mut d, 40_100, 149_900);
        assert!(d.world.calls.is_empty(), "{:?}", d.world.calls);
        step(&mut d, 150_000, 150_900);
        assert_eq!(d.world.calls, ["stop api-server graceful=false hold=No"]);
        step(&mut d, 151_000, 151_000);
        assert_eq!(d.world.calls.last().unwrap(), "start api-server");
        // The kill set no back-off: its first exit after it is started again at once.
        d.world.exiting.insert("api-server".into());
        step(&mut d, 152_000, 153_000);
        assert_eq!(d.world.calls.last().unwrap(), "start api-server");
        assert_eq!(d.world.calls.len(), 3, "{:?}", d.world.calls);
        let said: Vec<(u64, String)> = d
            .recorder()
            .snapshot()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ProcessNote { message, .. } => Some((e.t_ms, message)),
                EventKind::ProcessExited { reason, .. } => Some((e.t_ms, reason)),
                _ => None,
            })
            .map(|(t, m)| (t, m.split(':').next().unwrap_or_default().to_owned()))
            .collect();
        assert_eq!(
            said.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>(),
            [
                "its liveness probe failed 8 times in a row",
                "killed by the kubelet",
                "exit status 1"
            ],
            "{said:?}"
        );
    }

    #[test]
    fn remove_holds_a_process_down_until_its_for_starts_exactly_what_it_removed() {
        let s = scenario("  - {at: 1s, remove: kube-scheduler/leader, for: 30s}\n");
        let world = Fake {
            holder: Some("kube-scheduler-0".into()),
            ..Fake::default()
        };
        let mut d = driver(world);
        let mut p = play(&mut d, &s, Duration::from_secs(20));
        assert_eq!(
            d.world.calls,
            ["stop kube-scheduler-0 graceful=false hold=Pod"],
            "held down: no restart after the back-off"
        );
        // The leader changed meanwhile; `for:` still undoes what the step resolved to.
        d.world.holder = Some("kube-scheduler-1".into());
        p.until(&mut d, &s, Duration::from_secs(40));
        assert_eq!(
            d.world.calls,
            [
                "stop kube-scheduler-0 graceful=false hold=Pod",
                "start kube-scheduler-0"
            ]
        );
        let f = faults(&d.recorder().snapshot());
        assert_eq!(f[0].1, "kube-scheduler-0");
        assert_eq!(
            f[1].0,
            "start: kube-scheduler/leader (undoing `remove: kube-scheduler/leader` after its `for`)"
        );
        assert_eq!(f[1].1, "kube-scheduler-0");
    }

    #[test]
    fn a_leader_target_without_a_leader_touches_nothing_and_says_so() {
        let s = scenario("  - {at: 1s, kill: agent/a/leader}\n");
        let mut d = driver(Fake::default());
        play(&mut d, &s, Duration::from_secs(5));
        assert!(d.world.calls.is_empty(), "{:?}", d.world.calls);
        let f = faults(&d.recorder().snapshot());
        assert_eq!(
            f[0].1,
            "no process matched `agent/a/leader` (no leader at the time)"
        );
    }

    #[test]
    fn api_server_stop_is_graceful_crash_is_not_and_for_starts_it_again() {
        let s = scenario(
            "  - {at: 1s, api-server: stop, for: 5s}\n  - {at: 10s, etcd: crash, for: 5s}\n",
        );
        let mut d = driver(Fake::default());
        play(&mut d, &s, Duration::from_secs(20));
        assert_eq!(
            d.world.calls,
            [
                "stop api-server graceful=true hold=Pod",
                "start api-server",
                "stop etcd graceful=false hold=Crashing",
                "start etcd"
            ]
        );
    }

    #[test]
    fn partitions_cut_each_direction_and_heal_mends_only_what_no_other_step_still_cuts() {
        let s = scenario(
            "  - {at: 1s, partition: [agent/a/0, api-server], for: 10s}\n  - {at: 2s, partition: {from: agent/a/0, to: api-server}}\n  - {at: 20s, heal: all}\n",
        );
        let mut d = driver(Fake::default());
        let mut p = play(&mut d, &s, Duration::from_secs(5));
        assert_eq!(
            d.world.calls,
            [
                "cut a-0->api-server",
                "cut api-server->a-0",
                // The second step cuts a direction already cut: the world is not told again.
            ]
        );
        // The first step's `for` ends: the one-way cut of the second step stays.
        p.until(&mut d, &s, Duration::from_secs(11));
        assert_eq!(d.world.calls[2..], ["mend api-server->a-0"]);
        p.until(&mut d, &s, Duration::from_secs(20));
        assert_eq!(d.world.calls[3..], ["mend a-0->api-server"]);
        let f = faults(&d.recorder().snapshot());
        assert_eq!(f[0].1, "a-0 <-> api-server");
        assert_eq!(f[1].1, "a-0 -> api-server");
        assert_eq!(f[2].1, "api-server -> a-0");
        assert_eq!(f[3].1, "a-0 -> api-server");
    }

    /// Delays and losses on a link add up with a cut on it; each step's `for` ends its own
    /// effect; `heal: all` ends them all; `api-errors` steps are handed over as a set.
    #[test]
    fn delays_losses_and_api_errors_are_the_steps_in_effect() {
        let s = scenario(
            "  - {at: 1s, delay: {from: agent/a/0, to: api-server, latency: 2s, jitter: 100ms}, for: 10s}\n  - {at: 2s, loss: {between: [agent/a/0, api-server], ratio: 0.5}}\n  - {at: 3s, partition: {from: agent/a/0, to: api-server}, for: 1s}\n  - {at: 5s, api-errors: {status: 500, verbs: [update]}, for: 2s}\n  - {at: 6s, api-errors: {status: 429, users: [u]}}\n  - {at: 20s, heal: all}\n",
        );
        let mut d = driver(Fake::default());
        play(&mut d, &s, Duration::from_secs(30));
        assert_eq!(
            d.world.calls,
            [
                "slow a-0->api-server 2s±100ms loss 0.00",
                "slow a-0->api-server 2s±100ms loss 0.50",
                "slow api-server->a-0 0ns±0ns loss 0.50",
                "cut a-0->api-server",
                "slow a-0->api-server 2s±100ms loss 0.50",
                "api-errors [3]",
                "api-errors [3, 4]",
                "api-errors [4]",
                // The delay's `for` ends: the loss stays, both ways.
                "slow a-0->api-server 0ns±0ns loss 0.50",
                "mend a-0->api-server",
                "mend api-server->a-0",
            ]
        );
        let f = faults(&d.recorder().snapshot());
        assert_eq!(f[0].1, "a-0 -> api-server");
        assert!(
            f[4].1
                .contains("answers all of the matching requests with 500"),
            "{f:?}"
        );
        assert_eq!(f.last().unwrap().1, "a-0 <-> api-server");
    }

    #[test]
    fn api_level_steps_and_probes_go_to_the_observer() {
        let s = scenario(
            "  - {at: 1s, delete-pods: {namespace: kube-system, selector: component=kube-scheduler}}\n  - {at: 2s, bind: {pod: default/p, node: node-1}}\n",
        );
        let mut d = driver(Fake::default());
        play(&mut d, &s, Duration::from_secs(3));
        d.apply(
            &s,
            &PlannedKind::Probe { invariant: 0 },
            Duration::from_secs(3),
        );
        assert_eq!(d.world.calls.len(), 3);
        assert!(
            d.world.calls[0].starts_with("command DeletePods"),
            "{:?}",
            d.world.calls
        );
        assert!(
            d.world.calls[1].starts_with("command Bind"),
            "{:?}",
            d.world.calls
        );
        assert!(
            d.world.calls[2].starts_with("command Probe"),
            "{:?}",
            d.world.calls
        );
    }

    #[test]
    fn self_hosted_components_are_their_pods_containers() {
        let yaml = "name: t\ncluster:\n  nodes: 2\n  self-hosted: true\n  components: {kube-scheduler: {replicas: 2}}\nfaults:\n  - {at: 1s, remove: kube-scheduler, for: 5s}\n  - {at: 10s, kill: kube-scheduler/leader}\n";
        let s = kubechaos_core::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let world = Fake {
            holder: Some("kube-scheduler-abc".into()),
            ..Fake::default()
        };
        let mut d = driver(world);
        play(&mut d, &s, Duration::from_secs(12));
        assert_eq!(
            d.world.calls,
            [
                "containers kube-scheduler None Remove",
                "containers kube-scheduler None Start",
                "containers kube-scheduler Some(\"kube-scheduler-abc\") Kill"
            ]
        );
    }

    /// A pod agent's leader is the pod whose name its holder identity starts with (here
    /// `PODNAME_RANDOM`, as client-go programs write it); its kill is its container's, its
    /// partition cuts that pod's own link, and `agent/NAME` stands for every pod running now.
    #[test]
    fn a_pod_agents_targets_are_its_pods() {
        let yaml = "name: t
cluster:
  nodes: 1
  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}]
faults:
  - {at: 1s, partition: [agent/op/leader, api-server], for: 2s}
  - {at: 5s, kill: agent/op/leader}
  - {at: 6s, remove: agent/op, for: 1s}
";
        let s = kubechaos_core::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let world = Fake {
            holder: Some("op-7d9f-abcde_5f3a".into()),
            pods: vec!["op-7d9f-abcd".into(), "op-7d9f-abcde".into()],
            ..Fake::default()
        };
        let mut d = driver(world);
        play(&mut d, &s, Duration::from_secs(8));
        let mut other = driver(Fake {
            holder: Some("leader-elsewhere".into()),
            pods: vec!["op-7d9f-abcde".into()],
            ..Fake::default()
        });
        play(&mut other, &s, Duration::from_secs(6));
        let said = faults(&other.recorder().snapshot());
        assert!(
            said[0].1.contains("no links matched (the Lease ops/op is held by `leader-elsewhere`, which is none of agent op's running pods"),
            "{said:?}"
        );
        assert!(
            said[2]
                .1
                .starts_with("no pod matched (the Lease ops/op is held by `leader-elsewhere`"),
            "{said:?}"
        );
        assert_eq!(
            d.world.calls,
            [
                "cut op-7d9f-abcde->api-server",
                "cut api-server->op-7d9f-abcde",
                "mend op-7d9f-abcde->api-server",
                "mend api-server->op-7d9f-abcde",
                "containers agent/op Some(\"op-7d9f-abcde\") Kill",
                "containers agent/op None Remove",
                "containers agent/op None Start",
            ]
        );
    }

    /// A holder identity that does not start with its pod's name is read with the agent's
    /// `identity` pattern; what it does not capture matches no pod, and the step says why.
    #[test]
    fn a_pod_agents_identity_pattern_names_its_leader() {
        let yaml = "name: t
cluster:
  nodes: 1
  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}, identity: '^leader@(.+)$'}]
faults:
  - {at: 1s, kill: agent/op/leader}
";
        let s = kubechaos_core::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let mut d = driver(Fake {
            holder: Some("leader@op-7d9f-abcde".into()),
            pods: vec!["op-7d9f-abcd".into(), "op-7d9f-abcde".into()],
            ..Fake::default()
        });
        play(&mut d, &s, Duration::from_secs(2));
        assert_eq!(
            d.world.calls,
            ["containers agent/op Some(\"op-7d9f-abcde\") Kill"]
        );
        let mut other = driver(Fake {
            holder: Some("op-7d9f-abcde".into()),
            pods: vec!["op-7d9f-abcde".into()],
            ..Fake::default()
        });
        play(&mut other, &s, Duration::from_secs(2));
        assert!(other.world.calls.is_empty(), "{:?}", other.world.calls);
        let said = faults(&other.recorder().snapshot());
        assert!(
            said[0].1.contains(
                "its `identity` pattern `^leader@(.+)$` does not capture the name of one of them"
            ),
            "{said:?}"
        );
    }
}
