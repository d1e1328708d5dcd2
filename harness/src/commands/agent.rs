//! `agent`: the reference leader-elected agent, as the local backend runs it.

use std::time::Duration;

use super::{runtime, End};
use crate::cli::AgentArgs;
use kubechaos_core::scenario::AgentMode;

/// `kubechaos agent`: compete for a Lease until killed (with `--mode exit`, until it loses the
/// Lease: exit 1), reporting leadership as JSON lines.
pub fn agent(args: &AgentArgs) -> End {
    let (namespace, name) = super::lease_arg("agent", &args.lease, "default/agent-lock")?;
    let mode = match args.mode.as_str() {
        "give-up" => AgentMode::GiveUp,
        "stuck-on-stop" => AgentMode::StuckOnStop,
        _ => AgentMode::Correct,
    };
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "agent".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let identity = args
        .identity
        .clone()
        .unwrap_or_else(|| format!("{hostname}_{:08x}", nanos as u32 ^ std::process::id()));
    let rt = runtime()?;
    rt.block_on(async {
        // As a container's first process (PID 1) a signal with no handler is ignored, so a
        // deleted pod of the agent took its whole grace period to end (seen on kind: 30 s per
        // pod, and a namespace that outlived the next run's start). There SIGTERM ends it at
        // once, as it ends the agent anywhere else.
        if std::process::id() == 1 {
            use tokio::signal::unix::{signal, SignalKind};
            if let Ok(mut term) = signal(SignalKind::terminate()) {
                tokio::spawn(async move {
                    term.recv().await;
                    std::process::exit(128 + 15);
                });
            }
        }
        // client-go bounds leader-election requests by the renew deadline; 5s keeps each try
        // inside it, as the sim's clients do.
        let client = kubechaos_engine::kubeclient::client(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
            Some(Duration::from_secs(5)),
        )
        .await?;
        let process = kubechaos_core::events::identity_process(&identity).to_owned();
        kubechaos_engine::agent::run(kubechaos_engine::agent::AgentParams {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.clone(),
            mode,
            exit_on_loss: args.mode == "exit",
            clock: std::sync::Arc::new(kubechaos_engine::clock::SystemClock),
            rng: kubechaos_engine::clock::Rng::new(nanos, &identity),
            reporter: std::sync::Arc::new(kubechaos_engine::agent::JsonLinesReporter),
            note: Box::new(move |m| {
                kubechaos_engine::agent::JsonLinesReporter::emit(
                    &kubechaos_core::events::EventKind::ProcessNote {
                        process: process.clone(),
                        message: m.to_owned(),
                    },
                )
            }),
        })
        .await;
        Ok::<(), crate::failure::Failure>(())
    })?;
    // It returns only with --mode exit, once it lost its lease: exit 1, as a manager does.
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(1)
}
