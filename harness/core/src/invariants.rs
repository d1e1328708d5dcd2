//! Invariants, judged after the run on the recorded timeline. This code does not know which
//! backend produced the events: the sim, a local control plane and a kind cluster are judged
//! alike.

use std::collections::BTreeMap;

use crate::events::{fmt_ms, identity_process, Event, EventKind};
use crate::scenario::duration::human;
use crate::scenario::{Invariant, LeaseRef, Scenario};

/// The verdict on one invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Index in `expect:`.
    pub index: usize,
    /// `leader-reacquired kube-system/kube-scheduler`.
    pub label: String,
    /// Whether it held.
    pub held: bool,
    /// The measured figure (held) or what was expected, what was seen, and when (violated).
    pub message: String,
    /// When the window opened (ms since start), if the invariant has one.
    pub anchor_ms: Option<u64>,
    /// When the window closed (ms since start), if the invariant has one.
    pub deadline_ms: Option<u64>,
}

/// Facts derived from the timeline that several invariants use.
struct Timeline<'a> {
    events: &'a [Event],
    end_ms: u64,
    /// Moment the last fault ended: the last `fault-applied` event.
    last_fault_ms: u64,
    /// Moment each step id was applied.
    step_ms: BTreeMap<String, u64>,
}

impl<'a> Timeline<'a> {
    fn new(events: &'a [Event]) -> Self {
        let mut last_fault_ms = 0;
        let mut step_ms = BTreeMap::new();
        let mut end_ms = 0;
        for e in events {
            end_ms = end_ms.max(e.t_ms);
            if let EventKind::FaultApplied { id, undo, .. } = &e.kind {
                last_fault_ms = last_fault_ms.max(e.t_ms);
                if let (Some(id), false) = (id, undo) {
                    step_ms.entry(id.clone()).or_insert(e.t_ms);
                }
            }
        }
        Timeline {
            events,
            end_ms,
            last_fault_ms,
            step_ms,
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

    /// Whether `identity`'s process is running, in that incarnation, at `t`. A process the
    /// timeline never mentions (on an existing cluster, kubechaos sees Leases, not processes)
    /// counts as running: its renewals are the evidence.
    fn alive(&self, identity: &str, t: u64) -> bool {
        let process = identity_process(identity);
        let mentioned = self.events.iter().any(|e| match &e.kind {
            EventKind::ProcessStarted { process: p, .. }
            | EventKind::ProcessExited { process: p, .. } => p == process,
            _ => false,
        });
        if !mentioned {
            return true;
        }
        let wanted = identity
            .rsplit_once('_')
            .and_then(|(_, i)| i.parse::<u32>().ok());
        match (self.incarnation_at(process, t), wanted) {
            (Some(running), Some(wanted)) => running == wanted,
            (running, _) => running.is_some(),
        }
    }

    /// The processes that compete for a lease: the scenario's replicas, or for a self-hosted
    /// component every pod of it that ran (its name starts with the component's).
    fn candidates(&self, s: &Scenario, lease: &LeaseRef) -> Vec<String> {
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

    /// Candidate processes running at `t`.
    fn running(&self, candidates: &[String], t: u64) -> Vec<String> {
        candidates
            .iter()
            .filter(|c| self.incarnation_at(c, t).is_some())
            .cloned()
            .collect()
    }
}

/// Judge every invariant of a scenario on a recorded timeline.
pub fn judge(s: &Scenario, events: &[Event]) -> Vec<Verdict> {
    let tl = Timeline::new(events);
    s.expect
        .iter()
        .enumerate()
        .map(|(index, inv)| {
            let label = inv.value.label();
            let (held, message, anchor, deadline) = match &inv.value {
                Invariant::LeaderReacquired(i) => {
                    let a = tl.anchor(&inv.value);
                    let d = a + i.within.as_millis() as u64;
                    let (held, msg) = leader_reacquired(&tl, s, &i.lease, a, d, i.within);
                    (held, msg, Some(a), Some(d))
                }
                Invariant::SingleLeader(i) => {
                    let (held, msg) = single_leader(&tl, &i.lease);
                    (held, msg, None, None)
                }
                Invariant::Schedulable(i) => {
                    let a = tl.anchor(&inv.value);
                    let d = a + i.within.as_millis() as u64;
                    let (held, msg) = schedulable(&tl, index, a, d, i.within);
                    (held, msg, Some(a), Some(d))
                }
                Invariant::Unschedulable(i) => {
                    let a = tl.anchor(&inv.value);
                    let d = a + i.for_.as_millis() as u64;
                    let (held, msg) = unschedulable(&tl, index, a, d, i.for_);
                    (held, msg, Some(a), Some(d))
                }
                Invariant::Available(i) => {
                    let a = tl.anchor(&inv.value);
                    let d = a + i.within.as_millis() as u64;
                    let (held, msg) = available(&tl, &i.deployment, a, d, i.within);
                    (held, msg, Some(a), Some(d))
                }
            };
            Verdict {
                index,
                label,
                held,
                message,
                anchor_ms: anchor,
                deadline_ms: deadline,
            }
        })
        .collect()
}

fn leader_reacquired(
    tl: &Timeline<'_>,
    s: &Scenario,
    lease: &LeaseRef,
    anchor: u64,
    deadline: u64,
    within: std::time::Duration,
) -> (bool, String) {
    let name = lease.to_string();
    let mut last: Option<(u64, Option<String>, Option<u64>)> = None;
    for e in tl.events {
        let EventKind::LeaseObserved {
            lease: l,
            holder,
            renew_ms,
            ..
        } = &e.kind
        else {
            continue;
        };
        if *l != name {
            continue;
        }
        if e.t_ms > deadline {
            break;
        }
        last = Some((e.t_ms, holder.clone(), *renew_ms));
        if e.t_ms < anchor {
            continue;
        }
        if let (Some(h), Some(r)) = (holder, renew_ms) {
            if *r >= anchor && tl.alive(h, e.t_ms) {
                let after = e.t_ms.saturating_sub(anchor);
                return (
                    true,
                    format!(
                        "held by {} (renewed at {}), {} after the anchor at {} (limit {})",
                        identity_process(h),
                        fmt_ms(*r),
                        human(std::time::Duration::from_millis(after)),
                        fmt_ms(anchor),
                        human(within)
                    ),
                );
            }
        }
    }
    let candidates = tl.candidates(s, lease);
    let alive = tl.running(&candidates, deadline);
    let seen = match last {
        None => "the lease was never observed".to_owned(),
        Some((_, None, _)) => "the lease had no holder".to_owned(),
        Some((_, Some(h), renew)) => format!(
            "last holder {} (process {}), last renewal {}",
            h,
            if tl.alive(&h, deadline) {
                "still running"
            } else {
                "not running"
            },
            renew
                .map(|r| format!("at {}", fmt_ms(r)))
                .unwrap_or_else(|| "never".into())
        ),
    };
    let alive_text = if alive.is_empty() {
        "no candidate was running".to_owned()
    } else if alive.len() == candidates.len() {
        format!(
            "every candidate is alive ({}) but none is trying: none renewed or acquired the lease",
            alive.join(", ")
        )
    } else {
        format!(
            "candidates running at the deadline: {} of {} (none of them renewed or acquired the lease)",
            alive.join(", "),
            candidates.join(", ")
        )
    };
    (
        false,
        format!(
            "lease {name} was not re-acquired within {} of the anchor at {} (deadline {}): {seen}; {alive_text}",
            human(within),
            fmt_ms(anchor),
            fmt_ms(deadline)
        ),
    )
}

fn single_leader(tl: &Timeline<'_>, lease: &LeaseRef) -> (bool, String) {
    let name = lease.to_string();
    // Open intervals: identity -> start.
    let mut open: BTreeMap<String, u64> = BTreeMap::new();
    let mut terms = 0usize;
    for e in tl.events {
        match &e.kind {
            EventKind::LeadingStarted { lease: l, identity } if *l == name => {
                if let Some((other, since)) = open.iter().find(|(id, _)| *id != identity) {
                    return (
                        false,
                        format!(
                            "two candidates acted as leader of {name} at once: {other} (leading since {}) and {identity} (started leading at {})",
                            fmt_ms(*since),
                            fmt_ms(e.t_ms)
                        ),
                    );
                }
                open.insert(identity.clone(), e.t_ms);
                terms += 1;
            }
            EventKind::LeadingStopped {
                lease: l, identity, ..
            } if *l == name => {
                open.remove(identity);
            }
            EventKind::ProcessExited { process, .. } => {
                open.retain(|id, _| identity_process(id) != process);
            }
            _ => {}
        }
    }
    (
        true,
        format!(
            "never two leaders at once ({terms} leadership term{} observed)",
            if terms == 1 { "" } else { "s" }
        ),
    )
}

fn probe_pod(tl: &Timeline<'_>, index: usize) -> Option<(u64, String)> {
    tl.events.iter().find_map(|e| match &e.kind {
        EventKind::ProbeCreated { invariant, pod } if *invariant == index => {
            Some((e.t_ms, pod.clone()))
        }
        _ => None,
    })
}

fn bound(tl: &Timeline<'_>, pod: &str) -> Option<(u64, String)> {
    tl.events.iter().find_map(|e| match &e.kind {
        EventKind::PodBound { pod: p, node } if p == pod => Some((e.t_ms, node.clone())),
        _ => None,
    })
}

fn schedulable(
    tl: &Timeline<'_>,
    index: usize,
    anchor: u64,
    deadline: u64,
    within: std::time::Duration,
) -> (bool, String) {
    let Some((created, pod)) = probe_pod(tl, index) else {
        return (false, format!("the probe pod could not be created by the deadline {} (anchor {}): the API server did not accept it", fmt_ms(deadline), fmt_ms(anchor)));
    };
    match bound(tl, &pod) {
        Some((t, node)) if t <= deadline => (
            true,
            format!(
                "probe pod {pod} bound to {node} {} after the anchor at {} (limit {})",
                human(std::time::Duration::from_millis(t.saturating_sub(anchor))),
                fmt_ms(anchor),
                human(within)
            ),
        ),
        Some((t, node)) => (
            false,
            format!("probe pod {pod} (created at {}) was bound to {node} only at {}, past the deadline {} ({} after the anchor at {})", fmt_ms(created), fmt_ms(t), fmt_ms(deadline), human(within), fmt_ms(anchor)),
        ),
        None => (
            false,
            format!("probe pod {pod} (created at {}) was never bound to a node by the deadline {} ({} after the anchor at {}); no scheduler bound it", fmt_ms(created), fmt_ms(deadline), human(within), fmt_ms(anchor)),
        ),
    }
}

fn unschedulable(
    tl: &Timeline<'_>,
    index: usize,
    anchor: u64,
    until: u64,
    for_: std::time::Duration,
) -> (bool, String) {
    let Some((_, pod)) = probe_pod(tl, index) else {
        return (
            false,
            format!(
                "the probe pod could not be created (anchor {}), so no outage can be shown",
                fmt_ms(anchor)
            ),
        );
    };
    match bound(tl, &pod) {
        Some((t, node)) if t < until => (
            false,
            format!("probe pod {pod} was bound to {node} at {}, {} after the anchor at {}; expected it to stay unbound for {} (the outage did not happen)", fmt_ms(t), human(std::time::Duration::from_millis(t.saturating_sub(anchor))), fmt_ms(anchor), human(for_)),
        ),
        Some((t, _)) => (true, format!("probe pod {pod} stayed unbound for {} after the anchor at {} (required {})", human(std::time::Duration::from_millis(t - anchor)), fmt_ms(anchor), human(for_))),
        None => (true, format!("probe pod {pod} stayed unbound from the anchor at {} to the end of the run (required {})", fmt_ms(anchor), human(for_))),
    }
}

fn available(
    tl: &Timeline<'_>,
    deployment: &str,
    anchor: u64,
    deadline: u64,
    within: std::time::Duration,
) -> (bool, String) {
    // The state at each moment is the last observation: one made before the anchor still holds
    // at the anchor.
    let mut last: Option<(u64, u32, u32, u32, u32)> = None;
    let full = |l: &(u64, u32, u32, u32, u32)| l.2 > 0 && l.1 >= l.2;
    let held = |at: u64, l: &(u64, u32, u32, u32, u32)| {
        (
            true,
            format!(
                "{deployment} had {}/{} replicas available (its status and its Ready pods agree) {} after the anchor at {} (limit {})",
                l.1,
                l.2,
                human(std::time::Duration::from_millis(at - anchor)),
                fmt_ms(anchor),
                human(within)
            ),
        )
    };
    for e in tl.events {
        let EventKind::DeploymentObserved {
            deployment: d,
            available,
            desired,
            reported,
            ready_pods,
        } = &e.kind
        else {
            continue;
        };
        if d != deployment || e.t_ms > deadline {
            continue;
        }
        if e.t_ms >= anchor {
            if let Some(l) = last.filter(|l| l.0 < anchor && full(l)) {
                return held(anchor, &l);
            }
        }
        last = Some((e.t_ms, *available, *desired, *reported, *ready_pods));
        if let Some(l) = last.filter(|l| l.0 >= anchor && full(l)) {
            return held(l.0, &l);
        }
    }
    if let Some(l) = last.filter(|l| l.0 < anchor && full(l)) {
        return held(anchor, &l);
    }
    let seen = match last {
        Some((t, a, d, reported, ready)) => format!(
            "last seen at {}: {a}/{d} available (its status reported {reported} available, {ready} of its pods were Ready{})",
            fmt_ms(t),
            if reported > ready {
                "; a status ahead of the pods is stale: no controller-manager updated it"
            } else {
                ""
            }
        ),
        None => "the Deployment was never observed".into(),
    };
    (false, format!("{deployment} was not fully available within {} of the anchor at {} (deadline {}): {seen}", human(within), fmt_ms(anchor), fmt_ms(deadline)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(t_ms: u64, available: u32, reported: u32, ready_pods: u32) -> Event {
        Event {
            t_ms,
            kind: EventKind::DeploymentObserved {
                deployment: "kube-system/s".into(),
                available,
                desired: 2,
                reported,
                ready_pods,
            },
        }
    }

    fn judge_available(events: &[Event], anchor: u64) -> (bool, String) {
        let tl = Timeline::new(events);
        available(
            &tl,
            "kube-system/s",
            anchor,
            anchor + 30_000,
            std::time::Duration::from_secs(30),
        )
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
}
