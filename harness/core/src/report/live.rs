//! The live view of a real-time run (local, kube): while the plan plays, where the run is (the
//! current step, the time to the next fault), who holds each lease (or how long ago it expired),
//! and a countdown on each invariant's window. On a terminal it is a block of lines redrawn in
//! place under the run's messages; when the output is not a terminal, or in CI, it degrades to a
//! plain status line every 30 seconds between the messages.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use crate::events::{fmt_ms, identity_process, Event, EventKind};
use crate::invariants::{self, judge, Watch};
use crate::plan::{Plan, PlannedKind};
use crate::scenario::Scenario;

/// Where a real-time run is.
pub struct Status<'a> {
    /// Time since the run's time zero.
    pub now: Duration,
    /// The scenario.
    pub scenario: &'a Scenario,
    /// Its plan.
    pub plan: &'a Plan,
    /// How many of the plan's actions were applied.
    pub applied: usize,
    /// The timeline so far.
    pub events: &'a [Event],
}

/// What a run tells the person who started it.
pub trait Progress {
    /// A message: set-up, each step as it is applied, restore.
    fn say(&mut self, line: &str);
    /// Where the run is, about twice a second while the plan plays; `None` once it is over.
    fn status(&mut self, _status: Option<&Status<'_>>) {}
}

/// Any `FnMut(&str)` takes the messages and ignores the status.
impl<F: FnMut(&str)> Progress for F {
    fn say(&mut self, line: &str) {
        self(line)
    }
}

/// One invariant's state in the live view.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Window {
    /// Its window opens later.
    Waiting {
        /// When it opens.
        opens_ms: u64,
    },
    /// Its window is open and not yet decided.
    Open {
        /// When it closes.
        deadline_ms: u64,
    },
    /// It holds so far, and holds only if it still does when it is no longer watched
    /// (`unschedulable` until its deadline, `single-leader` until the run ends).
    Holding {
        /// When it is no longer watched.
        until_ms: u64,
    },
    /// Decided: held or violated, with the verdict's text.
    Decided {
        /// Whether it held.
        held: bool,
        /// The verdict's text.
        message: String,
    },
}

/// The live view's facts, without layout.
#[derive(Debug, PartialEq, Eq)]
pub struct View {
    /// Now, ms.
    pub(crate) now_ms: u64,
    /// The run's planned length, ms.
    pub(crate) total_ms: u64,
    /// The last action applied (its text and time), if any.
    pub(crate) current: Option<(String, u64)>,
    /// The next action (its text and time), if any.
    pub(crate) next: Option<(String, u64)>,
    /// Each lease: its holder's process and how long ago it renewed, or why nobody holds it.
    pub(crate) leases: Vec<(String, String)>,
    /// Each invariant: its label and state.
    pub(crate) invariants: Vec<(String, Window)>,
}

fn action_text(s: &Scenario, kind: &PlannedKind) -> String {
    match kind {
        PlannedKind::Fault { step } => s.faults[*step].action.to_string(),
        PlannedKind::Undo { step } => format!("undo `{}`", s.faults[*step].action),
        PlannedKind::Probe { invariant } => {
            format!("probe pod for `{}`", s.expect[*invariant].value.label())
        }
    }
}

/// Work out the view from the status.
pub fn view(st: &Status<'_>) -> View {
    let s = st.scenario;
    let now_ms = st.now.as_millis() as u64;
    let applied = st.applied.min(st.plan.actions.len());
    let current = applied
        .checked_sub(1)
        .map(|i| &st.plan.actions[i])
        .map(|a| (action_text(s, &a.kind), a.at.as_millis() as u64));
    let next = st
        .plan
        .actions
        .get(applied)
        .map(|a| (action_text(s, &a.kind), a.at.as_millis() as u64));

    // Leases: the scenario's, then any other the observer reported; each as last observed.
    let mut last: BTreeMap<String, Option<&EventKind>> =
        s.leases().keys().map(|l| (l.to_string(), None)).collect();
    for e in st.events {
        if let EventKind::LeaseObserved { lease, .. } = &e.kind {
            last.insert(lease.clone(), Some(&e.kind));
        }
    }
    let leases = last
        .into_iter()
        .map(|(lease, seen)| {
            let text = match seen {
                Some(EventKind::LeaseObserved {
                    holder: Some(h),
                    renew_ms,
                    duration_ms,
                    ..
                }) => {
                    let who = identity_process(h);
                    match renew_ms {
                        Some(r) => {
                            let ago = now_ms.saturating_sub(*r);
                            match duration_ms {
                                Some(d) if ago > *d => format!(
                                    "expired {} ago (last holder {who}, renewed at {})",
                                    fmt_ms(ago - d),
                                    fmt_ms(*r)
                                ),
                                _ => format!("{who}, renewed {} ago", fmt_ms(ago)),
                            }
                        }
                        None => who.to_owned(),
                    }
                }
                Some(_) => "no holder".to_owned(),
                None => "not observed yet".to_owned(),
            };
            (lease, text)
        })
        .collect();

    // Invariants: judged on the timeline so far once their window has opened (the anchor is an
    // action's time, so every action up to it has been applied by then).
    let verdicts = judge(s, st.events);
    let invariants = s
        .expect
        .iter()
        .zip(verdicts)
        .map(|(inv, v)| {
            let label = inv.value.label();
            let opens = s.planned_anchor(&inv.value).as_millis() as u64;
            let deadline = opens + inv.value.window().as_millis() as u64;
            let watch = invariants::watch(&inv.value);
            let window = match watch {
                // Decided by a violation; holds so far until the run ends (no term reported
                // yet is no evidence only once the run has ended).
                Watch::WholeRun if v.held || v.no_evidence || v.cannot_tell => Window::Holding {
                    until_ms: st.plan.duration.as_millis() as u64,
                },
                Watch::WholeRun => Window::Decided {
                    held: false,
                    message: v.message,
                },
                _ if now_ms < opens || st.applied < anchor_applied(st.plan, opens) => {
                    Window::Waiting { opens_ms: opens }
                }
                // Holds only if nothing happens for the whole window.
                Watch::WholeWindow if now_ms < deadline && v.held => Window::Open {
                    deadline_ms: deadline,
                },
                _ if v.held || now_ms >= deadline => Window::Decided {
                    held: v.held,
                    message: v.message,
                },
                Watch::UntilHeld | Watch::WholeWindow => Window::Open {
                    deadline_ms: deadline,
                },
            };
            (label, window)
        })
        .collect();
    View {
        now_ms,
        total_ms: st.plan.duration.as_millis() as u64,
        current,
        next,
        leases,
        invariants,
    }
}

/// How many actions are due at or before `t`.
fn anchor_applied(plan: &Plan, t: u64) -> usize {
    plan.actions
        .iter()
        .take_while(|a| a.at.as_millis() as u64 <= t)
        .count()
}

impl View {
    fn window_text(&self, w: &Window) -> String {
        match w {
            Window::Waiting { opens_ms } => format!(
                "opens in {} (at {})",
                fmt_ms(opens_ms.saturating_sub(self.now_ms)),
                fmt_ms(*opens_ms)
            ),
            Window::Open { deadline_ms } => format!(
                "open, {} left (deadline {})",
                fmt_ms(deadline_ms.saturating_sub(self.now_ms)),
                fmt_ms(*deadline_ms)
            ),
            Window::Holding { until_ms } => format!(
                "holding so far, watched {} more (until {})",
                fmt_ms(until_ms.saturating_sub(self.now_ms)),
                fmt_ms(*until_ms)
            ),
            Window::Decided { held, message } => {
                format!("{} {message}", if *held { "PASS" } else { "FAIL" })
            }
        }
    }

    fn next_text(&self) -> String {
        match &self.next {
            Some((what, at)) => format!(
                "next: {what} in {} (at {})",
                fmt_ms(at.saturating_sub(self.now_ms)),
                fmt_ms(*at)
            ),
            None => format!(
                "next: nothing; the run ends in {}",
                fmt_ms(self.total_ms.saturating_sub(self.now_ms))
            ),
        }
    }

    /// The block drawn on a terminal, a line each.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "t={} of {}  {}  {}",
            fmt_ms(self.now_ms),
            fmt_ms(self.total_ms),
            bar(self.now_ms, self.total_ms, 20),
            match &self.current {
                Some((what, at)) => format!("step: {what} (at {})", fmt_ms(*at)),
                None => "no step yet".to_owned(),
            }
        )];
        out.push(format!("  {}", self.next_text()));
        let width = self
            .leases
            .iter()
            .map(|(l, _)| l.len())
            .chain(self.invariants.iter().map(|(l, _)| l.len()))
            .max()
            .unwrap_or(0);
        for (lease, text) in &self.leases {
            out.push(format!("  lease      {lease:<width$}  {text}"));
        }
        for (label, w) in &self.invariants {
            out.push(format!(
                "  invariant  {label:<width$}  {}",
                self.window_text(w)
            ));
        }
        out
    }

    /// The same in one line, for logs.
    pub(crate) fn line(&self) -> String {
        let mut parts = vec![
            format!("t={} of {}", fmt_ms(self.now_ms), fmt_ms(self.total_ms)),
            self.next_text(),
        ];
        for (lease, text) in &self.leases {
            parts.push(format!("{lease}: {text}"));
        }
        for (label, w) in &self.invariants {
            let text = match w {
                Window::Decided { held, .. } => if *held { "PASS" } else { "FAIL" }.to_owned(),
                other => self.window_text(other),
            };
            parts.push(format!("{label}: {text}"));
        }
        parts.join("; ")
    }
}

fn bar(now: u64, total: u64, width: usize) -> String {
    let done = (now.min(total) as usize * width)
        .checked_div(total as usize)
        .unwrap_or(width);
    format!("[{}{}]", "#".repeat(done), "-".repeat(width - done))
}

/// How often the plain view prints its status line.
pub(crate) const PLAIN_EVERY: Duration = Duration::from_secs(30);

/// The live view on a terminal's stream: redrawn in place, or plain lines.
pub struct Terminal {
    out: Box<dyn Write + Send>,
    /// Columns of the terminal, asked at each drawing (it may be resized).
    width: Box<dyn Fn() -> usize + Send>,
    indent: &'static str,
    live: bool,
    /// Lines of the block drawn last (live).
    drawn: Vec<String>,
    /// When the next plain status line is due.
    next_plain: Duration,
}

impl Terminal {
    /// The view on this process's standard error: live if it is a terminal, `TERM` is not
    /// `dumb` and `CI` is not set; plain otherwise. Messages are indented by `indent`.
    pub fn stderr(indent: &'static str) -> Terminal {
        use std::io::IsTerminal;
        let live = std::io::stderr().is_terminal()
            && std::env::var_os("CI").is_none()
            && std::env::var("TERM").map_or(true, |t| t != "dumb");
        let width = || {
            terminal_size::terminal_size_of(std::io::stderr())
                .map(|(w, _)| w.0 as usize)
                .unwrap_or(100)
        };
        Terminal::new(Box::new(std::io::stderr()), Box::new(width), live, indent)
    }

    /// The view on `out`, live (redrawn in place, `width` columns) or plain.
    pub(crate) fn new(
        out: Box<dyn Write + Send>,
        width: Box<dyn Fn() -> usize + Send>,
        live: bool,
        indent: &'static str,
    ) -> Terminal {
        Terminal {
            out,
            width,
            indent,
            live,
            drawn: Vec::new(),
            next_plain: PLAIN_EVERY,
        }
    }

    /// Remove the block drawn last.
    fn clear(&mut self) {
        if !self.drawn.is_empty() {
            // Up to the block's first line, then clear to the end of the screen.
            let _ = write!(self.out, "\r\x1b[{}A\x1b[J", self.drawn.len());
        }
    }

    fn draw(&mut self, lines: Vec<String>) {
        let width = (self.width)().max(20);
        for l in &lines {
            let l = format!("{}{l}", self.indent);
            // One screen line each, or the block could not be cleared.
            let cut: String = l.chars().take(width - 1).collect();
            let _ = writeln!(self.out, "\x1b[2m{cut}\x1b[0m");
        }
        self.drawn = lines;
    }
}

impl Progress for Terminal {
    fn say(&mut self, line: &str) {
        self.clear();
        let _ = writeln!(self.out, "{}{line}", self.indent);
        let block = std::mem::take(&mut self.drawn);
        if !block.is_empty() {
            self.draw(block);
        }
        let _ = self.out.flush();
    }

    fn status(&mut self, status: Option<&Status<'_>>) {
        match status {
            None => {
                self.clear();
                self.drawn.clear();
                // The next run (of a suite) starts its own count.
                self.next_plain = PLAIN_EVERY;
            }
            Some(st) if self.live => {
                let lines = view(st).lines();
                self.clear();
                self.draw(lines);
            }
            Some(st) => {
                if st.now >= self.next_plain {
                    let _ = writeln!(self.out, "{}{}", self.indent, view(st).line());
                    while self.next_plain <= st.now {
                        self.next_plain += PLAIN_EVERY;
                    }
                }
            }
        }
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const YAML: &str = "name: t\ncluster: {nodes: 1, components: {kube-scheduler: {replicas: 2}}}\nfaults:\n  - {at: 10s, api-server: stop, for: 30s}\nexpect:\n  - leader-reacquired: {lease: kube-system/kube-scheduler, within: 20s}\n  - single-leader: {lease: kube-system/kube-scheduler}\nduration: 1m30s\n";

    fn ev(t_ms: u64, kind: EventKind) -> Event {
        Event::new(t_ms, kind)
    }

    fn lease(t: u64, holder: &str, renew: u64) -> Event {
        ev(
            t,
            EventKind::LeaseObserved {
                lease: "kube-system/kube-scheduler".into(),
                holder: Some(holder.into()),
                renew_ms: Some(renew),
                transitions: 0,
                duration_ms: Some(15_000),
                written_ms: None,
            },
        )
    }

    fn fault(t: u64, undo: bool) -> Event {
        ev(
            t,
            EventKind::FaultApplied {
                step: 0,
                id: None,
                action: "api-server: stop".into(),
                undo,
                detail: "api-server".into(),
                links: Vec::new(),
            },
        )
    }

    #[test]
    fn the_view_counts_down_to_the_next_fault_and_the_deadline() {
        let s = crate::scenario::parse(Path::new("t.yaml"), YAML.as_bytes()).unwrap();
        let plan = Plan::new(&s);
        let started = ev(
            0,
            EventKind::ProcessStarted {
                process: "kube-scheduler-0".into(),
                incarnation: 1,
            },
        );

        // 5s in: nothing applied yet, the lease held.
        let events = vec![started.clone(), lease(1_000, "kube-scheduler-0_1", 4_000)];
        let st = Status {
            now: Duration::from_secs(5),
            scenario: &s,
            plan: &plan,
            applied: 0,
            events: &events,
        };
        let v = view(&st);
        assert_eq!(v.current, None);
        assert_eq!(v.next, Some(("api-server: stop".into(), 10_000)));
        assert_eq!(
            v.leases,
            vec![(
                "kube-system/kube-scheduler".into(),
                "kube-scheduler-0, renewed 1.0s ago".into()
            )]
        );
        assert_eq!(v.invariants[0].1, Window::Waiting { opens_ms: 40_000 });
        assert_eq!(v.invariants[1].1, Window::Holding { until_ms: 90_000 });
        assert!(v
            .line()
            .contains("next: api-server: stop in 5.0s (at 10.0s)"));

        // 45s in: the outage is over, the lease expired at 19s, the window open until 1m.
        let events = vec![
            started.clone(),
            lease(1_000, "kube-scheduler-0_1", 4_000),
            fault(10_000, false),
            fault(40_000, true),
        ];
        let st = Status {
            now: Duration::from_secs(45),
            applied: 2,
            events: &events,
            ..st
        };
        let v = view(&st);
        assert_eq!(v.current, Some(("undo `api-server: stop`".into(), 40_000)));
        assert!(v.leases[0].1.starts_with("expired 26.0s ago"), "{v:?}");
        assert_eq!(
            v.invariants[0].1,
            Window::Open {
                deadline_ms: 60_000
            }
        );
        let lines = v.lines();
        assert!(lines[0].starts_with("t=45.0s of 1m30.0s  [##########----------]"));
        assert!(lines.iter().any(
            |l| l.contains("leader-reacquired kube-system/kube-scheduler")
                && l.contains("open, 15.0s left (deadline 1m00.0s)")
        ));

        // 50s in: re-acquired, so decided.
        let mut events = events.clone();
        events.push(lease(48_000, "kube-scheduler-0_1", 48_000));
        let st = Status {
            now: Duration::from_secs(50),
            events: &events,
            ..st
        };
        let v = view(&st);
        assert!(
            matches!(&v.invariants[0].1, Window::Decided { held: true, .. }),
            "{v:?}"
        );
        assert!(v
            .line()
            .contains("leader-reacquired kube-system/kube-scheduler: PASS"));
    }

    /// A writer whose bytes the test can read afterwards.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn take(&self) -> String {
            String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
        }
    }

    /// Statuses at `seconds`, with the scenario of the test above and no events.
    fn statuses(term: &mut Terminal, seconds: &[u64]) {
        let s = crate::scenario::parse(Path::new("t.yaml"), YAML.as_bytes()).unwrap();
        let plan = Plan::new(&s);
        for &sec in seconds {
            term.status(Some(&Status {
                now: Duration::from_secs(sec),
                scenario: &s,
                plan: &plan,
                applied: 0,
                events: &[],
            }));
        }
    }

    #[test]
    fn on_a_terminal_the_block_is_redrawn_in_place_under_the_messages() {
        let out = Shared::default();
        let mut term = Terminal::new(Box::new(out.clone()), Box::new(|| 60), true, "  ");
        term.say("starting");
        assert_eq!(out.take(), "  starting\n");
        statuses(&mut term, &[1]);
        let first = out.take();
        let lines = first.lines().count();
        assert!(lines >= 5, "{first}");
        assert!(!first.contains("\x1b[J"), "nothing to clear yet: {first:?}");
        // Each line fits the terminal, so the block can be cleared by counting lines.
        for l in first.lines() {
            let visible = l.replace("\x1b[2m", "").replace("\x1b[0m", "");
            assert!(visible.chars().count() < 60, "{visible}");
        }
        // A message goes above the block, which is drawn again under it.
        term.say("t=10.0s: api-server: stop");
        let text = out.take();
        assert!(
            text.starts_with(&format!(
                "\r\x1b[{lines}A\x1b[J  t=10.0s: api-server: stop\n"
            )),
            "{text:?}"
        );
        assert_eq!(text.lines().count(), lines + 1);
        // The next status replaces the block; the end of the run removes it.
        statuses(&mut term, &[2]);
        assert!(out.take().starts_with(&format!("\r\x1b[{lines}A\x1b[J")));
        term.status(None);
        assert_eq!(out.take(), format!("\r\x1b[{lines}A\x1b[J"));
        term.say("restored");
        assert_eq!(out.take(), "  restored\n");
    }

    #[test]
    fn elsewhere_it_is_a_plain_line_every_30_seconds() {
        let out = Shared::default();
        let mut term = Terminal::new(Box::new(out.clone()), Box::new(|| 60), false, "  ");
        term.say("starting");
        statuses(&mut term, &[0, 1, 29]);
        assert_eq!(out.take(), "  starting\n");
        statuses(&mut term, &[30, 31, 59, 61]);
        let text = out.take();
        assert!(!text.contains('\x1b'), "{text:?}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("  t=30.0s of 1m30.0s; next: api-server: stop"));
        assert!(lines[1].starts_with("  t=1m01.0s of 1m30.0s"));
        // A suite's next run starts its own count.
        term.status(None);
        statuses(&mut term, &[1, 30]);
        assert_eq!(out.take().lines().count(), 1);
    }
}
