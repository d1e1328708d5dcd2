//! kubechaos's core: what a run means, without any cluster. The first and the last steps of the
//! run path live here, and this crate depends on no runtime, client or simulator (no tokio, kube,
//! hyper or turmoil), so the compiler keeps them apart from the worlds they judge:
//!
//! [`scenario`] (model, decode, validate) -> [`plan`] -> *a backend, in `kubechaos-engine`*
//! -> [`events`] (the recorded timeline) -> [`invariants`] -> [`outcome`] -> [`report`]
//! (terminal, JUnit, JSON, HTML, the live view).
#![warn(missing_docs)]

pub mod events;
pub mod invariants;
pub mod outcome;
pub mod plan;
pub mod report;
pub mod scenario;
pub mod selector;
