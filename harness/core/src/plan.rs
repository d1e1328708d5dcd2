//! From a scenario to a plan: every action the backend must take, in time order. Faults, their
//! undoing after `for:`, and the probe pods that `schedulable`/`unschedulable` need at their
//! anchors.

use std::time::Duration;

use crate::scenario::{Action, Invariant, Scenario};

/// What to do at a moment of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlannedKind {
    /// Apply fault step `step` as written.
    Fault {
        /// Index in `faults:`.
        step: usize,
    },
    /// Undo fault step `step` (its `for:` ran out): start what it stopped, heal what it cut.
    Undo {
        /// Index in `faults:`.
        step: usize,
    },
    /// Create the probe pod of invariant `invariant`.
    Probe {
        /// Index in `expect:`.
        invariant: usize,
    },
}

/// One planned action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Offset from the start of the run.
    pub at: Duration,
    /// What.
    pub kind: PlannedKind,
}

/// The whole plan of a run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Length of the run.
    pub duration: Duration,
    /// Actions in time order; at equal times, in file order, undoing before probing.
    pub actions: Vec<Planned>,
}

impl Plan {
    /// Plan a validated scenario.
    pub fn new(s: &Scenario) -> Plan {
        let mut actions = Vec::new();
        for (step, f) in s.faults.iter().enumerate() {
            actions.push(Planned {
                at: f.at,
                kind: PlannedKind::Fault { step },
            });
            if let Some(d) = f.for_ {
                actions.push(Planned {
                    at: f.at + d,
                    kind: PlannedKind::Undo { step },
                });
            }
        }
        for (invariant, inv) in s.expect.iter().enumerate() {
            if matches!(
                inv.value,
                Invariant::Schedulable(_) | Invariant::Unschedulable(_)
            ) {
                actions.push(Planned {
                    at: s.planned_anchor(&inv.value),
                    kind: PlannedKind::Probe { invariant },
                });
            }
        }
        let rank = |k: &PlannedKind| match k {
            PlannedKind::Fault { .. } | PlannedKind::Undo { .. } => 0,
            PlannedKind::Probe { .. } => 1,
        };
        actions.sort_by_key(|a| (a.at, rank(&a.kind)));
        Plan {
            duration: s.run_duration(),
            actions,
        }
    }
}

/// What undoes an action after its `for:` (validation allows `for:` only where this is Some).
pub fn undo_of(action: &Action) -> Option<Action> {
    use crate::scenario::ProcessOp;
    match action {
        Action::ApiServer(ProcessOp::Stop | ProcessOp::Crash) => {
            Some(Action::ApiServer(ProcessOp::Start))
        }
        Action::Etcd(ProcessOp::Stop | ProcessOp::Crash) => Some(Action::Etcd(ProcessOp::Start)),
        Action::Partition(_) => Some(Action::Heal(crate::scenario::Heal)),
        Action::Remove(t) => Some(Action::Start(t.clone())),
        _ => None,
    }
}
