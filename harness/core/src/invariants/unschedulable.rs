//! `unschedulable: {for, after}`: a probe pod created at the anchor stays unbound for at least D:
//! the outage a scenario claims really happened.

use super::{Timeline, Watch};
use crate::events::fmt_ms;
use crate::scenario::duration::human;
use crate::scenario::Unschedulable;

/// Holds only if the probe pod stays unbound for the whole window.
pub(super) const WATCH: Watch = Watch::WholeWindow;

pub(super) fn judge(
    tl: &Timeline<'_>,
    i: &Unschedulable,
    index: usize,
    anchor: u64,
    until: u64,
) -> (bool, String) {
    let for_ = i.for_;
    let Some((created, pod)) = tl.probe_pod(index) else {
        return (
            false,
            format!(
                "the probe pod could not be created (anchor {}), so no outage can be shown",
                fmt_ms(anchor)
            ),
        );
    };
    // Created well after the anchor: the API server did not accept it until then (the observer tries
    // again every second), which is part of the outage; said, so that "stayed unbound" is not
    // read as a pod that waited the whole time.
    let bound = tl.bound(&pod);
    let pod = if created > anchor + 1_000 {
        format!(
            "{pod} (created at {}: not accepted by the API server until then)",
            fmt_ms(created)
        )
    } else {
        pod
    };
    match bound {
        Some((t, node)) if t < until => (
            false,
            format!("probe pod {pod} was bound to {node} at {}, {} after the anchor at {}; expected it to stay unbound for {} (the outage did not happen)", fmt_ms(t), human(std::time::Duration::from_millis(t.saturating_sub(anchor))), fmt_ms(anchor), human(for_)),
        ),
        Some((t, _)) => (true, format!("probe pod {pod} stayed unbound for {} after the anchor at {} (required {})", human(std::time::Duration::from_millis(t - anchor)), fmt_ms(anchor), human(for_))),
        None => (true, format!("probe pod {pod} stayed unbound from the anchor at {} to the end of the run (required {})", fmt_ms(anchor), human(for_))),
    }
}
