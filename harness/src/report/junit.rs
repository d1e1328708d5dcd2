//! JUnit XML: one testsuite per scenario, one testcase per invariant, the violation text as the
//! failure message.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::path::Path;

use crate::run::Outcome;
use crate::scenario::Scenario;

/// Render a run as JUnit XML. `events_path` is mentioned in each testcase's system-out.
pub fn render(
    s: &Scenario,
    outcome: &Outcome,
    backend: &str,
    seed: u64,
    events_path: Option<&Path>,
) -> String {
    let mut report = Report::new("kubechaos");
    let mut suite = TestSuite::new(format!("{} ({backend})", s.name));
    for v in &outcome.verdicts {
        let status = if v.held {
            TestCaseStatus::success()
        } else {
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
            st.set_message(v.message.clone());
            st.set_type("violated");
            st
        };
        let mut case = TestCase::new(v.label.clone(), status);
        case.set_classname(format!("kubechaos.{}", s.name));
        let mut out = format!("{}\nseed: {seed}\n", v.message);
        if let Some(p) = events_path {
            out.push_str(&format!("events: {}\n", p.display()));
        }
        case.set_system_out(out);
        suite.add_test_case(case);
    }
    suite.set_time(outcome.wall);
    report.add_test_suite(suite);
    report.set_time(outcome.wall);
    report.to_string().expect("junit serializes")
}
