//! `single-leader: {lease}`: never two candidates acting as leader at once, over the whole run.
//! The evidence is what the candidates say (their leadership reports), not the Lease: two
//! processes both believing they lead is the bug that matters.

use std::collections::BTreeMap;

use super::{Timeline, Watch};
use crate::events::{fmt_ms, identity_process, EventKind};
use crate::scenario::SingleLeader;

/// Judged over the whole run.
pub(super) const WATCH: Watch = Watch::WholeRun;

/// The verdict, its text, and when the first overlap began and ended.
pub(super) fn judge(tl: &Timeline<'_>, i: &SingleLeader) -> (bool, String, Option<(u64, u64)>) {
    let name = i.lease.to_string();
    // Open intervals: identity -> start.
    let mut open: BTreeMap<String, u64> = BTreeMap::new();
    let mut terms = 0usize;
    // The first overlap: (the one leading, since; the one that started too, at), and its end.
    let mut overlap: Option<((String, u64), (String, u64))> = None;
    let mut overlap_end: Option<u64> = None;
    let mut overlaps = 0usize;
    for e in tl.events {
        let before = open.len();
        match &e.kind {
            EventKind::LeadingStarted { lease: l, identity } if *l == name => {
                if let Some((other, since)) = open.iter().find(|(id, _)| *id != identity) {
                    overlaps += 1;
                    if overlap.is_none() {
                        overlap = Some(((other.clone(), *since), (identity.clone(), e.t_ms)));
                    }
                }
                open.insert(identity.clone(), e.t_ms);
                terms += 1;
            }
            EventKind::LeadingStopped {
                lease: l, identity, ..
            } if *l == name => {
                open.remove(identity);
            }
            EventKind::ProcessExited { process, .. } => {
                open.retain(|id, _| identity_process(id) != process);
            }
            _ => {}
        }
        // The first overlap ends when fewer than two lead again.
        if overlap.is_some() && overlap_end.is_none() && before >= 2 && open.len() < 2 {
            overlap_end = Some(e.t_ms);
        }
    }
    let Some(((other, since), (identity, from))) = overlap else {
        return (
            true,
            format!(
                "never two leaders at once ({terms} leadership term{} observed)",
                if terms == 1 { "" } else { "s" }
            ),
            None,
        );
    };
    let (until, length) = match overlap_end {
        Some(end) => (
            format!("until {}", at(end)),
            format!("for {}", length(end - from)),
        ),
        None => (
            "until the end of the run".to_owned(),
            format!("for at least {}", length(tl.end_ms.saturating_sub(from))),
        ),
    };
    let more = match overlaps {
        1 => String::new(),
        n => format!(
            "; {} more time{} later",
            n - 1,
            if n == 2 { "" } else { "s" }
        ),
    };
    (
        false,
        format!(
            "two candidates acted as leader of {name} at once from {} {until} ({length}): {other} (leading since {}) and {identity} (started leading at {}){more}",
            at(from),
            fmt_ms(since),
            at(from)
        ),
        Some((from, overlap_end.unwrap_or(tl.end_ms))),
    )
}

/// A moment of an overlap, to the millisecond where tenths would hide it.
fn at(ms: u64) -> String {
    if ms.is_multiple_of(100) {
        fmt_ms(ms)
    } else if ms >= 60_000 {
        format!("{}m{:06.3}s", ms / 60_000, (ms % 60_000) as f64 / 1000.0)
    } else {
        format!("{:.3}s", ms as f64 / 1000.0)
    }
}

/// How long an overlap lasted: milliseconds below a second.
fn length(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        fmt_ms(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;

    fn started(t_ms: u64, identity: &str) -> Event {
        Event {
            t_ms,
            read_ms: None,
            within_ms: None,
            kind: EventKind::LeadingStarted {
                lease: "default/lock".into(),
                identity: identity.into(),
            },
        }
    }

    fn stopped(t_ms: u64, identity: &str) -> Event {
        Event {
            t_ms,
            read_ms: None,
            within_ms: None,
            kind: EventKind::LeadingStopped {
                lease: "default/lock".into(),
                identity: identity.into(),
                reason: "lost".into(),
            },
        }
    }

    fn judged(events: &[Event]) -> (bool, String) {
        let i = SingleLeader {
            min_terms: 1,
            lease: crate::scenario::LeaseRef {
                namespace: "default".into(),
                name: "lock".into(),
            },
        };
        let (held, message, when) = judge(&Timeline::new(events), &i);
        assert_eq!(held, when.is_none(), "a violation says when");
        (held, message)
    }

    /// A violation says when the overlap began, when it ended and how long it lasted: 11 ms and a
    /// minute are different bugs.
    #[test]
    fn an_overlap_is_said_with_its_start_end_and_length() {
        let (held, message) = judged(&[
            started(1_000, "a-0_1"),
            started(20_000, "a-1_1"),
            stopped(20_011, "a-0_1"),
            started(50_000, "a-0_2"),
            stopped(51_000, "a-1_1"),
        ]);
        assert!(!held);
        assert_eq!(
            message,
            "two candidates acted as leader of default/lock at once from 20.0s until 20.011s (for 11ms): a-0_1 (leading since 1.0s) and a-1_1 (started leading at 20.0s); 1 more time later"
        );
    }

    /// An overlap still open when the run ends says so.
    #[test]
    fn an_overlap_to_the_end_of_the_run() {
        let (held, message) = judged(&[
            started(1_000, "a-0_1"),
            started(20_000, "a-1_1"),
            Event {
                t_ms: 80_000,
                read_ms: None,
                within_ms: None,
                kind: EventKind::RunEnded {},
            },
        ]);
        assert!(!held);
        assert!(
            message.contains("from 20.0s until the end of the run (for at least 1m00.0s)"),
            "{message}"
        );
    }

    /// Terms one after the other are no overlap.
    #[test]
    fn terms_one_after_the_other_hold() {
        let (held, message) = judged(&[
            started(1_000, "a-0_1"),
            stopped(20_000, "a-0_1"),
            started(21_000, "a-1_1"),
        ]);
        assert!(held, "{message}");
        assert_eq!(
            message,
            "never two leaders at once (2 leadership terms observed)"
        );
    }
}
