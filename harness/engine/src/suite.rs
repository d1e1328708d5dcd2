//! A suite: scenarios played one after the other on one backend, each judged, until the last
//! or an interruption (Ctrl-C, SIGTERM). A scenario that cannot run (its cluster did not start)
//! is one result among the others; the suite goes on.

use std::time::{Duration, Instant};

use crate::backend::BackendError;
use crate::run::{self, Outcome, Playable};
use kubechaos_core::report::live::Progress;
use kubechaos_core::scenario::{Pos, Scenario};

/// A scenario's result, as the suite hands it to its caller.
pub(crate) type Played = Result<Outcome, BackendError>;

/// What a suite produced: one result per scenario played, in order.
pub struct SuiteOutcome {
    /// Each scenario's outcome, or why it could not run. Shorter than the scenarios when the
    /// suite was interrupted.
    pub results: Vec<Played>,
    /// Whether Ctrl-C or SIGTERM stopped it (the last result says where).
    pub interrupted: bool,
    /// How long it took.
    pub wall: Duration,
}

impl SuiteOutcome {
    /// Scenarios whose every invariant held.
    pub fn held(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.as_ref().is_ok_and(Outcome::held))
            .count()
    }

    /// Scenarios with a violated invariant.
    pub fn violated(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.as_ref().is_ok_and(|o| !o.held()))
            .count()
    }

    /// Scenarios that could not run.
    pub fn errors(&self) -> usize {
        self.results.iter().filter(|r| r.is_err()).count()
    }
}

/// What `backend` cannot do with each scenario (index, problems), for the scenarios it cannot
/// run; checked before anything runs.
pub fn check(scenarios: &[Scenario], backend: &dyn Playable) -> Vec<(usize, Vec<(Pos, String)>)> {
    scenarios
        .iter()
        .enumerate()
        .map(|(i, s)| (i, backend.check(s)))
        .filter(|(_, problems)| !problems.is_empty())
        .collect()
}

/// Play each scenario in turn. `each` hears every result as soon as it is in (to write its files
/// and say it); an error from it stops the suite and is returned.
pub fn run<E>(
    scenarios: &[Scenario],
    backend: &mut dyn Playable,
    live: &mut dyn Progress,
    each: &mut dyn FnMut(&Scenario, &Played) -> Result<(), E>,
) -> Result<SuiteOutcome, E> {
    let started = Instant::now();
    let mut results = Vec::new();
    let mut interrupted = false;
    for s in scenarios {
        let result = run::run(s, backend, live);
        each(s, &result)?;
        interrupted = matches!(result, Err(BackendError::Interrupted { .. }));
        results.push(result);
        if interrupted {
            break;
        }
    }
    Ok(SuiteOutcome {
        results,
        interrupted,
        wall: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::Sim;

    fn scenario(name: &str, faults: &str, expect: &str) -> Scenario {
        let text = format!(
            "name: {name}\nduration: 90s\ncluster:\n  nodes: 1\n  components:\n    kube-scheduler: {{replicas: 1}}\n    kube-controller-manager: {{replicas: 1}}\nfaults: {faults}\nexpect:\n  - {expect}\n"
        );
        kubechaos_core::scenario::parse(
            &std::path::PathBuf::from(format!("{name}.yaml")),
            text.as_bytes(),
        )
        .expect("valid")
    }

    /// Each scenario is played and judged, in order; the counts split held from violated.
    #[test]
    fn plays_each_scenario_in_turn_and_counts_the_verdicts() {
        let scenarios = [
            scenario("holds", "[]", "schedulable: {within: 10s}"),
            scenario(
                "fails",
                "[{at: 5s, api-server: stop, for: 30s}]",
                "leader-reacquired: {lease: kube-system/kube-scheduler, within: 1s}",
            ),
        ];
        let mut seen = Vec::new();
        let outcome = run::<()>(
            &scenarios,
            &mut Sim::default(),
            &mut |_: &str| {},
            &mut |s, r| {
                seen.push((s.name.clone(), r.is_ok()));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(
            seen,
            [("holds".to_owned(), true), ("fails".to_owned(), true)]
        );
        assert_eq!(
            (outcome.held(), outcome.violated(), outcome.errors()),
            (1, 1, 0)
        );
        assert!(!outcome.interrupted);
    }

    /// An error from the caller's handler stops the suite there.
    #[test]
    fn an_error_from_the_handler_stops_the_suite() {
        let scenarios = [
            scenario("one", "[]", "schedulable: {within: 10s}"),
            scenario("two", "[]", "schedulable: {within: 10s}"),
        ];
        let mut played = 0;
        let r = run(
            &scenarios,
            &mut Sim::default(),
            &mut |_: &str| {},
            &mut |_, _| {
                played += 1;
                Err("cannot write")
            },
        );
        assert_eq!(r.err(), Some("cannot write"));
        assert_eq!(played, 1);
    }
}
