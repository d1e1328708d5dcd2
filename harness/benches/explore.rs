//! Speed of exploration: `cargo bench --bench explore`.
//!
//! Explores the shipped `topologies/control-plane.yaml` (two schedulers, two controller-managers,
//! two agent replicas on three nodes: six leader-elected processes; faults within 3 virtual
//! minutes) with up to 5 faults per schedule, on every core, and prints runs per second and the
//! peak resident memory. The goal: at least 10 runs per second on 2 cores. Figures for this
//! repository's machine are in docs/benchmarks.md. `KUBECHAOS_BENCH_RUNS` (default 40) and
//! `KUBECHAOS_BENCH_TICK_MS` (default: the sim's) change the budget and the step.

use kubechaos_core::scenario;
use kubechaos_engine::explore::{explore, ExploreOptions, Topology};
use std::path::Path;

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn main() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let runs = env("KUBECHAOS_BENCH_RUNS").unwrap_or(40) as usize;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/control-plane.yaml");
    let text = std::fs::read_to_string(&path).expect("topology");
    let s = scenario::parse(&path, text.as_bytes()).expect("control-plane loads");
    let topo = Topology::new(&s, &text).expect("a topology");
    let mut opts = ExploreOptions {
        runs,
        max_faults: 5,
        max_shrink_runs: 0,
        ..ExploreOptions::default()
    };
    if let Some(t) = env("KUBECHAOS_BENCH_TICK_MS") {
        opts.tick_ms = t;
    }
    let out = tempfile::tempdir().expect("tempdir");
    let summary =
        explore(&topo, &opts, out.path(), "bench", &mut |_, _, _, _| {}).expect("explores");
    let rate = summary.runs as f64 / summary.wall.as_secs_f64();
    println!(
        "explore control-plane on the sim: {} runs, up to 5 faults each, {} thread(s), tick {}ms",
        summary.runs, opts.jobs, opts.tick_ms
    );
    println!(
        "  {:.1} runs/s ({:.3}s of wall time per run per thread); {} violated an invariant",
        rate,
        summary.wall.as_secs_f64() * opts.jobs as f64 / summary.runs as f64,
        summary.violations
    );
    println!(
        "  goal: at least 10 runs/s on 2 cores: {}",
        if rate >= 10.0 { "met" } else { "NOT met" }
    );
    if let Some(kib) = peak_rss_kib() {
        println!("  peak resident memory: {:.1} MiB", kib as f64 / 1024.0);
    }
}
