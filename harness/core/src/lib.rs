//! kubechaos's core: what a run means, without any cluster. The first and the last steps of the
//! run path live here, and this crate depends on no runtime, client or simulator (no tokio, kube,
//! hyper or turmoil), so the compiler keeps them apart from the worlds they judge:
//!
//! [`scenario`] (model, decode, validate) -> [`plan`] -> *a backend, in `kubechaos-engine`*
//! -> [`events`] (the recorded timeline) -> [`invariants`] -> [`outcome`] -> [`report`]
//! (terminal, JUnit, JSON, HTML, the live view).
//!
//! # Adding a fault kind
//!
//! The compiler lists every place: matches over [`scenario::Action`] have no catch-all arms.
//!
//! 1. `core/src/scenario/model.rs`: the `Action` variant (and its schema type); then its
//!    `key`, `Display` (the text the format writes), `undo` (what `for:` does, if anything),
//!    `targets`, `is_api_level` and `node`.
//! 2. `core/src/scenario/decode.rs`: its key in `ACTION_KEYS` and how its value decodes, with
//!    positions for the errors.
//! 3. `engine/src/backend/driver.rs`: what it does to a world (`fault`, `undo`), through the
//!    `World` primitives. A fault that needs a new primitive adds a `World` method, which each
//!    world then implements (`backend/sim/mod.rs`, `backend/local/run.rs`,
//!    `backend/kube/mod.rs`).
//! 4. `engine/src/backend/kube/provider.rs`: which providers of existing clusters can do it;
//!    where kind or k3s can, `engine/src/backend/kube/machine.rs` does it with their commands
//!    (and says what it would do for `--dry-run`).
//!
//! Then `docs/scenario-format.md` (a test checks that it describes every key of the schema) and
//! `docs/scenario.schema.json` (`kubechaos schema`; a test checks it is current). `explore`
//! generates the model's actions; a new kind joins its strategies when it should be explored.
//!
//! # Adding an invariant
//!
//! 1. `core/src/scenario/model.rs`: the `Invariant` variant and its fields; then its `key`,
//!    `after`, `window`, `probes` and `label`.
//! 2. `core/src/scenario/decode.rs`: its key in `INVARIANT_KEYS` and how it decodes.
//! 3. `core/src/invariants/NAME.rs`: its judgement on the timeline and how the live view watches
//!    it (`WATCH`).
//! 4. `core/src/invariants/mod.rs`: the module, and its arm in `judge` and `watch`.
//!
//! Then the docs, as for a fault. The reports need nothing: the verdict, its window and its text
//! are recorded in the timeline (`invariant-judged`), which the terminal, JUnit, JSON and HTML
//! reports draw.
#![warn(missing_docs)]

pub mod error;
pub mod events;
pub mod invariants;
pub mod outcome;
pub mod plan;
pub mod report;
pub mod scenario;
pub mod selector;
