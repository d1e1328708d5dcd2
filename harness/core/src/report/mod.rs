//! Reports: the same events and verdicts feed the terminal, JUnit XML, the JSON summary, the
//! Markdown table of verdicts, the events file and the HTML report.

pub mod html;
pub mod junit;
pub mod live;
pub mod markdown;
pub mod summary;
pub mod terminal;

use std::path::Path;

use crate::outcome::Outcome;
use crate::scenario::Scenario;

/// One scenario's part of a report: its outcome, or why it could not run.
pub struct Entry<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// What the run produced, or the environment failure that stopped it.
    pub outcome: Result<&'a Outcome, &'a (dyn std::error::Error + 'static)>,
    /// Where its events were written, if they were.
    pub events_path: Option<&'a Path>,
    /// Where its HTML report was written, if it was.
    pub report_path: Option<&'a Path>,
}
