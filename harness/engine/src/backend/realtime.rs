//! What the backends that run in real time (local, kube) share: a recorder whose time zero is
//! set when the world is ready, Ctrl-C and SIGTERM turned into a flag, and the loop that plays a
//! plan through the shared [`Driver`], saying what it does and feeding the live view.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::driver::{Driver, World};
use kubechaos_core::events::{fmt_ms, EventKind, Recorder};
use kubechaos_core::plan::{Plan, PlannedKind};
use kubechaos_core::report::live::{Progress, Status};
use kubechaos_core::scenario::Scenario;

/// How often the driver looks at the plan and the processes.
pub const TICK: Duration = Duration::from_millis(100);

/// The runtime of a real-time run: two workers (output pumps, fake nodes, the observer).
pub fn runtime() -> Result<tokio::runtime::Runtime, super::BackendError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            super::BackendError::Environment(format!("cannot start the async runtime: {e}"))
        })
}

/// A recorder stamping real milliseconds since the instant set in the returned cell (zero until
/// it is set), with the run's start already recorded.
pub fn recorder(backend: &str, s: &Scenario, plan: &Plan) -> (Recorder, Arc<OnceLock<Instant>>) {
    let zero: Arc<OnceLock<Instant>> = Arc::default();
    let clock_zero = zero.clone();
    let recorder = Recorder::new(move || {
        clock_zero
            .get()
            .map(|z| z.elapsed().as_millis() as u64)
            .unwrap_or(0)
    });
    recorder.record_at(
        0,
        EventKind::RunStarted {
            scenario: s.name.clone(),
            backend: backend.into(),
            seed: 0,
            version: env!("CARGO_PKG_VERSION").into(),
            duration_ms: plan.duration.as_millis() as u64,
        },
    );
    (recorder, zero)
}

/// Ctrl-C or SIGTERM, as a flag and a channel.
pub struct Interrupt {
    /// Set once a signal came.
    pub flag: Arc<AtomicBool>,
    /// Changes once a signal came.
    pub rx: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Interrupt {
    /// Listen on runtime `rt`.
    pub fn listen(rt: &tokio::runtime::Runtime) -> Interrupt {
        let flag = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::watch::channel(false);
        let set = flag.clone();
        let task = rt.spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
            set.store(true, Ordering::SeqCst);
            let _ = tx.send(true);
        });
        Interrupt { flag, rx, task }
    }

    /// Whether a signal came.
    pub fn came(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Stop listening.
    pub fn stop(&self) {
        self.task.abort();
    }
}

/// How often the live view is told where the run is.
pub const STATUS_EVERY: Duration = Duration::from_millis(500);

/// Play `plan` in real time from now (time zero) until its end or an interrupt: apply each
/// action when due, supervise, say each step, and tell the live view where the run is. Returns
/// the time it ended.
pub fn play<W: World>(
    driver: &mut Driver<W>,
    s: &Scenario,
    plan: &Plan,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Duration {
    let started = Instant::now();
    let mut next = 0;
    let mut next_status = Duration::ZERO;
    let total = fmt_ms(plan.duration.as_millis() as u64);
    progress.say(&format!("t=0.0s: running for {total}"));
    let ended = loop {
        let now = started.elapsed();
        while next < plan.actions.len() && plan.actions[next].at <= now {
            let kind = &plan.actions[next].kind;
            driver.apply(s, kind, now);
            let t = fmt_ms(now.as_millis() as u64);
            progress.say(&match kind {
                PlannedKind::Fault { step } => format!("t={t}: {}", s.faults[*step].action),
                PlannedKind::Undo { step } => format!(
                    "t={t}: undoing `{}` after its `for`",
                    s.faults[*step].action
                ),
                PlannedKind::Probe { invariant } => format!(
                    "t={t}: probe pod for `{}`",
                    s.expect[*invariant].value.label()
                ),
            });
            next += 1;
        }
        driver.supervise(now);
        if now >= plan.duration || interrupt.came() {
            break now;
        }
        if now >= next_status {
            let events = driver.recorder().snapshot();
            progress.status(Some(&Status {
                now,
                scenario: s,
                plan,
                applied: next,
                events: &events,
            }));
            next_status = now + STATUS_EVERY;
        }
        std::thread::sleep(TICK);
    };
    progress.status(None);
    ended
}
