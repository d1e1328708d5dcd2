//! The leader-elected agent: hosts leader-only work that starts when it becomes leader and stops
//! when it stops leading, with the behaviours of the first failure kubechaos exists for (an agent
//! whose `LeaderElector.Run` returned after a failed renew and was never started again; README)
//! selectable by mode.
//!
//! The same function runs in the simulation (over turmoil, with the simulated clock) and as a
//! real process (`kubechaos agent`, which the local backend starts for each replica) against a
//! real API server.

use std::sync::Arc;

use crate::clock::{Clock, Rng};
use crate::elector::{Config, Elector, LeadershipReporter};
use kubechaos_core::scenario::AgentMode;

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
    /// Instead of `mode`, return on losing the lease, for the process to exit: what a
    /// controller-runtime manager does ("leader election lost", exit 1) and kube-scheduler,
    /// left to its kubelet to start again (`kubechaos agent --mode exit`; not a scenario's mode:
    /// the sim has no kubelet).
    pub exit_on_loss: bool,
    /// Timestamps.
    pub clock: Arc<dyn Clock>,
    /// Jitter.
    pub rng: Rng,
    /// Where leadership is reported.
    pub reporter: Arc<dyn LeadershipReporter>,
    /// Called with a sentence when the agent does something worth explaining.
    pub note: Box<dyn Fn(&str) + Send + Sync>,
}

/// Run an agent replica for as long as the process lives (until it loses its lease, with
/// `exit_on_loss`).
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
        if p.exit_on_loss {
            (p.note)("lost the lease; exiting, as a controller-runtime manager does (\"leader election lost\")");
            return;
        }
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

/// Reports leadership as JSON lines on stdout, one [`EventKind`](kubechaos_core::events::EventKind) per
/// line (`{"event":"leading-started","lease":"default/agent-lock","identity":"agent-0_1",
/// "time":"2026-12-05T08:11:08.123456789Z"}`). The backends read these lines from every agent
/// replica, the reference agent's and your own program's; `time` (optional, RFC 3339) is when
/// it happened by the program's own clock, and places the report there (a line that reached
/// kubechaos or its runtime late still lands where it was said).
pub struct JsonLinesReporter;

impl JsonLinesReporter {
    /// Print one event line, stamped with this process's clock, and flush it at once.
    pub fn emit(kind: &kubechaos_core::events::EventKind) {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        if let Ok(serde_json::Value::Object(mut o)) = serde_json::to_value(kind) {
            o.insert(
                "time".into(),
                k8s_openapi::jiff::Timestamp::now().to_string().into(),
            );
            if let Ok(line) = serde_json::to_string(&o) {
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        }
    }
}

impl LeadershipReporter for JsonLinesReporter {
    fn started_leading(&self, lease: &str, identity: &str) {
        Self::emit(&kubechaos_core::events::EventKind::LeadingStarted {
            lease: lease.to_owned(),
            identity: identity.to_owned(),
        });
    }
    fn stopped_leading(&self, lease: &str, identity: &str, reason: &str) {
        Self::emit(&kubechaos_core::events::EventKind::LeadingStopped {
            lease: lease.to_owned(),
            identity: identity.to_owned(),
            reason: reason.to_owned(),
        });
    }
}
