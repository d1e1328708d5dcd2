//! `leader-reacquired: {lease, within, after}`: within D of the anchor, a live candidate holds
//! the Lease and renews it: a renewal from after the anchor, seen while it is still valid. A
//! renewal that reaches the API server only after its own lease ran out (a request held up by a
//! partition and delivered when it healed, stamped with the time it was made) is not leadership:
//! nobody could have led on it. A violation says who held it last, whether that process still
//! runs, and what the timeline shows of the candidates: none running; faults still in effect at
//! the deadline that can keep them from the Lease; candidates still waiting out the lease, as
//! client-go does (a full lease duration from when it first sees the record, or sees it
//! change); and only when none of that explains it, that every candidate is alive but none is
//! trying (the seed's bug).

use super::{Timeline, Watch};
use crate::events::{fmt_ms, identity_process, EventKind};
use crate::scenario::duration::human;
use crate::scenario::{LeaderReacquired, Scenario};

/// Decided once a live candidate holds and renews the Lease.
pub(super) const WATCH: Watch = Watch::UntilHeld;

/// The instance a holder identity names: `cr-0_2` (the second start of process `cr-0`) as it
/// is, where kubechaos gave the identity; upstream's `HOSTNAME_UUID` by its process alone.
fn instance(identity: &str) -> &str {
    match identity.rsplit_once('_') {
        Some((_, n)) if !n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()) => {
            identity
        }
        _ => identity_process(identity),
    }
}

pub(super) fn judge(
    tl: &Timeline<'_>,
    s: &Scenario,
    i: &LeaderReacquired,
    anchor: u64,
    deadline: u64,
) -> (bool, String, Option<u64>) {
    let (lease, within) = (&i.lease, i.within);
    let name = lease.to_string();
    // The last observation: when, holder, renewTime, lease duration.
    type Seen = (u64, Option<String>, Option<u64>, Option<u64>);
    let mut last: Option<Seen> = None;
    for e in tl.events {
        let EventKind::LeaseObserved {
            lease: l,
            holder,
            renew_ms,
            duration_ms,
            ..
        } = &e.kind
        else {
            continue;
        };
        if *l != name {
            continue;
        }
        if e.t_ms > deadline {
            break;
        }
        last = Some((e.t_ms, holder.clone(), *renew_ms, *duration_ms));
        if e.t_ms < anchor {
            continue;
        }
        if let (Some(h), Some(r)) = (holder, renew_ms) {
            let valid_when_seen = duration_ms.is_none_or(|d| r + d >= e.t_ms);
            if *r >= anchor && valid_when_seen && tl.alive(&name, h, e.t_ms) {
                let after = e.t_ms.saturating_sub(anchor);
                return (
                    true,
                    format!(
                        "held by {} (renewed at {}), {} after the anchor at {} (limit {})",
                        instance(h),
                        fmt_ms(*r),
                        human(std::time::Duration::from_millis(after)),
                        fmt_ms(anchor),
                        human(within)
                    ),
                    Some(after),
                );
            }
        }
    }
    let candidates = tl.candidates(s, lease);
    let alive = tl.running(&candidates, deadline);
    let seen = match last {
        None => "the lease was never observed".to_owned(),
        Some((_, None, ..)) => "the lease had no holder".to_owned(),
        Some((seen_at, Some(h), renew, duration)) => format!(
            "last holder {} (process {}), last renewal {}{}",
            h,
            if tl.alive(&name, &h, deadline) {
                "still running"
            } else {
                "not running"
            },
            renew
                .map(|r| format!("at {}", fmt_ms(r)))
                .unwrap_or_else(|| "never".into()),
            match (renew, duration) {
                (Some(r), Some(d)) if r + d < seen_at => format!(
                    ", which reached the API server at {}, after its {} lease had run out (a request held up and delivered late)",
                    fmt_ms(seen_at),
                    human(std::time::Duration::from_millis(d))
                ),
                _ => String::new(),
            }
        ),
    };
    // When the record last changed, as seen: a candidate waits a full lease duration from then,
    // or from its own start if it started later (client-go's `observedTime`).
    let mut changed: Option<(u64, Option<String>, Option<u64>)> = None;
    let mut duration = None;
    for e in tl.events.iter().take_while(|e| e.t_ms <= deadline) {
        if let EventKind::LeaseObserved {
            lease: l,
            holder,
            renew_ms,
            duration_ms,
            ..
        } = &e.kind
        {
            if *l == name {
                duration = duration_ms.or(duration);
                if changed
                    .as_ref()
                    .is_none_or(|(_, h, r)| h != holder || r != renew_ms)
                {
                    changed = Some((e.t_ms, holder.clone(), *renew_ms));
                }
            }
        }
    }
    // Each running candidate: held back by a fault still in effect on it, still waiting out the
    // lease, or free to take it.
    let hindrances = tl.hindrances(s, deadline);
    let (mut held_back, mut waiting, mut free) = (
        std::collections::BTreeMap::<&str, Vec<String>>::new(),
        Vec::new(),
        Vec::new(),
    );
    for c in &alive {
        let on_it = || hindrances.iter().filter(|h| h.on(c));
        let fault = on_it().find(|h| h.until.is_none());
        // It could read the record again only once what held it back had ended.
        let freed = on_it().filter_map(|h| h.until).max().unwrap_or(0);
        let wait_end = match (&changed, duration) {
            (Some((at, Some(_), _)), Some(d)) => {
                Some(tl.started_at(c, deadline).unwrap_or(0).max(*at).max(freed) + d)
            }
            _ => None,
        };
        if let Some(h) = fault {
            held_back
                .entry(h.fault.as_str())
                .or_default()
                .push(c.clone());
        } else if let Some(end) = wait_end.filter(|end| *end > deadline) {
            waiting.push(format!("{c} (until {})", fmt_ms(end)));
        } else {
            free.push(c.clone());
        }
    }
    let running = if alive.len() == candidates.len() {
        format!("every candidate is alive ({})", alive.join(", "))
    } else {
        format!(
            "candidates running at the deadline: {} of {}",
            alive.join(", "),
            candidates.join(", ")
        )
    };
    let were = |names: &[String]| if names.len() == 1 { "was" } else { "were" };
    let alive_text = if alive.is_empty() {
        "no candidate was running".to_owned()
    } else if held_back.is_empty() && waiting.is_empty() && alive.len() == candidates.len() {
        format!("{running} but none is trying: none renewed or acquired the lease")
    } else {
        let mut parts = vec![format!("{running}; none renewed or acquired the lease")];
        for (fault, names) in &held_back {
            parts.push(format!(
                "{} {} held back by `{fault}`, still in effect",
                names.join(", "),
                were(names)
            ));
        }
        if !waiting.is_empty() {
            parts.push(format!(
                "{} {} still waiting out the lease as client-go does (a full lease duration from when it saw the record change, from its start, or from the end of a fault that kept it from reading the record)",
                waiting.join(", "),
                were(&waiting)
            ));
        }
        if !free.is_empty() {
            parts.push(format!(
                "{} {} free to take it but not trying",
                free.join(", "),
                were(&free)
            ));
        }
        parts.join("; ")
    };
    (
        false,
        format!(
            "lease {name} was not re-acquired within {} of the anchor at {} (deadline {}): {seen}; {alive_text}",
            human(within),
            fmt_ms(anchor),
            fmt_ms(deadline)
        ),
        None,
    )
}
