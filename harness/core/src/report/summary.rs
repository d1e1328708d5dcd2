//! The JSON summary of one run or a suite: what CI systems and scripts read.

use serde::Serialize;

use super::Entry;

/// The whole summary.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// kubechaos's version.
    pub(crate) version: &'static str,
    /// `sim`, `local`.
    pub(crate) backend: String,
    /// The seed (sim).
    pub(crate) seed: u64,
    /// The exit code of the run.
    pub(crate) exit_code: i32,
    /// Every scenario, in the order played.
    pub(crate) scenarios: Vec<ScenarioSummary>,
}

/// One scenario.
#[derive(Debug, Serialize)]
pub(crate) struct ScenarioSummary {
    /// Its `name:`.
    pub(crate) name: String,
    /// Its file.
    pub(crate) file: String,
    /// `held`, `violated`, `cannot-tell` (none violated, some the evidence could not tell), or
    /// `error` (it could not run).
    pub(crate) result: &'static str,
    /// Wall seconds the run took.
    pub(crate) wall_seconds: f64,
    /// Why it could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// Its events file, when written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) events: Option<String>,
    /// Its HTML report, when written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) report: Option<String>,
    /// One per invariant, in file order.
    pub(crate) invariants: Vec<InvariantSummary>,
    /// Lines printed as leadership reports that could not be read (not judged); left out when
    /// there were none.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) rejected_reports: usize,
    /// The longest that a fact was read after it happened, in milliseconds (every fact is
    /// placed when it happened: a busy machine or a slow API server shows here, not in the
    /// verdicts); left out when everything was read as it happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) largest_lag_ms: Option<u64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One invariant's verdict.
#[derive(Debug, Serialize)]
pub(crate) struct InvariantSummary {
    /// `leader-reacquired kube-system/kube-scheduler`.
    pub(crate) label: String,
    /// Whether it held.
    pub(crate) held: bool,
    /// Not held because the evidence could not tell (neither held nor violated).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) cannot_tell: bool,
    /// The measured figure, or what was expected, seen and when.
    pub(crate) message: String,
    /// How long after its anchor it held, in milliseconds (`leader-reacquired`, `schedulable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) took_ms: Option<u64>,
}

/// Render runs as a pretty-printed JSON summary.
pub fn render(entries: &[Entry<'_>], backend: &str, seed: u64, exit_code: i32) -> String {
    let scenarios = entries
        .iter()
        .map(|e| match &e.outcome {
            Ok(o) => ScenarioSummary {
                name: e.scenario.name.clone(),
                file: e.scenario.source.path.display().to_string(),
                result: if o.held() {
                    "held"
                } else if o.cannot_tell() {
                    "cannot-tell"
                } else {
                    "violated"
                },
                wall_seconds: o.wall.as_secs_f64(),
                error: None,
                events: e.events_path.map(|p| p.display().to_string()),
                report: e.report_path.map(|p| p.display().to_string()),
                invariants: o
                    .verdicts
                    .iter()
                    .map(|v| InvariantSummary {
                        label: v.label.clone(),
                        held: v.held,
                        cannot_tell: v.cannot_tell,
                        message: v.message.clone(),
                        took_ms: v.took_ms,
                    })
                    .collect(),
                rejected_reports: o.rejected_reports(),
                largest_lag_ms: o.largest_lag().map(|(lag, _)| lag),
            },
            Err(error) => ScenarioSummary {
                name: e.scenario.name.clone(),
                file: e.scenario.source.path.display().to_string(),
                result: "error",
                wall_seconds: 0.0,
                error: Some(crate::error::chain(*error)),
                events: None,
                report: None,
                invariants: Vec::new(),
                rejected_reports: 0,
                largest_lag_ms: None,
            },
        })
        .collect();
    let summary = Summary {
        version: env!("CARGO_PKG_VERSION"),
        backend: backend.to_owned(),
        seed,
        exit_code,
        scenarios,
    };
    serde_json::to_string_pretty(&summary).expect("summary serializes") + "\n"
}
