//! From a scenario to a plan: every action the backend must take, in time order. Faults, their
//! undoing after `for:`, and the probe pods that `schedulable`/`unschedulable` need at their
//! anchors.

use std::time::Duration;

use crate::scenario::Scenario;

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
            if inv.value.probes() {
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scenario::Action;

    fn plan(yaml: &str) -> Plan {
        let s = crate::scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).expect("valid");
        Plan::new(&s)
    }

    fn at(p: &Plan) -> Vec<(u64, PlannedKind)> {
        p.actions
            .iter()
            .map(|a| (a.at.as_secs(), a.kind.clone()))
            .collect()
    }

    const CLUSTER: &str =
        "name: t\ncluster: {nodes: 1, components: {kube-scheduler: {replicas: 2}}}\n";

    #[test]
    fn faults_their_undoing_and_probes_in_time_order() {
        let p = plan(&format!(
            "{CLUSTER}faults:\n  - {{at: 30s, kill: kube-scheduler/0}}\n  - {{at: 10s, api-server: stop, for: 40s}}\nexpect:\n  - schedulable: {{within: 1m}}\n  - single-leader: {{lease: kube-system/kube-scheduler}}\n"
        ));
        use PlannedKind::*;
        assert_eq!(
            at(&p),
            [
                (10, Fault { step: 1 }),
                (30, Fault { step: 0 }),
                (50, Undo { step: 1 }),
                // The probe at the anchor: the end of the last fault (with its `for`).
                (50, Probe { invariant: 0 }),
            ]
        );
        // The run lasts until the last deadline plus the margin.
        assert_eq!(p.duration, Duration::from_secs(50 + 60 + 30));
    }

    #[test]
    fn at_equal_times_steps_keep_file_order_and_probing_comes_last() {
        let p = plan(&format!(
            "{CLUSTER}faults:\n  - {{at: 20s, id: cut, partition: [kube-scheduler/0, api-server], for: 10s}}\n  - {{at: 30s, kill: kube-scheduler/1}}\n  - {{at: 30s, heal: all}}\nexpect:\n  - unschedulable: {{for: 5s, after: cut}}\n  - schedulable: {{within: 10s}}\n"
        ));
        use PlannedKind::*;
        assert_eq!(
            at(&p),
            [
                (20, Fault { step: 0 }),
                (20, Probe { invariant: 0 }),
                // A step's undoing stands where the step stands in the file.
                (30, Undo { step: 0 }),
                (30, Fault { step: 1 }),
                (30, Fault { step: 2 }),
                (30, Probe { invariant: 1 }),
            ]
        );
    }

    #[test]
    fn a_given_duration_is_the_run_and_only_probing_invariants_plan_anything() {
        let p = plan(&format!(
            "{CLUSTER}duration: 5m\nfaults:\n  - {{at: 1s, remove: kube-scheduler, for: 1s}}\nexpect:\n  - leader-reacquired: {{lease: kube-system/kube-scheduler, within: 30s}}\n"
        ));
        assert_eq!(p.duration, Duration::from_secs(300));
        assert_eq!(p.actions.len(), 2, "{:?}", p.actions);
    }

    #[test]
    fn for_undoes_stops_crashes_partitions_and_removes_only() {
        use crate::scenario::{Component, Heal, Partition, ProcessOp, Selector, Target};
        let sched = Target::Component(Component::KubeScheduler, Selector::All);
        let cases = [
            (
                Action::ApiServer(ProcessOp::Stop),
                Some(Action::ApiServer(ProcessOp::Start)),
            ),
            (
                Action::ApiServer(ProcessOp::Crash),
                Some(Action::ApiServer(ProcessOp::Start)),
            ),
            (Action::ApiServer(ProcessOp::Restart), None),
            (
                Action::Etcd(ProcessOp::Stop),
                Some(Action::Etcd(ProcessOp::Start)),
            ),
            (
                Action::Partition(Partition {
                    a: sched.clone(),
                    b: Target::API_SERVER,
                    oneway: false,
                    reset: false,
                }),
                Some(Action::Heal(Heal)),
            ),
            (
                Action::Remove(sched.clone()),
                Some(Action::Start(sched.clone())),
            ),
            (Action::Kill(sched.clone()), None),
            (Action::Start(sched), None),
            (Action::Heal(Heal), None),
        ];
        for (action, undo) in cases {
            assert_eq!(action.undo(), undo, "{action}");
        }
    }
}
