//! The kubelet's container restart back-off, which the driver's supervisor (static pods, the
//! local backend's processes) and the fake nodes' agent (pods) both follow. Mirrors
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
