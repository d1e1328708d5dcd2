//! One run, end to end: scenario -> plan -> backend -> events -> invariants.

use std::time::{Duration, Instant};

use crate::backend::{self, BackendError, BackendKind};
pub use kubechaos_core::outcome::Outcome;
pub use kubechaos_core::plan::Plan;
use kubechaos_core::scenario::Scenario;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Which world.
    pub backend: BackendKind,
    /// Seed (sim).
    pub seed: u64,
    /// Virtual time per simulation step (sim).
    pub tick: Duration,
    /// Keep the run directory (local).
    pub keep: bool,
    /// Which existing cluster (kube).
    pub kube: backend::kube::KubeTarget,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            backend: BackendKind::Sim,
            seed: DEFAULT_SEED,
            tick: backend::sim::SimOptions::default().tick,
            keep: false,
            kube: Default::default(),
        }
    }
}

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 1;

/// Play a validated scenario.
pub fn run(s: &Scenario, opts: &RunOptions) -> Result<Outcome, BackendError> {
    run_with_progress(s, opts, &mut |_: &str| {})
}

/// Play a validated scenario, telling `progress` what a real-time backend is doing.
pub fn run_with_progress(
    s: &Scenario,
    opts: &RunOptions,
    progress: &mut dyn kubechaos_core::report::live::Progress,
) -> Result<Outcome, BackendError> {
    let problems = backend::check(opts.backend, opts.kube.provider, s);
    if !problems.is_empty() {
        return Err(BackendError::Unsupported {
            backend: opts.backend.name(),
            problems,
        });
    }
    let plan = Plan::new(s);
    let started = Instant::now();
    let events = match opts.backend {
        BackendKind::Sim => backend::sim::run(
            s,
            &plan,
            &backend::sim::SimOptions {
                seed: opts.seed,
                tick: opts.tick,
            },
        )?,
        BackendKind::Local => backend::local::run::run(
            s,
            &plan,
            &backend::local::run::LocalOptions { keep: opts.keep },
            progress,
        )?,
        BackendKind::Kube => backend::kube::run(s, &plan, &opts.kube, progress)?,
    };
    Ok(Outcome::judge(s, plan, events, started.elapsed()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tracing_test::traced_test;

    use super::*;
    use kubechaos_core::scenario;

    /// Operators read these lines when leadership is lost; they must name the lease.
    #[traced_test]
    #[test]
    fn the_elector_logs_acquiring_and_losing_its_lease() {
        let yaml = "name: t\ncluster: {nodes: 0, agents: [{name: agent, replicas: 1, lease: default/agent-lock}]}\nfaults:\n  - {at: 10s, api-server: stop, for: 30s}\n";
        let s = scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).expect("valid");
        run(&s, &RunOptions::default()).expect("runs");
        assert!(logs_contain(
            "successfully acquired lease lease=default/agent-lock identity=agent-0_1"
        ));
        assert!(logs_contain(
            "failed to renew lease: stopped leading lease=default/agent-lock identity=agent-0_1"
        ));
    }
}
