//! Backends: the world a scenario is played against. They share everything but the world: the
//! plan they carry out, the events they record, and the invariants that judge them.
//!
//! [`driver`] carries out the fault vocabulary for any world;
//! - [`sim`]: a deterministic simulated cluster (turmoil), the default;
//! - [`local`]: a real control plane started on this machine from upstream binaries;
//! - `kube`: an existing cluster from a kubeconfig (not built yet).

pub mod driver;
pub mod local;
pub mod sim;

use crate::scenario::validate::process_name;
use crate::scenario::{Action, Invariant, Pos, Scenario, Target};

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
        BackendKind::Sim => {
            let mut problems = built_cluster_check(s, "sim");
            problems.extend(sim::check(s));
            problems
        }
        BackendKind::Local => built_cluster_check(s, "local"),
        BackendKind::Kube => vec![(
            s.source.name_pos,
            "the `kube` backend is not built yet (see the open issues); expected `--backend sim` or `--backend local`".to_owned(),
        )],
    }
}

/// What the backends that build their own cluster (sim, local) cannot do yet, and node targets
/// that their cluster does not have.
fn built_cluster_check(s: &Scenario, backend: &str) -> Vec<(Pos, String)> {
    let later = "it comes with the disaster-recovery work";
    let mut problems = Vec::new();
    if s.cluster.self_hosted {
        problems.push((s.source.name_pos, format!("`cluster.self-hosted: true` is not yet supported by the {backend} backend ({later}); expected `self-hosted: false`")));
    }
    for step in &s.faults {
        if let Action::Recover(_) | Action::Bind(_) = &step.action {
            problems.push((
                step.pos,
                format!(
                    "`{}` is not yet supported by the {backend} backend ({later})",
                    step.action.key()
                ),
            ));
        }
        for (i, t) in step.action.targets().into_iter().enumerate() {
            if let Target::Node(name) = t {
                let known = (0..s.cluster.nodes).any(|n| process_name("node", n) == *name);
                if !known {
                    let pos = step.target_pos.get(i).copied().unwrap_or(step.pos);
                    problems.push((pos, format!(
                        "target `node/{name}`: the {backend} backend's nodes are {}; expected one of those",
                        match s.cluster.nodes {
                            0 => "none (cluster.nodes is 0)".to_owned(),
                            1 => "only node-0".to_owned(),
                            n => format!("node-0 … node-{}", n - 1),
                        }
                    )));
                }
            }
        }
    }
    for inv in &s.expect {
        if let Invariant::Available(a) = &inv.value {
            problems.push((inv.pos, format!(
                "`available: {{deployment: {}}}`: the {backend} backend's cluster has no Deployments without `self-hosted: true`, which is not supported yet ({later})",
                a.deployment
            )));
        }
    }
    problems
}
