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
    let mut holders: BTreeMap<String, Option<String>> = BTreeMap::new();
    for e in &outcome.events {
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
            EventKind::LeaseObserved {
                lease,
                holder,
                renew_ms,
                ..
            } => {
                let prev = holders.insert(lease.clone(), holder.clone());
                if prev.as_ref() != Some(holder) {
                    Some(format!(
                        "lease     {lease}: held by {}",
                        holder.as_deref().map(identity_process).unwrap_or("nobody")
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

/// The verdict section.
pub fn verdicts(outcome: &Outcome) -> String {
    let mut out = String::new();
    for v in &outcome.verdicts {
        let _ = writeln!(
            out,
            "  {}  {}: {}",
            if v.held { "PASS" } else { "FAIL" },
            v.label,
            v.message
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
