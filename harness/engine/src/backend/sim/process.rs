//! What every simulated process shares: its name, its incarnation, the recorder, the clock and
//! a client for the API server.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::net::SimTransport;
use crate::clock::{Clock, Rng};
use crate::elector::{Config, Elector, LeadershipReporter};
use kubechaos_core::events::{EventKind, Recorder};
use kubechaos_core::scenario::LeaseRef;

/// Per-request timeout of simulated clients. client-go's leader-election clients are bounded by
/// the renew deadline; 5s keeps every try inside it.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A simulated process (one turmoil host).
#[derive(Clone)]
pub struct Proc {
    /// Process (and host) name, e.g. `kube-scheduler-1`.
    pub(crate) name: String,
    incarnation: Arc<AtomicU32>,
    /// The run's recorder.
    pub(crate) recorder: Recorder,
    /// Timestamps.
    pub(crate) clock: Arc<dyn Clock>,
    /// The run's seed.
    pub(crate) seed: u64,
    /// The incarnation asked to terminate (SIGTERM from its node, for a deleted pod); 0: none.
    terminate: Arc<tokio::sync::watch::Sender<u32>>,
}

/// How long kube-scheduler and kube-controller-manager take from their start to their first
/// request. Measured on the pinned v1.37.2 on the local backend: from the first log line to
/// "Attempting to acquire leader lease" 0.23-0.51 s (kube-scheduler), 0.23-0.26 s
/// (kube-controller-manager), several starting at once on 2 cores. Where in this range a start
/// falls decides where a leader's 2 s renew cycle stands against the scenario's times.
pub(crate) const START_UP: (Duration, Duration) =
    (Duration::from_millis(250), Duration::from_millis(550));

impl Proc {
    /// A process that has not started yet.
    pub fn new(name: &str, recorder: Recorder, clock: Arc<dyn Clock>, seed: u64) -> Self {
        Proc {
            name: name.to_owned(),
            incarnation: Arc::default(),
            recorder,
            clock,
            seed,
            terminate: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Ask the running incarnation to terminate, as the kubelet's SIGTERM to a deleted pod's
    /// container: each model handles it as its upstream component handles the signal.
    pub(crate) fn terminate(&self) {
        let inc = self.incarnation.load(Ordering::SeqCst);
        self.terminate.send_replace(inc);
    }

    /// Until incarnation `inc` is asked to terminate.
    pub(crate) async fn terminated(&self, inc: u32) {
        let mut rx = self.terminate.subscribe();
        let _ = rx.wait_for(|asked| *asked >= inc).await;
    }

    /// Mark a start: the next incarnation. Returns it.
    pub(crate) fn start(&self) -> u32 {
        let inc = self.incarnation.fetch_add(1, Ordering::SeqCst) + 1;
        self.recorder.record(EventKind::ProcessStarted {
            process: self.name.clone(),
            incarnation: inc,
        });
        inc
    }

    /// Record that the process ends on its own, and why.
    pub(crate) fn exit(&self, reason: &str) {
        self.recorder.record(EventKind::ProcessExited {
            process: self.name.clone(),
            reason: reason.to_owned(),
        });
    }

    /// Record a note about what the process does.
    pub(crate) fn note(&self, message: &str) {
        self.recorder.record(EventKind::ProcessNote {
            process: self.name.clone(),
            message: message.to_owned(),
        });
    }

    /// The lease identity of incarnation `inc`: `hostname_uid` shaped, as upstream.
    pub(crate) fn identity(&self, inc: u32) -> String {
        format!("{}_{inc}", self.name)
    }

    /// A client over the simulated network, authenticated as the process is on the local
    /// backend ([`credentials`]).
    pub(crate) fn client(&self) -> kube::Client {
        let (user, client_go) = credentials(&self.name);
        SimTransport::client_as(REQUEST_TIMEOUT, &self.name, user, client_go)
    }

    /// Wait out what an upstream component takes from its start to its first request (flags
    /// parsed, clients and informers built): drawn per incarnation from the seed within
    /// [`START_UP`].
    pub(crate) async fn start_up(&self, inc: u32) {
        let mut rng = Rng::new(self.seed, &format!("{}/start-up", self.identity(inc)));
        let (low, high) = START_UP;
        tokio::time::sleep(low + (high - low).mul_f64(rng.next_f64())).await;
    }

    /// A jitter source for incarnation `inc`, derived from the seed.
    pub(crate) fn rng(&self, inc: u32) -> Rng {
        Rng::new(self.seed, &self.identity(inc))
    }

    /// An elector for `lease` with default timing, reporting leadership to the recorder.
    pub(crate) fn elector(&self, client: kube::Client, lease: &LeaseRef, inc: u32) -> Elector {
        Elector::new(
            client,
            &lease.namespace,
            &lease.name,
            &self.identity(inc),
            Config::default(),
            self.clock.clone(),
            self.rng(inc),
            Arc::new(RecorderReporter(self.recorder.clone())),
        )
    }
}

/// Who a process is to the API server, as on the local backend (its certificates,
/// `local::pki::IDENTITIES`): the components as upstream's RBAC names them, with client-go's
/// REST client (which retries on `Retry-After`); the rest (agents, nodes) kubechaos's own
/// programs, which authenticate as kubechaos's admin and use kube-rs.
pub(crate) fn credentials(process: &str) -> (&'static str, bool) {
    if process.starts_with("kube-scheduler-") {
        ("system:kube-scheduler", true)
    } else if process.starts_with("kube-controller-manager-") {
        ("system:kube-controller-manager", true)
    } else {
        (super::net::ADMIN_USER, false)
    }
}

/// Reports leadership into the recorder.
pub(crate) struct RecorderReporter(pub Recorder);

impl LeadershipReporter for RecorderReporter {
    fn started_leading(&self, lease: &str, identity: &str) {
        self.0.record(EventKind::LeadingStarted {
            lease: lease.to_owned(),
            identity: identity.to_owned(),
        });
    }
    fn stopped_leading(&self, lease: &str, identity: &str, reason: &str) {
        self.0.record(EventKind::LeadingStopped {
            lease: lease.to_owned(),
            identity: identity.to_owned(),
            reason: reason.to_owned(),
        });
    }
}

/// Until a pod changes after resourceVersion `rv` (`None`: not known, then simply `max`), or `max`
/// has passed: a watch on pods over the simulated network, as the informers of upstream's
/// scheduler and controllers wake them within milliseconds of a change (a deleted pod's
/// replacement is created and bound at once). A partition or a stopped API server answers no
/// watch: the model then waits out `max`, as it would have polled.
pub(crate) async fn pods_changed(client: &kube::Client, rv: Option<&str>, max: Duration) {
    use futures::StreamExt;
    let wait = async {
        let Some(rv) = rv else {
            return std::future::pending::<()>().await;
        };
        let api = kube::Api::<k8s_openapi::api::core::v1::Pod>::all(client.clone());
        let params = kube::api::WatchParams::default().timeout(max.as_secs().max(1) as u32);
        match api.watch(&params, rv).await {
            Ok(events) => {
                let mut events = std::pin::pin!(events);
                if events.next().await.is_none() {
                    std::future::pending::<()>().await;
                }
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    let _ = tokio::time::timeout(max, wait).await;
}
