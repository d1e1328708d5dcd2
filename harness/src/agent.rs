//! The leader-elected agent: hosts leader-only work that starts when it becomes leader and stops
//! when it stops leading, with the behaviours of the first seed
//! (`shared/seeds/leader-election-stops-permanently.txt`) selectable by mode.
//!
//! This is the seam for the reference agent: the simulation runs this code over turmoil today,
//! and a real `kubechaos-agent` binary can run the same function against a real API server.

use std::sync::Arc;

use crate::clock::{Clock, Rng};
use crate::elector::{Config, Elector, LeadershipReporter};
use crate::scenario::AgentMode;

/// Everything an agent replica needs.
pub struct AgentParams {
    /// Client for the API server.
    pub client: kube::Client,
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This replica's identity.
    pub identity: String,
    /// Behaviour on losing the lease.
    pub mode: AgentMode,
    /// Timestamps.
    pub clock: Arc<dyn Clock>,
    /// Jitter.
    pub rng: Rng,
    /// Where leadership is reported.
    pub reporter: Arc<dyn LeadershipReporter>,
    /// Called with a sentence when the agent does something worth explaining.
    pub note: Box<dyn Fn(&str) + Send + Sync>,
}

/// Run an agent replica for as long as the process lives.
pub async fn run(p: AgentParams) {
    let mut elector = Elector::new(
        p.client,
        &p.namespace,
        &p.name,
        &p.identity,
        Config::default(),
        p.clock,
        p.rng,
        p.reporter,
    );
    loop {
        // The leader-only module: works until leadership is lost (the elector drops it then).
        elector.run(std::future::pending::<()>()).await;
        match p.mode {
            AgentMode::Correct => {
                (p.note)("lost the lease; modules stopped; becoming a candidate again");
            }
            AgentMode::GiveUp => {
                (p.note)(
                    "lost the lease; the elector returned and nothing starts it again (give-up)",
                );
                std::future::pending::<()>().await;
            }
            AgentMode::StuckOnStop => {
                (p.note)("lost the lease; stopping a module that only exits when its configuration channel closes: blocked (stuck-on-stop)");
                std::future::pending::<()>().await;
            }
        }
    }
}
