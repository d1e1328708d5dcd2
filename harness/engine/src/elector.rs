//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! Mirrors `k8s.io/client-go/tools/leaderelection/leaderelection.go` (v0.3x):
//! - `acquire`: try, then retry every `retry_period` with jitter (`wait.JitterUntil`, factor 1.2,
//!   sliding) until the lease is ours;
//! - `renew`: every `retry_period`, poll `tryAcquireOrRenew` until it succeeds or
//!   `renew_deadline` passes (`wait.PollUntilContextTimeout`); when it does not succeed in time,
//!   leadership is lost and `run` returns (the caller decides what happens next: upstream
//!   kube-scheduler and kube-controller-manager exit);
//! - `tryAcquireOrRenew`: a leader whose lease is still valid updates it directly (the optimistic
//!   fast path); otherwise get the lease, create it if missing, and take it over only if it
//!   expired. Expiry is judged by this candidate's own clock: the time it *observed* the record
//!   change plus `leaseDurationSeconds`, never by comparing the holder's `renewTime` with the
//!   local clock. Updates carry the resourceVersion, so a stale write gets 409 Conflict.
//!
//! Time comes from tokio (virtual under turmoil) and timestamps from an injectable [`Clock`], so
//! the same code runs in the simulation and in real programs.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use crate::clock::{Clock, Rng};

/// Timing of an elector. Defaults are client-go's and the components' (15s/10s/2s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// How long a lease is valid after its holder's last observed renewal. Default 15s.
    pub(crate) lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading. Default 10s.
    pub(crate) renew_deadline: Duration,
    /// Interval between tries. Default 2s.
    pub(crate) retry_period: Duration,
    /// Jitter added to acquire retries, as a fraction of `retry_period`. Default 1.2.
    pub(crate) jitter_factor: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            jitter_factor: 1.2,
        }
    }
}

/// Told when this candidate starts and stops acting as leader, so the harness can judge real
/// overlap, not only the Lease object.
pub trait LeadershipReporter: Send + Sync {
    /// This candidate now leads.
    fn started_leading(&self, lease: &str, identity: &str);
    /// This candidate stopped leading.
    fn stopped_leading(&self, lease: &str, identity: &str, reason: &str);
}

/// What this candidate last saw of the lease, and when (by its own clock).
#[derive(Clone, Debug)]
struct Observed {
    lease: Lease,
    at: Instant,
}

/// What `try_acquire_or_renew` decides from a lease it read. Pure, so it can be tested against
/// client-go's behaviour table without a server.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decision {
    /// Someone else holds an unexpired lease: do nothing.
    Wait,
    /// Write this spec (take over, or renew our own).
    Write(LeaseSpec),
}

/// Decide what to do with a lease held as `current`, observed unchanged since `observed_at`.
pub(crate) fn decide(
    current: &LeaseSpec,
    observed_at: Instant,
    now: Instant,
    wall: MicroTime,
    identity: &str,
    lease_duration: Duration,
) -> Decision {
    let holder = current.holder_identity.as_deref().unwrap_or("");
    let duration = current
        .lease_duration_seconds
        .map(|s| Duration::from_secs(s.max(0) as u64))
        .unwrap_or(lease_duration);
    if !holder.is_empty() && holder != identity && observed_at + duration > now {
        return Decision::Wait;
    }
    let ours = holder == identity;
    Decision::Write(LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(lease_duration.as_secs() as i32),
        acquire_time: if ours {
            current.acquire_time.clone().or(Some(wall.clone()))
        } else {
            Some(wall.clone())
        },
        renew_time: Some(wall),
        lease_transitions: Some(current.lease_transitions.unwrap_or(0) + i32::from(!ours)),
        ..LeaseSpec::default()
    })
}

/// A candidate for one Lease.
pub(crate) struct Elector {
    config: Config,
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    clock: Arc<dyn Clock>,
    rng: Rng,
    reporter: Arc<dyn LeadershipReporter>,
    observed: Option<Observed>,
    leading: bool,
}

impl Elector {
    /// A candidate `identity` for `namespace/name`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        config: Config,
        clock: Arc<dyn Clock>,
        rng: Rng,
        reporter: Arc<dyn LeadershipReporter>,
    ) -> Self {
        Elector {
            config,
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            clock,
            rng,
            reporter,
            observed: None,
            leading: false,
        }
    }

    /// `NAMESPACE/NAME` of the lease.
    pub(crate) fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Become leader, run `work` while leading, and return when leadership is lost (the work is
    /// dropped at that moment: it stops acting as leader). If `work` finishes first, leadership is
    /// kept until it is lost, as client-go does.
    pub(crate) async fn run<F: Future<Output = ()>>(&mut self, work: F) {
        self.acquire().await;
        self.leading = true;
        let lease = self.lease();
        tracing::info!(lease = %lease, identity = %self.identity, "successfully acquired lease");
        self.reporter.started_leading(&lease, &self.identity);
        {
            let work = async {
                work.await;
                std::future::pending::<()>().await
            };
            tokio::pin!(work);
            let renew = self.renew();
            tokio::pin!(renew);
            tokio::select! {
                biased;
                () = &mut renew => {}
                () = &mut work => {}
            }
        }
        self.leading = false;
        tracing::info!(lease = %lease, identity = %self.identity, "failed to renew lease: stopped leading");
        self.reporter.stopped_leading(
            &lease,
            &self.identity,
            "failed to renew the lease within the renew deadline",
        );
    }

    async fn acquire(&mut self) {
        loop {
            if self.try_acquire_or_renew().await {
                return;
            }
            let jitter = self.rng.next_f64() * self.config.jitter_factor;
            tokio::time::sleep(self.config.retry_period.mul_f64(1.0 + jitter)).await;
        }
    }

    /// Returns when the lease could not be renewed within the renew deadline.
    async fn renew(&mut self) {
        loop {
            let deadline = Instant::now() + self.config.renew_deadline;
            let mut renewed = false;
            while Instant::now() < deadline {
                if let Ok(true) =
                    tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await
                {
                    renewed = true;
                    break;
                }
                if Instant::now() + self.config.retry_period > deadline {
                    tokio::time::sleep_until(deadline).await;
                    break;
                }
                tokio::time::sleep(self.config.retry_period).await;
            }
            if !renewed {
                return;
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    fn lease_valid(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|o| {
            let secs = o
                .lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .unwrap_or(15)
                .max(0) as u64;
            o.at + Duration::from_secs(secs) > now
        })
    }

    /// One try, as client-go's `tryAcquireOrRenew`: true when the lease is ours after it.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> bool {
        let now = Instant::now();
        let wall = MicroTime(self.clock.wall());

        // Fast path: a leader whose lease is still valid renews without reading first.
        if self.leading && self.lease_valid(now) {
            let mut lease = self
                .observed
                .as_ref()
                .expect("valid lease was observed")
                .lease
                .clone();
            if let Some(spec) = lease.spec.as_mut() {
                spec.renew_time = Some(wall.clone());
            }
            if self.write(&lease, now).await {
                return true;
            }
        }

        let current = match self.api.get_opt(&self.name).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(self.config.lease_duration.as_secs() as i32),
                        acquire_time: Some(wall.clone()),
                        renew_time: Some(wall),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(created) => {
                        self.observed = Some(Observed {
                            lease: created,
                            at: now,
                        });
                        true
                    }
                    Err(e) => {
                        failed(&self.lease(), &e, "error initially creating lease lock");
                        false
                    }
                };
            }
            Err(e) => {
                failed(&self.lease(), &e, "error retrieving resource lock");
                return false;
            }
        };

        let spec = current.spec.clone().unwrap_or_default();
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.lease.spec.as_ref() != Some(&spec));
        if changed {
            self.observed = Some(Observed {
                lease: current.clone(),
                at: now,
            });
        }
        let observed_at = self.observed.as_ref().expect("set above").at;
        match decide(
            &spec,
            observed_at,
            now,
            wall,
            &self.identity,
            self.config.lease_duration,
        ) {
            Decision::Wait => false,
            Decision::Write(new_spec) => {
                let mut lease = current;
                lease.spec = Some(new_spec);
                self.write(&lease, now).await
            }
        }
    }

    /// Asked to stop without `ReleaseOnCancel`: a leader stops acting as one (and says so); the
    /// Lease stays as last renewed, to expire.
    pub(crate) fn stop_without_release(&mut self) {
        if std::mem::take(&mut self.leading) {
            self.reporter.stopped_leading(
                &self.lease(),
                &self.identity,
                "asked to terminate: the lease is left to expire",
            );
        }
    }

    /// client-go's `release` (`ReleaseOnCancel`, what kube-scheduler sets): a leader asked to
    /// stop writes the Lease with no holder and a one-second duration, so that another candidate
    /// takes it at its next try instead of waiting out the lease. Read first and retried on a
    /// conflict, within the renew deadline, as `tryRelease`. A candidate that does not lead
    /// writes nothing.
    pub(crate) async fn release(&mut self) {
        if !self.leading {
            return;
        }
        self.leading = false;
        let lease = self.lease();
        let released = self.try_release().await;
        tracing::info!(lease = %lease, identity = %self.identity, released, "stopped leading: asked to terminate");
        self.reporter.stopped_leading(
            &lease,
            &self.identity,
            if released {
                "asked to terminate: released the lease (ReleaseOnCancel)"
            } else {
                "asked to terminate: the lease could not be released"
            },
        );
    }

    /// client-go's `release` after a renew that failed (its `renew` ends with it when
    /// `ReleaseOnCancel` is set): the leader that just stopped tries to give the Lease up
    /// before it goes on (kube-scheduler then exits). Bounded by the renew deadline; a Lease
    /// that cannot be read (the API server unreachable, slow) is left as it is.
    pub(crate) async fn release_lost(&mut self) {
        let released = self.try_release().await;
        tracing::info!(lease = %self.lease(), identity = %self.identity, released, "released after a failed renew");
    }

    /// `tryRelease`: read the Lease, and if the record last observed names this candidate
    /// (client-go's `IsLeader`), write it with no holder and a one-second duration; retried on
    /// a conflict; within the renew deadline. Whether it was written.
    async fn try_release(&mut self) -> bool {
        let deadline = Instant::now() + self.config.renew_deadline;
        let ours = self
            .observed
            .as_ref()
            .and_then(|o| o.lease.spec.as_ref())
            .and_then(|s| s.holder_identity.as_deref())
            == Some(self.identity.as_str());
        tokio::time::timeout_at(deadline, async {
            loop {
                let Ok(Some(mut current)) = self.api.get_opt(&self.name).await else {
                    return false;
                };
                if !ours {
                    return true; // not leading: nothing to give up
                }
                let spec = current.spec.clone().unwrap_or_default();
                let wall = MicroTime(self.clock.wall());
                current.spec = Some(LeaseSpec {
                    holder_identity: Some(String::new()),
                    lease_duration_seconds: Some(1),
                    acquire_time: Some(wall.clone()),
                    renew_time: Some(wall),
                    lease_transitions: spec.lease_transitions,
                    ..LeaseSpec::default()
                });
                match self
                    .api
                    .replace(&self.name, &PostParams::default(), &current)
                    .await
                {
                    Ok(_) => return true,
                    Err(kube::Error::Api(e)) if e.code == 409 => continue,
                    Err(_) => return false,
                }
            }
        })
        .await
        .unwrap_or(false)
    }

    /// Update the lease (with its resourceVersion: a stale write is a 409) and remember what
    /// was written and when.
    async fn write(&mut self, lease: &Lease, now: Instant) -> bool {
        match self
            .api
            .replace(&self.name, &PostParams::default(), lease)
            .await
        {
            Ok(updated) => {
                self.observed = Some(Observed {
                    lease: updated,
                    at: now,
                });
                true
            }
            Err(e) => {
                failed(&self.lease(), &e, "failed to update lease");
                false
            }
        }
    }
}

/// Say a request that failed. One the API server refused for who asks or what it asks (401,
/// 403, 400, 422: a missing Role's 403 names the verb, the resource and the service account) at
/// error level, as client-go's `klog.Errorf` says every failure, since the program will not
/// lead until a person mends it; the failures a chaos run brings by design (an API server away,
/// a conflict with another candidate, a lease not there yet) at debug level.
fn failed(lease: &str, e: &kube::Error, what: &str) {
    match e {
        kube::Error::Api(s) if refused(s.code) => {
            tracing::error!(lease = %lease, code = s.code, "{what}: {}", s.message)
        }
        _ => tracing::debug!(lease = %lease, error = %e, "{what}"),
    }
}

/// Whether an API status code refuses the request itself (trying again as it is will not help).
fn refused(code: u16) -> bool {
    matches!(code, 400 | 401 | 403 | 422)
}

#[cfg(test)]
mod tests {
    //! client-go's behaviour table for `tryAcquireOrRenew`'s decision
    //! (`leaderelection_test.go`, `TestTryAcquireOrRenew`), on the pure decision function.
    use super::*;

    /// A refusal of the request itself is said at error level (a missing Role's 403); what a
    /// chaos run brings by design (a conflict, a lease not there yet, a server error) is not.
    #[test]
    fn only_a_refused_request_is_said_as_an_error() {
        assert!([400, 401, 403, 422].into_iter().all(super::refused));
        assert!(![404, 409, 429, 500, 503].into_iter().any(super::refused));
    }
    use k8s_openapi::jiff::Timestamp;

    fn t(s: i64) -> MicroTime {
        MicroTime(Timestamp::from_second(1_700_000_000 + s).unwrap())
    }

    fn spec(holder: &str, renew: i64, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: (!holder.is_empty()).then(|| holder.to_owned()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(t(0)),
            renew_time: Some(t(renew)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    const D: Duration = Duration::from_secs(15);

    #[tokio::test(start_paused = true)]
    async fn acquires_an_expired_lease_and_counts_the_transition() {
        let observed = Instant::now();
        let now = observed + Duration::from_secs(16);
        let Decision::Write(s) = decide(&spec("other", 0, 3), observed, now, t(100), "me", D)
        else {
            panic!("should take over")
        };
        assert_eq!(s.holder_identity.as_deref(), Some("me"));
        assert_eq!(s.lease_transitions, Some(4));
        assert_eq!(s.acquire_time, Some(t(100)));
        assert_eq!(s.renew_time, Some(t(100)));
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_take_an_unexpired_lease() {
        let observed = Instant::now();
        let now = observed + Duration::from_secs(14);
        assert_eq!(
            decide(&spec("other", 0, 0), observed, now, t(100), "me", D),
            Decision::Wait
        );
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_is_judged_by_observation_time_not_the_holders_clock() {
        // The holder's renewTime is an hour in the past (skewed clock), but this candidate saw
        // the record change only 5s ago: the lease is valid.
        let observed = Instant::now();
        let now = observed + Duration::from_secs(5);
        assert_eq!(
            decide(&spec("other", -3600, 0), observed, now, t(0), "me", D),
            Decision::Wait
        );
    }

    #[tokio::test(start_paused = true)]
    async fn renews_its_own_lease_keeping_acquire_time_and_transitions() {
        let observed = Instant::now();
        let Decision::Write(s) = decide(&spec("me", 0, 2), observed, observed, t(10), "me", D)
        else {
            panic!("should renew")
        };
        assert_eq!(s.acquire_time, Some(t(0)));
        assert_eq!(s.lease_transitions, Some(2));
        assert_eq!(s.renew_time, Some(t(10)));
    }

    #[tokio::test(start_paused = true)]
    async fn takes_a_released_lease_at_once() {
        let observed = Instant::now();
        let Decision::Write(s) = decide(&spec("", 0, 1), observed, observed, t(3), "me", D) else {
            panic!("should take")
        };
        assert_eq!(s.holder_identity.as_deref(), Some("me"));
        assert_eq!(s.lease_transitions, Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn uses_the_records_lease_duration() {
        let mut long = spec("other", 0, 0);
        long.lease_duration_seconds = Some(60);
        let observed = Instant::now();
        assert_eq!(
            decide(
                &long,
                observed,
                observed + Duration::from_secs(30),
                t(30),
                "me",
                D
            ),
            Decision::Wait
        );
    }
}
