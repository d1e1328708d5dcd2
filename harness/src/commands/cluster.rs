//! `cluster build|up|status|down`: the local control plane, by hand.

use std::path::Path;
use std::time::Duration;

use super::{runtime, End};
use crate::cli::UpArgs;
use crate::failure::{Failure, Verdict};
use kubechaos_engine::backend::local::runs::{ApiState, Down, RunRecord};

/// `kubechaos cluster build`: the pinned binaries, built once into the cache.
pub fn build() -> End {
    use kubechaos_engine::backend::local::build;
    let pins = build::Pins::embedded()?;
    let dir = build::ensure(&pins, &mut |line| eprintln!("{line}"))?;
    println!(
        "Kubernetes {} and etcd {} are in {}",
        pins.kubernetes,
        pins.etcd,
        dir.display()
    );
    for b in build::BINARIES {
        println!("  {}", dir.join(b).display());
    }
    Ok(Verdict::Held)
}

/// `kubechaos cluster up`: a local control plane until Ctrl-C, SIGTERM or `--for`.
pub fn up(args: &UpArgs) -> End {
    use kubechaos_core::scenario::Component;
    use kubechaos_engine::backend::local::cluster::{LocalCluster, Quiet, Restarts, Spec};
    // One thread: children get a parent-death signal tied to the thread that started them.
    let rt = runtime()?;
    let spec = Spec {
        nodes: args.nodes,
        components: [
            (Component::KubeScheduler, args.schedulers),
            (Component::KubeControllerManager, args.controller_managers),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect(),
        self_hosted: args.self_hosted,
        api_servers: args.api_servers,
        etcd_members: args.etcd_members,
        purpose: "cluster up".into(),
        ..Spec::default()
    };
    rt.block_on(async {
        let mut say = |line: &str| eprintln!("{line}");
        let cluster = tokio::select! {
            biased;
            _ = tokio::signal::ctrl_c() => {
                return Err(Failure::Interrupted(
                    "interrupted while starting; everything started was stopped".to_owned(),
                ));
            }
            c = LocalCluster::up(&spec, args.keep, std::sync::Arc::new(Quiet), &mut say) => c,
        };
        let mut cluster = cluster.map_err(Failure::Local)?;
        println!("export KUBECONFIG={}", cluster.admin_kubeconfig.display());
        println!("# then, for example: kubectl get leases -A; kubectl get nodes");
        println!("# logs: {}/logs", cluster.dir.display());
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminated = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        let stop = async {
            match args.for_ {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        // Until stopped, what ends by itself is started again (as a kubelet would).
        tokio::pin!(terminated, stop);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut restarts = Restarts::default();
        loop {
            tokio::select! {
                biased;
                _ = tokio::signal::ctrl_c() => {
                    eprintln!("kubechaos: stopping (Ctrl-C)");
                    break;
                }
                () = &mut terminated => {
                    eprintln!("kubechaos: stopping (SIGTERM)");
                    break;
                }
                () = &mut stop => {
                    eprintln!("kubechaos: stopping");
                    break;
                }
                _ = tick.tick() => {
                    for line in cluster.keep_running(&mut restarts) {
                        eprintln!("kubechaos: {line}");
                    }
                }
            }
        }
        match cluster.down().await {
            Some(dir) => eprintln!("kubechaos: stopped; kept {}", dir.display()),
            None => eprintln!(
                "kubechaos: stopped; every process ended and the run directory was removed"
            ),
        }
        Ok(Verdict::Held)
    })
}

/// `kubechaos cluster status`: each local control plane of this machine, and how it is.
pub fn status() -> End {
    let runs = RunRecord::all();
    if runs.is_empty() {
        println!("no local control plane on this machine (start one with `kubechaos cluster up`)");
        return Ok(Verdict::Held);
    }
    let rt = runtime()?;
    for (dir, r) in runs {
        let alive = r.alive();
        let state = if alive {
            "running"
        } else if r.keep {
            "ended (directory kept)"
        } else {
            "ended without cleaning up (`kubechaos cluster down` removes it)"
        };
        println!("{}  {}  pid {}  {state}", dir.display(), r.purpose, r.pid);
        if !alive {
            continue;
        }
        println!("  export KUBECONFIG={}", r.kubeconfig.display());
        let status = rt.block_on(r.status());
        match &status.api {
            ApiState::Ready => println!("  API: ready"),
            ApiState::NotReady(why) => println!("  API: not ready ({why})"),
            ApiState::Unreachable(why) => println!("  API: not reachable ({why})"),
            ApiState::NoKubeconfig(_) => println!("  API: cannot read its kubeconfig"),
        }
        for (lease, holder) in &status.leases {
            println!(
                "  lease {lease}: {}",
                holder.as_deref().unwrap_or("not held")
            );
        }
        if let Some((ready, all)) = status.nodes {
            println!("  nodes: {ready}/{all} Ready and schedulable");
        }
    }
    Ok(Verdict::Held)
}

/// `kubechaos cluster down [DIR]`: stop every `cluster up` (or the run in DIR), and remove what
/// a killed kubechaos left.
pub fn down(only: Option<&Path>) -> End {
    let mut runs = RunRecord::all();
    if let Some(dir) = only {
        let wanted = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        runs.retain(|(d, _)| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()) == wanted);
        if runs.is_empty() {
            return Err(Failure::Input(format!(
                "kubechaos: {} is not a local control plane's run directory (it has no {}); expected one that `kubechaos cluster status` lists",
                dir.display(),
                RunRecord::FILE
            )));
        }
    } else {
        // Scenario runs stop themselves (Ctrl-C); without a DIR only `cluster up` is stopped.
        runs.retain(|(_, r)| r.purpose == "cluster up" || !r.alive());
    }
    let mut acted = false;
    for (dir, r) in runs {
        if r.alive() {
            eprintln!(
                "kubechaos: stopping {} ({}, pid {})",
                dir.display(),
                r.purpose,
                r.pid
            );
        }
        match r
            .down(&dir, Duration::from_secs(30), only.is_some())
            .map_err(Failure::Down)?
        {
            Down::Stopped => println!(
                "stopped {}{}",
                dir.display(),
                if dir.exists() {
                    " (directory kept)"
                } else {
                    ""
                }
            ),
            Down::Removed if r.keep => println!("removed {} (kept by --keep)", dir.display()),
            Down::Removed => println!(
                "removed {} (left by a kubechaos that was killed)",
                dir.display()
            ),
            Down::Kept => continue,
        }
        acted = true;
    }
    if !acted {
        println!("no local control plane is running");
    }
    Ok(Verdict::Held)
}
