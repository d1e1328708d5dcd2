//! `single-leader: {lease}`: never two candidates acting as leader at once, over the whole run.
//! The evidence is what the candidates say (their leadership reports), not the Lease: two
//! processes both believing they lead is the bug that matters.

use std::collections::BTreeMap;

use super::{Timeline, Watch};
use crate::events::{fmt_ms, identity_process, EventKind};
use crate::scenario::SingleLeader;

/// Judged over the whole run.
pub(super) const WATCH: Watch = Watch::WholeRun;

pub(super) fn judge(tl: &Timeline<'_>, i: &SingleLeader) -> (bool, String) {
    let name = i.lease.to_string();
    // Open intervals: identity -> start.
    let mut open: BTreeMap<String, u64> = BTreeMap::new();
    let mut terms = 0usize;
    for e in tl.events {
        match &e.kind {
            EventKind::LeadingStarted { lease: l, identity } if *l == name => {
                if let Some((other, since)) = open.iter().find(|(id, _)| *id != identity) {
                    return (
                        false,
                        format!(
                            "two candidates acted as leader of {name} at once: {other} (leading since {}) and {identity} (started leading at {})",
                            fmt_ms(*since),
                            fmt_ms(e.t_ms)
                        ),
                    );
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
    }
    (
        true,
        format!(
            "never two leaders at once ({terms} leadership term{} observed)",
            if terms == 1 { "" } else { "s" }
        ),
    )
}
