//! Backends: the world a scenario is played against. They share everything but the world: the
//! plan they carry out, the events they record, and the invariants that judge them.
//!
//! [`driver`] carries out the fault vocabulary for any world;
//! - [`sim`]: a deterministic simulated cluster (turmoil), the default;
//! - [`local`]: a real control plane started on this machine (`cluster build|up` work; scenario
//!   runs are not built yet);
//! - `kube`: an existing cluster from a kubeconfig (not built yet).

pub mod driver;
pub mod local;
pub mod sim;

use crate::scenario::{Pos, Scenario};

/// Which world to run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// A deterministic simulated cluster.
    Sim,
    /// A real control plane started on this machine from upstream binaries.
    Local,
    /// An existing cluster from a kubeconfig context.
    Kube,
}

impl BackendKind {
    /// As written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::Local => "local",
            BackendKind::Kube => "kube",
        }
    }
}

/// Why a backend could not run a scenario.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The scenario asks for something this backend cannot do (exit 2). Each problem has the
    /// position of what asked for it.
    #[error("the {backend} backend cannot run this scenario")]
    Unsupported {
        /// Backend name.
        backend: &'static str,
        /// What it cannot do, and where the scenario asks for it.
        problems: Vec<(Pos, String)>,
    },
    /// The world failed underneath the run (exit 3).
    #[error("{0}")]
    Environment(String),
}

/// What a backend can do with a scenario, checked before anything runs.
pub fn check(kind: BackendKind, s: &Scenario) -> Vec<(Pos, String)> {
    match kind {
        BackendKind::Sim => sim::check(s),
        BackendKind::Local | BackendKind::Kube => vec![(
            s.source.name_pos,
            format!(
                "the `{}` backend is not built yet (see the open issues); expected `--backend sim`",
                kind.name()
            ),
        )],
    }
}
