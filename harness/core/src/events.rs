//! The observed timeline. Every backend records the same event types; invariants and reports
//! read only this. `--events FILE` writes it as JSON lines, one event per line.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// What a line a candidate printed is to kubechaos (see [`read_report`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// A leadership report: `leading-started` or `leading-stopped`.
    Leadership(EventKind),
    /// `process-note`: something the candidate says about itself.
    Note(String),
    /// A report that cannot be read: what was wrong.
    Rejected(String),
    /// Not a report: the candidate's own log (a JSON log line has no `event` field).
    NotAReport,
}

/// Read a line a candidate printed. A JSON object with an `event` field is a report:
/// `{"event":"leading-started","lease":"NS/NAME","identity":"ID"}`,
/// `{"event":"leading-stopped","lease":…,"identity":…,"reason":"…"}` (`reason` may be left out)
/// and `{"event":"process-note","message":"…"}`; any other line is the candidate's own log.
pub fn read_report(line: &str) -> Report {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(line.trim())
    else {
        return Report::NotAReport;
    };
    let Some(event) = o.get("event") else {
        return Report::NotAReport;
    };
    let text = |key: &str| {
        o.get(key)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
    };
    let lease_and_identity = |event: &str| match (text("lease"), text("identity")) {
        (Some(l), Some(i))
            if l.split_once('/')
                .is_some_and(|(ns, n)| !ns.is_empty() && !n.is_empty()) =>
        {
            Ok((l.to_owned(), i.to_owned()))
        }
        _ => Err(format!(
            "`{event}` needs `lease` (NAMESPACE/NAME) and `identity`, both strings"
        )),
    };
    match event.as_str() {
        Some("leading-started") => match lease_and_identity("leading-started") {
            Ok((lease, identity)) => Report::Leadership(EventKind::LeadingStarted { lease, identity }),
            Err(e) => Report::Rejected(e),
        },
        Some("leading-stopped") => match lease_and_identity("leading-stopped") {
            Ok((lease, identity)) => Report::Leadership(EventKind::LeadingStopped {
                lease,
                identity,
                reason: text("reason").unwrap_or("no reason given").to_owned(),
            }),
            Err(e) => Report::Rejected(e),
        },
        Some("process-note") => match text("message") {
            Some(m) => Report::Note(m.to_owned()),
            None => Report::Rejected("`process-note` needs `message`, a string".to_owned()),
        },
        _ => Report::Rejected(format!(
            "`event` is {event}; expected \"leading-started\", \"leading-stopped\" or \"process-note\""
        )),
    }
}

/// One thing that happened, `t_ms` milliseconds after the run started.
///
/// `t_ms` is when it happened where it happened (its source's time: a log line's runtime
/// timestamp, a container's exit as its node's runtime tells it, a Lease's `renewTime`), never
/// when kubechaos read it; `read_ms` is when kubechaos read it, where that was later. A fact
/// read late is placed where it belongs, so that a verdict does not turn on how quickly
/// kubechaos reads (a busy machine, a slow API server), and the lag is in the events file for
/// the report to tell ([`largest_lag`]).
///
/// Where its source tells a time only coarsely (a pod's status through the API: `startedAt` and
/// `finishedAt` are whole seconds), the fact happened somewhere from `t_ms` to `t_ms +
/// within_ms`: the invariants are judged with it at each end of that interval, and a verdict
/// that turns on where in it the fact fell is "the evidence cannot tell"
/// ([`crate::invariants::judge`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Milliseconds since the start of the run (virtual on the sim, real elsewhere), when it
    /// happened (the earliest it can have happened, where `within_ms` is set).
    pub t_ms: u64,
    /// When kubechaos read it (milliseconds since the start of the run), if later than `t_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ms: Option<u64>,
    /// It happened at most this long after `t_ms`: its source tells its time no finer (999 for a
    /// time the API gives to the whole second). `None`: `t_ms` is when it happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_ms: Option<u64>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// An event that happened at `t_ms`, read then.
    pub fn new(t_ms: u64, kind: EventKind) -> Event {
        Event {
            t_ms,
            read_ms: None,
            within_ms: None,
            kind,
        }
    }

    /// The latest it can have happened.
    pub fn latest_ms(&self) -> u64 {
        self.t_ms + self.within_ms.unwrap_or(0)
    }

    /// When kubechaos read it.
    pub fn read_at(&self) -> u64 {
        self.read_ms.unwrap_or(self.t_ms).max(self.t_ms)
    }
}

/// Until when a Lease record keeps other candidates off: a lease duration from its renewal,
/// counted from when the API server took the write if that was later than its `renewTime` (the
/// candidates, as client-go's do, wait a full duration from when they see a record change, which
/// is never before the API server has it).
pub fn lease_valid_until(
    renew_ms: Option<u64>,
    written_ms: Option<u64>,
    duration_ms: Option<u64>,
) -> Option<u64> {
    let from = renew_ms.map(|r| r.max(written_ms.unwrap_or(0)))?;
    duration_ms.map(|d| from + d)
}

/// What the observer's [`EventKind::LeasesRelisted`] says, as the timeline shows it.
pub fn leases_relisted_text(since_ms: u64, leases: Option<&[String]>) -> String {
    match leases {
        Some(leases) => format!(
            "observer: listed the Leases again (their watch could not resume where it broke), and the API server's storage no longer held the writes it missed of {}: their changes since {} are known by the state they left, not one by one",
            leases.join(", "),
            fmt_ms(since_ms)
        ),
        None => format!(
            "observer: listed the Leases again (their watch could not resume where it broke): their changes since {} are known by the state they left, not one by one",
            fmt_ms(since_ms)
        ),
    }
}

/// What the observer's [`EventKind::ApiReach`] says, as the timeline shows it.
pub fn api_reach_text(reached: bool, error: Option<&str>) -> String {
    if reached {
        "observer: reached the API server again".into()
    } else {
        format!(
            "observer: cannot reach the API server ({}); retrying every second",
            error.unwrap_or("no answer")
        )
    }
}

/// What a fact is, in a few words, for a report that points at one (the largest lag).
pub fn fact_text(kind: &EventKind) -> String {
    match kind {
        EventKind::LeaseObserved { lease, holder, .. } => match holder {
            Some(h) => format!("Lease {lease} written by {h}"),
            None => format!("Lease {lease} released"),
        },
        EventKind::LeadingStarted { identity, .. } => format!("{identity} said it leads"),
        EventKind::LeadingStopped { identity, .. } => format!("{identity} said it stopped leading"),
        EventKind::ProcessStarted {
            process,
            incarnation,
        } => format!("{process} started (start #{incarnation})"),
        EventKind::ProcessExited { process, .. } => format!("{process} exited"),
        EventKind::ApiServerServing { process, .. } => format!("{process} served again"),
        EventKind::ProcessNote { process, .. } | EventKind::ReportRejected { process, .. } => {
            format!("a line of {process}")
        }
        EventKind::PodBound { pod, .. } => format!("pod {pod} bound"),
        EventKind::NodeObserved { node, .. } => format!("node {node}"),
        EventKind::DeploymentObserved { deployment, .. } => format!("Deployment {deployment}"),
        other => format!("{other:?}"),
    }
}

/// The fact read the longest after it happened, and how long after (`None`: everything was read
/// as it happened). What a report says so that a user can tell a busy runner (a lag of seconds,
/// verdicts unaffected) from a broken operator.
pub fn largest_lag(events: &[Event]) -> Option<(u64, &Event)> {
    events
        .iter()
        .map(|e| (e.read_at() - e.t_ms, e))
        .filter(|(lag, _)| *lag > 0)
        .max_by_key(|(lag, _)| *lag)
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum EventKind {
    /// The run began.
    RunStarted {
        /// Scenario name.
        scenario: String,
        /// `sim`, `local` or `kube`.
        backend: String,
        /// The seed (sim).
        seed: u64,
        /// kubechaos version.
        version: String,
        /// Planned length of the run.
        duration_ms: u64,
    },
    /// A fault step (or the undoing of one, after its `for:`) was applied.
    FaultApplied {
        /// Index of the step in `faults:`.
        step: usize,
        /// The step's `id:`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The step as written (or what undoes it).
        action: String,
        /// This undoes the step after its `for:`.
        undo: bool,
        /// What it resolved to: the processes or links it touched.
        detail: String,
        /// A partition, delay or loss applied: each link direction it acts on, `[from, to]`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        links: Vec<[String; 2]>,
    },
    /// A process (component replica, agent replica, node, api-server, etcd) started.
    ProcessStarted {
        /// Process name, e.g. `kube-scheduler-1`.
        process: String,
        /// How many times it has started, from 1.
        incarnation: u32,
    },
    /// An API server answered its etcd readiness check (`GET /readyz/etcd`, `ok`: it answers
    /// requests and reaches etcd) for the first time since it was started, or since an etcd
    /// member was started: requests are served again. Its time is when the check that first got `ok` was sent (the
    /// one before it, at most a period earlier, got none). A fault's end that starts an API
    /// server or etcd again counts from here: a busy machine's slow start is not charged to
    /// the software under test. A world that records none (the sim, whose API server serves as
    /// it starts) has the end at the start.
    ApiServerServing {
        /// The API server.
        process: String,
        /// Its start that answered.
        incarnation: u32,
    },
    /// A process ended.
    ProcessExited {
        /// Process name.
        process: String,
        /// Why: `killed`, `removed`, `stopped`, `crashed`, `exited: ...`.
        reason: String,
    },
    /// The observer saw a Lease change (new holder, renewal, or transition).
    LeaseObserved {
        /// `NAMESPACE/NAME`.
        lease: String,
        /// `holderIdentity`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        holder: Option<String>,
        /// `renewTime`, as milliseconds since the start of the run (negative values clamp to 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        renew_ms: Option<u64>,
        /// `leaseTransitions`.
        transitions: u32,
        /// `leaseDurationSeconds`, in milliseconds: a holder that has not renewed for this long
        /// has lost the lease.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        /// When the API server took the write that made this record, by its own clock: the
        /// latest `time` of the Lease's `managedFields` (whole seconds: the start of its second).
        /// A renewal held up on its way (a slow API server, a busy node), taken later than its
        /// `renewTime`, counts from here: no other candidate can have seen it before
        /// ([`lease_valid_until`]). It is not when etcd stored the write: an API server cut off
        /// from etcd takes a request in and stores it at the heal, so it bounds nothing of when
        /// a renewal was stored (`leader-reacquired` counts from when kubechaos read it). A
        /// record whose write was taken in a second after its `renewTime`'s is placed here (the
        /// event's `t_ms`): the Lease was renewed by nothing before. Left out where nothing
        /// tells (the sim's API server before it kept `managedFields`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        written_ms: Option<u64>,
    },
    /// A candidate reports that it believes it leads and acts as leader.
    LeadingStarted {
        /// `NAMESPACE/NAME`.
        lease: String,
        /// Its identity (`process_incarnation`).
        identity: String,
    },
    /// A candidate reports that it stopped acting as leader.
    LeadingStopped {
        /// `NAMESPACE/NAME`.
        lease: String,
        /// Its identity.
        identity: String,
        /// Why.
        reason: String,
    },
    /// The harness created a probe pod for an invariant.
    ProbeCreated {
        /// Index of the invariant in `expect:`.
        invariant: usize,
        /// `NAMESPACE/NAME`.
        pod: String,
    },
    /// The observer saw a pod bound to a node.
    PodBound {
        /// `NAMESPACE/NAME`.
        pod: String,
        /// The node.
        node: String,
    },
    /// The observer saw a node's Ready condition or schedulability change.
    NodeObserved {
        /// Node name.
        node: String,
        /// Ready condition is True.
        ready: bool,
        /// The node carries a NoSchedule/NoExecute taint.
        tainted: bool,
    },
    /// The observer saw a Deployment's availability change.
    DeploymentObserved {
        /// `NAMESPACE/NAME`.
        deployment: String,
        /// Replicas available as both its status reports and its pods confirm: the smaller of
        /// `reported` and `ready_pods`.
        available: u32,
        /// `spec.replicas`.
        desired: u32,
        /// `status.availableReplicas`: stale while no controller-manager runs.
        #[serde(default)]
        reported: u32,
        /// Its pods (as its selector's `matchLabels` select them, not being deleted) whose Ready
        /// condition is True.
        #[serde(default)]
        ready_pods: u32,
    },
    /// A pod of a pod agent (`agents: [{pods: …}]`) was seen for the first time: from now on
    /// its process (named by the pod) is one of the agent's candidates.
    CandidatePod {
        /// The agent group.
        agent: String,
        /// `NAMESPACE/NAME` of the pod.
        pod: String,
        /// Its process name in the timeline (the pod's name).
        process: String,
    },
    /// Something a process said about itself that explains its behaviour.
    ProcessNote {
        /// Process name.
        process: String,
        /// The note.
        message: String,
    },
    /// Whether kubechaos's observer can read the API server: lost when a request of its was
    /// not answered (`reached: false`, with the error; placed when that request was sent), back
    /// when one was answered again (placed when the answer was read). Between the two, the
    /// Leases' changes were not seen as they came: a leadership term begun meanwhile is judged
    /// by the next reading of its Lease.
    ApiReach {
        /// The API server answered again (`true`), or stopped answering (`false`).
        reached: bool,
        /// The error that said it was lost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The observer's watch of Leases broke and could not be resumed where it broke (the API
    /// server no longer had its place, `410 Gone`: an API server started again keeps no history
    /// from before its start), so it listed them again (placed when that list was read). A
    /// Lease's changes from `since_ms` until then were not seen one by one, only the state they
    /// left (the observer reads the writes a broken watch missed back from the API server's
    /// storage: this is said when that storage no longer held them). A gap in the evidence: a
    /// leadership term begun meanwhile is judged by the next reading of its Lease, not by the
    /// reading from before, which may have missed the write that made it leader; and no leader
    /// is found acting on a lost Lease at a moment within it on a reading from before it.
    LeasesRelisted {
        /// From when writes may have been missed: the last write of a Lease that the broken
        /// watch brought, or when it last delivered anything if that was earlier.
        since_ms: u64,
        /// The followed Leases (`NAMESPACE/NAME`) written meanwhile whose writes could not be
        /// read back (the others' were); absent in events files from before kubechaos read them
        /// back: every Lease.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leases: Option<Vec<String>>,
    },
    /// A line a candidate printed as a leadership report (a JSON object with an `event` field)
    /// that kubechaos could not read: it is not judged, and said rather than dropped.
    ReportRejected {
        /// Process name.
        process: String,
        /// What was wrong, and what was expected.
        error: String,
        /// The line (its first 300 characters).
        line: String,
    },
    /// An invariant was judged on the timeline (recorded after the run, at its end, so that the
    /// events file alone can be rendered again as a report).
    InvariantJudged {
        /// Index of the invariant in `expect:`.
        invariant: usize,
        /// `leader-reacquired kube-system/kube-scheduler`.
        label: String,
        /// Whether it held.
        held: bool,
        /// Not held because the evidence cannot tell (facts known only to the whole second put
        /// it either way); neither a pass nor a violation.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cannot_tell: bool,
        /// The measured figure, or what was expected, seen and when.
        message: String,
        /// When its window opened, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor_ms: Option<u64>,
        /// When its window closed, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_ms: Option<u64>,
        /// When the violation began, for an invariant judged over the whole run that says
        /// where (`single-leader`: the overlap; `valid-lease-while-leading`: leading beyond the
        /// tolerance).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        violated_from_ms: Option<u64>,
        /// When that violation ended (the run's end if it had not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        violated_to_ms: Option<u64>,
    },
    /// The run was stopped before its end (Ctrl-C, SIGTERM; on an existing cluster also a
    /// failed machine command): the timeline is incomplete and was not judged.
    RunInterrupted {},
    /// The run ended.
    RunEnded {},
}

/// Collects events from every part of a run. Cheap to clone; shared by the hosts of a
/// simulation or the tasks of a real run.
#[derive(Clone)]
pub struct Recorder {
    /// The events, and whether the run has ended (nothing is recorded after its end).
    events: Arc<Mutex<(Vec<Event>, bool)>>,
    clock: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl Recorder {
    /// A recorder that stamps events with `clock()` (milliseconds since the run started).
    pub fn new(clock: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        Recorder {
            events: Arc::default(),
            clock: Arc::new(clock),
        }
    }

    /// Record an event now.
    pub fn record(&self, kind: EventKind) {
        let t = (self.clock)();
        self.record_at(t, kind);
    }

    /// Record an event at a given time (nothing, once the run has ended).
    pub fn record_at(&self, t_ms: u64, kind: EventKind) {
        self.push(Event::new(t_ms, kind));
    }

    /// Record a fact read now that happened at `source_ms` (its source's time, on the run's
    /// clock): placed then, with the time it was read. A source time later than now (clocks a
    /// little apart) is now.
    pub fn record_from(&self, source_ms: u64, kind: EventKind) {
        self.record_within(source_ms, None, kind);
    }

    /// Record a fact read now that its source places somewhere from `source_ms` to `source_ms +
    /// within_ms` (a time told to the whole second): as [`Recorder::record_from`], with the
    /// interval.
    pub fn record_within(&self, source_ms: u64, within_ms: Option<u64>, kind: EventKind) {
        let now = (self.clock)();
        let t_ms = source_ms.min(now);
        self.push(Event {
            t_ms,
            read_ms: (now > t_ms).then_some(now),
            within_ms: within_ms.map(|w| w.min(now - t_ms)).filter(|w| *w > 0),
            kind,
        });
    }

    fn push(&self, e: Event) {
        let mut events = self.events.lock().expect("recorder lock");
        if !events.1 {
            events.0.push(e);
        }
    }

    /// End the timeline at `t_ms`: `run-interrupted` (if it was) and `run-ended` are its last
    /// events. What was stamped later (a watch that reported while the run was being ended) and
    /// whatever is recorded from now on (the world being stopped) is not part of the run.
    pub fn end(&self, t_ms: u64, interrupted: bool) {
        let mut events = self.events.lock().expect("recorder lock");
        events.0.retain(|e| e.t_ms <= t_ms);
        if interrupted {
            events
                .0
                .push(Event::new(t_ms, EventKind::RunInterrupted {}));
        }
        events.0.push(Event::new(t_ms, EventKind::RunEnded {}));
        events.1 = true;
    }

    /// Milliseconds since the start of the run, on the recorder's clock.
    pub fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    /// Every event so far, in time order (stable for events at the same time).
    pub fn snapshot(&self) -> Vec<Event> {
        let mut events = self.events.lock().expect("recorder lock").0.clone();
        events.sort_by_key(|e| e.t_ms);
        events
    }
}

/// Write events as JSON lines.
pub fn write_jsonl(events: &[Event], out: &mut dyn Write) -> std::io::Result<()> {
    for e in events {
        serde_json::to_writer(&mut *out, e)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// A line of an events file that is not an event.
#[derive(Debug, PartialEq, Eq)]
pub struct JsonlError {
    /// 1-based line in the file.
    pub line: usize,
    /// 1-based column in that line.
    pub column: usize,
    /// What serde said.
    pub message: String,
}

impl std::fmt::Display for JsonlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// Read events written by [`write_jsonl`].
pub fn read_jsonl(text: &str) -> Result<Vec<Event>, JsonlError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                let message = e.to_string();
                // serde_json ends its message with its own position in the line: drop it.
                let message = match message.rfind(" at line ") {
                    Some(k) => message[..k].to_owned(),
                    None => message,
                };
                JsonlError {
                    line: i + 1,
                    column: e.column().max(1),
                    message,
                }
            })
        })
        .collect()
}

/// The process part of a lease holder identity: `kube-scheduler-0_3` -> `kube-scheduler-0`.
/// Identities follow upstream's `hostname_uuid` shape, with the incarnation in place of the uuid.
pub fn identity_process(identity: &str) -> &str {
    identity
        .rsplit_once('_')
        .map(|(p, _)| p)
        .unwrap_or(identity)
}

/// Format milliseconds as a run offset: `2m20.0s`, `12.4s`.
pub fn fmt_ms(ms: u64) -> String {
    let s = ms as f64 / 1000.0;
    if ms >= 60_000 {
        format!("{}m{:04.1}s", ms / 60_000, (ms % 60_000) as f64 / 1000.0)
    } else {
        format!("{s:.1}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timeline ends with `run-ended`: what a watch stamped after the end, or records while
    /// the world is being stopped, is not part of it (found by CI: node observations after an
    /// interrupted run's `run-ended`).
    #[test]
    fn nothing_follows_the_end_of_a_run() {
        let r = Recorder::new(|| 0);
        let node = |t_ms| Event {
            t_ms,
            read_ms: None,
            within_ms: None,
            kind: EventKind::NodeObserved {
                node: "node-0".into(),
                ready: true,
                tainted: false,
            },
        };
        r.record_at(5, node(5).kind);
        r.record_at(12, node(12).kind);
        r.end(10, true);
        r.record_at(11, node(11).kind);
        let kinds: Vec<EventKind> = r.snapshot().into_iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                node(5).kind,
                EventKind::RunInterrupted {},
                EventKind::RunEnded {}
            ]
        );
    }

    /// A `leading-stopped` report without a `reason` is a report (the reason is optional): a
    /// stop dropped for want of one made a program that had stopped leading look like a second
    /// leader.
    #[test]
    fn a_stop_without_a_reason_is_read() {
        assert_eq!(
            read_report(
                r#"{"event":"leading-stopped","lease":"default/lock","identity":"cr-0_2"}"#
            ),
            Report::Leadership(EventKind::LeadingStopped {
                lease: "default/lock".into(),
                identity: "cr-0_2".into(),
                reason: "no reason given".into(),
            })
        );
        assert_eq!(
            read_report(
                r#"{"event":"leading-started","lease":"default/lock","identity":"cr-0_2","extra":1}"#
            ),
            Report::Leadership(EventKind::LeadingStarted {
                lease: "default/lock".into(),
                identity: "cr-0_2".into(),
            })
        );
        assert_eq!(
            read_report(r#"{"event":"process-note","message":"hi"}"#),
            Report::Note("hi".into())
        );
    }

    /// A line meant as a report that cannot be read is rejected with the reason; a program's
    /// own log lines (JSON or not) are not reports.
    #[test]
    fn a_broken_report_is_rejected_and_a_log_line_is_not_a_report() {
        for (line, error) in [
            (
                r#"{"event":"leading-started","lease":"lock","identity":"a"}"#,
                "`leading-started` needs `lease` (NAMESPACE/NAME) and `identity`",
            ),
            (
                r#"{"event":"leading-stopped","identity":"a"}"#,
                "`leading-stopped` needs `lease`",
            ),
            (
                r#"{"event":"leading_started","lease":"d/l","identity":"a"}"#,
                "`event` is \"leading_started\"; expected",
            ),
            (
                r#"{"event":"process-note"}"#,
                "`process-note` needs `message`",
            ),
        ] {
            match read_report(line) {
                Report::Rejected(e) => assert!(e.starts_with(error), "{line}: {e}"),
                r => panic!("{line}: {r:?}"),
            }
        }
        for line in [
            r#"{"level":"info","msg":"successfully acquired lease"}"#,
            "I1130 leaderelection.go:258] attempting to acquire leader lease",
            "{not json",
        ] {
            assert_eq!(read_report(line), Report::NotAReport, "{line}");
        }
    }

    #[test]
    fn jsonl_round_trips() {
        let events = vec![
            Event {
                t_ms: 0,
                read_ms: None,
                within_ms: None,
                kind: EventKind::RunStarted {
                    scenario: "x".into(),
                    backend: "sim".into(),
                    seed: 1,
                    version: "0".into(),
                    duration_ms: 5,
                },
            },
            Event {
                t_ms: 7,
                read_ms: None,
                within_ms: None,
                kind: EventKind::LeaseObserved {
                    lease: "a/b".into(),
                    holder: Some("p_1".into()),
                    renew_ms: Some(6),
                    transitions: 0,
                    duration_ms: Some(15_000),
                    written_ms: None,
                },
            },
            Event {
                t_ms: 9,
                read_ms: None,
                within_ms: None,
                kind: EventKind::RunEnded {},
            },
        ];
        let mut out = Vec::new();
        write_jsonl(&events, &mut out).unwrap();
        assert_eq!(
            read_jsonl(std::str::from_utf8(&out).unwrap()).unwrap(),
            events
        );
    }

    #[test]
    fn identity_maps_to_process() {
        assert_eq!(identity_process("kube-scheduler-0_3"), "kube-scheduler-0");
        assert_eq!(identity_process("plain"), "plain");
        assert_eq!(fmt_ms(140_000), "2m20.0s");
        assert_eq!(fmt_ms(12_400), "12.4s");
    }
}
