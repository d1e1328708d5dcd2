//! The kubelet's restarts of a container: its restart back-off, which the driver's supervisor
//! (static pods, the local backend's processes) and the fake nodes' agent (pods) both follow,
//! and the liveness probe kubeadm gives kube-apiserver ([`LIVENESS`]). Mirrors
//! `pkg/kubelet` (v1.37, `kuberuntime_manager.go` `doBackOff` with `flowcontrol.Backoff`): a
//! container that exits for the first time is started again at once (the kubelet has no back-off
//! for it yet, and only then sets one of 10 s); each further exit waits its back-off from when
//! the container finished, doubling up to 5 minutes; after 10 minutes without an exit it starts
//! over. Seen on a real kind node (kubelet v1.37.2): kube-controller-manager, exited on a lost
//! Lease, ran again 0.9 s later; kube-apiserver, exited a second time, 10.9 s later ("back-off
//! 10s restarting failed container"). The kubelet learns of an exit at its next relist of the
//! containers (every second): each wait is that second longer.

use std::time::Duration;

/// How long after the kubelet's container exits, `restarts` restarts after the last reset, it
/// starts it again: the relist that sees the exit, then the back-off (0 the first time; then
/// 10 s, doubling, at most 5 minutes).
pub(crate) fn backoff(restarts: u32) -> Duration {
    let back_off = match restarts {
        0 => 0,
        n => 10u64.saturating_mul(1u64 << (n - 1).min(5)).min(300),
    };
    RELIST + Duration::from_secs(back_off)
}

/// The kubelet's relist of its containers (the generic PLEG's period), by which it sees an exit.
pub(crate) const RELIST: Duration = Duration::from_secs(1);

/// A liveness probe as the kubelet runs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Liveness {
    /// From the container's start to its first probe (`initialDelaySeconds`).
    pub(crate) initial_delay: Duration,
    /// Between probes (`periodSeconds`).
    pub(crate) period: Duration,
    /// Failures in a row that make the kubelet restart the container (`failureThreshold`).
    pub(crate) failure_threshold: u32,
    /// From the kubelet's SIGTERM to its SIGKILL (the pod's `terminationGracePeriodSeconds`).
    pub(crate) grace: Duration,
}

/// kubeadm's liveness probe of kube-apiserver (v1.37: `GET /livez` every 10 s from 10 s after
/// its start, 8 failures; the static pod's grace period is the default 30 s). `/livez` fails
/// while its etcd does not answer (its `etcd` check; within about 5 s of etcd frozen, measured
/// on the pinned v1.37.2). Seen on a real kind node with the API server cut off from its etcd:
/// killed 110 s into the cut (the eighth failure about 80 s in, then the grace period, its
/// requests waiting on etcd to the end), started again at once.
pub(crate) const LIVENESS: Liveness = Liveness {
    initial_delay: Duration::from_secs(10),
    period: Duration::from_secs(10),
    failure_threshold: 8,
    grace: Duration::from_secs(30),
};

/// The back-off resets after this long running (kubelet: 10 minutes).
pub(crate) const BACKOFF_RESET: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_restarts_a_first_exit_at_once_then_backs_off_doubling_to_five_minutes() {
        let secs: Vec<u64> = (0..9).map(|r| (backoff(r) - RELIST).as_secs()).collect();
        assert_eq!(secs, [0, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(RELIST, Duration::from_secs(1));
        assert_eq!(BACKOFF_RESET, Duration::from_secs(600));
    }
}
