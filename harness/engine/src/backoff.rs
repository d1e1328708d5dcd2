//! The kubelet's container restart back-off, which the driver's supervisor (static pods, the
//! local backend's processes) and the fake nodes' agent (pods) both follow. Mirrors
//! `pkg/kubelet` (v1.37): 10 s initial, doubling, at most 5 minutes, reset after 10 minutes of
//! running.

use std::time::Duration;

/// kubelet's container restart back-off (`pkg/kubelet`: 10s initial, doubling, at most 5 minutes).
pub(crate) fn backoff(restarts: u32) -> Duration {
    Duration::from_secs(10u64.saturating_mul(1u64 << restarts.min(5)).min(300))
}

/// The back-off resets after this long running (kubelet: 10 minutes).
pub(crate) const BACKOFF_RESET: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_back_off_doubles_to_five_minutes_and_resets_after_ten() {
        let secs: Vec<u64> = (0..8).map(|r| backoff(r).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(BACKOFF_RESET, Duration::from_secs(600));
    }
}
