//! A judged run: the timeline a backend recorded, the verdict on each invariant, and the
//! timeline with those verdicts recorded at its end (so that an events file holds everything a
//! report shows).

use std::time::Duration;

use crate::events::{Event, EventKind};
use crate::invariants::{judge, Verdict};
use crate::plan::Plan;
use crate::scenario::Scenario;

/// What a run produced.
#[derive(Debug)]
pub struct Outcome {
    /// The plan that was played.
    pub plan: Plan,
    /// The recorded timeline, ending with the verdicts and `run-ended`.
    pub events: Vec<Event>,
    /// One verdict per invariant, in file order.
    pub verdicts: Vec<Verdict>,
    /// Wall time the backend took.
    pub wall: Duration,
}

impl Outcome {
    /// Judge a recorded timeline.
    pub fn judge(s: &Scenario, plan: Plan, events: Vec<Event>, wall: Duration) -> Outcome {
        let verdicts = judge(s, &events);
        let events = with_verdicts(events, &verdicts);
        Outcome {
            plan,
            events,
            verdicts,
            wall,
        }
    }

    /// Whether every invariant held.
    pub fn held(&self) -> bool {
        self.verdicts.iter().all(|v| v.held)
    }

    /// Whether no invariant was violated and some could not be told (the others held).
    pub fn cannot_tell(&self) -> bool {
        !self.held() && self.verdicts.iter().all(|v| v.held || v.cannot_tell)
    }

    /// The fact read the longest after it happened, and how long after.
    pub fn largest_lag(&self) -> Option<(u64, &Event)> {
        crate::events::largest_lag(&self.events)
    }

    /// How many lines printed as leadership reports could not be read (and were not judged).
    pub fn rejected_reports(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::ReportRejected { .. }))
            .count()
    }
}

/// The timeline with the verdicts recorded at its end (before `run-ended`).
fn with_verdicts(mut events: Vec<Event>, verdicts: &[Verdict]) -> Vec<Event> {
    let end = events.last().map(|e| e.t_ms).unwrap_or(0);
    let ended = match events.last() {
        Some(Event {
            kind: EventKind::RunEnded {},
            ..
        }) => events.pop(),
        _ => None,
    };
    events.extend(verdicts.iter().map(|v| Event {
        t_ms: end,
        read_ms: None,
        within_ms: None,
        kind: EventKind::InvariantJudged {
            invariant: v.index,
            label: v.label.clone(),
            held: v.held,
            cannot_tell: v.cannot_tell,
            message: v.message.clone(),
            anchor_ms: v.anchor_ms,
            deadline_ms: v.deadline_ms,
            violated_from_ms: v.violated.map(|w| w.0),
            violated_to_ms: v.violated.map(|w| w.1),
        },
    }));
    events.extend(ended);
    events
}
