//! The HTML report: one self-contained file (no network needed to open it) that shows a run on
//! one time axis. The timeline is turned here into lanes of spans and marks (the part that knows
//! Kubernetes: lease holders and expiries, processes, nodes, probe pods, invariant windows);
//! `report.js`, inlined in the page, only draws them and shows an item's details.
//!
//! Built from the events alone, so `kubechaos report EVENTS.jsonl` renders an old run the same
//! as the run itself did.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::events::{fmt_ms, identity_process, lease_valid_until, Event, EventKind};

/// Everything the page draws.
#[derive(Debug, Serialize)]
pub struct Model {
    /// Scenario name.
    pub(crate) scenario: String,
    /// `sim`, `local`, `kube`.
    pub(crate) backend: String,
    /// The seed (sim).
    pub(crate) seed: u64,
    /// kubechaos version that ran it.
    pub(crate) version: String,
    /// Planned length of the run.
    pub(crate) duration_ms: u64,
    /// Time of the last event: the right end of the axis.
    pub(crate) end_ms: u64,
    /// Invariants held, violated, and that the evidence could not tell (neither held nor
    /// violated: never counted as violated); `None` when the events file has no verdicts.
    pub(crate) verdicts: Option<(usize, usize, usize)>,
    /// When the run was interrupted (Ctrl-C, SIGTERM), if it was: then it was not judged.
    pub(crate) interrupted_ms: Option<u64>,
    /// Each invariant violated or that could not be told: `label: message` (`label (cannot
    /// tell): message`).
    pub(crate) violations: Vec<String>,
    /// Lanes in groups, in drawing order.
    pub groups: Vec<Group>,
}

/// A group of lanes under a heading.
#[derive(Debug, Serialize)]
pub struct Group {
    /// `faults`, `leases`, `processes`, `nodes`, `pods`, `deployments`, `invariants`.
    pub(crate) name: &'static str,
    /// Its lanes.
    pub lanes: Vec<Lane>,
}

/// One row of the chart.
#[derive(Debug, Serialize)]
pub struct Lane {
    /// Unique in the report: `lease:kube-system/kube-scheduler`, `process:api-server`.
    pub id: String,
    /// The row's label.
    pub(crate) label: String,
    /// Intervals, drawn as bars.
    pub spans: Vec<Span>,
    /// Moments, drawn as ticks.
    pub(crate) marks: Vec<Mark>,
}

/// An interval of a lane.
#[derive(Debug, Serialize)]
pub struct Span {
    /// Start, ms since the run started.
    pub(crate) from: u64,
    /// End.
    pub(crate) to: u64,
    /// What it is (a CSS class): `fault`, `holder`, `expired`, `up`, `down`, `leading`, `ready`,
    /// `not-ready`, `pending`, `bound`, `available`, `unavailable`, `held`, `violated`, `window`.
    pub class: &'static str,
    /// Colour index for `holder` spans (the same process has the same colour in every lane).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) colour: Option<usize>,
    /// Short text drawn inside the bar when it fits.
    pub(crate) text: String,
    /// What hovering or clicking shows.
    pub detail: String,
}

/// A moment of a lane.
#[derive(Debug, Serialize)]
pub(crate) struct Mark {
    /// When, ms since the run started.
    pub(crate) at: u64,
    /// What it is (a CSS class): `fault`, `renew`, `expiry`, `exit`, `start`, `note`, `bound`,
    /// `anchor`, `deadline`.
    pub(crate) class: &'static str,
    /// What hovering or clicking shows.
    pub(crate) detail: String,
}

impl Lane {
    fn new(id: String, label: String) -> Self {
        Lane {
            id,
            label,
            spans: Vec::new(),
            marks: Vec::new(),
        }
    }

    fn span(&mut self, from: u64, to: u64, class: &'static str, text: String, detail: String) {
        self.spans.push(Span {
            from,
            to: to.max(from),
            class,
            colour: None,
            text,
            detail,
        });
    }

    fn mark(&mut self, at: u64, class: &'static str, detail: String) {
        self.marks.push(Mark { at, class, detail });
    }
}

/// Why an events file cannot be drawn.
#[derive(Debug, PartialEq, Eq)]
pub enum ModelError {
    /// It has no `run-started` event.
    NoRunStarted,
}

/// Colours for lease holders: processes in order of first appearance.
#[derive(Default)]
struct Palette(BTreeMap<String, usize>);

impl Palette {
    fn of(&mut self, process: &str) -> usize {
        let next = self.0.len();
        *self.0.entry(process.to_owned()).or_insert(next)
    }
}

/// Build the lanes of a run from its events.
pub fn model(events: &[Event]) -> Result<Model, ModelError> {
    let Some((scenario, backend, seed, version, duration_ms)) =
        events.iter().find_map(|e| match &e.kind {
            EventKind::RunStarted {
                scenario,
                backend,
                seed,
                version,
                duration_ms,
            } => Some((
                scenario.clone(),
                backend.clone(),
                *seed,
                version.clone(),
                *duration_ms,
            )),
            _ => None,
        })
    else {
        return Err(ModelError::NoRunStarted);
    };
    let interrupted_ms = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::RunInterrupted {}))
        .map(|e| e.t_ms);
    // The axis ends where the run did: its planned end, or where it was interrupted.
    let last = events.iter().map(|e| e.t_ms).max().unwrap_or(0);
    let end_ms = match interrupted_ms {
        Some(_) => last,
        None => last.max(duration_ms),
    };
    let mut palette = Palette::default();
    let faults = fault_lanes(events);
    let leases = lease_lanes(events, end_ms, &mut palette);
    let processes = process_lanes(events, end_ms, &mut palette);
    let nodes = node_lanes(events, end_ms);
    let pods = pod_lanes(events, end_ms);
    let deployments = deployment_lanes(events, end_ms);
    let (invariants, (verdicts, violations)) = invariant_lanes(events, end_ms);
    let groups = [
        ("faults", faults),
        ("leases", leases),
        ("processes", processes),
        ("nodes", nodes),
        ("pods", pods),
        ("deployments", deployments),
        ("invariants", invariants),
    ]
    .into_iter()
    .filter(|(_, lanes)| !lanes.is_empty())
    .map(|(name, lanes)| Group { name, lanes })
    .collect();
    Ok(Model {
        scenario,
        backend,
        seed,
        version,
        duration_ms,
        end_ms,
        verdicts,
        interrupted_ms,
        violations,
        groups,
    })
}

/// A lane per fault step: a span from the step to its undoing (`for:`), or a mark for a step
/// that is over at once (a restart, a kill).
fn fault_lanes(events: &[Event]) -> Vec<Lane> {
    let mut lanes: BTreeMap<usize, Lane> = BTreeMap::new();
    let mut open: BTreeMap<usize, (u64, String, String)> = BTreeMap::new();
    for e in events {
        let EventKind::FaultApplied {
            step,
            id,
            action,
            undo,
            detail,
            ..
        } = &e.kind
        else {
            continue;
        };
        let lane = lanes.entry(*step).or_insert_with(|| {
            Lane::new(
                format!("fault:{step}"),
                match id {
                    Some(id) => format!("{action} ({id})"),
                    None => action.clone(),
                },
            )
        });
        if *undo {
            if let Some((from, action, detail)) = open.remove(step) {
                lane.span(
                    from,
                    e.t_ms,
                    "fault",
                    action.clone(),
                    format!(
                        "step {step}: {action} from {} to {} ({detail})",
                        fmt_ms(from),
                        fmt_ms(e.t_ms)
                    ),
                );
            }
            lane.mark(
                e.t_ms,
                "fault",
                format!("at {}: {action} ({detail})", fmt_ms(e.t_ms)),
            );
        } else {
            lane.mark(
                e.t_ms,
                "fault",
                format!("step {step} at {}: {action} ({detail})", fmt_ms(e.t_ms)),
            );
            // A step that is undone later (its `for:`) becomes a span then; one that is over at
            // once (a restart, a kill) or lasts (a removal without `for:`) stays a mark.
            open.insert(*step, (e.t_ms, action.clone(), detail.clone()));
        }
    }
    lanes.into_values().collect()
}

/// A lane per lease: a bar per holder (coloured by its process), renewals as ticks, expiries
/// (no renewal for `leaseDurationSeconds`) marked and the time nobody validly held it hatched.
fn lease_lanes(events: &[Event], end_ms: u64, palette: &mut Palette) -> Vec<Lane> {
    struct Held {
        holder: String,
        since: u64,
        renew: u64,
        /// When the API server took the last renewal, where later than its `renewTime`: the
        /// Lease is valid from there (as the verdicts count it, [`lease_valid_until`]).
        written: Option<u64>,
        duration: Option<u64>,
    }
    let mut lanes: BTreeMap<String, (Lane, Option<Held>)> = BTreeMap::new();
    fn close(lane: &mut Lane, held: Held, at: u64, palette: &mut Palette) {
        let expiry =
            lease_valid_until(Some(held.renew), held.written, held.duration).filter(|x| *x < at);
        let until = expiry.unwrap_or(at);
        let process = identity_process(&held.holder).to_owned();
        lane.spans.push(Span {
            from: held.since,
            to: until.max(held.since),
            class: "holder",
            colour: Some(palette.of(&process)),
            text: process.clone(),
            detail: format!(
                "held by {} from {} to {}{}",
                held.holder,
                fmt_ms(held.since),
                fmt_ms(until),
                match held.duration {
                    Some(d) => format!(
                        " (last renewal {}, lease duration {})",
                        fmt_ms(held.renew),
                        fmt_ms(d)
                    ),
                    None => format!(" (last renewal {})", fmt_ms(held.renew)),
                }
            ),
        });
        if let Some(x) = expiry {
            lane.mark(
                x,
                "expiry",
                format!(
                    "expired at {}: {} last renewed at {}{} and did not renew within {}",
                    fmt_ms(x),
                    held.holder,
                    fmt_ms(held.renew),
                    match held.written {
                        Some(w) if w > held.renew =>
                            format!(" (taken by the API server at {})", fmt_ms(w)),
                        _ => String::new(),
                    },
                    fmt_ms(held.duration.unwrap_or(0))
                ),
            );
            lane.span(
                x,
                at,
                "expired",
                String::new(),
                format!(
                    "no valid holder from {} to {} (the lease had expired)",
                    fmt_ms(x),
                    fmt_ms(at)
                ),
            );
        }
    }
    for e in events {
        let EventKind::LeaseObserved {
            lease,
            holder,
            renew_ms,
            transitions,
            duration_ms,
            written_ms,
        } = &e.kind
        else {
            continue;
        };
        let (lane, held) = lanes.entry(lease.clone()).or_insert_with(|| {
            (
                Lane::new(format!("lease:{lease}"), lease.clone()),
                None::<Held>,
            )
        });
        let renew = renew_ms.unwrap_or(e.t_ms).min(e.t_ms);
        match (held.take(), holder) {
            (Some(h), Some(new)) if h.holder == *new => {
                let expired = lease_valid_until(Some(h.renew), h.written, h.duration)
                    .is_some_and(|until| until < renew);
                if expired {
                    close(lane, h, renew, palette);
                    *held = Some(Held {
                        holder: new.clone(),
                        since: renew,
                        renew,
                        written: *written_ms,
                        duration: *duration_ms,
                    });
                } else {
                    *held = Some(Held {
                        renew,
                        written: *written_ms,
                        duration: duration_ms.or(h.duration),
                        ..h
                    });
                }
                lane.mark(
                    renew,
                    "renew",
                    format!(
                        "renewed by {new} at {} (observed at {}, {transitions} transitions)",
                        fmt_ms(renew),
                        fmt_ms(e.t_ms)
                    ),
                );
            }
            (previous, Some(new)) => {
                if let Some(h) = previous {
                    close(lane, h, e.t_ms, palette);
                }
                lane.mark(
                    e.t_ms,
                    "start",
                    format!(
                        "acquired by {new} (observed at {}, renewTime {}, {transitions} transitions)",
                        fmt_ms(e.t_ms),
                        fmt_ms(renew)
                    ),
                );
                *held = Some(Held {
                    holder: new.clone(),
                    since: e.t_ms,
                    renew,
                    written: *written_ms,
                    duration: *duration_ms,
                });
            }
            (previous, None) => {
                if let Some(h) = previous {
                    close(lane, h, e.t_ms, palette);
                }
                lane.mark(
                    e.t_ms,
                    "exit",
                    format!("released: no holder (observed at {})", fmt_ms(e.t_ms)),
                );
            }
        }
    }
    lanes
        .into_values()
        .map(|(mut lane, held)| {
            if let Some(h) = held {
                close(&mut lane, h, end_ms, palette);
            }
            lane
        })
        .collect()
}

/// A lane per process: up from each start to its exit, down (with the reason) until it starts
/// again; the time it believed it led, and what it said about itself.
fn process_lanes(events: &[Event], end_ms: u64, palette: &mut Palette) -> Vec<Lane> {
    /// A process's lane and what is still open in it.
    struct Proc {
        lane: Lane,
        /// Up since, as which start.
        up: Option<(u64, u32)>,
        /// Down since, and why.
        down: Option<(u64, String)>,
    }
    /// The process's lane, made on first mention (lanes keep that order).
    fn at<'a>(procs: &'a mut Vec<Proc>, p: &str) -> &'a mut Proc {
        let i = match procs.iter().position(|x| x.lane.label == p) {
            Some(i) => i,
            None => {
                procs.push(Proc {
                    lane: Lane::new(format!("process:{p}"), p.to_owned()),
                    up: None,
                    down: None,
                });
                procs.len() - 1
            }
        };
        &mut procs[i]
    }
    let mut procs: Vec<Proc> = Vec::new();
    let mut leading: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut notes: Vec<(u64, String, String)> = Vec::new();
    /// Draw the time `identity` acted as leader of `lease` on its process's lane.
    fn led(
        procs: &mut Vec<Proc>,
        palette: &mut Palette,
        (lease, identity): (String, String),
        (from, to): (u64, u64),
        how: String,
    ) {
        let process = identity_process(&identity);
        let span = Span {
            from,
            to,
            class: "leading",
            colour: Some(palette.of(process)),
            text: String::new(),
            detail: format!(
                "{identity} acted as leader of {lease} from {} {how}",
                fmt_ms(from)
            ),
        };
        at(procs, process).lane.spans.push(span);
    }
    for e in events {
        let t = e.t_ms;
        match &e.kind {
            EventKind::ProcessStarted {
                process,
                incarnation,
            } => {
                let p = at(&mut procs, process);
                if let Some((since, reason)) = p.down.take() {
                    let detail = format!("down from {} to {}: {reason}", fmt_ms(since), fmt_ms(t));
                    p.lane.span(since, t, "down", String::new(), detail);
                }
                let detail = format!("start #{incarnation} at {}", fmt_ms(t));
                p.lane.mark(t, "start", detail);
                p.up = Some((t, *incarnation));
            }
            EventKind::ApiServerServing {
                process,
                incarnation,
            } if t > 0 => {
                let detail = format!(
                    "start #{incarnation} served again (/readyz/etcd ok) at {}",
                    fmt_ms(t)
                );
                at(&mut procs, process).lane.mark(t, "serving", detail);
            }
            EventKind::ProcessExited { process, reason } => {
                let p = at(&mut procs, process);
                if let Some((since, n)) = p.up.take() {
                    let detail = format!(
                        "running (start #{n}) from {} to {}",
                        fmt_ms(since),
                        fmt_ms(t)
                    );
                    p.lane.span(since, t, "up", format!("#{n}"), detail);
                }
                p.lane.mark(t, "exit", format!("{reason} at {}", fmt_ms(t)));
                p.down = Some((t, reason.clone()));
                // A process that exits stops leading, whether or not it said so.
                let ended: Vec<(String, String)> = leading
                    .keys()
                    .filter(|(_, id)| identity_process(id) == process)
                    .cloned()
                    .collect();
                for key in ended {
                    let since = leading.remove(&key).expect("listed");
                    let how = format!("until it exited at {}", fmt_ms(t));
                    led(&mut procs, palette, key, (since, t), how);
                }
            }
            EventKind::LeadingStarted { lease, identity } => {
                leading.insert((lease.clone(), identity.clone()), t);
            }
            EventKind::LeadingStopped {
                lease,
                identity,
                reason,
            } => {
                let key = (lease.clone(), identity.clone());
                if let Some(since) = leading.remove(&key) {
                    let how = format!("to {} (stopped: {reason})", fmt_ms(t));
                    led(&mut procs, palette, key, (since, t), how);
                }
            }
            EventKind::ProcessNote { process, message } => {
                notes.push((t, process.clone(), message.clone()));
            }
            EventKind::ApiReach { reached, error } => {
                notes.push((
                    t,
                    "kubechaos".into(),
                    crate::events::api_reach_text(*reached, error.as_deref()),
                ));
            }
            EventKind::LeasesRelisted { since_ms, leases } => {
                notes.push((
                    t,
                    "kubechaos".into(),
                    crate::events::leases_relisted_text(*since_ms, leases.as_deref()),
                ));
            }
            EventKind::ReportRejected {
                process,
                error,
                line,
            } => {
                notes.push((
                    t,
                    process.clone(),
                    format!("a report that cannot be read ({error}), not judged: {line}"),
                ));
            }
            _ => {}
        }
    }
    for (key, since) in leading {
        led(
            &mut procs,
            palette,
            key,
            (since, end_ms),
            "to the end".into(),
        );
    }
    for (t, process, message) in notes {
        let detail = format!("{process} at {}: {message}", fmt_ms(t));
        at(&mut procs, &process).lane.mark(t, "note", detail);
    }
    procs
        .into_iter()
        .map(|mut p| {
            if let Some((since, n)) = p.up {
                let detail = format!("running (start #{n}) from {} to the end", fmt_ms(since));
                p.lane.span(since, end_ms, "up", format!("#{n}"), detail);
            }
            if let Some((since, reason)) = p.down {
                let detail = format!("down from {} to the end: {reason}", fmt_ms(since));
                p.lane.span(since, end_ms, "down", String::new(), detail);
            }
            // Leading bars are drawn over the process's own bars.
            p.lane.spans.sort_by_key(|s| (s.class == "leading", s.from));
            p.lane
        })
        .collect()
}

/// Lanes of a state that events of one kind set, one lane per key (a node's readiness, a
/// Deployment's availability): a span from each change to the next, the last to the end.
fn state_lanes<S>(
    events: &[Event],
    end_ms: u64,
    prefix: &str,
    state_of: impl Fn(&EventKind) -> Option<(&String, S)>,
    draw: impl Fn(&mut Lane, u64, u64, &S),
) -> Vec<Lane> {
    struct Open<S> {
        lane: Lane,
        since: u64,
        state: S,
    }
    let mut lanes: BTreeMap<String, Open<S>> = BTreeMap::new();
    for e in events {
        let Some((key, state)) = state_of(&e.kind) else {
            continue;
        };
        match lanes.get_mut(key) {
            Some(open) => {
                draw(&mut open.lane, open.since, e.t_ms, &open.state);
                open.since = e.t_ms;
                open.state = state;
            }
            None => {
                let lane = Lane::new(format!("{prefix}:{key}"), key.clone());
                lanes.insert(
                    key.clone(),
                    Open {
                        lane,
                        since: e.t_ms,
                        state,
                    },
                );
            }
        }
    }
    lanes
        .into_values()
        .map(|mut open| {
            draw(&mut open.lane, open.since, end_ms, &open.state);
            open.lane
        })
        .collect()
}

/// A lane per node: Ready, not Ready, tainted.
fn node_lanes(events: &[Event], end_ms: u64) -> Vec<Lane> {
    state_lanes(
        events,
        end_ms,
        "node",
        |k| match k {
            EventKind::NodeObserved {
                node,
                ready,
                tainted,
            } => Some((node, (*ready, *tainted))),
            _ => None,
        },
        |lane, from, to, (ready, tainted)| {
            let what = match (ready, tainted) {
                (true, false) => "Ready",
                (true, true) => "Ready, tainted",
                (false, false) => "not Ready",
                (false, true) => "not Ready, tainted",
            };
            let class = if *ready && !tainted {
                "ready"
            } else {
                "not-ready"
            };
            let detail = format!("{what} from {} to {}", fmt_ms(from), fmt_ms(to));
            lane.span(from, to, class, what.into(), detail);
        },
    )
}

/// A lane per probe pod (and any other pod the observer saw bound): pending from its creation
/// to its binding, then bound.
fn pod_lanes(events: &[Event], end_ms: u64) -> Vec<Lane> {
    /// A pod as seen: created (by kubechaos, for an invariant), bound (to a node).
    struct Seen {
        pod: String,
        created: Option<(u64, usize)>,
        bound: Option<(u64, String)>,
    }
    let mut pods: Vec<Seen> = Vec::new();
    let mut seen = |pod: &String| -> usize {
        match pods.iter().position(|s| s.pod == *pod) {
            Some(i) => i,
            None => {
                pods.push(Seen {
                    pod: pod.clone(),
                    created: None,
                    bound: None,
                });
                pods.len() - 1
            }
        }
    };
    let mut changes: Vec<(usize, u64, &EventKind)> = Vec::new();
    for e in events {
        if let EventKind::ProbeCreated { pod, .. } | EventKind::PodBound { pod, .. } = &e.kind {
            changes.push((seen(pod), e.t_ms, &e.kind));
        }
    }
    for (i, t, kind) in changes {
        match kind {
            EventKind::ProbeCreated { invariant, .. } => pods[i].created = Some((t, *invariant)),
            EventKind::PodBound { node, .. } if pods[i].bound.is_none() => {
                pods[i].bound = Some((t, node.clone()))
            }
            _ => {}
        }
    }
    pods.into_iter()
        .map(
            |Seen {
                 pod,
                 created,
                 bound,
             }| {
                let mut lane = Lane::new(format!("pod:{pod}"), pod.clone());
                // The observer can see a pod bound before kubechaos records having created it
                // (the scheduler answered within the create's round trip): bound no earlier than
                // created.
                let bound = match (&created, bound) {
                    (Some((t, _)), Some((b, node))) => Some((b.max(*t), node)),
                    (_, bound) => bound,
                };
                if let Some((t, inv)) = created {
                    lane.mark(
                        t,
                        "start",
                        format!("created at {} (probe of invariant {inv})", fmt_ms(t)),
                    );
                    let until = bound.as_ref().map(|(b, _)| *b).unwrap_or(end_ms);
                    lane.span(
                        t,
                        until,
                        "pending",
                        "pending".into(),
                        match &bound {
                            Some((b, _)) => format!(
                                "pending from {} to {} ({} unbound)",
                                fmt_ms(t),
                                fmt_ms(*b),
                                fmt_ms(b - t)
                            ),
                            None => format!("pending from {} and never bound", fmt_ms(t)),
                        },
                    );
                }
                if let Some((b, node)) = bound {
                    lane.mark(b, "bound", format!("bound to {node} at {}", fmt_ms(b)));
                    lane.span(
                        b,
                        end_ms,
                        "bound",
                        format!("on {node}"),
                        format!("bound to {node} from {}", fmt_ms(b)),
                    );
                }
                lane
            },
        )
        .collect()
}

/// A lane per Deployment: available or not, with the counts.
fn deployment_lanes(events: &[Event], end_ms: u64) -> Vec<Lane> {
    state_lanes(
        events,
        end_ms,
        "deployment",
        |k| match k {
            EventKind::DeploymentObserved {
                deployment,
                available,
                desired,
                ..
            } => Some((deployment, (*available, *desired))),
            _ => None,
        },
        |lane, from, to, (available, desired)| {
            let class = if available >= desired && *desired > 0 {
                "available"
            } else {
                "unavailable"
            };
            let detail = format!(
                "{available} of {desired} replicas available from {} to {}",
                fmt_ms(from),
                fmt_ms(to)
            );
            lane.span(from, to, class, format!("{available}/{desired}"), detail);
        },
    )
}

/// Held, violated and cannot-tell counts (none when nothing was judged), and the text of each
/// invariant that did not hold.
type Verdicts = (Option<(usize, usize, usize)>, Vec<String>);

/// A lane per invariant: its window from the anchor to the deadline, coloured by the verdict,
/// with the verdict's text; the counts and the violations for the page's top.
fn invariant_lanes(events: &[Event], end_ms: u64) -> (Vec<Lane>, Verdicts) {
    let mut lanes = Vec::new();
    let mut violations = Vec::new();
    let (mut held_n, mut violated_n, mut unknown_n) = (0, 0, 0);
    for e in events {
        let EventKind::InvariantJudged {
            invariant,
            label,
            held,
            cannot_tell,
            message,
            anchor_ms,
            deadline_ms,
            violated_from_ms,
            violated_to_ms,
        } = &e.kind
        else {
            continue;
        };
        let verdict = crate::invariants::verdict_word(*held, *cannot_tell);
        // The class of its span: a verdict the evidence could not give is no violation.
        let class = match (*held, *cannot_tell) {
            (true, _) => "held",
            (false, true) => "cannot-tell",
            (false, false) => "violated",
        };
        // Two invariants of one Lease (one per outage, say) differ by their windows: the label
        // says where each opens.
        let shown = match anchor_ms {
            Some(a) => format!("{label} from {}", fmt_ms(*a)),
            None => label.clone(),
        };
        let mut lane = Lane::new(format!("invariant:{invariant}"), shown);
        let (from, to) = (anchor_ms.unwrap_or(0), deadline_ms.unwrap_or(end_ms));
        match (violated_from_ms, violated_to_ms) {
            // Judged over the whole run, violated there: the run as its window, the violation
            // where it happened.
            (Some(vf), Some(vt)) => {
                lane.span(
                    from,
                    to,
                    "window",
                    String::new(),
                    format!("{label}: judged over the whole run"),
                );
                lane.span(
                    *vf,
                    (*vt).max(*vf + 1),
                    class,
                    verdict.into(),
                    format!(
                        "{verdict} {label} from {} to {}: {message}",
                        fmt_ms(*vf),
                        fmt_ms(*vt)
                    ),
                );
            }
            _ => lane.span(
                from,
                to,
                class,
                verdict.into(),
                format!("{verdict} {label}: {message}"),
            ),
        }
        if let Some(a) = anchor_ms {
            lane.mark(*a, "anchor", format!("anchor at {}", fmt_ms(*a)));
        }
        if let Some(d) = deadline_ms {
            lane.mark(*d, "deadline", format!("deadline at {}", fmt_ms(*d)));
        }
        if *held {
            held_n += 1;
        } else if *cannot_tell {
            unknown_n += 1;
            violations.push(format!("{label} (cannot tell): {message}"));
        } else {
            violated_n += 1;
            violations.push(format!("{label}: {message}"));
        }
        lanes.push(lane);
    }
    let counts = (!lanes.is_empty()).then_some((held_n, violated_n, unknown_n));
    (lanes, (counts, violations))
}

const CSS: &str = include_str!("report.css");
const JS: &str = include_str!("report.js");

/// Render a run as one self-contained HTML page.
pub fn render(events: &[Event]) -> Result<String, ModelError> {
    let m = model(events)?;
    let data = serde_json::to_string(&m).expect("the model serializes");
    // Inside <script>, `</` could end the element early.
    let data = data.replace("</", "<\\/").replace("<!--", "<\\!--");
    let title = format!(
        "kubechaos: {} on {}{}",
        m.scenario,
        m.backend,
        match (m.interrupted_ms, m.verdicts) {
            (Some(_), _) => " — interrupted".to_owned(),
            (None, Some((_, 0, 0))) => " — held".to_owned(),
            (None, Some((_, v, 0))) => format!(" — {v} violated"),
            (None, Some((_, 0, c))) => format!(" — {c} cannot tell"),
            (None, Some((_, v, c))) => format!(" — {v} violated, {c} cannot tell"),
            (None, None) => String::new(),
        }
    );
    Ok(format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kubechaos {version}">
<title>{title}</title>
<script>
// Installed first, so that an error anywhere in the page is shown on it (and a test sees it).
window.addEventListener("error", function (e) {{
  var root = document.documentElement;
  root.setAttribute("data-errors", (root.getAttribute("data-errors") || "") + e.message + "\n");
}});
</script>
<style>
{CSS}</style>
</head>
<body>
<header id="head"><noscript>This report draws its timeline with JavaScript.</noscript></header>
<section id="violations"></section>
<div id="legend"></div>
<div id="toolbar"></div>
<div id="chart"></div>
<aside id="details" aria-live="polite"></aside>
<div id="tip" role="tooltip"></div>
<script type="application/json" id="kubechaos-data">{data}</script>
<script>
{JS}</script>
</body>
</html>
"#,
        version = env!("CARGO_PKG_VERSION"),
        title = escape(&title),
    ))
}

/// Escape text for HTML.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_ms: u64, kind: EventKind) -> Event {
        Event::new(t_ms, kind)
    }

    fn started() -> Event {
        ev(
            0,
            EventKind::RunStarted {
                scenario: "t".into(),
                backend: "sim".into(),
                seed: 1,
                version: "0".into(),
                duration_ms: 60_000,
            },
        )
    }

    fn lease(t: u64, holder: &str, renew: u64) -> Event {
        ev(
            t,
            EventKind::LeaseObserved {
                lease: "ns/l".into(),
                holder: Some(holder.into()),
                renew_ms: Some(renew),
                transitions: 0,
                duration_ms: Some(10_000),
                written_ms: None,
            },
        )
    }

    /// Process `p` starts its `n`th time.
    fn start(t: u64, n: u32) -> Event {
        ev(
            t,
            EventKind::ProcessStarted {
                process: "p".into(),
                incarnation: n,
            },
        )
    }

    /// Process `p` is killed.
    fn killed(t: u64) -> Event {
        ev(
            t,
            EventKind::ProcessExited {
                process: "p".into(),
                reason: "killed".into(),
            },
        )
    }

    fn lane<'a>(m: &'a Model, id: &str) -> &'a Lane {
        m.groups
            .iter()
            .flat_map(|g| &g.lanes)
            .find(|l| l.id == id)
            .unwrap_or_else(|| panic!("no lane {id}"))
    }

    fn spans(l: &Lane) -> Vec<(u64, u64, &'static str)> {
        l.spans.iter().map(|s| (s.from, s.to, s.class)).collect()
    }

    #[test]
    fn a_lease_that_is_not_renewed_expires_until_the_next_holder() {
        let events = vec![
            started(),
            lease(1_000, "a_1", 1_000),
            lease(3_000, "a_1", 3_000),
            lease(30_000, "b_1", 30_000),
            lease(32_000, "b_1", 32_000),
        ];
        let m = model(&events).unwrap();
        let l = lane(&m, "lease:ns/l");
        assert_eq!(
            spans(l),
            vec![
                (1_000, 13_000, "holder"),
                (13_000, 30_000, "expired"),
                (30_000, 42_000, "holder"),
                (42_000, 60_000, "expired"),
            ],
            "{l:?}"
        );
        let expiries: Vec<u64> = l
            .marks
            .iter()
            .filter(|m| m.class == "expiry")
            .map(|m| m.at)
            .collect();
        // b last renewed at 32s: by the end (60s) its lease had expired too, at 42s.
        assert_eq!(expiries, vec![13_000, 42_000]);
        let renewals = l.marks.iter().filter(|m| m.class == "renew").count();
        assert_eq!(renewals, 2);
        assert_ne!(l.spans[0].colour, l.spans[2].colour);
    }

    /// A renewal the API server took late (its `managedFields` time after its `renewTime`)
    /// keeps the Lease valid from when it was taken, as the verdicts count it: the drawing does
    /// not show an expiry that `valid-lease-while-leading` did not see.
    #[test]
    fn a_renewal_taken_late_expires_from_when_it_was_taken() {
        let mut late = lease(8_000, "a_1", 3_000);
        if let EventKind::LeaseObserved { written_ms, .. } = &mut late.kind {
            *written_ms = Some(7_000);
        }
        let events = vec![started(), lease(1_000, "a_1", 1_000), late];
        let m = model(&events).unwrap();
        let l = lane(&m, "lease:ns/l");
        assert_eq!(
            spans(l),
            vec![(1_000, 17_000, "holder"), (17_000, 60_000, "expired")],
            "{l:?}"
        );
        let expiry = l.marks.iter().find(|m| m.class == "expiry").unwrap();
        assert!(
            expiry.detail.contains("last renewed at 3.0s (taken by the API server at 7.0s) and did not renew within 10.0s"),
            "{}",
            expiry.detail
        );
    }

    #[test]
    fn a_step_with_a_for_is_a_span_and_an_instant_one_a_mark() {
        let fault = |t, step, undo| {
            ev(
                t,
                EventKind::FaultApplied {
                    step,
                    id: None,
                    action: format!("step{step}"),
                    undo,
                    detail: "x".into(),
                    links: Vec::new(),
                },
            )
        };
        let events = vec![
            started(),
            fault(5_000, 0, false),
            fault(20_000, 1, false),
            fault(25_000, 0, true),
        ];
        let m = model(&events).unwrap();
        assert_eq!(spans(lane(&m, "fault:0")), vec![(5_000, 25_000, "fault")]);
        assert!(lane(&m, "fault:1").spans.is_empty());
        assert_eq!(lane(&m, "fault:1").marks.len(), 1);
    }

    #[test]
    fn processes_are_up_between_start_and_exit() {
        let events = vec![started(), start(0, 1), killed(10_000), start(15_000, 2)];
        let m = model(&events).unwrap();
        assert_eq!(
            spans(lane(&m, "process:p")),
            vec![
                (0, 10_000, "up"),
                (10_000, 15_000, "down"),
                (15_000, 60_000, "up")
            ]
        );
    }

    /// Found by the real tier: on the local control plane the observer saw a probe bound before
    /// kubechaos recorded creating it, and building the page panicked on the negative wait.
    #[test]
    fn a_probe_seen_bound_before_its_creation_was_recorded_is_bound_at_creation() {
        let events = vec![
            started(),
            ev(
                9_990,
                EventKind::PodBound {
                    pod: "kubechaos/probe-1".into(),
                    node: "node-0".into(),
                },
            ),
            ev(
                10_000,
                EventKind::ProbeCreated {
                    invariant: 0,
                    pod: "kubechaos/probe-1".into(),
                },
            ),
        ];
        let m = model(&events).unwrap();
        assert_eq!(
            spans(lane(&m, "pod:kubechaos/probe-1")),
            vec![(10_000, 10_000, "pending"), (10_000, 60_000, "bound")]
        );
    }

    #[test]
    fn leading_ends_when_the_process_exits() {
        let events = vec![
            started(),
            start(0, 1),
            ev(
                1_000,
                EventKind::LeadingStarted {
                    lease: "ns/l".into(),
                    identity: "p_1".into(),
                },
            ),
            killed(10_000),
        ];
        let m = model(&events).unwrap();
        let leading: Vec<_> = spans(lane(&m, "process:p"))
            .into_iter()
            .filter(|s| s.2 == "leading")
            .collect();
        assert_eq!(leading, vec![(1_000, 10_000, "leading")]);
    }

    #[test]
    fn verdicts_and_violations_come_from_the_events() {
        let events = vec![
            started(),
            ev(
                60_000,
                EventKind::InvariantJudged {
                    invariant: 0,
                    label: "schedulable".into(),
                    held: false,
                    cannot_tell: false,
                    message: "never bound".into(),
                    anchor_ms: Some(10_000),
                    deadline_ms: Some(40_000),
                    violated_from_ms: None,
                    violated_to_ms: None,
                },
            ),
        ];
        let m = model(&events).unwrap();
        assert_eq!(m.verdicts, Some((0, 1, 0)));
        assert_eq!(m.violations, vec!["schedulable: never bound".to_owned()]);
        assert_eq!(
            spans(lane(&m, "invariant:0")),
            vec![(10_000, 40_000, "violated")]
        );
        assert_eq!(model(&events[..1]).unwrap().verdicts, None);
        assert_eq!(model(&[]).unwrap_err(), ModelError::NoRunStarted);
    }

    /// An invariant the evidence could not judge (CANNOT TELL) is counted and drawn as that,
    /// never as a violation: the page's title and counts say so.
    #[test]
    fn a_verdict_that_cannot_be_told_is_no_violation() {
        let judged = |invariant, held, cannot_tell, message: &str| {
            ev(
                60_000,
                EventKind::InvariantJudged {
                    invariant,
                    label: format!("inv{invariant}"),
                    held,
                    cannot_tell,
                    message: message.into(),
                    anchor_ms: Some(10_000),
                    deadline_ms: Some(40_000),
                    violated_from_ms: None,
                    violated_to_ms: None,
                },
            )
        };
        let events = vec![
            started(),
            judged(0, true, false, "held"),
            judged(1, false, true, "no evidence"),
        ];
        let m = model(&events).unwrap();
        assert_eq!(m.verdicts, Some((1, 0, 1)));
        assert_eq!(
            m.violations,
            vec!["inv1 (cannot tell): no evidence".to_owned()]
        );
        assert_eq!(
            spans(lane(&m, "invariant:1")),
            vec![(10_000, 40_000, "cannot-tell")]
        );
        let page = render(&events).unwrap();
        assert!(page.contains(" — 1 cannot tell</title>"), "{page}");
        let mut both = events.clone();
        both.push(judged(2, false, false, "never bound"));
        assert!(render(&both)
            .unwrap()
            .contains(" — 1 violated, 1 cannot tell</title>"));
    }

    /// A violation of an invariant judged over the whole run is drawn where it happened (the
    /// overlap of two leaders), not over the whole run.
    #[test]
    fn a_whole_run_violation_is_drawn_where_it_happened() {
        let events = vec![
            started(),
            ev(
                60_000,
                EventKind::InvariantJudged {
                    invariant: 0,
                    label: "single-leader default/lock".into(),
                    held: false,
                    cannot_tell: false,
                    message: "two candidates acted as leader at once".into(),
                    anchor_ms: None,
                    deadline_ms: None,
                    violated_from_ms: Some(20_000),
                    violated_to_ms: Some(20_011),
                },
            ),
        ];
        let m = model(&events).unwrap();
        assert_eq!(
            spans(lane(&m, "invariant:0")),
            vec![(0, 60_000, "window"), (20_000, 20_011, "violated")]
        );
        // Every class drawn has a style of its own (the window once had none and was drawn
        // black over the whole run).
        let css = include_str!("report.css");
        for s in &lane(&m, "invariant:0").spans {
            assert!(
                css.contains(&format!("svg .span.{} {{", s.class)),
                "no style for spans of class {}",
                s.class
            );
        }
    }

    /// Two invariants of one Lease, one per outage: their lanes say where each window opens, so
    /// that the column's cut (start and end kept) still tells them apart.
    #[test]
    fn two_invariants_of_one_lease_are_told_apart_by_their_windows() {
        let judged = |invariant: usize, anchor: u64| {
            ev(
                90_000,
                EventKind::InvariantJudged {
                    invariant,
                    label: "leader-reacquired client-go-agent/client-go-agent-lock".into(),
                    held: true,
                    cannot_tell: false,
                    message: "held".into(),
                    anchor_ms: Some(anchor),
                    deadline_ms: Some(anchor + 30_000),
                    violated_from_ms: None,
                    violated_to_ms: None,
                },
            )
        };
        let m = model(&[started(), judged(0, 40_000), judged(1, 80_000)]).unwrap();
        assert_eq!(
            lane(&m, "invariant:0").label,
            "leader-reacquired client-go-agent/client-go-agent-lock from 40.0s"
        );
        assert_eq!(
            lane(&m, "invariant:1").label,
            "leader-reacquired client-go-agent/client-go-agent-lock from 1m20.0s"
        );
    }

    #[test]
    fn an_interrupted_run_says_so() {
        let events = vec![
            started(),
            ev(20_000, EventKind::RunInterrupted {}),
            ev(20_000, EventKind::RunEnded {}),
        ];
        let m = model(&events).unwrap();
        assert_eq!((m.interrupted_ms, m.verdicts), (Some(20_000), None));
        // The axis ends there, not at the planned end.
        assert_eq!(m.end_ms, 20_000);
        assert!(render(&events)
            .unwrap()
            .contains("<title>kubechaos: t on sim — interrupted</title>"));
    }

    #[test]
    fn the_page_needs_no_network() {
        let page = render(&[started()]).unwrap();
        // The one URL is SVG's namespace, a name and not a place the page loads from.
        let urls: Vec<&str> = page
            .match_indices("http")
            .map(|(i, _)| &page[i..(i + 26).min(page.len())])
            .collect();
        assert_eq!(urls, vec!["http://www.w3.org/2000/svg"], "{urls:?}");
        for external in ["src=", "href=", "@import", "url(http"] {
            assert!(!page.contains(external), "{external}");
        }
    }

    #[test]
    fn text_from_the_cluster_cannot_end_the_data_script() {
        let events = vec![
            started(),
            ev(
                1,
                EventKind::ProcessNote {
                    process: "p".into(),
                    message: "</script><script>alert(1)</script><!--".into(),
                },
            ),
        ];
        let page = render(&events).unwrap();
        assert_eq!(page.matches("</script>").count(), 3, "{page}");
        assert!(!page.contains("<!--"));
    }
}
