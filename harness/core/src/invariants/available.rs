//! `available: {deployment, within, after}`: within D of the anchor the Deployment has all its
//! replicas available: its status says so and its Ready pods confirm it (a status is stale while
//! no controller-manager runs).

use super::{Timeline, Watch};
use crate::events::{fmt_ms, EventKind};
use crate::scenario::duration::human;
use crate::scenario::Available;

/// Decided once every replica is available.
pub(super) const WATCH: Watch = Watch::UntilHeld;

pub(super) fn judge(
    tl: &Timeline<'_>,
    i: &Available,
    anchor: u64,
    deadline: u64,
) -> (bool, String) {
    let (deployment, within) = (i.deployment.as_str(), i.within);
    // The state at each moment is the last observation: one made before the anchor still holds
    // at the anchor.
    let mut last: Option<(u64, u32, u32, u32, u32)> = None;
    let full = |l: &(u64, u32, u32, u32, u32)| l.2 > 0 && l.1 >= l.2;
    let held = |at: u64, l: &(u64, u32, u32, u32, u32)| {
        (
            true,
            format!(
                "{deployment} had {}/{} replicas available (its status and its Ready pods agree) {} after the anchor at {} (limit {})",
                l.1,
                l.2,
                human(std::time::Duration::from_millis(at - anchor)),
                fmt_ms(anchor),
                human(within)
            ),
        )
    };
    for e in tl.events {
        let EventKind::DeploymentObserved {
            deployment: d,
            available,
            desired,
            reported,
            ready_pods,
        } = &e.kind
        else {
            continue;
        };
        if d != deployment || e.t_ms > deadline {
            continue;
        }
        if e.t_ms >= anchor {
            if let Some(l) = last.filter(|l| l.0 < anchor && full(l)) {
                return held(anchor, &l);
            }
        }
        last = Some((e.t_ms, *available, *desired, *reported, *ready_pods));
        if let Some(l) = last.filter(|l| l.0 >= anchor && full(l)) {
            return held(l.0, &l);
        }
    }
    if let Some(l) = last.filter(|l| l.0 < anchor && full(l)) {
        return held(anchor, &l);
    }
    let seen = match last {
        Some((t, a, d, reported, ready)) => format!(
            "last seen at {}: {a}/{d} available (its status reported {reported} available, {ready} of its pods were Ready{})",
            fmt_ms(t),
            if reported > ready {
                "; a status ahead of the pods is stale: no controller-manager updated it"
            } else {
                ""
            }
        ),
        None => "the Deployment was never observed".into(),
    };
    (false, format!("{deployment} was not fully available within {} of the anchor at {} (deadline {}): {seen}", human(within), fmt_ms(anchor), fmt_ms(deadline)))
}
