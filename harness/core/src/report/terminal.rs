//! The terminal report: the timeline as it unfolded (faults, process exits and restarts,
//! leadership changes, probes) and one line per invariant with its verdict and measured figure.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::events::{fmt_ms, identity_process, EventKind};
use crate::outcome::Outcome;
use crate::scenario::Scenario;

/// Render the cluster line: `3 nodes, kube-scheduler ×2, …`. On an existing cluster
/// (`existing`), its nodes are its own, not the scenario's `nodes`.
pub fn cluster_line(s: &Scenario, existing: bool) -> String {
    let mut parts = vec![if existing {
        "the cluster's own nodes".to_owned()
    } else {
        format!(
            "{} node{}",
            s.cluster.nodes,
            if s.cluster.nodes == 1 { "" } else { "s" }
        )
    }];
    if s.cluster.api_servers > 1 {
        parts.push(format!("api-server ×{}", s.cluster.api_servers));
    }
    if s.cluster.etcd.members > 1 {
        parts.push(format!("etcd ×{}", s.cluster.etcd.members));
    }
    for (c, spec) in &s.cluster.components {
        parts.push(format!("{} ×{}", c.name(), spec.replicas));
    }
    for a in &s.cluster.agents {
        if let Some(p) = &a.pods {
            parts.push(format!(
                "pod agent {} (pods `{}` in {})",
                a.name, p.selector, p.namespace
            ));
            continue;
        }
        let runs = match &a.command {
            Some(cmd) => format!("`{}`", cmd.join(" ")),
            None => format!(
                "reference agent, {}",
                a.mode.map(|m| m.name()).unwrap_or("correct")
            ),
        };
        parts.push(format!("agent group {} ×{} ({runs})", a.name, a.replicas));
    }
    if !s.cluster.manifests.is_empty() {
        let files: Vec<&str> = s
            .cluster
            .manifests
            .iter()
            .map(|m| m.written.as_str())
            .collect();
        parts.push(format!("manifests {}", files.join(", ")));
    }
    parts.join(", ")
}

/// The timeline section. `verbose`: every event, not only the notable ones.
pub fn timeline(outcome: &Outcome, verbose: bool) -> String {
    let mut out = String::new();
    let expiries = expiries(outcome);
    let mut next_expiry = expiries.iter().peekable();
    let mut holders: BTreeMap<String, Option<String>> = BTreeMap::new();
    // The Leases that expired since they were last seen held.
    let mut lapsed: std::collections::BTreeSet<String> = Default::default();
    for e in &outcome.events {
        // A Lease that its holder did not renew in time expired: said at the moment it did.
        while let Some((t, lease, holder)) = next_expiry.next_if(|(t, ..)| *t < e.t_ms) {
            lapsed.insert(lease.clone());
            let _ = writeln!(
                out,
                "  {:>9}  lease     {lease}: expired (not renewed by {})",
                fmt_ms(*t),
                identity_process(holder)
            );
        }
        let line = match &e.kind {
            EventKind::FaultApplied { action, detail, .. } => {
                Some(format!("fault     {action}  [{detail}]"))
            }
            EventKind::ProcessExited { process, reason } => {
                Some(format!("exit      {process}: {reason}"))
            }
            EventKind::ProcessStarted {
                process,
                incarnation,
            } if *incarnation > 1 || verbose => {
                Some(format!("start     {process} (start #{incarnation})"))
            }
            EventKind::ApiServerServing {
                process,
                incarnation,
            } if *incarnation > 1 || verbose || e.t_ms > 0 => Some(format!(
                "serving   {process} (start #{incarnation}): /readyz/etcd ok, the API is served again"
            )),
            EventKind::LeaseObserved {
                lease,
                holder,
                renew_ms,
                ..
            } => {
                let prev = holders.insert(lease.clone(), holder.clone());
                let again = lapsed.remove(lease);
                let shown = holder.as_deref().map(identity_process).unwrap_or("nobody");
                if prev.as_ref() != Some(holder) {
                    Some(format!("lease     {lease}: held by {shown}"))
                } else if again && holder.is_some() {
                    // The same holder renewed it after it had expired: it took it back.
                    Some(format!(
                        "lease     {lease}: held by {shown} again (renewed at {})",
                        renew_ms.map(fmt_ms).unwrap_or_default()
                    ))
                } else if verbose {
                    Some(format!(
                        "renew     {lease} by {} at {}",
                        holder.as_deref().unwrap_or("-"),
                        renew_ms.map(fmt_ms).unwrap_or_default()
                    ))
                } else {
                    None
                }
            }
            EventKind::ProbeCreated { pod, .. } => Some(format!("probe     created {pod}")),
            EventKind::PodBound { pod, node } => Some(format!("bound     {pod} -> {node}")),
            EventKind::ProcessNote { process, message } => {
                Some(format!("note      {process}: {message}"))
            }
            EventKind::ApiReach { reached, error } => Some(format!(
                "note      kubechaos: {}",
                crate::events::api_reach_text(*reached, error.as_deref())
            )),
            EventKind::LeasesRelisted { since_ms, leases } => Some(format!(
                "note      kubechaos: {}",
                crate::events::leases_relisted_text(*since_ms, leases.as_deref())
            )),
            EventKind::CandidatePod { agent, pod, .. } => {
                Some(format!("candidate {pod} of agent/{agent}"))
            }
            EventKind::ReportRejected {
                process,
                error,
                line,
            } => Some(format!(
                "REJECTED  {process}: a report that cannot be read ({error}), not judged: {line}"
            )),
            EventKind::NodeObserved {
                node,
                ready,
                tainted,
            } if verbose || !ready || *tainted => Some(format!(
                "node      {node}: {}{}",
                if *ready { "Ready" } else { "not Ready" },
                if *tainted { ", tainted" } else { "" }
            )),
            // The verdict section says these.
            EventKind::InvariantJudged { .. } => None,
            other if verbose => Some(format!("{other:?}")),
            _ => None,
        };
        if let Some(l) = line {
            let _ = writeln!(out, "  {:>9}  {l}", fmt_ms(e.t_ms));
        }
    }
    out
}

/// When each Lease expired, as the observations show: a holder's renewal made it valid until
/// `renewTime` + `leaseDurationSeconds`, and the next observation of it (if any) was neither a
/// renewal from before then (seen late) nor in time. In time order: (when, lease, holder).
fn expiries(outcome: &Outcome) -> Vec<(u64, String, String)> {
    let end = outcome.events.last().map(|e| e.t_ms).unwrap_or(0);
    // Each observation: when, lease, holder, renewTime, when it lapses.
    type Seen<'a> = (u64, &'a str, Option<&'a str>, Option<u64>, Option<u64>);
    let seen: Vec<Seen<'_>> = outcome
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LeaseObserved {
                lease,
                holder,
                renew_ms,
                duration_ms,
                written_ms,
                ..
            } => Some((
                e.t_ms,
                lease.as_str(),
                holder.as_deref(),
                *renew_ms,
                crate::events::lease_valid_until(*renew_ms, *written_ms, *duration_ms),
            )),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for (i, &(_, lease, holder, _, until)) in seen.iter().enumerate() {
        let (Some(holder), Some(until)) = (holder, until) else {
            continue;
        };
        let next = seen[i + 1..].iter().find(|s| s.1 == lease);
        let renewed_in_time =
            next.is_some_and(|n| n.2 == Some(holder) && n.3.is_some_and(|r| r <= until));
        let seen_before = next.is_some_and(|n| n.0 <= until);
        if !renewed_in_time && !seen_before && until < end {
            out.push((until, lease.to_owned(), holder.to_owned()));
        }
    }
    out.sort();
    out
}

/// The verdict section.
pub fn verdicts(outcome: &Outcome) -> String {
    let mut out = String::new();
    for v in &outcome.verdicts {
        let _ = writeln!(out, "  {}  {}: {}", v.word(), v.label, v.message);
    }
    // A lag of a second or more is said: with every fact placed at its source's time the
    // verdicts do not depend on it, and it tells a busy runner (or a slow API server) apart
    // from a broken operator.
    if let Some((lag, e)) = outcome.largest_lag().filter(|(lag, _)| *lag >= 1_000) {
        let _ = writeln!(
            out,
            "  INFO  evidence was read up to {} after it happened ({} at {}, read at {}); each fact is placed when it happened",
            fmt_ms(lag),
            crate::events::fact_text(&e.kind),
            fmt_ms(e.t_ms),
            fmt_ms(e.read_at())
        );
    }
    let rejected = outcome.rejected_reports();
    if rejected > 0 {
        let _ = writeln!(
            out,
            "  WARN  {rejected} line{} printed as a leadership report could not be read and {} not judged (REJECTED in the timeline, `report-rejected` in the events)",
            if rejected == 1 { "" } else { "s" },
            if rejected == 1 { "was" } else { "were" }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;

    /// A Lease that its holder did not renew in time is said to expire when it did, and the
    /// same holder taking it back gets a line too; a renewal seen late but made in time is no
    /// expiry.
    #[test]
    fn the_timeline_says_when_a_lease_expired_and_who_took_it_back() {
        let s = crate::scenario::parse(
            std::path::Path::new("t.yaml"),
            b"name: t\ncluster: {components: {kube-scheduler: {replicas: 1}}}\n",
        )
        .unwrap();
        let seen = |t_ms: u64, renew: u64| Event {
            t_ms,
            read_ms: None,
            within_ms: None,
            kind: EventKind::LeaseObserved {
                lease: "kube-system/kube-scheduler".into(),
                holder: Some("s-0_1".into()),
                renew_ms: Some(renew),
                transitions: 0,
                duration_ms: Some(15_000),
                written_ms: None,
            },
        };
        let events = vec![
            seen(1_000, 1_000),
            // Made at 15.5s, before the 16s expiry, seen late: no expiry.
            seen(17_000, 15_500),
            seen(40_000, 40_000),
            Event {
                t_ms: 60_000,
                read_ms: None,
                within_ms: None,
                kind: EventKind::RunEnded {},
            },
        ];
        let outcome = Outcome::judge(
            &s,
            crate::plan::Plan::new(&s),
            events,
            std::time::Duration::ZERO,
        );
        let text = timeline(&outcome, false);
        assert_eq!(
            text,
            "       1.0s  lease     kube-system/kube-scheduler: held by s-0\n      30.5s  lease     kube-system/kube-scheduler: expired (not renewed by s-0)\n      40.0s  lease     kube-system/kube-scheduler: held by s-0 again (renewed at 40.0s)\n      55.0s  lease     kube-system/kube-scheduler: expired (not renewed by s-0)\n"
        );
    }
}
