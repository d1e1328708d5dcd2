//! `valid-lease-while-leading: {lease, tolerance}`: no candidate acts as leader while the Lease
//! does not name it, or has expired by its own `renewTime` + `leaseDurationSeconds`, for longer
//! than `tolerance`. A leader that goes on acting on a lease it lost is the fencing bug that a
//! single replica shows: `single-leader` cannot see it, since nobody else leads.
//!
//! The evidence: the candidates' leadership reports (a term runs from `leading-started` to
//! `leading-stopped` or the process's exit) against the Lease as the observer saw it. The
//! tolerance covers the observer's lag and the candidates' own renew deadlines.

use super::{Timeline, Watch};
use crate::events::{fmt_ms, identity_process, EventKind};
use crate::scenario::duration::human;
use crate::scenario::ValidLeaseWhileLeading;

/// A claim that a leader led beyond the tolerance: who, from when, why.
type Claim = (String, u64, String);
/// A claim waiting for the end of the gap in the evidence its moment falls in: the claim, the
/// index of the event it was found at, the gap.
type Waiting = Option<(Claim, usize, (u64, u64))>;

/// Judged over the whole run.
pub(super) const WATCH: Watch = Watch::WholeRun;

/// The Lease as last observed.
#[derive(Default)]
struct Seen {
    /// Whether it has been observed at all: before that, nothing is known of it (a Lease not read
    /// yet is not a Lease naming nobody), and a term is judged from its first reading.
    observed: bool,
    holder: Option<String>,
    /// When the observed holder last changed.
    holder_since: u64,
    renew_ms: Option<u64>,
    duration_ms: Option<u64>,
    /// When the API server took the record's write (to the second), where told.
    written_ms: Option<u64>,
    /// Where the reading is placed on the timeline: when its write was made.
    at: u64,
}

impl Seen {
    /// `renewTime` (or, later, when the API server took it) + `leaseDurationSeconds`, when both
    /// are known.
    fn valid_until(&self) -> Option<u64> {
        crate::events::lease_valid_until(self.renew_ms, self.written_ms, self.duration_ms)
    }

    /// How the renewal that `valid_until` counts from is said.
    fn renewed(&self) -> String {
        let renewed = fmt_ms(self.renew_ms.unwrap_or(0));
        match self
            .written_ms
            .filter(|w| self.renew_ms.is_none_or(|r| *w > r))
        {
            Some(w) => format!(
                "renewed at {renewed}, taken by the API server at {},",
                fmt_ms(w)
            ),
            None => format!("renewed at {renewed}"),
        }
    }
}

/// Whether a holder identity names the candidate that reports `identity`: the same identity, or
/// the same process (upstream components write `HOSTNAME_UUID`, their reports say
/// `PROCESS_INCARNATION`; a restarted process's earlier term ended with its exit).
fn names(tl: &Timeline<'_>, lease: &str, holder: &str, identity: &str) -> bool {
    holder == identity || tl.holder_process(lease, holder) == identity_process(identity)
}

/// When the term of `identity` (leading since `since`) stops being justified by the Lease, and
/// why (`u64::MAX` while the Lease names it and no expiry is known).
fn unjustified_from(
    tl: &Timeline<'_>,
    lease: &str,
    seen: &Seen,
    identity: &str,
    since: u64,
) -> (u64, String) {
    if !seen.observed {
        return (u64::MAX, String::new());
    }
    match &seen.holder {
        // A term that began after the Lease seen last had expired (the observer has not seen its
        // new renewal yet) is judged from its start: the tolerance covers that lag too.
        Some(h) if names(tl, lease, h, identity) => match seen.valid_until() {
            Some(until) => (
                until.max(since),
                format!(
                    "the Lease had expired at {} ({} for {})",
                    fmt_ms(until),
                    seen.renewed(),
                    fmt_ms(seen.duration_ms.unwrap_or(0))
                ),
            ),
            None => (u64::MAX, String::new()),
        },
        Some(h) => (
            seen.holder_since.max(since),
            format!(
                "the Lease named {} (since {})",
                tl.holder_process(lease, h),
                fmt_ms(seen.holder_since)
            ),
        ),
        None => (
            seen.holder_since.max(since),
            format!(
                "the Lease named nobody (since {})",
                fmt_ms(seen.holder_since)
            ),
        ),
    }
}

/// The verdict, its text, and when leading beyond the tolerance began and ended.
pub(super) fn judge(
    tl: &Timeline<'_>,
    i: &ValidLeaseWhileLeading,
) -> (bool, String, Option<(u64, u64)>) {
    let name = i.lease.to_string();
    let tolerance = i.tolerance.as_millis() as u64;
    let mut seen = Seen::default();
    // Open terms: identity -> when it started leading.
    let mut open: Vec<(String, u64)> = Vec::new();
    // Whether the observer could not read the API server (lost, not back yet), and the terms
    // begun while it could not, which its next reading of the Lease judges: a term begun then
    // (the observer slow to read again after an outage, on a busy machine or through a slow
    // API server) is justified if that reading names it, and unjustified from its start if it
    // names another. Once judged against the Lease as last seen before, which was stale, a
    // correct leader that took the Lease back was failed.
    let mut blind = false;
    // And when its watch of Leases broke and was listed again: from when it last delivered to
    // that list, a write that made a candidate leader may have gone unseen (an API server started
    // again keeps no history from before its start). A term begun then is judged the same way.
    // These are gaps in the evidence (the observer reads the missed writes back from the API
    // server's storage; a gap is what it could not): no leading at a moment within one is found
    // unjustified on a reading of the Lease from before it, which a renewal in it, unseen, may
    // have made stale (a stopping kube-apiserver closes its watches at once and takes writes
    // for seconds more). A claim on such a moment waits for the gap's end: it stands if nothing
    // of the Lease was read from within the gap (nothing was written), and is dropped, the
    // moment unjudged, if something was.
    // A relisting that left a gap in this Lease's writes (old files name no Lease: every one).
    let gap_in_this_lease =
        |leases: &Option<Vec<String>>| leases.as_ref().is_none_or(|l| l.contains(&name));
    let relisted: Vec<(u64, u64)> = tl
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LeasesRelisted { since_ms, leases } if gap_in_this_lease(leases) => {
                Some((*since_ms, e.t_ms))
            }
            _ => None,
        })
        .collect();
    // The gap a claim on moment `beyond`, resting on a reading placed at `read`, falls in.
    let gap_of = |read: u64, beyond: u64| {
        relisted
            .iter()
            .copied()
            .find(|(from, to)| read <= *from && *from < beyond && beyond <= *to)
    };
    let mut waiting: Waiting = None;
    // Gaps in which a claim was dropped: leading then was not judged.
    let mut unjudged: Vec<(u64, u64)> = Vec::new();
    let unseen = |t: u64| relisted.iter().any(|(from, to)| (*from..=*to).contains(&t));
    let mut unread: Vec<String> = Vec::new();
    // From when the observer's view of the Leases was whole again after the last such window (it
    // answered again, or the Leases were listed again): a term still unread at the run's end (no
    // change of its Lease seen since) is judged against the Lease as seen then, from then on.
    let mut whole_from = 0u64;
    let mut terms = 0usize;
    // The first term found leading beyond the tolerance: who, why, and the event index it was
    // found at (its end is looked for from there).
    let violation = |seen: &Seen, open: &[(String, u64)], unread: &[String], now: u64| {
        open.iter()
            .filter(|(identity, _)| !unread.contains(identity))
            .find_map(|(identity, since)| {
                let (from, why) = unjustified_from(tl, &name, seen, identity, *since);
                (from != u64::MAX && from.saturating_add(tolerance) < now)
                    .then(|| (identity.clone(), from.saturating_add(tolerance), why))
            })
    };
    let mut found = None;
    // A waiting claim at moment `now`: found once its gap has ended with nothing read from
    // within it, dropped once something was.
    let settle = |waiting: &mut Waiting, unjudged: &mut Vec<(u64, u64)>, seen: &Seen, now: u64| {
        let (_, _, (from, to)) = waiting.as_ref()?;
        if seen.at > *from {
            unjudged.push((*from, *to));
            *waiting = None;
            None
        } else if now > *to {
            waiting.take().map(|(v, n, _)| (v, n))
        } else {
            None
        }
    };
    for (n, e) in tl.events.iter().enumerate() {
        // What was open up to this moment, against the Lease as it was seen until now.
        if let Some(f) = settle(&mut waiting, &mut unjudged, &seen, e.t_ms) {
            found = Some(f);
            break;
        }
        if let Some(v) = violation(&seen, &open, &unread, e.t_ms) {
            match gap_of(seen.at, v.1) {
                None => {
                    found = Some((v, n));
                    break;
                }
                Some(gap) => {
                    if waiting.is_none() {
                        waiting = Some((v, n, gap));
                    }
                }
            }
        }
        match &e.kind {
            EventKind::LeaseObserved {
                lease,
                holder,
                renew_ms,
                duration_ms,
                written_ms,
                ..
            } if *lease == name => {
                if *holder != seen.holder || !seen.observed {
                    seen.holder_since = e.t_ms;
                }
                seen.observed = true;
                seen.holder = holder.clone();
                seen.renew_ms = *renew_ms;
                seen.duration_ms = *duration_ms;
                seen.written_ms = *written_ms;
                seen.at = e.t_ms;
                // The reading that judges the terms begun unseen: the Lease as it is now.
                unread.clear();
            }
            EventKind::ApiReach { reached, .. } => {
                blind = !reached;
                if *reached {
                    whole_from = e.t_ms;
                }
            }
            EventKind::LeasesRelisted { leases, .. } if gap_in_this_lease(leases) => {
                whole_from = e.t_ms
            }
            EventKind::LeadingStarted { lease, identity } if *lease == name => {
                open.retain(|(id, _)| id != identity);
                open.push((identity.clone(), e.t_ms));
                if (blind || unseen(e.t_ms)) && !unread.contains(identity) {
                    unread.push(identity.clone());
                }
                terms += 1;
            }
            EventKind::LeadingStopped {
                lease, identity, ..
            } if *lease == name => open.retain(|(id, _)| id != identity),
            EventKind::ProcessExited { process, .. } => {
                open.retain(|(id, _)| identity_process(id) != process)
            }
            _ => {}
        }
    }
    if found.is_none() {
        found = settle(&mut waiting, &mut unjudged, &seen, u64::MAX);
    }
    if found.is_none() {
        // Terms begun unseen that no later reading judged: the Lease did not change after the
        // view was whole again, so as seen then it is as it was, from then on (else a leader
        // that said it led through an outage and never wrote its Lease would never be judged).
        // Not while the observer still cannot read at the end: then nothing tells.
        let open: Vec<(String, u64)> = open
            .iter()
            .filter_map(|(identity, since)| match unread.contains(identity) {
                true if blind => None,
                true => Some((identity.clone(), (*since).max(whole_from))),
                false => Some((identity.clone(), *since)),
            })
            .collect();
        found = violation(&seen, &open, &[], tl.end_ms).map(|v| (v, tl.events.len()));
    }
    unjudged.dedup();
    let gaps: String = unjudged
        .iter()
        .map(|(from, to)| {
            format!(
                "; from {} to {} its leading was not judged: the Lease's writes then could not be read back",
                fmt_ms(*from),
                fmt_ms(*to)
            )
        })
        .collect();
    let Some(((identity, beyond, why), n)) = found else {
        return (
            true,
            format!(
                "every leader's Lease named it and was unexpired while it led, within {} ({terms} leadership term{} observed){gaps}",
                human(i.tolerance),
                if terms == 1 { "" } else { "s" }
            ),
            None,
        );
    };
    // How long it went on: until it stopped leading or its process ended, or the Lease named
    // it again, unexpired (from then its leading is valid again), or the run ended.
    let ended = tl.events[n..].iter().find_map(|e| match &e.kind {
        EventKind::LeadingStopped {
            lease,
            identity: id,
            ..
        } if *lease == name && *id == identity => {
            Some((e.t_ms, format!("it stopped leading at {}", fmt_ms(e.t_ms))))
        }
        EventKind::ProcessExited { process, .. } if process == identity_process(&identity) => {
            Some((e.t_ms, format!("it stopped leading at {}", fmt_ms(e.t_ms))))
        }
        EventKind::LeaseObserved {
            lease,
            holder: Some(h),
            renew_ms,
            duration_ms,
            written_ms,
            ..
        } if *lease == name
            && names(tl, &name, h, &identity)
            && crate::events::lease_valid_until(*renew_ms, *written_ms, *duration_ms)
                .is_some_and(|until| until > e.t_ms) =>
        {
            Some((
                e.t_ms,
                format!(
                    "from {} the Lease named it again, unexpired (renewed at {}), and its leading was valid again",
                    fmt_ms(e.t_ms),
                    fmt_ms(renew_ms.unwrap_or(e.t_ms))
                ),
            ))
        }
        _ => None,
    });
    let (ended, until) = match ended {
        Some((t, said)) => (Some(t), said),
        None => (
            None,
            format!("it still led when the run ended at {}", fmt_ms(tl.end_ms)),
        ),
    };
    (
        false,
        format!(
            "{identity} acted as leader of {name} while {why}: still leading at {}, beyond the tolerance of {}; {until}{gaps}",
            fmt_ms(beyond),
            human(i.tolerance)
        ),
        Some((beyond, ended.unwrap_or(tl.end_ms))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::scenario::LeaseRef;

    fn ev(t_ms: u64, kind: EventKind) -> Event {
        Event::new(t_ms, kind)
    }
    fn lease(t_ms: u64, holder: Option<&str>, renew_ms: u64) -> Event {
        ev(
            t_ms,
            EventKind::LeaseObserved {
                lease: "default/lock".into(),
                holder: holder.map(str::to_owned),
                renew_ms: Some(renew_ms),
                transitions: 0,
                duration_ms: Some(15_000),
                written_ms: None,
            },
        )
    }
    fn started(t_ms: u64, identity: &str) -> Event {
        ev(
            t_ms,
            EventKind::LeadingStarted {
                lease: "default/lock".into(),
                identity: identity.into(),
            },
        )
    }
    fn stopped(t_ms: u64, identity: &str) -> Event {
        ev(
            t_ms,
            EventKind::LeadingStopped {
                lease: "default/lock".into(),
                identity: identity.into(),
                reason: "lost".into(),
            },
        )
    }
    /// The observer lost the API server (`false`) or reached it again.
    fn reach(t_ms: u64, reached: bool) -> Event {
        ev(
            t_ms,
            EventKind::ApiReach {
                reached,
                error: None,
            },
        )
    }
    fn judged(events: &[Event]) -> (bool, String) {
        let i = ValidLeaseWhileLeading {
            lease: LeaseRef {
                namespace: "default".into(),
                name: "lock".into(),
            },
            tolerance: std::time::Duration::from_secs(2),
            min_terms: 1,
        };
        let (held, message, when) = judge(&Timeline::new(events), &i);
        assert_eq!(held, when.is_none(), "a violation says when");
        (held, message)
    }

    /// A leader that renews, and stops when it cannot, holds.
    #[test]
    fn a_leader_that_renews_and_stops_in_time_holds() {
        let (held, message) = judged(&[
            lease(900, Some("a-0_1"), 900),
            started(1_000, "a-0_1"),
            lease(10_000, Some("a-0_1"), 10_000),
            // It cannot renew from 12s; its lease expires at 25s; it stops at 26s (in tolerance).
            stopped(26_000, "a-0_1"),
            ev(60_000, EventKind::RunEnded {}),
        ]);
        assert!(held, "{message}");
    }

    /// A renewal that reached the API server late (stamped 12.3 s by its holder, taken at 18 s:
    /// a slow API server on a busy node) keeps others off until 33 s, not 27.3 s: its leader,
    /// cut off after it and stopping at 30.9 s, holds. Without that time it would not.
    #[test]
    fn a_renewal_taken_late_by_the_api_server_counts_from_when_it_was_taken() {
        let late = |written_ms| {
            let mut e = lease(12_300, Some("a-0_1"), 12_300);
            if let EventKind::LeaseObserved { written_ms: w, .. } = &mut e.kind {
                *w = written_ms;
            }
            e
        };
        for (written, holds) in [(Some(18_000), true), (None, false)] {
            let (held, message) = judged(&[
                lease(900, Some("a-0_1"), 900),
                started(1_000, "a-0_1"),
                late(written),
                stopped(30_900, "a-0_1"),
                ev(60_000, EventKind::RunEnded {}),
            ]);
            assert_eq!(held, holds, "{message}");
            if !holds {
                assert!(
                    message.contains("(renewed at 12.3s for 15.0s)"),
                    "{message}"
                );
            }
        }
        // Past that, it is a violation all the same, and says when the API server took it.
        let (held, message) = judged(&[
            lease(900, Some("a-0_1"), 900),
            started(1_000, "a-0_1"),
            late(Some(18_000)),
            stopped(40_000, "a-0_1"),
            ev(60_000, EventKind::RunEnded {}),
        ]);
        assert!(!held);
        assert!(
            message.contains(
                "the Lease had expired at 33.0s (renewed at 12.3s, taken by the API server at 18.0s, for 15.0s)"
            ),
            "{message}"
        );
    }

    /// Leading on for two minutes on an expired lease is the fencing bug.
    #[test]
    fn leading_on_an_expired_lease_is_a_violation() {
        let (held, message) = judged(&[
            lease(900, Some("a-0_1"), 900),
            started(1_000, "a-0_1"),
            lease(10_000, Some("a-0_1"), 10_000),
            ev(140_000, EventKind::RunEnded {}),
        ]);
        assert!(!held);
        assert_eq!(
            message,
            "a-0_1 acted as leader of default/lock while the Lease had expired at 25.0s (renewed at 10.0s for 15.0s): still leading at 27.0s, beyond the tolerance of 2s; it still led when the run ended at 2m20.0s"
        );
    }

    /// A leader that goes on leading through an outage (issue 29: one replica, the API server
    /// stopped at 20 s for 2 minutes) violates until the Lease names it again, unexpired: its
    /// renewal at 2m24.9s ends the window, not the end of the run.
    #[test]
    fn a_violation_ends_when_the_lease_names_the_leader_unexpired_again() {
        let i = ValidLeaseWhileLeading {
            lease: LeaseRef {
                namespace: "default".into(),
                name: "lock".into(),
            },
            tolerance: std::time::Duration::from_secs(2),
            min_terms: 1,
        };
        let events = [
            lease(900, Some("a-0_1"), 900),
            started(1_000, "a-0_1"),
            lease(9_000, Some("a-0_1"), 9_000),
            lease(18_000, Some("a-0_1"), 18_000),
            // (the API server away from 20 s to 2m20s: nothing read)
            lease(144_900, Some("a-0_1"), 144_900),
            lease(160_000, Some("a-0_1"), 160_000),
            ev(230_100, EventKind::RunEnded {}),
        ];
        let (held, message, when) = judge(&Timeline::new(&events), &i);
        assert!(!held);
        assert_eq!(when, Some((35_000, 144_900)));
        assert_eq!(
            message,
            "a-0_1 acted as leader of default/lock while the Lease had expired at 33.0s (renewed at 18.0s for 15.0s): still leading at 35.0s, beyond the tolerance of 2s; from 2m24.9s the Lease named it again, unexpired (renewed at 2m24.9s), and its leading was valid again"
        );
        // A Lease that names it but has expired already does not end it.
        let mut stale = lease(144_900, Some("a-0_1"), 100_000);
        stale.t_ms = 144_900;
        let events = [
            lease(900, Some("a-0_1"), 900),
            started(1_000, "a-0_1"),
            lease(9_000, Some("a-0_1"), 9_000),
            lease(18_000, Some("a-0_1"), 18_000),
            stale,
            ev(230_100, EventKind::RunEnded {}),
        ];
        let (_, message, when) = judge(&Timeline::new(&events), &i);
        assert_eq!(when, Some((35_000, 230_100)), "{message}");
    }

    /// Leading on after another took the Lease is a violation, even without a second report.
    #[test]
    fn leading_on_after_another_took_the_lease_is_a_violation() {
        let (held, message) = judged(&[
            lease(900, Some("a-0_1"), 900),
            started(1_000, "a-0_1"),
            lease(10_000, Some("a-0_1"), 10_000),
            lease(20_000, Some("a-0_1"), 20_000),
            lease(30_000, Some("a-1_1"), 30_000),
            stopped(40_000, "a-0_1"),
        ]);
        assert!(!held);
        assert!(
            message.starts_with("a-0_1 acted as leader of default/lock while the Lease named a-1 (since 30.0s): still leading at 32.0s, beyond the tolerance of 2s; it stopped leading at 40.0s"),
            "{message}"
        );
    }

    /// A leader that leads again after an outage, reported before the observer sees its new
    /// renewal, is judged from its new term's start.
    #[test]
    fn a_new_term_is_judged_from_its_start() {
        let (held, message) = judged(&[
            lease(900, Some("a-0_1"), 900),
            started(1_000, "a-0_1"),
            lease(8_000, Some("a-0_1"), 8_000),
            stopped(18_000, "a-0_1"),
            started(52_600, "a-0_1"),
            lease(52_600, Some("a-0_1"), 52_500),
            lease(60_000, Some("a-0_1"), 60_000),
            ev(70_000, EventKind::RunEnded {}),
        ]);
        assert!(held, "{message}");
    }

    /// A leader reporting from before the observer's first reading of its Lease (a loaded
    /// machine, an existing cluster's slow list) has not led "while the Lease named nobody":
    /// nothing was known of the Lease yet. Judged from that first reading, a Lease that names
    /// another is still caught.
    #[test]
    fn a_lease_not_read_yet_names_nobody_and_nobody_else() {
        let (held, message) = judged(&[
            started(0, "a-0_1"),
            lease(9_000, Some("a-0_1"), 8_500),
            lease(18_000, Some("a-0_1"), 18_000),
            ev(30_000, EventKind::RunEnded {}),
        ]);
        assert!(held, "{message}");
        let (held, message) = judged(&[
            started(0, "a-0_1"),
            lease(9_000, Some("a-1_1"), 8_500),
            ev(30_000, EventKind::RunEnded {}),
        ]);
        assert!(!held);
        assert!(
            message.starts_with("a-0_1 acted as leader of default/lock while the Lease named a-1 (since 9.0s): still leading at 11.0s"),
            "{message}"
        );
    }

    /// Upstream components write `HOSTNAME_UUID` in the Lease and report `PROCESS_N`: the same
    /// process is the same candidate. The observer's lag at the start is within tolerance.
    #[test]
    fn a_holder_is_matched_by_its_process_and_the_observers_lag_is_tolerated() {
        let (held, message) = judged(&[
            started(1_000, "kube-scheduler-0_1"),
            lease(2_500, Some("kube-scheduler-0_5f1c"), 2_400),
            lease(12_000, Some("kube-scheduler-0_5f1c"), 12_000),
            lease(20_000, Some("kube-scheduler-0_5f1c"), 20_000),
            ev(30_000, EventKind::RunEnded {}),
        ]);
        assert!(held, "{message}");
    }

    /// Found by the delayed-observer test (issue 36): through a 5 s proxy the observer read the
    /// API server again only 21 s after it was back, and the correct leader had taken the Lease
    /// back meanwhile; judged against the Lease as last seen before the outage (expired), its
    /// term was a false FAIL. A term begun while the observer could not read is judged by the
    /// next reading of the Lease: justified if it names the leader, unjustified from the term's
    /// start if it names another.
    #[test]
    fn a_term_begun_while_the_observer_could_not_read_is_judged_by_the_next_reading() {
        let before = [
            started(1_000, "a_1"),
            lease(1_000, Some("a_1"), 74_900),
            stopped(84_900, "a_1"),
            reach(90_000, false),
            started(117_900, "a_1"),
            reach(136_000, true),
        ];
        let mut named = before.to_vec();
        named.extend([
            lease(120_000, Some("a_1"), 120_000),
            lease(132_000, Some("a_1"), 132_000),
            ev(140_000, EventKind::RunEnded {}),
        ]);
        named.sort_by_key(|e| e.t_ms);
        let (held, message) = judged(&named);
        assert!(held, "{message}");
        let mut other = before.to_vec();
        other.extend([
            lease(120_000, Some("b_1"), 120_000),
            ev(140_000, EventKind::RunEnded {}),
        ]);
        other.sort_by_key(|e| e.t_ms);
        let (held, message) = judged(&other);
        assert!(!held, "{message}");
        assert!(
            message.contains("the Lease named b (since 2m00.0s)"),
            "{message}"
        );
    }

    /// Found on kind (CI of `31843ea`, a client-go agent in `exit` mode whose identity is its pod's
    /// name, kubechaos reading 5 s late): after a 40 s API server stop, the restarted container
    /// took the Lease back at 2m16.8s and said so; the observer had reached the API server again
    /// at 2m16.0s, but its watch of Leases could not resume (the new API server had no history)
    /// and its list came after the renewal at 2m20.8s: the writes at 2m16.8s and 2m18.8s were
    /// never seen, and the term, judged against the Lease from before the outage (expired), was a
    /// false FAIL.
    /// A term begun between the broken watch's last word and the list is judged by the next
    /// reading: justified if it names the leader, unjustified from its start if another.
    #[test]
    fn a_term_begun_while_the_leases_watch_was_broken_is_judged_by_the_next_reading() {
        let relisted = |t_ms: u64, since_ms: u64| {
            ev(
                t_ms,
                EventKind::LeasesRelisted {
                    since_ms,
                    leases: None,
                },
            )
        };
        // Renewed every 2 s until 72.9s; its process ends in the outage.
        let mut before: Vec<Event> = (0..=36u64)
            .map(|k| lease(900 + k * 2_000, Some("a_1"), 900 + k * 2_000))
            .collect();
        before.extend([
            started(1_000, "a_1"),
            stopped(85_700, "a_1"),
            reach(89_900, false),
            reach(136_000, true),
            started(136_800, "a_1"),
        ]);
        let after = |holder: &str| {
            let mut events = before.to_vec();
            events.extend([
                lease(140_800, Some(holder), 140_800),
                lease(142_800, Some(holder), 142_800),
                stopped(150_000, "a_1"),
                ev(200_000, EventKind::RunEnded {}),
            ]);
            events
        };
        let judged_with = |mut events: Vec<Event>, relist: bool| {
            if relist {
                events.push(relisted(141_500, 78_700));
            }
            events.sort_by_key(|e| e.t_ms);
            judged(&events)
        };
        // Without the word that the watch was broken, the stale reading judges it (as before).
        let (held, message) = judged_with(after("a_1"), false);
        assert!(!held, "{message}");
        assert!(
            message.contains("while the Lease had expired at 1m27.9s"),
            "{message}"
        );
        let (held, message) = judged_with(after("a_1"), true);
        assert!(held, "{message}");
        let (held, message) = judged_with(after("b_1"), true);
        assert!(!held, "{message}");
        assert!(
            message.contains("the Lease named b (since 2m20.8s)"),
            "{message}"
        );
        // A term begun after the list is judged against the Lease as seen, as always.
        let mut late = before[..before.len() - 1].to_vec();
        late.extend([
            relisted(137_000, 78_700),
            lease(136_500, Some("b_1"), 136_500),
            started(140_000, "a_1"),
            lease(146_500, Some("b_1"), 146_500),
            ev(200_000, EventKind::RunEnded {}),
        ]);
        late.sort_by_key(|e| e.t_ms);
        let (held, message) = judged(&late);
        assert!(!held, "{message}");
    }

    /// The false FAIL of a correct client-go program on the local control plane: the API server
    /// stopped at 20.1s (SIGTERM) closed its watches at once (the observer's last at 20.5s) and
    /// took the program's renewals for seconds more; the observer, listing again after the
    /// restart, could not see them, and found the program leading until 36.9s on the renewal at
    /// 18.8s (expired at 33.8s). Its leading then is not judged on that reading (the observer
    /// reads such writes back from etcd's past now: this is what remains where it cannot); when
    /// nothing was written in the gap (the Lease read after it is the one from before), the claim
    /// stands; a gap in another Lease's evidence changes nothing.
    #[test]
    fn leading_within_a_gap_in_the_evidence_is_not_judged_on_the_reading_from_before_it() {
        let gap = |leases: Option<Vec<String>>| {
            ev(
                54_900,
                EventKind::LeasesRelisted {
                    since_ms: 20_500,
                    leases,
                },
            )
        };
        let run = |gap: Option<Event>, read_after: bool| {
            let mut events = vec![
                lease(16_800, Some("agent-0_1"), 16_800),
                started(1_000, "agent-0_1"),
                lease(18_800, Some("agent-0_1"), 18_800),
                stopped(36_900, "agent-0_1"),
                started(54_200, "agent-0_1"),
                stopped(60_000, "agent-0_1"),
                ev(110_000, EventKind::RunEnded {}),
            ];
            events.extend(gap);
            if read_after {
                events.extend([
                    lease(54_300, Some("agent-0_1"), 54_300),
                    lease(56_300, Some("agent-0_1"), 56_300),
                ]);
            }
            events.sort_by_key(|e| e.t_ms);
            judged(&events)
        };
        let ours = Some(vec!["default/lock".to_owned()]);
        let (held, message) = run(Some(gap(ours.clone())), true);
        assert!(held, "{message}");
        assert!(
            message.ends_with("; from 20.5s to 54.9s its leading was not judged: the Lease's writes then could not be read back"),
            "{message}"
        );
        // Events files from before the gap named its Leases: every Lease.
        assert!(run(Some(gap(None)), true).0);
        // Nothing written in the gap: the Lease read after it is the one from before.
        let (held, message) = run(Some(gap(ours)), false);
        assert!(!held, "{message}");
        assert!(
            message.contains("while the Lease had expired at 33.8s (renewed at 18.8s for 15.0s): still leading at 35.8s"),
            "{message}"
        );
        for other in [None, Some(gap(Some(vec!["default/other".to_owned()])))] {
            let (held, message) = run(other, true);
            assert!(!held, "{message}");
            assert!(message.contains("still leading at 35.8s"), "{message}");
            assert!(!message.contains("not judged"), "{message}");
        }
    }

    /// A term begun while the observer could not read, and no change of its Lease seen after:
    /// once the observer's view is whole again, the Lease as seen then is as it stays. A leader
    /// that says it leads through an outage and never writes its Lease is caught from then (it
    /// was never judged: a false PASS); one whose Lease names it, unexpired, holds.
    #[test]
    fn a_term_begun_unseen_that_no_later_reading_judges_is_judged_once_the_view_is_whole() {
        // Led, stopped; the observer blind from 30 s; the term begun unseen at 60 s.
        let outage = [
            lease(900, Some("a_1"), 900),
            started(1_000, "a_1"),
            lease(10_000, Some("a_1"), 10_000),
            stopped(20_000, "a_1"),
            reach(30_000, false),
            started(60_000, "a_1"),
        ];
        let then = |more: &[Event]| judged(&[&outage[..], more].concat());
        let (held, message) = then(&[reach(90_000, true), ev(200_000, EventKind::RunEnded {})]);
        assert!(!held, "{message}");
        assert_eq!(
            message,
            "a_1 acted as leader of default/lock while the Lease had expired at 25.0s (renewed at 10.0s for 15.0s): still leading at 1m32.0s, beyond the tolerance of 2s; it still led when the run ended at 3m20.0s"
        );
        // Still unable to read when the run ends: nothing tells, not judged (as before).
        let (held, message) = then(&[ev(200_000, EventKind::RunEnded {})]);
        assert!(held, "{message}");
        // A Lease seen naming it, unexpired, after the outage: judged by it, as before.
        let (held, message) = then(&[
            reach(90_000, true),
            lease(95_000, Some("a_1"), 95_000),
            stopped(100_000, "a_1"),
            ev(200_000, EventKind::RunEnded {}),
        ]);
        assert!(held, "{message}");
    }
}
