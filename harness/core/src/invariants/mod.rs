//! Invariants, judged after the run on the recorded timeline. This code does not know which
//! backend produced the events: the sim, a local control plane and a kind cluster are judged
//! alike.
//!
//! One module per invariant, with its judgement and how the live view watches it ([`Watch`]);
//! this module holds what they share: the facts derived from the timeline ([`Timeline`]) and the
//! dispatch over the scenario model's [`Invariant`].

mod available;
mod leader_reacquired;
mod schedulable;
mod single_leader;
mod unschedulable;
mod valid_lease_while_leading;

use std::collections::BTreeMap;

use crate::events::{identity_process, Event, EventKind};
use crate::scenario::{holder_pod, Invariant, LeaseRef, Scenario};

/// The verdict on one invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Index in `expect:`.
    pub(crate) index: usize,
    /// `leader-reacquired kube-system/kube-scheduler`.
    pub label: String,
    /// Whether it held.
    pub held: bool,
    /// The measured figure (held) or what was expected, what was seen, and when (violated).
    pub message: String,
    /// Not held because nothing was seen to judge it on (`single-leader` and
    /// `valid-lease-while-leading` with fewer leadership terms than `min-terms`): a failure,
    /// which the live view leaves open while the run lasts.
    pub no_evidence: bool,
    /// Not held because the evidence cannot tell: it held with the facts known only to within
    /// an interval (a pod's status times, whole seconds) at one end of their intervals and not
    /// at the other ([`judge`]). Neither a pass nor a violation; the message says both.
    pub cannot_tell: bool,
    /// When the window opened (ms since start), if the invariant has one.
    pub(crate) anchor_ms: Option<u64>,
    /// When the window closed (ms since start), if the invariant has one.
    pub(crate) deadline_ms: Option<u64>,
    /// When a violation of an invariant judged over the whole run began and ended.
    pub(crate) violated: Option<(u64, u64)>,
    /// How long after its anchor it held: `leader-reacquired` (the renewal seen) and
    /// `schedulable` (the probe bound). The figures the sim and the real control plane are
    /// compared on.
    pub took_ms: Option<u64>,
}

impl Verdict {
    /// The verdict in a word, as the reports print it: `PASS`, `FAIL`, or `CANNOT TELL`.
    pub fn word(&self) -> &'static str {
        verdict_word(self.held, self.cannot_tell)
    }
}

/// A verdict in a word: `PASS`, `FAIL`, or `CANNOT TELL` (the evidence could not tell).
pub fn verdict_word(held: bool, cannot_tell: bool) -> &'static str {
    match (held, cannot_tell) {
        (true, _) => "PASS",
        (false, true) => "CANNOT TELL",
        (false, false) => "FAIL",
    }
}

/// Facts derived from the timeline that several invariants use.
pub(crate) struct Timeline<'a> {
    events: &'a [Event],
    end_ms: u64,
    /// Moment the last fault ended: the last `fault-applied` event, or, for one that starts an
    /// API server or etcd again, when an API server served again ([`Timeline::back_at`]).
    last_fault_ms: u64,
    /// Moment each step id was applied, and (as `ID.end`) undone by its `for:`, as
    /// `last_fault_ms` counts it.
    step_ms: BTreeMap<String, u64>,
    /// When an API server answered its readiness check again (`api-server-serving`), in order.
    serving: Vec<u64>,
    /// How the holder identities of each pod agent's Lease name its pods, by Lease.
    pod_agents: BTreeMap<String, PodNaming>,
}

/// A fault that can keep candidates from a Lease, and while.
pub(crate) struct Hindrance {
    /// The step's action, as written.
    pub(crate) fault: String,
    /// The processes it acts on; `None`: every client.
    pub(crate) on: Option<Vec<String>>,
    /// When it was applied.
    pub(crate) since: u64,
    /// When it ended; `None`: still in effect.
    pub(crate) until: Option<u64>,
}

impl Hindrance {
    /// Whether it acts on `process`.
    pub(crate) fn on(&self, process: &str) -> bool {
        self.on
            .as_ref()
            .is_none_or(|on| on.iter().any(|p| p == process))
    }
}

/// How a pod agent's holder identities name its pods: its `identity` pattern, and its candidate
/// pods.
struct PodNaming {
    pattern: Option<regex::Regex>,
    pods: Vec<String>,
}

/// Whether a fault step's event (`undo`: its undoing after its `for:`) starts an API server or
/// an etcd member again.
fn brings_back(action: &crate::scenario::Action, undo: bool) -> bool {
    use crate::scenario::{Action, ProcessOp, Target};
    match action {
        Action::ApiServer(op) | Action::Etcd(op) => match op {
            ProcessOp::Stop | ProcessOp::Crash => undo,
            ProcessOp::Start | ProcessOp::Restart => true,
        },
        Action::Remove(Target::ApiServer(_) | Target::Etcd(_)) => undo,
        Action::Start(Target::ApiServer(_) | Target::Etcd(_)) => true,
        _ => false,
    }
}

impl<'a> Timeline<'a> {
    fn new(events: &'a [Event]) -> Self {
        let mut last_fault_ms = 0;
        let mut step_ms = BTreeMap::new();
        let mut end_ms = 0;
        let mut serving: Vec<u64> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ApiServerServing { .. }))
            .map(|e| e.t_ms)
            .collect();
        serving.sort_unstable();
        for e in events {
            end_ms = end_ms.max(e.t_ms);
            if let EventKind::FaultApplied { id, undo, .. } = &e.kind {
                last_fault_ms = last_fault_ms.max(e.t_ms);
                if let Some(id) = id {
                    let key = if *undo {
                        format!("{id}{}", crate::scenario::END_SUFFIX)
                    } else {
                        id.clone()
                    };
                    step_ms.entry(key).or_insert(e.t_ms);
                }
            }
        }
        Timeline {
            events,
            end_ms,
            last_fault_ms,
            step_ms,
            serving,
            pod_agents: BTreeMap::new(),
        }
    }

    /// When the start of an API server or etcd at `t` had the API served again: the first
    /// `api-server-serving` at or after `t` (`None`: none came in the run). A world that records
    /// none at all (the sim, whose API server serves as it starts) has it at `t`.
    fn back_at(&self, t: u64) -> Option<u64> {
        if self.serving.is_empty() {
            return Some(t);
        }
        self.serving.iter().copied().find(|&s| s >= t)
    }

    /// The ends of the fault steps that start an API server or etcd again counted from when the
    /// API server served again, not from when the process was started: a fault ends once
    /// everything it stopped is back, and an API server that is slow to start on a busy
    /// machine is the machine's, not the software under test's. One that never served again is
    /// counted at its start (the verdict's explanation says it held candidates back).
    fn with_fault_ends(mut self, s: &Scenario) -> Self {
        let mut last = self.last_fault_ms;
        let mut ends = Vec::new();
        for e in self.events {
            let EventKind::FaultApplied { step, id, undo, .. } = &e.kind else {
                continue;
            };
            let Some(f) = s.faults.get(*step) else {
                continue;
            };
            if !brings_back(&f.action, *undo) {
                continue;
            }
            let back = self.back_at(e.t_ms).unwrap_or(e.t_ms);
            last = last.max(back);
            if let Some(id) = id {
                let key = if *undo {
                    format!("{id}{}", crate::scenario::END_SUFFIX)
                } else {
                    id.clone()
                };
                ends.push((key, e.t_ms, back));
            }
        }
        for (key, at, back) in ends {
            // The first application of the key is its anchor (as [`Timeline::new`] takes it).
            if self.step_ms.get(&key) == Some(&at) {
                self.step_ms.insert(key, back);
            }
        }
        self.last_fault_ms = last;
        self
    }

    /// With what the scenario says of its pod agents' identities.
    fn with_pod_agents(mut self, s: &Scenario) -> Self {
        for a in s.cluster.agents.iter().filter(|a| a.is_pods()) {
            let pods = self.candidates(s, &a.lease);
            self.pod_agents.insert(
                a.lease.to_string(),
                PodNaming {
                    pattern: a.identity_pattern(),
                    pods,
                },
            );
        }
        self
    }

    /// The process a holder identity of `lease` stands for: a pod agent's pod
    /// ([`holder_pod`]; the identity itself if it names none), else the part before the `_`.
    fn holder_process(&self, lease: &str, identity: &str) -> String {
        match self.pod_agents.get(lease) {
            Some(n) => holder_pod(n.pattern.as_ref(), identity, &n.pods)
                .cloned()
                .unwrap_or_else(|| identity.to_owned()),
            None => identity_process(identity).to_owned(),
        }
    }

    fn anchor(&self, inv: &Invariant) -> u64 {
        match inv.after() {
            Some(id) => self.step_ms.get(id).copied().unwrap_or(self.end_ms),
            None => self.last_fault_ms,
        }
    }

    /// The incarnation of `process` running at `t`, if it is running.
    fn incarnation_at(&self, process: &str, t: u64) -> Option<u32> {
        let mut running = None;
        for e in self.events.iter().take_while(|e| e.t_ms <= t) {
            match &e.kind {
                EventKind::ProcessStarted {
                    process: p,
                    incarnation,
                } if p == process => running = Some(*incarnation),
                EventKind::ProcessExited { process: p, .. } if p == process => running = None,
                _ => {}
            }
        }
        running
    }

    /// Whether the process a holder identity of `lease` names, in the incarnation that wrote a
    /// record of it at `written` (the record's source time: its `renewTime`, or `acquireTime`
    /// when it changed hands), is still running at `t`. A process the timeline never mentions
    /// (on an existing cluster, kubechaos sees Leases, not processes) counts as running: its
    /// renewals are the evidence.
    fn alive(&self, lease: &str, identity: &str, written: u64, t: u64) -> bool {
        let process = self.holder_process(lease, identity);
        let process = process.as_str();
        let mentioned = self.events.iter().any(|e| match &e.kind {
            EventKind::ProcessStarted { process: p, .. }
            | EventKind::ProcessExited { process: p, .. } => p == process,
            _ => false,
        });
        if !mentioned {
            return true;
        }
        // `NAME_INCARNATION` is how kubechaos names the processes it starts; a pod's program
        // makes its own identity (`PODNAME_RANDOM`, or the pod's name alone, which every start
        // of its container writes again), whose suffix says nothing of incarnations: the record
        // was written by the start of it that ran when it was written.
        let pod = self
            .events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::CandidatePod { process: p, .. } if p == process));
        let wanted = if pod {
            self.incarnation_at(process, written)
        } else {
            identity
                .rsplit_once('_')
                .and_then(|(_, i)| i.parse::<u32>().ok())
        };
        match (self.incarnation_at(process, t), wanted) {
            (Some(running), Some(wanted)) => running == wanted,
            (running, _) => running.is_some(),
        }
    }

    /// The processes that compete for a lease: the scenario's replicas, for a self-hosted
    /// component every pod of it that ran (its name starts with the component's), and for a pod
    /// agent every pod the timeline said was one of its candidates.
    fn candidates(&self, s: &Scenario, lease: &LeaseRef) -> Vec<String> {
        if let Some(agent) = s
            .cluster
            .agents
            .iter()
            .find(|a| a.is_pods() && &a.lease == lease)
        {
            let mut out: Vec<String> = Vec::new();
            for e in self.events {
                if let EventKind::CandidatePod {
                    agent: a, process, ..
                } = &e.kind
                {
                    if *a == agent.name && !out.contains(process) {
                        out.push(process.clone());
                    }
                }
            }
            return out;
        }
        let component = crate::scenario::Component::ALL
            .into_iter()
            .find(|c| &c.lease() == lease);
        match component {
            Some(c) if s.cluster.self_hosted => {
                let prefix = format!("{}-", c.name());
                let mut out: Vec<String> = Vec::new();
                for e in self.events {
                    if let EventKind::ProcessStarted { process, .. } = &e.kind {
                        if process.starts_with(&prefix) && !out.contains(process) {
                            out.push(process.clone());
                        }
                    }
                }
                out
            }
            _ => s.candidates(lease),
        }
    }

    /// The probe pod of invariant `index`: when it was created, and its name.
    fn probe_pod(&self, index: usize) -> Option<(u64, String)> {
        self.events.iter().find_map(|e| match &e.kind {
            EventKind::ProbeCreated { invariant, pod } if *invariant == index => {
                Some((e.t_ms, pod.clone()))
            }
            _ => None,
        })
    }

    /// When `pod` was bound, and to which node.
    fn bound(&self, pod: &str) -> Option<(u64, String)> {
        self.events.iter().find_map(|e| match &e.kind {
            EventKind::PodBound { pod: p, node } if p == pod => Some((e.t_ms, node.clone())),
            _ => None,
        })
    }

    /// When the incarnation of `process` running at `t` started.
    fn started_at(&self, process: &str, t: u64) -> Option<u64> {
        let mut since = None;
        for e in self.events.iter().take_while(|e| e.t_ms <= t) {
            match &e.kind {
                EventKind::ProcessStarted { process: p, .. } if p == process => {
                    since = Some(e.t_ms)
                }
                EventKind::ProcessExited { process: p, .. } if p == process => since = None,
                _ => {}
            }
        }
        since
    }

    /// The faults applied by `t` that can keep a candidate from a Lease, as the file writes
    /// them, each with the processes it acts on (`None`: every client) and when it ended (`None`:
    /// still in effect at `t`): partitions, delays and losses (on the links they were applied
    /// to; between API servers and etcd, every client) until undone or healed, API errors until
    /// undone, and API servers or etcd members stopped or removed until started again and the
    /// API served again ([`Timeline::back_at`]).
    fn hindrances(&self, s: &Scenario, t: u64) -> Vec<Hindrance> {
        use crate::scenario::{Action, ProcessOp, Target};
        let mut all: Vec<Hindrance> = Vec::new();
        // Index in `all` of each step's open hindrance.
        let mut open: BTreeMap<usize, usize> = BTreeMap::new();
        for e in self.events.iter().take_while(|e| e.t_ms <= t) {
            let EventKind::FaultApplied {
                step, undo, links, ..
            } = &e.kind
            else {
                continue;
            };
            let Some(f) = s.faults.get(*step) else {
                continue;
            };
            // An API server or etcd started again holds candidates back until the API is
            // served again (`None`: not by `t`).
            let end = if brings_back(&f.action, *undo) {
                self.back_at(e.t_ms).filter(|&b| b <= t)
            } else {
                Some(e.t_ms)
            };
            let mut close = |which: &dyn Fn(&Action) -> bool, open: &mut BTreeMap<usize, usize>| {
                open.retain(|k, i| {
                    if which(&s.faults[*k].action) {
                        all[*i].until = end;
                        false
                    } else {
                        true
                    }
                });
            };
            if *undo {
                if let Some(i) = open.remove(step) {
                    all[i].until = end;
                }
                continue;
            }
            let on = match &f.action {
                Action::Partition(_) | Action::Delay(_) | Action::Loss(_) => {
                    // The processes at the ends of the links it was applied to.
                    let mut ends: Vec<String> = links.iter().flatten().cloned().collect();
                    ends.sort();
                    ends.dedup();
                    // Between API servers and etcd: any client whose connection lands on that
                    // API server is held back, and the timeline does not say whose does.
                    let control_plane =
                        |p: &String| p.starts_with("api-server") || p.starts_with("etcd");
                    if ends.is_empty() {
                        // It matched no link (its leader was not known): it held nobody back.
                        None
                    } else if ends.iter().all(control_plane) {
                        Some(None)
                    } else {
                        Some(Some(ends))
                    }
                }
                Action::ApiErrors(_)
                | Action::ApiServer(ProcessOp::Stop | ProcessOp::Crash)
                | Action::Etcd(ProcessOp::Stop | ProcessOp::Crash)
                | Action::Remove(Target::ApiServer(_) | Target::Etcd(_)) => Some(None),
                Action::Start(t @ (Target::ApiServer(_) | Target::Etcd(_))) => {
                    let kind = std::mem::discriminant(t);
                    close(
                        &|a| matches!(a, Action::Remove(r) if std::mem::discriminant(r) == kind),
                        &mut open,
                    );
                    None
                }
                Action::Heal(_) => {
                    close(&|a| a.link().is_some(), &mut open);
                    None
                }
                Action::ApiServer(ProcessOp::Start | ProcessOp::Restart) => {
                    close(&|a| matches!(a, Action::ApiServer(_)), &mut open);
                    None
                }
                Action::Etcd(ProcessOp::Start | ProcessOp::Restart) => {
                    close(&|a| matches!(a, Action::Etcd(_)), &mut open);
                    None
                }
                _ => None,
            };
            if let Some(on) = on {
                open.insert(*step, all.len());
                all.push(Hindrance {
                    fault: f.action.to_string(),
                    on,
                    since: e.t_ms,
                    until: None,
                });
            }
        }
        all
    }

    /// Candidate processes running at `t`.
    fn running(&self, candidates: &[String], t: u64) -> Vec<String> {
        candidates
            .iter()
            .filter(|c| self.incarnation_at(c, t).is_some())
            .cloned()
            .collect()
    }
}

/// How the live view watches an invariant while a run plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Decided once it holds; violated when its deadline passes first.
    UntilHeld,
    /// Holds only if nothing happens for its whole window; a violation decides it at once.
    WholeWindow,
    /// Watched until the run ends; a violation decides it at once.
    WholeRun,
}

/// How the live view watches `inv`.
pub(crate) fn watch(inv: &Invariant) -> Watch {
    match inv {
        Invariant::LeaderReacquired(_) => leader_reacquired::WATCH,
        Invariant::Schedulable(_) => schedulable::WATCH,
        Invariant::Unschedulable(_) => unschedulable::WATCH,
        Invariant::SingleLeader(_) => single_leader::WATCH,
        Invariant::ValidLeaseWhileLeading(_) => valid_lease_while_leading::WATCH,
        Invariant::Available(_) => available::WATCH,
    }
}

/// For an invariant judged on what the candidates say of their leading (`single-leader`,
/// `valid-lease-while-leading`): `Some(why)` when fewer than `min_terms` leadership terms of
/// `lease` were observed. Then nothing was judged, and the invariant has not held: a run in
/// which no candidate's words were read cannot show that two never led at once. Says what was
/// seen of the Lease instead, and where the candidates' words were looked for.
fn no_evidence(
    tl: &Timeline<'_>,
    s: &Scenario,
    lease: &LeaseRef,
    min_terms: u32,
) -> Option<String> {
    let name = lease.to_string();
    let terms = tl
        .events
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::LeadingStarted { lease: l, .. } if *l == name))
        .count();
    if terms >= min_terms as usize {
        return None;
    }
    let held = tl.events.iter().find_map(|e| match &e.kind {
        EventKind::LeaseObserved {
            lease: l,
            holder: Some(h),
            ..
        } if *l == name => Some((e.t_ms, h.clone())),
        _ => None,
    });
    let lease_said = match held {
        Some((t, h)) => format!(
            "the Lease was held all the same (by {}, first seen at {})",
            tl.holder_process(&name, &h),
            crate::events::fmt_ms(t)
        ),
        None => "the Lease was never seen held either".to_owned(),
    };
    let mut looked: Vec<String> = Vec::new();
    for a in s.cluster.agents.iter().filter(|a| a.lease == *lease) {
        looked.push(match &a.leading {
            Some(l) => format!(
                "agent {}'s `leading.started` pattern `{}` matched no line its processes printed (with `leading:` patterns, they are its only evidence; patterns are case-sensitive: client-go logs `Successfully acquired lease`, controller-runtime then `leader election lost`)",
                a.name, l.started
            ),
            None => format!(
                "agent {} printed no leadership report (`{{\"event\":\"leading-started\",...}}` lines); give it `leading:` patterns that its log lines match (client-go: `started: 'Successfully acquired lease'`)",
                a.name
            ),
        });
    }
    let looked = if looked.is_empty() {
        String::new()
    } else {
        format!("; {}", looked.join("; "))
    };
    Some(format!(
        "no evidence: {terms} leadership term{} of {name} observed where {min_terms} {} needed to judge it, so it has not held; {lease_said}{looked}. If no candidate is meant to say it leads, write `min-terms: 0`",
        if terms == 1 { "" } else { "s" },
        if min_terms == 1 { "is" } else { "are" },
    ))
}

/// What a judge of the candidates' terms says: held, its words, when it was violated.
type Judged = (bool, String, Option<(u64, u64)>);

/// The verdict of an invariant judged on the candidates' terms, unless there was no evidence to
/// judge it on (`no_evidence`: why): then it has not held, and no violation is drawn. Returns
/// ((held, message), when violated, no evidence).
fn on_terms(
    (held, message, when): Judged,
    no_evidence: Option<String>,
) -> ((bool, String), Option<(u64, u64)>, bool) {
    match no_evidence {
        Some(why) => ((false, why), None, true),
        None => ((held, message), when, false),
    }
}

/// Judge every invariant of a scenario on a recorded timeline.
///
/// A fact whose source tells its time only to within an interval ([`Event::within_ms`]: a pod's
/// start or exit from its status, to the whole second) is judged twice: with every such fact
/// at the start of its interval (where it is recorded), and with every one at the end of its
/// interval (as far as the order its process told allows: [`at_latest`]). Where the two
/// verdicts differ, the evidence cannot tell, and the verdict says so with both readings and
/// the facts in question instead of passing or failing. The sim's, the local backend's and a
/// kind node's runtime's facts are exact: they are judged once.
pub fn judge(s: &Scenario, events: &[Event]) -> Vec<Verdict> {
    let first = judge_placed(s, events);
    if events.iter().all(|e| e.within_ms.is_none()) {
        return first;
    }
    let latest = at_latest(s, events);
    let last = judge_placed(s, &latest);
    first
        .into_iter()
        .zip(last)
        .map(|(a, b)| {
            if a.held == b.held {
                a
            } else {
                cannot_tell(a, b, events)
            }
        })
        .collect()
}

/// The verdict of an invariant that held with the coarse facts at one end of their intervals
/// (`a`: at their start, `b`: at their end) and not at the other.
fn cannot_tell(a: Verdict, b: Verdict, events: &[Event]) -> Verdict {
    use crate::events::{fact_text, fmt_ms};
    let failed = if a.held { &b } else { &a };
    let near = failed
        .violated
        .map(|v| v.0)
        .or(failed.deadline_ms)
        .unwrap_or(0);
    let mut coarse: Vec<&Event> = events.iter().filter(|e| e.within_ms.is_some()).collect();
    coarse.sort_by_key(|e| e.t_ms.abs_diff(near));
    let shown: Vec<String> = coarse
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "{} at {} or up to {} ms later",
                fact_text(&e.kind),
                fmt_ms(e.t_ms),
                e.within_ms.unwrap_or(0)
            )
        })
        .collect();
    let more = coarse.len().saturating_sub(shown.len());
    let reading = |v: &Verdict| {
        if v.held {
            format!("held ({})", v.message)
        } else {
            format!("did not hold ({})", v.message)
        }
    };
    Verdict {
        held: false,
        no_evidence: false,
        cannot_tell: true,
        message: format!(
            "the evidence cannot tell: {}{}, told only to the whole second (a pod's status through the API); with each at the start of its second it {}, at its end it {}",
            shown.join("; "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
            reading(&a),
            reading(&b)
        ),
        violated: None,
        took_ms: None,
        ..a
    }
}

/// The timeline with each fact known only to within an interval placed at the end of its
/// interval, as far as the order its process told allows: a start no later than the next exact
/// fact of its process (a line it printed, a Lease record in its name), an exit before its
/// process's next start. Sorted by time. A fact of the run before (a line of the incarnation
/// that exited) taken as a bound only keeps a start earlier: the second reading is then closer
/// to the first, never beyond what happened.
fn at_latest(s: &Scenario, events: &[Event]) -> Vec<Event> {
    let tl = Timeline::new(events).with_pod_agents(s);
    // Whether `e` is something `process` said or wrote: a line of it, a leadership report or a
    // Lease record in its name (a pod's own identity, or kubechaos's `PROCESS_INCARNATION`).
    let of = |e: &Event, process: &str| -> bool {
        let named = |lease: &str, identity: &str| {
            tl.holder_process(lease, identity) == process || identity_process(identity) == process
        };
        match &e.kind {
            EventKind::ProcessNote { process: p, .. }
            | EventKind::ReportRejected { process: p, .. } => p == process,
            EventKind::LeadingStarted { lease, identity }
            | EventKind::LeadingStopped {
                lease, identity, ..
            } => named(lease, identity),
            EventKind::LeaseObserved {
                lease,
                holder: Some(h),
                ..
            } => named(lease, h),
            _ => false,
        }
    };
    let mut out = events.to_vec();
    for (i, e) in events.iter().enumerate() {
        let (Some(_), EventKind::ProcessStarted { process, .. }) = (e.within_ms, &e.kind) else {
            continue;
        };
        let bound = events
            .iter()
            .filter(|x| x.within_ms.is_none() && x.t_ms >= e.t_ms)
            .filter(|x| of(x, process))
            .map(|x| x.t_ms)
            .min();
        out[i].t_ms = e.latest_ms().min(bound.unwrap_or(u64::MAX)).max(e.t_ms);
    }
    for (i, e) in events.iter().enumerate() {
        let (Some(_), EventKind::ProcessExited { process, .. }) = (e.within_ms, &e.kind) else {
            continue;
        };
        // Its process's next start, as just placed.
        let next = events
            .iter()
            .enumerate()
            .skip(i + 1)
            .find(|(_, x)| matches!(&x.kind, EventKind::ProcessStarted { process: p, .. } if p == process))
            .map(|(j, _)| out[j].t_ms);
        let latest = match next {
            Some(n) => e.latest_ms().min(n.saturating_sub(1)),
            None => e.latest_ms(),
        };
        out[i].t_ms = latest.max(e.t_ms);
    }
    out.sort_by_key(|e| e.t_ms);
    out
}

/// Judge every invariant on a timeline whose facts are placed.
fn judge_placed(s: &Scenario, events: &[Event]) -> Vec<Verdict> {
    let tl = Timeline::new(events).with_pod_agents(s).with_fault_ends(s);
    s.expect
        .iter()
        .enumerate()
        .map(|(index, inv)| {
            // The window: from the anchor (a step's time, or the last fault's end) for as long as
            // the invariant says; `single-leader` has none (it is judged over the whole run).
            let anchor = tl.anchor(&inv.value);
            let deadline = anchor + inv.value.window().as_millis() as u64;
            let window = Some(anchor).zip(Some(deadline));
            let mut violated = None;
            let mut took_ms = None;
            let mut no_evidence_seen = false;
            let ((held, message), window) = match &inv.value {
                Invariant::LeaderReacquired(i) => {
                    let (held, message, took) =
                        leader_reacquired::judge(&tl, s, i, anchor, deadline);
                    took_ms = took;
                    ((held, message), window)
                }
                Invariant::SingleLeader(i) => {
                    let judged = single_leader::judge(&tl, i);
                    let v;
                    (v, violated, no_evidence_seen) =
                        on_terms(judged, no_evidence(&tl, s, &i.lease, i.min_terms));
                    (v, None)
                }
                Invariant::ValidLeaseWhileLeading(i) => {
                    let judged = valid_lease_while_leading::judge(&tl, i);
                    let v;
                    (v, violated, no_evidence_seen) =
                        on_terms(judged, no_evidence(&tl, s, &i.lease, i.min_terms));
                    (v, None)
                }
                Invariant::Schedulable(i) => {
                    let (held, message, took) = schedulable::judge(&tl, i, index, anchor, deadline);
                    took_ms = took;
                    ((held, message), window)
                }
                Invariant::Unschedulable(i) => (
                    unschedulable::judge(&tl, i, index, anchor, deadline),
                    window,
                ),
                Invariant::Available(i) => (available::judge(&tl, i, anchor, deadline), window),
            };
            Verdict {
                index,
                label: inv.value.label(),
                held,
                message,
                no_evidence: no_evidence_seen,
                cannot_tell: false,
                anchor_ms: window.map(|w| w.0),
                deadline_ms: window.map(|w| w.1),
                violated,
                took_ms,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(t_ms: u64, available: u32, reported: u32, ready_pods: u32) -> Event {
        Event {
            t_ms,
            read_ms: None,
            within_ms: None,
            kind: EventKind::DeploymentObserved {
                deployment: "kube-system/s".into(),
                available,
                desired: 2,
                reported,
                ready_pods,
            },
        }
    }

    fn at(t_ms: u64, kind: EventKind) -> Event {
        Event::new(t_ms, kind)
    }

    /// The observer's read of Lease `ops/op`: held by `holder`, renewed at `renew` for 15s.
    fn lease_seen(t_ms: u64, holder: &str, renew: u64) -> Event {
        at(
            t_ms,
            EventKind::LeaseObserved {
                lease: "ops/op".into(),
                holder: Some(holder.into()),
                renew_ms: Some(renew),
                transitions: 0,
                duration_ms: Some(15_000),
                written_ms: None,
            },
        )
    }

    /// Pod `ops/op-1` of pod agent `op`, running from the start.
    fn candidate_op_1() -> Vec<Event> {
        vec![
            at(
                0,
                EventKind::CandidatePod {
                    agent: "op".into(),
                    pod: "ops/op-1".into(),
                    process: "op-1".into(),
                },
            ),
            at(
                0,
                EventKind::ProcessStarted {
                    process: "op-1".into(),
                    incarnation: 1,
                },
            ),
        ]
    }

    fn judge_available(events: &[Event], anchor: u64) -> (bool, String) {
        let tl = Timeline::new(events);
        let inv = crate::scenario::Available {
            deployment: "kube-system/s".into(),
            within: std::time::Duration::from_secs(30),
            after: None,
        };
        available::judge(&tl, &inv, anchor, anchor + 30_000)
    }

    /// `after: ID.end` opens the window when the step's `for:` undid it, as recorded; `after:
    /// ID` when it was applied.
    #[test]
    fn an_anchor_at_a_steps_end_is_its_recorded_undo() {
        let s = crate::scenario::parse(
            std::path::Path::new("t.yaml"),
            b"name: t\ncluster: {components: {kube-scheduler: {replicas: 1}}}\nfaults:\n  - {at: 10s, id: outage, api-server: stop, for: 45s}\nexpect:\n  - schedulable: {within: 1m, after: outage}\n  - schedulable: {within: 1m, after: outage.end}\n",
        )
        .unwrap();
        let applied = |t_ms: u64, undo: bool| {
            at(
                t_ms,
                EventKind::FaultApplied {
                    step: 0,
                    id: Some("outage".into()),
                    action: "api-server: stop".into(),
                    undo,
                    detail: String::new(),
                    links: Vec::new(),
                },
            )
        };
        let events = [
            applied(10_020, false),
            applied(55_040, true),
            at(120_000, EventKind::RunEnded {}),
        ];
        let v = judge(&s, &events);
        assert_eq!(v[0].anchor_ms, Some(10_020));
        assert_eq!(v[1].anchor_ms, Some(55_040));
        assert_eq!(v[1].deadline_ms, Some(115_040));
    }

    /// An API server started again ends its outage when it served again (`api-server-serving`),
    /// not when it was started: the anchor of `after: ID.end` and of the last fault's end are
    /// there, and the step's own start (`after: ID`) is not moved. One that never served again
    /// in the run is counted at its start.
    #[test]
    fn an_api_server_outage_ends_when_the_api_server_served_again() {
        let s = crate::scenario::parse(
            std::path::Path::new("t.yaml"),
            b"name: t\ncluster: {components: {kube-scheduler: {replicas: 1}}}\nfaults:\n  - {at: 10s, id: outage, api-server: stop, for: 30s}\nexpect:\n  - schedulable: {within: 1m, after: outage}\n  - schedulable: {within: 1m, after: outage.end}\n  - schedulable: {within: 1m}\n",
        )
        .unwrap();
        let applied = |t_ms: u64, undo: bool| {
            at(
                t_ms,
                EventKind::FaultApplied {
                    step: 0,
                    id: Some("outage".into()),
                    action: "api-server: stop".into(),
                    undo,
                    detail: String::new(),
                    links: Vec::new(),
                },
            )
        };
        let serving = |t_ms: u64, incarnation: u32| {
            at(
                t_ms,
                EventKind::ApiServerServing {
                    process: "api-server".into(),
                    incarnation,
                },
            )
        };
        let events = [
            serving(0, 1),
            applied(10_020, false),
            applied(48_200, true),
            serving(64_700, 2),
            at(150_000, EventKind::RunEnded {}),
        ];
        let v = judge(&s, &events);
        assert_eq!(v[0].anchor_ms, Some(10_020));
        assert_eq!(v[1].anchor_ms, Some(64_700));
        assert_eq!(v[1].deadline_ms, Some(124_700));
        assert_eq!(v[2].anchor_ms, Some(64_700));
        // Never served again: at its start.
        let events = [
            serving(0, 1),
            applied(10_020, false),
            applied(48_200, true),
            at(150_000, EventKind::RunEnded {}),
        ];
        let v = judge(&s, &events);
        assert_eq!(v[1].anchor_ms, Some(48_200));
        assert_eq!(v[2].anchor_ms, Some(48_200));
    }

    /// Found by the real tier (the client-go example on a busy machine): kube-apiserver,
    /// started again at 48.2 s, served at 1m04.7s. A candidate kept from the Lease by the outage
    /// waits a full lease duration from when it could read the record again, so it was free to
    /// take it from 1m19.7s, not from 15 s after the start; until the API server served, the
    /// outage still held it back.
    #[test]
    fn an_outage_holds_candidates_back_until_the_api_server_served_again() {
        let yaml = "name: t
cluster:
  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}]
faults: [{at: 10s, id: outage, for: 30s, api-server: stop}]
expect:
  - leader-reacquired: {lease: ops/op, within: 30s, after: outage.end}
  - leader-reacquired: {lease: ops/op, within: 10s, after: outage}
";
        let s = crate::scenario::parse(std::path::Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let applied = |t_ms: u64, undo: bool| {
            at(
                t_ms,
                EventKind::FaultApplied {
                    step: 0,
                    id: Some("outage".into()),
                    action: "api-server: stop".into(),
                    undo,
                    detail: String::new(),
                    links: Vec::new(),
                },
            )
        };
        let serving = |t_ms: u64, incarnation: u32| {
            at(
                t_ms,
                EventKind::ApiServerServing {
                    process: "api-server".into(),
                    incarnation,
                },
            )
        };
        let mut events = candidate_op_1();
        events.extend([
            serving(0, 1),
            lease_seen(9_000, "op-1_a", 9_000),
            applied(10_020, false),
            applied(48_200, true),
            serving(64_700, 2),
            at(120_000, EventKind::RunEnded {}),
        ]);
        let v = judge(&s, &events);
        assert!(!v[0].held, "{}", v[0].message);
        assert_eq!(v[0].anchor_ms, Some(64_700));
        assert!(
            v[0].message.contains(
                "free to take it, with nothing in the way: op-1 (from 1m19.7s to 1m34.7s)"
            ),
            "{}",
            v[0].message
        );
        // At 20 s, the API server down: held back by the outage, still in effect.
        assert!(!v[1].held, "{}", v[1].message);
        assert!(
            v[1].message
                .contains("op-1 was held back by `api-server: stop`, still in effect"),
            "{}",
            v[1].message
        );
    }

    /// A pod agent whose `leading:` patterns match none of its lines while its pod holds the
    /// Lease: nothing said who led, so neither leadership invariant held (once they passed with
    /// "0 leadership terms observed"), and the words say which pattern found nothing. With
    /// `min-terms: 0` the same run holds; with one term seen it is judged as before.
    #[test]
    fn no_leadership_term_observed_is_no_evidence_and_not_a_pass() {
        let yaml = |min: &str| {
            format!(
                "name: t
cluster:
  agents: [{{name: op, lease: ops/op, pods: {{namespace: ops, selector: app=op}}, leading: {{started: 'successfully acquired lease'}}}}]
expect:
  - single-leader: {{lease: ops/op{min}}}
  - valid-lease-while-leading: {{lease: ops/op{min}}}
"
            )
        };
        let mut events = candidate_op_1();
        events.extend([
            lease_seen(100, "op-1_x", 100),
            lease_seen(10_100, "op-1_x", 10_100),
            lease_seen(19_100, "op-1_x", 19_100),
            at(20_000, EventKind::RunEnded {}),
        ]);
        let parse = |y: String| {
            crate::scenario::parse(std::path::Path::new("t.yaml"), y.as_bytes()).unwrap()
        };
        let v = judge(&parse(yaml("")), &events);
        for v in &v {
            assert!(!v.held, "{}: {}", v.label, v.message);
            assert!(
                v.message.starts_with("no evidence: 0 leadership terms of ops/op observed where 1 is needed to judge it, so it has not held; the Lease was held all the same (by op-1, first seen at 0.1s); agent op's `leading.started` pattern `successfully acquired lease` matched no line"),
                "{}",
                v.message
            );
            assert!(v.message.contains("`min-terms: 0`"), "{}", v.message);
            assert_eq!(v.violated, None);
            assert!(v.no_evidence);
        }
        let v = judge(&parse(yaml(", min-terms: 0")), &events);
        assert!(v.iter().all(|v| v.held), "{v:?}");
        events.insert(
            3,
            at(
                150,
                EventKind::LeadingStarted {
                    lease: "ops/op".into(),
                    identity: "op-1_1".into(),
                },
            ),
        );
        let v = judge(&parse(yaml("")), &events);
        assert!(v.iter().all(|v| v.held), "{v:?}");
        assert!(v[0].message.contains("(1 leadership term observed)"));
    }

    /// A pod agent whose program writes its identity in its own way: its `identity` pattern
    /// maps the Lease's holder to its pod, so the pod that leads on a Lease naming it is judged
    /// valid and, once the pod is gone, the holder is known not to run. Without the pattern the
    /// same timeline would read as leading on a Lease that names someone else.
    #[test]
    fn a_pod_agents_identity_pattern_maps_holders_to_its_pods() {
        let yaml = |identity: &str| {
            format!(
                "name: t
cluster:
  agents: [{{name: op, lease: ops/op, pods: {{namespace: ops, selector: app=op}}{identity}}}]
faults: [{{at: 1s, kill: agent/op}}]
expect:
  - valid-lease-while-leading: {{lease: ops/op}}
  - leader-reacquired: {{lease: ops/op, within: 10s}}
"
            )
        };
        let lease = |t_ms: u64, renew: u64| lease_seen(t_ms, "leader@op-1", renew);
        let mut events = candidate_op_1();
        events.extend([
            lease(100, 100),
            at(
                200,
                EventKind::LeadingStarted {
                    lease: "ops/op".into(),
                    identity: "op-1_1".into(),
                },
            ),
            at(
                5_000,
                EventKind::FaultApplied {
                    step: 0,
                    id: None,
                    action: "kill: agent/op".into(),
                    undo: false,
                    detail: String::new(),
                    links: Vec::new(),
                },
            ),
            at(
                5_000,
                EventKind::ProcessExited {
                    process: "op-1".into(),
                    reason: "killed".into(),
                },
            ),
            // The observer's next read: renewed before the kill, seen after it.
            lease(5_500, 4_900),
            at(20_000, EventKind::RunEnded {}),
        ]);
        let with = crate::scenario::parse(
            std::path::Path::new("t.yaml"),
            yaml(", identity: '^leader@(.+)$'").as_bytes(),
        )
        .unwrap();
        let v = judge(&with, &events);
        assert!(v[0].held, "{}", v[0].message);
        assert!(
            !v[1].held,
            "a holder whose pod was killed does not re-acquire"
        );
        assert!(
            v[1].message.contains("process not running"),
            "{}",
            v[1].message
        );

        let without =
            crate::scenario::parse(std::path::Path::new("t.yaml"), yaml("").as_bytes()).unwrap();
        let v = judge(&without, &events);
        assert!(!v[0].held, "{}", v[0].message);
        assert!(
            v[0].message.contains("the Lease named leader@op-1"),
            "{}",
            v[0].message
        );
        assert!(
            v[1].message.contains("process still running"),
            "{}",
            v[1].message
        );
    }

    /// Found by the real tier (a client-go pod cut off from the API server with `--mode
    /// give-up`): the cut-off leader's renewal, made 0.7s after the cut and held up by it, reached
    /// the API server when the cut healed, 29s later, stamped with the time it was made. Its
    /// 15s lease had run out long before anyone could see it; nobody led. That is not a lease
    /// re-acquired (it was once judged so); a renewal seen while valid is.
    #[test]
    fn a_renewal_delivered_after_its_lease_ran_out_is_not_leadership() {
        let yaml = "name: t
cluster:
  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}]
faults: [{at: 80s, for: 30s, partition: [agent/op/leader, api-server]}]
expect:
  - leader-reacquired: {lease: ops/op, within: 30s}
";
        let s = crate::scenario::parse(std::path::Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let lease = |t_ms: u64, renew: u64| lease_seen(t_ms, "op-1", renew);
        let events = |late: Event| {
            let mut events = candidate_op_1();
            events.extend([
                lease(78_700, 78_700),
                at(
                    80_100,
                    EventKind::FaultApplied {
                        step: 0,
                        id: None,
                        action: "partition: [agent/op/leader, api-server]".into(),
                        undo: false,
                        detail: String::new(),
                        links: Vec::new(),
                    },
                ),
                late,
                at(140_000, EventKind::RunEnded {}),
            ]);
            events
        };
        // Delivered at the heal (1m50.1s), renewed at 1m20.8s: ran out at 1m35.8s. It is
        // placed when it was written, and read when it reached the API server.
        let read_late = |read: u64| Event {
            read_ms: Some(read),
            ..lease(80_800, 80_800)
        };
        let v = judge(&s, &events(read_late(110_100)));
        assert!(!v[0].held, "{}", v[0].message);
        assert!(
            v[0].message.contains("after its 15s lease had run out"),
            "{}",
            v[0].message
        );
        // The same renewal seen while it was valid is leadership.
        let v = judge(&s, &events(read_late(81_000)));
        assert!(v[0].held, "{}", v[0].message);
        // The `managedFields` time is when the API server took the request in, not when etcd
        // stored it, and tells nothing of when the renewal reached storage (found on the real
        // API server: `trap-api-server-cut-from-etcd`, a renewal taken at 16 s by the API server
        // cut off from etcd, stored at the heal at 55 s; counting from its managedFields time
        // once passed that trap). A renewal taken in time and read after its lease ran out
        // is refused.
        let taken = |written: u64, read: u64| {
            let mut e = read_late(read);
            if let EventKind::LeaseObserved { written_ms, .. } = &mut e.kind {
                *written_ms = Some(written);
            }
            e
        };
        let v = judge(&s, &events(taken(80_000, 110_100)));
        assert!(!v[0].held, "{}", v[0].message);
        let v = judge(&s, &events(taken(110_000, 110_100)));
        assert!(!v[0].held, "{}", v[0].message);
        // Read late but stored in time: the next write of the Lease, made at 1m22.8s, named this
        // one's resourceVersion, so it was stored by then (the writes a broken watch missed,
        // read back from the API server's storage at once, long after they were made). A
        // next write made after the read tells nothing more.
        let mut chain = events(read_late(110_100));
        chain.push(Event {
            read_ms: Some(110_100),
            ..lease(82_800, 82_800)
        });
        chain.sort_by_key(|e| e.t_ms);
        let v = judge(&s, &chain);
        assert!(v[0].held, "{}", v[0].message);
        assert!(
            v[0].message.contains("(renewed at 1m20.8s)"),
            "{}",
            v[0].message
        );
        let mut late_next = events(read_late(110_100));
        late_next.push(lease(110_050, 110_050));
        late_next.sort_by_key(|e| e.t_ms);
        let v = judge(&s, &late_next);
        assert!(
            v[0].message.contains("(renewed at 1m50.0s), 29.9s after"),
            "{}",
            v[0].message
        );
    }

    /// Found on the way (issue 36): a controller-runtime manager whose identity is its pod's
    /// name, which every start of its container writes again. Its leader exited on its lost
    /// lease during an API outage, its container was started again and, with the same identity,
    /// held the Lease again after the outage. That is the Lease re-acquired (once judged "not
    /// running: the start of it that wrote this identity has exited", under a timeline that
    /// said the opposite): a record is the writing of the start that ran when it was written.
    /// A start that keeps the identity but never renews again (`give-up`) still fails, and its
    /// diagnosis says that the start running holds the record.
    #[test]
    fn an_identity_written_again_by_a_restarted_container_is_that_containers() {
        let yaml = "name: t
cluster:
  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}]
faults: [{at: 20s, id: outage, for: 40s, api-server: stop}]
expect:
  - leader-reacquired: {lease: ops/op, within: 1m, after: outage.end}
";
        let s = crate::scenario::parse(std::path::Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let fault = |t_ms: u64, undo: bool| {
            at(
                t_ms,
                EventKind::FaultApplied {
                    step: 0,
                    id: Some("outage".into()),
                    action: "api-server: stop".into(),
                    undo,
                    detail: String::new(),
                    links: Vec::new(),
                },
            )
        };
        let mut events = candidate_op_1();
        events.extend([
            lease_seen(2_000, "op-1", 2_000),
            lease_seen(18_000, "op-1", 18_000),
            fault(20_000, false),
            at(
                32_100,
                EventKind::ProcessExited {
                    process: "op-1".into(),
                    reason: "its container exited (exit code 1)".into(),
                },
            ),
            at(
                42_600,
                EventKind::ProcessStarted {
                    process: "op-1".into(),
                    incarnation: 2,
                },
            ),
            fault(60_000, true),
        ]);
        let mut renewed = events.clone();
        renewed.extend([
            lease_seen(61_200, "op-1", 61_200),
            lease_seen(119_500, "op-1", 119_500),
            at(130_000, EventKind::RunEnded {}),
        ]);
        let v = judge(&s, &renewed);
        assert!(v[0].held, "{}", v[0].message);
        assert!(
            v[0].message
                .starts_with("held by op-1 (renewed at 1m01.2s)"),
            "{}",
            v[0].message
        );
        // The same identity, never renewed after the outage: still a violation, whose words do
        // not say its writer is gone (the running start wrote none after the anchor).
        events.push(at(130_000, EventKind::RunEnded {}));
        let v = judge(&s, &events);
        assert!(!v[0].held, "{}", v[0].message);
        assert!(
            v[0].message.contains("last holder op-1 (process not running: the start of it that wrote this identity has exited; start #2 runs)"),
            "{}",
            v[0].message
        );
    }

    /// Found by the real tier (the same give-up pods): the cut-off leader's held renewal reached
    /// the API server at the heal, the deadline; the record changed then, so every candidate was
    /// "still waiting out the lease" at the deadline. But the replica not cut off had seen the
    /// record stand unchanged for a full lease duration from 1m34.5s: it was free to take the
    /// Lease for 15 s and did not. The message says so, and keeps the cut-off one waiting.
    #[test]
    fn a_candidate_free_for_a_while_before_a_late_change_is_not_waiting() {
        let yaml = "name: t
cluster:
  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}]
faults: [{at: 80s, id: cut, for: 30s, partition: [agent/op/leader, api-server]}]
expect:
  - leader-reacquired: {lease: ops/op, within: 30s, after: cut}
";
        let s = crate::scenario::parse(std::path::Path::new("t.yaml"), yaml.as_bytes()).unwrap();
        let mut events = candidate_op_1();
        events.extend([
            at(
                0,
                EventKind::CandidatePod {
                    agent: "op".into(),
                    pod: "ops/op-2".into(),
                    process: "op-2".into(),
                },
            ),
            at(
                0,
                EventKind::ProcessStarted {
                    process: "op-2".into(),
                    incarnation: 1,
                },
            ),
            lease_seen(79_500, "op-1_a", 79_500),
            at(
                80_100,
                EventKind::FaultApplied {
                    step: 0,
                    id: Some("cut".into()),
                    action: "partition: [agent/op/leader, api-server]".into(),
                    undo: false,
                    detail: "op-1 <-> api-server".into(),
                    links: vec![
                        ["op-1".into(), "api-server".into()],
                        ["api-server".into(), "op-1".into()],
                    ],
                },
            ),
            lease_seen(110_100, "op-1_a", 81_500),
            at(
                110_100,
                EventKind::FaultApplied {
                    step: 0,
                    id: Some("cut".into()),
                    action: "partition: [agent/op/leader, api-server]".into(),
                    undo: true,
                    detail: "op-1 <-> api-server".into(),
                    links: vec![
                        ["op-1".into(), "api-server".into()],
                        ["api-server".into(), "op-1".into()],
                    ],
                },
            ),
            at(140_000, EventKind::RunEnded {}),
        ]);
        let v = judge(&s, &events);
        assert!(!v[0].held, "{}", v[0].message);
        let m = &v[0].message;
        assert!(
            m.contains("op-2 (from 1m34.5s to 1m50.1s) was free to take it but not trying"),
            "{m}"
        );
        assert!(
            m.contains("op-1 (until 2m05.1s) was still waiting out the lease"),
            "{m}"
        );
        assert!(!m.contains("op-2 (until"), "{m}");
    }

    /// A violation says only what the timeline shows: a fault still in effect, a candidate
    /// still waiting out the lease as client-go does, and "none is trying" only when neither
    /// explains why nobody holds it.
    #[test]
    fn a_lost_lease_says_why_nobody_took_it_only_as_far_as_the_timeline_shows() {
        let verdict = |faults: &str, within: &str, restart: u64, undo: bool| {
            let yaml = format!(
                "name: t
cluster:
  agents: [{{name: op, lease: ops/op, pods: {{namespace: ops, selector: app=op}}}}]
faults: [{faults}]
expect:
  - leader-reacquired: {{lease: ops/op, within: {within}}}
"
            );
            let s =
                crate::scenario::parse(std::path::Path::new("t.yaml"), yaml.as_bytes()).unwrap();
            let mut events = candidate_op_1();
            let applied = |undo: bool| {
                at(
                    20_000,
                    EventKind::FaultApplied {
                        step: 0,
                        id: None,
                        action: s.faults[0].action.to_string(),
                        undo,
                        detail: "op-1 -> api-server".into(),
                        links: vec![["op-1".into(), "api-server".into()]],
                    },
                )
            };
            events.extend([
                lease_seen(10_000, "op-1_a", 10_000),
                applied(false),
                at(
                    20_000,
                    EventKind::ProcessExited {
                        process: "op-1".into(),
                        reason: "killed".into(),
                    },
                ),
                at(
                    restart,
                    EventKind::ProcessStarted {
                        process: "op-1".into(),
                        incarnation: 2,
                    },
                ),
            ]);
            if undo {
                events.push(applied(true));
            }
            events.push(at(200_000, EventKind::RunEnded {}));
            let v = judge(&s, &events);
            assert!(!v[0].held);
            v[0].message.clone()
        };
        // Restarted at 25s: it waits a full lease duration from its start, until 40s.
        let m = verdict("{at: 20s, kill: agent/op}", "10s", 25_000, false);
        assert!(
            m.contains("op-1 (until 40.0s) was still waiting out the lease as client-go does"),
            "{m}"
        );
        assert!(!m.contains("none is trying"), "{m}");
        // The Lease still names the identity of the start that was killed: that is not the
        // process running now (a pod's program makes a new identity at each start).
        assert!(
            m.contains("last holder op-1_a (process not running: the start of it that wrote this identity has exited; start #2 runs)"),
            "{m}"
        );
        // Its wait ends at the deadline, or less than one retry before it: still waiting, not
        // free (once "free to take it ... (from 40.0s to 40.0s)").
        for within in ["20s", "22s"] {
            let m = verdict("{at: 20s, kill: agent/op}", within, 25_000, false);
            assert!(
                m.contains("op-1 (until 40.0s) was still waiting out the lease as client-go does"),
                "{within}: {m}"
            );
            assert!(
                !m.contains("none is trying") && !m.contains("free to take it"),
                "{m}"
            );
        }
        // Long after its wait ended, with nothing in its way: none is trying.
        let m = verdict("{at: 20s, kill: agent/op}", "1m", 25_000, false);
        assert!(
            m.contains("every candidate is alive (op-1) but none is trying"),
            "{m}"
        );
        // A delay still in effect at the deadline is said, not "none is trying".
        let m = verdict(
            "{at: 20s, delay: {from: agent/op, to: api-server, latency: 12s}}",
            "1m",
            25_000,
            false,
        );
        assert!(m.contains("op-1 was held back by `delay: {from: agent/op, to: api-server, latency: 12s}`, still in effect"), "{m}");
        // Undone by its `for`: no longer in the way.
        let m = verdict(
            "{at: 20s, for: 1s, api-errors: {status: 500, verbs: [update]}}",
            "1m",
            25_000,
            true,
        );
        assert!(m.contains("but none is trying"), "{m}");
    }

    #[test]
    fn availability_seen_before_the_anchor_still_holds_at_it() {
        let (held, msg) = judge_available(&[seen(1_000, 2, 2, 2)], 10_000);
        assert!(held, "{msg}");
        assert!(msg.contains("0ms after the anchor"), "{msg}");
    }

    #[test]
    fn a_stale_status_without_ready_pods_is_not_availability() {
        let (held, msg) = judge_available(&[seen(1_000, 2, 2, 2), seen(5_000, 0, 2, 0)], 10_000);
        assert!(!held);
        assert!(msg.contains("a status ahead of the pods is stale"), "{msg}");
    }

    #[test]
    fn availability_regained_within_the_window_holds_with_its_delay() {
        let events = [
            seen(5_000, 0, 0, 0),
            seen(22_000, 1, 1, 2),
            seen(25_000, 2, 2, 2),
        ];
        let (held, msg) = judge_available(&events, 10_000);
        assert!(held, "{msg}");
        assert!(
            msg.contains("15") && msg.contains("after the anchor"),
            "{msg}"
        );
        let (held, _) = judge_available(&events[..2], 10_000);
        assert!(!held);
    }

    /// A pod agent `op` judged by `single-leader` alone.
    fn single_leader_of_pods() -> Scenario {
        let yaml = "name: t
cluster:
  agents: [{name: op, lease: ops/op, pods: {namespace: ops, selector: app=op}}]
expect:
  - single-leader: {lease: ops/op}
";
        crate::scenario::parse(std::path::Path::new("t.yaml"), yaml.as_bytes()).unwrap()
    }

    /// Issue 36: where only the API tells a pod's exit (its status: whole seconds), a verdict
    /// that turns on where in that second the exit fell is "the evidence cannot tell", with the
    /// second, instead of a pass or a fail. Told exactly, or far enough from the other facts,
    /// the same timeline has a verdict.
    #[test]
    fn an_exit_told_to_the_second_that_decides_a_verdict_cannot_tell() {
        let s = single_leader_of_pods();
        let leads = |t_ms: u64, identity: &str| {
            at(
                t_ms,
                EventKind::LeadingStarted {
                    lease: "ops/op".into(),
                    identity: identity.into(),
                },
            )
        };
        // op-a leads from 10s; its exit is told as 30s (somewhere in 30.0s-30.999s); op-b
        // says it leads at `b_leads`.
        let events = |within: Option<u64>, b_leads: u64| {
            let mut exit = at(
                30_000,
                EventKind::ProcessExited {
                    process: "op-a".into(),
                    reason: "its container restarted (restartCount 1)".into(),
                },
            );
            exit.within_ms = within;
            let mut events = vec![
                at(
                    0,
                    EventKind::ProcessStarted {
                        process: "op-a".into(),
                        incarnation: 1,
                    },
                ),
                leads(10_000, "op-a_1"),
                exit,
                leads(b_leads, "op-b_1"),
                at(60_000, EventKind::RunEnded {}),
            ];
            events.sort_by_key(|e| e.t_ms);
            events
        };
        let v = judge(&s, &events(Some(999), 30_500));
        assert!(
            !v[0].held && v[0].cannot_tell && !v[0].no_evidence,
            "{:?}",
            v[0]
        );
        assert_eq!(v[0].word(), "CANNOT TELL");
        assert!(
            v[0].message
                .starts_with("the evidence cannot tell: op-a exited at 30.0s or up to 999 ms later, told only to the whole second"),
            "{}",
            v[0].message
        );
        assert!(
            v[0].message.contains("it held (never two leaders"),
            "{}",
            v[0].message
        );
        assert!(
            v[0].message
                .contains("at its end it did not hold (two candidates acted as leader"),
            "{}",
            v[0].message
        );
        // The exit told exactly: it held.
        let v = judge(&s, &events(None, 30_500));
        assert!(v[0].held && !v[0].cannot_tell, "{}", v[0].message);
        // Whichever the exit's place in its second, op-b led after it: it held.
        let v = judge(&s, &events(Some(999), 31_200));
        assert!(v[0].held && !v[0].cannot_tell, "{}", v[0].message);
        // And before it, whichever its place: a violation.
        let v = judge(&s, &events(Some(999), 29_000));
        assert!(!v[0].held && !v[0].cannot_tell, "{}", v[0].message);
    }

    /// A start told to the second is placed at its second's end only as far as its process
    /// allows: never after the first thing that start said (it had started by then), and an exit
    /// never after its process's next start.
    #[test]
    fn the_latest_placement_keeps_each_process_in_its_order() {
        let s = single_leader_of_pods();
        let coarse = |t_ms: u64, kind: EventKind| Event {
            within_ms: Some(999),
            ..at(t_ms, kind)
        };
        let events = vec![
            coarse(
                5_000,
                EventKind::ProcessStarted {
                    process: "op-a".into(),
                    incarnation: 1,
                },
            ),
            at(
                5_300,
                EventKind::LeadingStarted {
                    lease: "ops/op".into(),
                    identity: "op-a_1".into(),
                },
            ),
            coarse(
                20_000,
                EventKind::ProcessExited {
                    process: "op-a".into(),
                    reason: "x".into(),
                },
            ),
            coarse(
                20_001,
                EventKind::ProcessStarted {
                    process: "op-a".into(),
                    incarnation: 2,
                },
            ),
        ];
        let late = at_latest(&s, &events);
        let t = |i: usize| late.iter().find(|e| e.kind == events[i].kind).unwrap().t_ms;
        assert_eq!(t(0), 5_300, "a start no later than the first thing it said");
        assert_eq!(t(2), 20_999, "an exit before its process's next start");
        assert_eq!(t(3), 21_000);
    }
}
