//! Speed and memory of the simulation: `cargo bench --bench sim`.
//!
//! Plays the shipped `api-restart` (2 schedulers, 2 controller-managers, 2 agents, 3 nodes,
//! 4 virtual minutes) several times in one process and prints wall time per run, virtual
//! seconds per wall second, and the process's peak resident memory. The target: one run in
//! under 1 second of wall time in a release build. Figures for this repository's machine are in
//! docs/benchmarks.md.

use std::path::Path;
use std::time::{Duration, Instant};

use kubechaos_core::scenario;
use kubechaos_engine::backend::sim::run as sim;

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn main() {
    let runs: usize = std::env::var("KUBECHAOS_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/api-restart.yaml");
    let s = scenario::load(&path).expect("api-restart loads");
    let mut walls: Vec<Duration> = Vec::new();
    let mut virtual_time = Duration::ZERO;
    let mut events = 0;
    for seed in 1..=runs as u64 {
        let started = Instant::now();
        let outcome = sim(&s, seed).expect("sim runs");
        walls.push(started.elapsed());
        virtual_time = outcome.plan.duration;
        events = outcome.events.len();
        assert!(outcome.held(), "api-restart must hold (seed {seed})");
    }
    walls.sort();
    let median = walls[walls.len() / 2];
    let total: Duration = walls.iter().sum();
    println!("api-restart on the sim, {runs} runs (seeds 1..={runs}), {} virtual per run, ~{events} events", kubechaos_core::scenario::duration::human(virtual_time));
    println!(
        "  wall per run: min {:.3}s, median {:.3}s, max {:.3}s",
        walls[0].as_secs_f64(),
        median.as_secs_f64(),
        walls[walls.len() - 1].as_secs_f64()
    );
    println!(
        "  virtual seconds per wall second: {:.0} (median run)",
        virtual_time.as_secs_f64() / median.as_secs_f64()
    );
    println!("  total wall: {:.2}s", total.as_secs_f64());
    match peak_rss_kib() {
        Some(kib) => println!("  peak resident memory: {:.1} MiB", kib as f64 / 1024.0),
        None => println!("  peak resident memory: unavailable (no /proc/self/status)"),
    }
    let target = Duration::from_secs(1);
    println!(
        "  target: under {:.0}s per run: {}",
        target.as_secs_f64(),
        if median < target { "met" } else { "NOT met" }
    );
}
