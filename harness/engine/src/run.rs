//! One run, end to end: scenario -> plan -> backend -> events -> invariants.
//!
//! The run skeleton is written once, here: [`play`] records the run's start, lets the backend
//! bring up its world (with the observer following it), carries the plan out through the shared
//! [`Driver`] at the world's time, records the end, and lets the backend stop and restore what it
//! touched. A [`Backend`] supplies only what differs: a recorder on its time, its [`World`] (the
//! primitive operations, and the clock: virtual steps or real ticks), what it can do, and its end.

use std::time::Instant;

use crate::backend::driver::{Driver, World};
use crate::backend::BackendError;
use kubechaos_core::events::{fmt_ms, Event, EventKind, Recorder};
pub(crate) use kubechaos_core::outcome::Outcome;
pub use kubechaos_core::plan::Plan;
use kubechaos_core::plan::PlannedKind;
use kubechaos_core::report::live::{Progress, Status};
use kubechaos_core::scenario::{Action, Pos, Scenario};

/// The seed used when none is given.
pub const DEFAULT_SEED: u64 = 1;

/// A world that is ready: time zero of the run is now.
pub(crate) struct Ready<W> {
    /// The world.
    pub(crate) world: W,
    /// The processes the driver supervises, all running.
    pub(crate) processes: Vec<String>,
}

/// What a backend supplies to the run skeleton.
pub(crate) trait Backend {
    /// Its world.
    type World: World;
    /// As `--backend` and the `run-started` event name it.
    fn name(&self) -> &'static str;
    /// The seed recorded in `run-started` for a run of `s` (0 where nothing is seeded).
    fn seed(&self, _s: &Scenario) -> u64 {
        0
    }
    /// What this backend cannot do with a scenario, with where the scenario asks for it; checked
    /// before anything runs.
    fn check(&self, s: &Scenario) -> Vec<(Pos, String)>;
    /// A recorder that stamps events with the run's time (zero until the world is ready).
    fn recorder(&mut self) -> Recorder;
    /// What `--dry-run` says the faults that are not API calls act through.
    fn via(&self) -> String;
    /// How this backend carries out a fault that is not an API call, and what undoes it
    /// (`--dry-run`).
    fn describe(&self, action: &Action) -> (String, String);
    /// Bring up (or reach) the world, with the observer following it. The run's time zero is
    /// when this returns. If it fails, it leaves nothing behind (`finish` is not called).
    fn start(
        &mut self,
        s: &Scenario,
        plan: &Plan,
        recorder: &Recorder,
        progress: &mut dyn Progress,
    ) -> Result<Ready<Self::World>, BackendError>;
    /// Once the timeline has ended (at `end`, run time): stop what was started, restore what was
    /// changed, and say so. Returns what was stopped and restored, for an interrupted run's
    /// message.
    fn finish(
        &mut self,
        world: Self::World,
        end: std::time::Duration,
        progress: &mut dyn Progress,
    ) -> Result<String, BackendError>;
}

/// Any backend, as a value chosen at run time (the command line's `--backend`).
pub trait Playable {
    /// As `--backend` names it.
    fn name(&self) -> &'static str;
    /// What it cannot do with a scenario.
    fn check(&self, s: &Scenario) -> Vec<(Pos, String)>;
    /// What `--dry-run` says the faults that are not API calls act through.
    fn via(&self) -> String;
    /// How it carries out a fault that is not an API call, and what undoes it.
    fn describe(&self, action: &Action) -> (String, String);
    /// Play a plan; the recorded timeline.
    fn play(
        &mut self,
        s: &Scenario,
        plan: &Plan,
        progress: &mut dyn Progress,
    ) -> Result<Vec<Event>, BackendError>;
}

impl<B: Backend> Playable for B {
    fn name(&self) -> &'static str {
        Backend::name(self)
    }

    fn check(&self, s: &Scenario) -> Vec<(Pos, String)> {
        Backend::check(self, s)
    }

    fn via(&self) -> String {
        Backend::via(self)
    }

    fn describe(&self, action: &Action) -> (String, String) {
        Backend::describe(self, action)
    }

    fn play(
        &mut self,
        s: &Scenario,
        plan: &Plan,
        progress: &mut dyn Progress,
    ) -> Result<Vec<Event>, BackendError> {
        play(self, s, plan, progress)
    }
}

/// The plan as `backend` would carry it out, touching nothing (`--dry-run`): each step, how, and
/// what undoes it.
pub fn dry_run(s: &Scenario, plan: &Plan, backend: &dyn Playable) -> String {
    let mut out = String::new();
    for a in &plan.actions {
        let at = fmt_ms(a.at.as_millis() as u64);
        match &a.kind {
            PlannedKind::Fault { step } => {
                let action = &s.faults[*step].action;
                let (how, undo) = match action {
                    Action::DeletePods(d) => (
                        format!(
                            "DELETE the pods in {} matching `{}`, wait until they are gone",
                            d.namespace, d.selector
                        ),
                        "nothing: their controllers replace them".to_owned(),
                    ),
                    Action::Recover(r) => (
                        format!(
                            "read {}, CREATE a pod from its template bound to {}",
                            r.pod_from, r.node
                        ),
                        if r.cleanup {
                            "its cleanup deletes it once the workload's pods are Ready".to_owned()
                        } else {
                            "nothing: it is left running (the run says so)".to_owned()
                        },
                    ),
                    Action::Bind(b) => (
                        format!("POST a Binding of {} to {}", b.pod, b.node),
                        "nothing".to_owned(),
                    ),
                    Action::ApiServer(_)
                    | Action::Etcd(_)
                    | Action::Partition(_)
                    | Action::Heal(_)
                    | Action::Kill(_)
                    | Action::Remove(_)
                    | Action::Start(_)
                    | Action::Delay(_)
                    | Action::Loss(_)
                    | Action::ApiErrors(_) => backend.describe(action),
                };
                let via = if action.is_api_level() {
                    "via the API".to_owned()
                } else {
                    format!("via {}", backend.via())
                };
                out.push_str(&format!(
                    "{at:>9}  {action}\n           {via}: {how}\n           undone by: {undo}\n"
                ));
            }
            PlannedKind::Undo { step } => {
                let action = &s.faults[*step].action;
                out.push_str(&format!(
                    "{at:>9}  {} (undoing `{action}` after its `for`)\n",
                    action.undo_text().unwrap_or_default()
                ));
            }
            PlannedKind::Probe { invariant } => {
                out.push_str(&format!(
                    "{at:>9}  CREATE probe pod {}/probe-{invariant} for `{}` (deleted at the end)\n",
                    crate::observer::PROBE_NAMESPACE,
                    s.expect[*invariant].value.label()
                ));
            }
        }
    }
    out
}

/// Play a validated scenario on a backend and judge it.
pub fn run(
    s: &Scenario,
    backend: &mut dyn Playable,
    progress: &mut dyn Progress,
) -> Result<Outcome, BackendError> {
    let problems = backend.check(s);
    if !problems.is_empty() {
        return Err(BackendError::Unsupported {
            backend: backend.name(),
            problems,
        });
    }
    let plan = Plan::new(s);
    let started = Instant::now();
    let events = backend.play(s, &plan, progress)?;
    Ok(Outcome::judge(s, plan, events, started.elapsed()))
}

/// The run skeleton: start, play the plan at the world's time, end. Returns the recorded
/// timeline; an interrupted run's timeline comes with [`BackendError::Interrupted`].
pub(crate) fn play<B: Backend>(
    backend: &mut B,
    s: &Scenario,
    plan: &Plan,
    progress: &mut dyn Progress,
) -> Result<Vec<Event>, BackendError> {
    let recorder = backend.recorder();
    recorder.record_at(
        0,
        EventKind::RunStarted {
            scenario: s.name.clone(),
            backend: backend.name().into(),
            seed: backend.seed(s),
            version: env!("CARGO_PKG_VERSION").into(),
            duration_ms: plan.duration.as_millis() as u64,
        },
    );
    let Ready { world, processes } = backend.start(s, plan, &recorder, progress)?;
    let mut driver = Driver::new(world, recorder.clone(), processes);
    let ended = drive(&mut driver, s, plan, progress);
    let mut world = driver.into_world();
    let end = match ended {
        Ok(end) => end,
        Err(e) => {
            let now = world.clock().now();
            let _ = backend.finish(world, now, progress);
            return Err(e);
        }
    };
    let end_ms = end.as_millis() as u64;
    let interrupted = world.clock().interrupted();
    // Judge only when the evidence is in: what happened before the end and is still on its way
    // is read first (each fact is placed at its source's time, so it lands where it belongs).
    if !interrupted {
        let unread = world.drain();
        if !unread.is_empty() {
            recorder.record_at(
                end_ms,
                EventKind::ProcessNote {
                    process: "kubechaos".into(),
                    message: format!(
                        "at the end of the run, not everything that happened could be read before judging: {}",
                        unread.join("; ")
                    ),
                },
            );
        }
    }
    recorder.end(end_ms, interrupted);
    let restored = backend.finish(world, end, progress)?;
    if interrupted {
        return Err(BackendError::Interrupted {
            message: format!("interrupted at t={}; {restored}", fmt_ms(end_ms)),
            events: recorder.snapshot(),
        });
    }
    Ok(recorder.snapshot())
}

/// How often a real-time world tells the live view where the run is.
pub(crate) const STATUS_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// The driver loop: apply each planned action when due, supervise, and let time pass until the
/// plan's end or an interruption; in real time, say each step and tell the live view where the
/// run is. Returns the time it ended.
fn drive<W: World>(
    driver: &mut Driver<W>,
    s: &Scenario,
    plan: &Plan,
    progress: &mut dyn Progress,
) -> Result<std::time::Duration, BackendError> {
    let real_time = driver.world.clock().real_time();
    let mut next = 0;
    let mut next_status = std::time::Duration::ZERO;
    if real_time {
        let total = fmt_ms(plan.duration.as_millis() as u64);
        progress.say(&format!("t=0.0s: running for {total}"));
    }
    let ended = loop {
        let now = driver.world.clock().now();
        while next < plan.actions.len() && plan.actions[next].at <= now {
            let kind = &plan.actions[next].kind;
            driver.apply(s, kind, now);
            if real_time {
                progress.say(&say_step(s, kind, now));
            }
            next += 1;
        }
        driver.supervise(now);
        if now >= plan.duration || driver.world.clock().interrupted() {
            break now;
        }
        if real_time && now >= next_status {
            let events = driver.recorder().snapshot();
            progress.status(Some(&Status {
                now,
                scenario: s,
                plan,
                applied: next,
                events: &events,
            }));
            next_status = now + STATUS_EVERY;
        }
        driver.world.clock().advance()?;
    };
    if real_time {
        progress.status(None);
    }
    Ok(ended)
}

/// A planned action as the live view says it.
fn say_step(s: &Scenario, kind: &PlannedKind, now: std::time::Duration) -> String {
    let t = fmt_ms(now.as_millis() as u64);
    match kind {
        PlannedKind::Fault { step } => format!("t={t}: {}", s.faults[*step].action),
        PlannedKind::Undo { step } => format!(
            "t={t}: undoing `{}` after its `for`",
            s.faults[*step].action
        ),
        PlannedKind::Probe { invariant } => format!(
            "t={t}: probe pod for `{}`",
            s.expect[*invariant].value.label()
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tracing_test::traced_test;

    use super::*;
    use kubechaos_core::scenario;

    /// Operators read these lines when leadership is lost; they must name the lease.
    #[traced_test]
    #[test]
    fn the_elector_logs_acquiring_and_losing_its_lease() {
        let yaml = "name: t\ncluster: {nodes: 0, agents: [{name: agent, replicas: 1, lease: default/agent-lock}]}\nfaults:\n  - {at: 10s, api-server: stop, for: 30s}\n";
        let s = scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).expect("valid");
        crate::backend::sim::run(&s, DEFAULT_SEED).expect("runs");
        assert!(logs_contain(
            "successfully acquired lease lease=default/agent-lock identity=agent-0_1"
        ));
        assert!(logs_contain(
            "failed to renew lease: stopped leading lease=default/agent-lock identity=agent-0_1"
        ));
    }

    /// Elected candidates as client-go elects them stop leading at their renew deadline, before
    /// their lease expires: through an API outage and a leader cut off, every leader's Lease names
    /// it and is valid while it leads, on the components and the agents alike.
    #[test]
    fn client_go_electors_never_lead_on_a_lease_they_lost() {
        let yaml = "name: t\ncluster:\n  nodes: 1\n  components: {kube-scheduler: {replicas: 2}}\n  agents: [{name: agent, replicas: 2, lease: default/agent-lock}]\nfaults:\n  - {at: 10s, api-server: stop, for: 40s}\n  - {at: 70s, partition: [agent/agent/leader, api-server], for: 40s}\nexpect:\n  - valid-lease-while-leading: {lease: default/agent-lock}\n  - valid-lease-while-leading: {lease: kube-system/kube-scheduler, tolerance: 1s}\n  - single-leader: {lease: default/agent-lock}\nduration: 3m\n";
        let s = scenario::parse(Path::new("t.yaml"), yaml.as_bytes()).expect("valid");
        for seed in 1..=3 {
            let o = crate::backend::sim::run(&s, seed).expect("runs");
            for v in &o.verdicts {
                assert!(v.held, "seed {seed}: {}: {}", v.label, v.message);
            }
            assert!(
                o.verdicts[0].message.contains("leadership terms observed"),
                "{}",
                o.verdicts[0].message
            );
        }
    }
}
