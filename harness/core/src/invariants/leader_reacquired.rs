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

/// The longest time between two tries of client-go's elector to acquire a Lease: `RetryPeriod`
/// (2 s, the default of client-go's users and of the upstream components) with its jitter
/// (`wait.JitterUntil`, factor 1.2). A candidate free to take the Lease for less than this may
/// simply not have tried yet.
const RETRY_SPAN_MS: u64 = 4_400;

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
    // The last observation: when it was written (its source time) and read, holder, renewTime,
    // lease duration.
    type Seen = (u64, u64, Option<String>, Option<u64>, Option<u64>);
    let mut last: Option<Seen> = None;
    // When each reading of the Lease is known to have been stored by: when it was read, or, if
    // earlier, when the next write of it was made (its writer had read this one: an update names
    // the resourceVersion it replaces). The observer reads the writes a broken watch missed back
    // from the API server's storage long after they were stored; the next write bounds them.
    let mut next_write: Option<u64> = None;
    let mut stored_by: Vec<Option<u64>> = vec![None; tl.events.len()];
    for (n, e) in tl.events.iter().enumerate().rev() {
        if matches!(&e.kind, EventKind::LeaseObserved { lease: l, .. } if *l == name) {
            stored_by[n] = Some(next_write.map_or(e.read_at(), |w| w.clamp(e.t_ms, e.read_at())));
            next_write = Some(e.t_ms);
        }
    }
    for (n, e) in tl.events.iter().enumerate() {
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
        let stored = stored_by[n].unwrap_or(e.read_at());
        last = Some((e.t_ms, stored, holder.clone(), *renew_ms, *duration_ms));
        if e.t_ms < anchor {
            continue;
        }
        if let (Some(h), Some(r)) = (holder, renew_ms) {
            // Stored by when kubechaos read it or the next write was made, and nothing tells
            // more: not the `managedFields` time, which is when the API server took the request
            // in, before etcd stored it (a renewal taken at 16 s by an API server cut off from
            // etcd was stored at the heal, 39 s later, after its lease had run out: it is not
            // leadership).
            let valid_when_seen = duration_ms.is_none_or(|d| r + d >= stored);
            if *r >= anchor && valid_when_seen && tl.alive(&name, h, e.t_ms, e.t_ms) {
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
        Some((_, _, None, ..)) => "the lease had no holder".to_owned(),
        Some((written, seen_at, Some(h), renew, duration)) => format!(
            "last holder {} (process {}), last renewal {}{}",
            h,
            if tl.alive(&name, &h, written, deadline) {
                "still running".to_owned()
            } else {
                match tl.incarnation_at(&tl.holder_process(&name, &h), deadline) {
                    Some(n) => format!(
                        "not running: the start of it that wrote this identity has exited; start #{n} runs"
                    ),
                    None => "not running".to_owned(),
                }
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
    // Each version of the record, as seen: when it appeared, whether it named a holder, and
    // until when it stood (the next change, or the deadline). A candidate waits a full lease
    // duration from when it sees a version appear (client-go's `observedTime`), or from its own
    // start if it started later, and is free to take the Lease once that wait ends while the
    // version still stands.
    let mut versions: Vec<(u64, bool, u64)> = Vec::new();
    let mut current: Option<(Option<String>, Option<u64>)> = None;
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
                let record = (holder.clone(), *renew_ms);
                if current.as_ref() != Some(&record) {
                    if let Some(v) = versions.last_mut() {
                        v.2 = e.t_ms;
                    }
                    versions.push((e.t_ms, holder.is_some(), deadline));
                    current = Some(record);
                }
            }
        }
    }
    // Each running candidate: free to take the Lease for a while within the window (and it did
    // not), held back by a fault still in effect on it, or still waiting out the lease.
    let hindrances = tl.hindrances(s, deadline);
    let (mut held_back, mut waiting, mut free) = (
        std::collections::BTreeMap::<&str, Vec<String>>::new(),
        Vec::new(),
        Vec::new(),
    );
    for c in &alive {
        let on_it: Vec<(u64, u64)> = hindrances
            .iter()
            .filter(|h| h.on(c))
            .map(|h| (h.since, h.until.unwrap_or(u64::MAX)))
            .collect();
        let start = tl.started_at(c, deadline).unwrap_or(0);
        let (window, wait_end) = free_window(&versions, duration, start, &on_it, anchor, deadline);
        // Free for less than one retry of client-go's elector is no sign of not trying: its
        // next try may not have come yet.
        let window = window.filter(|(from, to)| to.saturating_sub(*from) >= RETRY_SPAN_MS);
        if let Some((from, to)) = window {
            free.push(format!("{c} (from {} to {})", fmt_ms(from), fmt_ms(to)));
        } else if let Some(h) = hindrances.iter().find(|h| h.on(c) && h.until.is_none()) {
            held_back
                .entry(h.fault.as_str())
                .or_default()
                .push(c.clone());
        } else {
            match wait_end {
                Some(end) => waiting.push(format!("{c} (until {})", fmt_ms(end))),
                None => free.push(c.clone()),
            }
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
        format!(
            "{running} but none is trying: none renewed or acquired the lease; free to take it, with nothing in the way: {}",
            free.join(", ")
        )
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
                "{} {} still waiting out the lease as client-go does (a full lease duration from when it saw the record change, from its start, or from the end of a fault that kept it from reading the record, then up to one retry)",
                waiting.join(", "),
                were(&waiting)
            ));
        }
        if !free.is_empty() {
            parts.push(format!(
                "{} {} free to take it but not trying (the record had stood for a full lease duration since it could read it, with nothing in the way)",
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

/// When, within `[anchor, deadline]`, a candidate started at `start` and kept from the API
/// server over `hindered` (`[since, until)`) was free to take the Lease: the last stretch in
/// which a version of the record had stood for a full lease duration since the candidate could
/// first read it, with nothing in its way. Without one, when its wait for the version standing
/// at the deadline ends (`None`: it cannot end while something is in its way, or nothing names
/// a holder to wait on). Conservative: after a fault the wait starts again from its end, as for
/// a candidate that reads a changed record then.
fn free_window(
    versions: &[(u64, bool, u64)],
    duration: Option<u64>,
    start: u64,
    hindered: &[(u64, u64)],
    anchor: u64,
    deadline: u64,
) -> (Option<(u64, u64)>, Option<u64>) {
    let mut window = None;
    let mut wait_end = None;
    for (i, &(appeared, holder, stood_until)) in versions.iter().enumerate() {
        let wait = if holder { duration.unwrap_or(0) } else { 0 };
        // The first moment from which it could read this version for a whole wait.
        let mut from = appeared.max(start);
        while let Some(&(_, until)) = hindered
            .iter()
            .find(|&&(since, until)| since <= from + wait && until > from)
        {
            from = until;
            if from == u64::MAX {
                break;
            }
        }
        if from == u64::MAX {
            wait_end = None;
            continue;
        }
        let free_from = from + wait;
        let free_to = hindered
            .iter()
            .map(|&(since, _)| since)
            .filter(|&since| since >= free_from)
            .min()
            .unwrap_or(u64::MAX)
            .min(stood_until);
        let last = i + 1 == versions.len();
        let shown_from = free_from.max(anchor);
        if shown_from < free_to || (last && free_from <= deadline && shown_from <= free_to) {
            window = Some((shown_from, free_to));
        }
        wait_end = (last && wait > 0).then_some(free_from);
    }
    (window, wait_end)
}
