//! Time from `cluster up` to a ready local control plane: `cargo bench --bench cluster_up`.
//!
//! Starts the default local cluster (etcd, kube-apiserver, 2 kube-schedulers, 2
//! kube-controller-managers, 3 fake nodes) several times with the binaries already built, and
//! prints the time to API ready and to ready (API ready, both leases held, every node Ready and
//! schedulable). Target (issue 3): ready in under 15 seconds. Figures: docs/benchmarks.md.

use std::time::Instant;

use kubechaos_core::scenario::Component;
use kubechaos_engine::backend::local::cluster::{LocalCluster, Quiet, Spec};

fn main() {
    let runs: usize = std::env::var("KUBECHAOS_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let spec = Spec {
        nodes: 3,
        components: [
            (Component::KubeScheduler, 2),
            (Component::KubeControllerManager, 2),
        ]
        .into_iter()
        .collect(),
        agents: Vec::new(),
        self_hosted: false,
        purpose: "cluster up".into(),
    };
    let mut ready = Vec::new();
    for i in 1..=runs {
        rt.block_on(async {
            let started = Instant::now();
            let mut api = None;
            let cluster = LocalCluster::up(&spec, false, std::sync::Arc::new(Quiet), &mut |line| {
                if line.starts_with("API ready") {
                    api = Some(started.elapsed());
                }
            })
            .await
            .expect("the local cluster starts");
            let t = started.elapsed();
            println!(
                "run {i}: API ready {:.1}s, ready {:.1}s",
                api.map(|a| a.as_secs_f64()).unwrap_or(f64::NAN),
                t.as_secs_f64()
            );
            ready.push(t);
            cluster.down().await;
        });
    }
    ready.sort();
    let median = ready[ready.len() / 2];
    println!(
        "cluster up to ready: median {:.1}s over {runs} runs (target under 15s: {})",
        median.as_secs_f64(),
        if median.as_secs() < 15 {
            "met"
        } else {
            "NOT met"
        }
    );
}
