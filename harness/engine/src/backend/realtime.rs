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

/// A run's time zero on both of its clocks, set together once the world is ready: the
/// monotonic one that stamps events, and the wall clock that sources stamp facts with (a Lease's
/// `renewTime`, a log line's runtime timestamp, a container's exit in its node), so that a fact
/// stamped at its source is placed on the run's clock. Read apart, the two zeros once differed
/// by half a second, and a Lease renewed after the API server's start was placed before it.
/// Cheap to clone; before it is set, every time is zero.
#[derive(Clone, Default)]
pub(crate) struct Zero(Arc<OnceLock<(Instant, k8s_openapi::jiff::Timestamp)>>);

impl Zero {
    /// Set time zero to now, on both clocks (once; later calls change nothing).
    pub(crate) fn set_now(&self) -> (Instant, k8s_openapi::jiff::Timestamp) {
        let wall = k8s_openapi::jiff::Timestamp::now();
        *self.0.get_or_init(|| (Instant::now(), wall))
    }

    /// A time zero whose wall clock reads `wall` (tests).
    #[cfg(test)]
    pub(crate) fn at(wall: k8s_openapi::jiff::Timestamp) -> Zero {
        let z = Zero::default();
        let _ = z.0.set((Instant::now(), wall));
        z
    }

    /// Milliseconds since time zero, now.
    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.0
            .get()
            .map(|(z, _)| z.elapsed().as_millis() as u64)
            .unwrap_or(0)
    }

    /// Milliseconds since time zero of wall-clock time `t` (0 for a time before it).
    pub(crate) fn ms_of(&self, t: k8s_openapi::jiff::Timestamp) -> u64 {
        self.signed_ms_of(t).max(0) as u64
    }

    /// Milliseconds since time zero of wall-clock time `t`, negative before it.
    pub(crate) fn signed_ms_of(&self, t: k8s_openapi::jiff::Timestamp) -> i64 {
        self.0
            .get()
            .map(|(_, wall)| t.duration_since(*wall).as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A recorder stamping real milliseconds since the time zero that the backend sets in `zero`
/// once its world is ready (zero until then). `zero` is replaced by the recorder's own.
pub(crate) fn recorder(zero: &mut Zero) -> Recorder {
    *zero = Zero::default();
    let clock = zero.clone();
    Recorder::new(move || clock.elapsed_ms())
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
