//! `schedulable: {within, after}`: a probe pod created at the anchor is bound to a node within
//! D (by a scheduler, or by a `bind` step).

use super::{Timeline, Watch};
use crate::events::fmt_ms;
use crate::scenario::duration::human;
use crate::scenario::Schedulable;

/// Decided once the probe pod is bound.
pub(super) const WATCH: Watch = Watch::UntilHeld;

pub(super) fn judge(
    tl: &Timeline<'_>,
    i: &Schedulable,
    index: usize,
    anchor: u64,
    deadline: u64,
) -> (bool, String, Option<u64>) {
    let within = i.within;
    let Some((created, pod)) = tl.probe_pod(index) else {
        return (false, format!("the probe pod could not be created by the deadline {} (anchor {}): the API server did not accept it", fmt_ms(deadline), fmt_ms(anchor)), None);
    };
    match tl.bound(&pod) {
        Some((t, node)) if t <= deadline => (
            true,
            format!(
                "probe pod {pod} bound to {node} {} after the anchor at {} (limit {})",
                human(std::time::Duration::from_millis(t.saturating_sub(anchor))),
                fmt_ms(anchor),
                human(within)
            ),
            Some(t.saturating_sub(anchor)),
        ),
        Some((t, node)) => (
            false,
            format!("probe pod {pod} (created at {}) was bound to {node} only at {}, past the deadline {} ({} after the anchor at {})", fmt_ms(created), fmt_ms(t), fmt_ms(deadline), human(within), fmt_ms(anchor)),
            None,
        ),
        None => (
            false,
            format!("probe pod {pod} (created at {}) was never bound to a node by the deadline {} ({} after the anchor at {}); no scheduler bound it", fmt_ms(created), fmt_ms(deadline), human(within), fmt_ms(anchor)),
            None,
        ),
    }
}
