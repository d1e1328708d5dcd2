//! Time from `cluster up` to a ready local control plane: `cargo bench --bench cluster_up`.
//!
//! Starts the default local cluster (etcd, kube-apiserver, 2 kube-schedulers, 2
//! kube-controller-managers, 3 fake nodes) several times with the binaries already built, and
//! prints the time to API ready and to ready (API ready, both leases held, every node Ready and
//! schedulable); then the same cluster self-hosted (the components as Deployments, brought up
//! through bootstrap pods). Target (issue 15): the default cluster ready in at most 5 seconds.
//! Figures: docs/benchmarks.md.

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
    let spec = |self_hosted: bool| Spec {
        nodes: 3,
        components: [
            (Component::KubeScheduler, 2),
            (Component::KubeControllerManager, 2),
        ]
        .into_iter()
        .collect(),
        self_hosted,
        purpose: "cluster up".into(),
        ..Spec::default()
    };
    let time = |spec: &Spec, what: &str| -> Vec<std::time::Duration> {
        let mut ready = Vec::new();
        for i in 1..=runs {
            rt.block_on(async {
                let started = Instant::now();
                let mut api = None;
                let cluster =
                    LocalCluster::up(spec, false, std::sync::Arc::new(Quiet), &mut |line| {
                        if line.starts_with("API ready") {
                            api = Some(started.elapsed());
                        }
                    })
                    .await
                    .expect("the local cluster starts");
                let t = started.elapsed();
                println!(
                    "{what} run {i}: API ready {:.1}s, ready {:.1}s",
                    api.map(|a| a.as_secs_f64()).unwrap_or(f64::NAN),
                    t.as_secs_f64()
                );
                ready.push(t);
                cluster.down().await;
            });
        }
        ready.sort();
        ready
    };
    let hosted = time(&spec(true), "self-hosted");
    println!(
        "self-hosted cluster up to ready: median {:.1}s over {runs} runs",
        hosted[hosted.len() / 2].as_secs_f64()
    );
    let ready = time(&spec(false), "default");
    let median = ready[ready.len() / 2];
    println!(
        "cluster up to ready: median {:.1}s over {runs} runs (target at most 5s: {})",
        median.as_secs_f64(),
        if median.as_secs_f64() <= 5.0 {
            "met"
        } else {
            "NOT met"
        }
    );
}
