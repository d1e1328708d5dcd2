//! Cost of the HTML report and the live view on a long timeline: `cargo bench --bench report`.
//!
//! Plays `api-restart`'s cluster (three control-plane components' leases and two agents) on the
//! sim for one virtual hour with an API-server outage every ten minutes, then times
//! `report::html::render` of the whole timeline (and the page's size) and `report::live::view`
//! at the end of it, which a real-time run computes twice a second from its driver's loop. The
//! goals: the view well inside the driver's 100 ms step (under 5 ms), the page under 1 s to
//! render and a few MiB. Figures for this repository's machine are in docs/benchmarks.md.

use std::path::Path;
use std::time::{Duration, Instant};

use kubechaos_core::plan::Plan;
use kubechaos_core::report::{html, live};
use kubechaos_core::scenario;
use kubechaos_engine::backend::sim::run as sim;
use kubechaos_engine::run::DEFAULT_SEED;

const HOUR: &str = "name: an-hour
cluster:
  nodes: 3
  components:
    kube-scheduler: {replicas: 2}
    kube-controller-manager: {replicas: 2}
  agents:
    - {name: agent, replicas: 2, lease: default/agent-lock}
faults:
  - {at: 5m, api-server: stop, for: 1m}
  - {at: 15m, api-server: stop, for: 1m}
  - {at: 25m, api-server: stop, for: 1m}
  - {at: 35m, api-server: stop, for: 1m}
  - {at: 45m, api-server: stop, for: 1m}
  - {at: 55m, api-server: stop, for: 1m}
expect:
  - leader-reacquired: {lease: kube-system/kube-scheduler, within: 1m}
  - leader-reacquired: {lease: default/agent-lock, within: 1m}
  - single-leader: {lease: default/agent-lock}
  - schedulable: {within: 1m}
duration: 1h
";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let s = scenario::parse(Path::new("an-hour.yaml"), HOUR.as_bytes()).expect("valid");
    let outcome = sim(&s, DEFAULT_SEED).expect("runs");
    let events = &outcome.events;
    println!(
        "a virtual hour of api-restart's cluster with six outages: {} events",
        events.len()
    );

    let mut renders = Vec::new();
    let mut size = 0;
    for _ in 0..10 {
        let t = Instant::now();
        size = html::render(events).expect("renders").len();
        renders.push(t.elapsed());
    }
    let render = median(renders);
    println!(
        "  html::render: median {:.1} ms of 10; page {:.2} MiB",
        render.as_secs_f64() * 1000.0,
        size as f64 / (1024.0 * 1024.0)
    );

    let plan = Plan::new(&s);
    let mut views = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let v = live::view(&live::Status {
            now: plan.duration - Duration::from_secs(1),
            scenario: &s,
            plan: &plan,
            applied: plan.actions.len(),
            events,
        });
        std::hint::black_box(v.lines());
        views.push(t.elapsed());
    }
    let view = median(views);
    println!(
        "  live::view at the end: median {:.2} ms of 20",
        view.as_secs_f64() * 1000.0
    );
    let met = view < Duration::from_millis(5)
        && render < Duration::from_secs(1)
        && size < 8 * 1024 * 1024;
    println!(
        "  goals: view under 5 ms, render under 1 s, page under 8 MiB: {}",
        if met { "met" } else { "NOT met" }
    );
}
