//! What the backends that run in real time (local, kube) share: their runtime, a recorder whose
//! time zero is set when the world is ready, Ctrl-C and SIGTERM turned into a flag, and the
//! clock their worlds keep ([`RealTime`]). The loop itself is the run skeleton's
//! ([`crate::run::play`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kubechaos_core::events::Recorder;

/// How often the driver looks at the plan and the processes.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// The runtime of a real-time run: two workers (output pumps, fake nodes, the observer).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, super::BackendError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| super::EnvironmentError::Runtime(e).into())
}

/// A recorder stamping real milliseconds since the instant the backend sets in `zero` once its
/// world is ready (zero until then). `zero` is replaced by the recorder's own cell.
pub(crate) fn recorder(zero: &mut Arc<OnceLock<Instant>>) -> Recorder {
    *zero = Arc::default();
    let clock_zero = zero.clone();
    Recorder::new(move || {
        clock_zero
            .get()
            .map(|z| z.elapsed().as_millis() as u64)
            .unwrap_or(0)
    })
}

/// Ctrl-C or SIGTERM, as a flag and a channel.
pub(crate) struct Interrupt {
    /// Set once a signal came.
    pub(crate) flag: Arc<AtomicBool>,
    /// Changes once a signal came.
    pub(crate) rx: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Interrupt {
    /// Listen on runtime `rt`.
    pub(crate) fn listen(rt: &tokio::runtime::Runtime) -> Interrupt {
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
    pub(crate) fn came(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Stop listening.
    pub(crate) fn stop(&self) {
        self.task.abort();
    }
}

/// The clock of a real-time world: the wall clock since time zero, looked at every [`TICK`],
/// and whether the run was interrupted.
pub(crate) struct RealTime {
    zero: Instant,
    interrupt: Interrupt,
}

impl RealTime {
    /// Time zero is `zero`; `interrupt` ends the run early.
    pub(crate) fn new(zero: Instant, interrupt: Interrupt) -> RealTime {
        RealTime { zero, interrupt }
    }

    /// The flag [`Self::interrupted`] reads, for a world that ends the run on a failure.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.interrupt.flag.clone()
    }

    /// Stop listening for signals.
    pub(crate) fn stop(&self) {
        self.interrupt.stop();
    }
}

impl super::driver::WorldClock for RealTime {
    /// Since time zero.
    fn now(&mut self) -> Duration {
        self.zero.elapsed()
    }

    /// Wait one tick.
    fn advance(&mut self) -> Result<(), super::BackendError> {
        std::thread::sleep(TICK);
        Ok(())
    }

    fn real_time(&self) -> bool {
        true
    }

    /// Whether Ctrl-C or SIGTERM came (or the world set the flag: a failure underneath).
    fn interrupted(&self) -> bool {
        self.interrupt.came()
    }
}
