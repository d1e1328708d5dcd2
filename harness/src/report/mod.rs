//! Reports: the same events and verdicts feed the terminal, JUnit XML and the events file.

pub mod junit;
pub mod terminal;
