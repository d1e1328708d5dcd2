//! JUnit XML: one testsuite per scenario, one testcase per invariant, the violation text as the
//! failure message; a scenario that could not run is one testcase in error. Each testcase's
//! system-out names the run's events file and HTML report, where written.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::time::Duration;

use super::Entry;

/// Render runs as JUnit XML.
pub fn render(entries: &[Entry<'_>], backend: &str, seed: u64) -> String {
    let mut report = Report::new("kubechaos");
    let mut total = Duration::ZERO;
    for e in entries {
        let s = e.scenario;
        let mut suite = TestSuite::new(format!("{} ({backend})", s.name));
        let files = |out: &mut String| {
            for (what, path) in [("events", e.events_path), ("report", e.report_path)] {
                if let Some(p) = path {
                    out.push_str(&format!("{what}: {}\n", p.display()));
                }
            }
        };
        match &e.outcome {
            Ok(outcome) => {
                for v in &outcome.verdicts {
                    let status = if v.held {
                        TestCaseStatus::success()
                    } else {
                        let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                        st.set_message(v.message.clone());
                        st.set_type(if v.cannot_tell {
                            "cannot-tell"
                        } else {
                            "violated"
                        });
                        st
                    };
                    let mut case = TestCase::new(v.label.clone(), status);
                    case.set_classname(format!("kubechaos.{}", s.name));
                    let mut out = format!("{}\nseed: {seed}\n", v.message);
                    files(&mut out);
                    case.set_system_out(out);
                    suite.add_test_case(case);
                }
                suite.set_time(outcome.wall);
                total += outcome.wall;
            }
            Err(error) => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
                st.set_message(crate::error::chain(*error));
                st.set_type("environment");
                let mut case = TestCase::new("run", st);
                case.set_classname(format!("kubechaos.{}", s.name));
                suite.add_test_case(case);
            }
        }
        report.add_test_suite(suite);
    }
    report.set_time(total);
    report.to_string().expect("junit serializes")
}
