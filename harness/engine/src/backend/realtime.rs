//! What the backends that run in real time (local, kube) share: their runtime, a recorder whose
//! time zero is set when the world is ready, Ctrl-C and SIGTERM turned into a flag, and the
//! clock their worlds keep ([`RealTime`]). The loop itself is the run skeleton's
//! ([`crate::run::play`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kubechaos_core::events::{fmt_ms, EventKind, Recorder};

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

/// How long a step that targets a Lease's holder waits for the API server to say who it is.
const LEASE_READ: Duration = Duration::from_secs(2);

/// The holder identity a Lease names now, for a step that targets its leader: read from the API
/// server; when that does not answer within [`LEASE_READ`] (it may be the thing that is down,
/// or slow on a busy machine), the holder in the observer's latest reading of it. (On kube a
/// slow read once meant "no leader at the time", and a partition of the leader cut nothing.)
pub(crate) fn lease_identity(
    rt: &tokio::runtime::Handle,
    client: &kube::Client,
    recorder: &Recorder,
    lease: &kubechaos_core::scenario::LeaseRef,
) -> Option<String> {
    let read = rt.block_on(async {
        tokio::time::timeout(LEASE_READ, crate::kubeclient::lease_holder(client, lease)).await
    });
    let why = match read {
        Ok(Ok(found)) => return found,
        Ok(Err(e)) => format!("did not answer ({})", kubechaos_core::error::chain(&e)),
        Err(_) => format!("did not answer within {}s", LEASE_READ.as_secs()),
    };
    let seen = last_seen_holder(&recorder.snapshot(), &lease.to_string());
    recorder.record(EventKind::ProcessNote {
        process: "kubechaos".into(),
        message: format!(
            "asked who holds {lease} for a step on its leader, the API server {why}: {}",
            match &seen {
                Some((t, Some(h))) => format!(
                    "taken from the Lease as last seen (written at {}): {h}",
                    fmt_ms(*t)
                ),
                Some((t, None)) => format!(
                    "the Lease as last seen (written at {}) named nobody",
                    fmt_ms(*t)
                ),
                None => "the Lease was never seen: no leader at the time".into(),
            }
        ),
    });
    seen.and_then(|(_, h)| h)
}

/// The latest reading of Lease `key` among `events` (by the time each reading is placed at,
/// not the order they were read in): where it is placed, and the holder it names.
fn last_seen_holder(
    events: &[kubechaos_core::events::Event],
    key: &str,
) -> Option<(u64, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LeaseObserved { lease, holder, .. } if lease == key => {
                Some((e.t_ms, holder.clone()))
            }
            _ => None,
        })
        .max_by_key(|(t, _)| *t)
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

#[cfg(test)]
mod tests {
    use super::*;
    use kubechaos_core::events::{Event, EventKind};

    fn seen(t_ms: u64, lease: &str, holder: Option<&str>) -> Event {
        Event::new(
            t_ms,
            EventKind::LeaseObserved {
                lease: lease.into(),
                holder: holder.map(str::to_owned),
                renew_ms: Some(t_ms),
                transitions: 0,
                duration_ms: Some(15_000),
                written_ms: None,
            },
        )
    }

    /// The kube-pod-cut play in the real tier, its API server slow at the tier's start: the
    /// read of the Lease did not answer in time, and the leader was "no leader at the time".
    /// When the API server does not answer, the holder is the observer's latest reading, by
    /// the time each reading is placed at (a reading placed earlier may be read later).
    #[test]
    fn a_lease_the_api_server_does_not_say_in_time_names_the_holder_seen_last() {
        let rt = runtime().unwrap();
        let client = {
            let _in = rt.enter();
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap()
        };
        let recorder = Recorder::new(|| 0);
        let lease = kubechaos_core::scenario::LeaseRef {
            namespace: "ns".into(),
            name: "lock".into(),
        };
        assert_eq!(
            lease_identity(rt.handle(), &client, &recorder, &lease),
            None,
            "never seen"
        );
        for e in [
            seen(0, "ns/lock", Some("a")),
            seen(9_000, "ns/lock", Some("b")),
            seen(5_000, "ns/lock", Some("c")),
            seen(12_000, "ns/other", Some("d")),
        ] {
            recorder.record_at(e.t_ms, e.kind);
        }
        assert_eq!(
            lease_identity(rt.handle(), &client, &recorder, &lease),
            Some("b".to_owned())
        );
        let released = seen(10_000, "ns/lock", None);
        recorder.record_at(released.t_ms, released.kind);
        assert_eq!(
            lease_identity(rt.handle(), &client, &recorder, &lease),
            None,
            "released"
        );
        // Each time, the timeline says where the answer came from.
        let notes: Vec<String> = recorder
            .snapshot()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::ProcessNote { message, .. } => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "asked who holds ns/lock for a step on its leader, the API server did not answer ("
            ),
            "{notes:?}"
        );
        assert!(
            notes[0].ends_with("): the Lease was never seen: no leader at the time"),
            "{notes:?}"
        );
        assert!(
            notes[1].ends_with(": taken from the Lease as last seen (written at 9.0s): b"),
            "{notes:?}"
        );
        assert!(
            notes[2].ends_with(": the Lease as last seen (written at 10.0s) named nobody"),
            "{notes:?}"
        );
    }
}
