//! `recover pod-from|bind`: disaster recovery by hand, on any cluster.

use std::time::{Duration, Instant};

use super::{runtime, End};
use crate::cli::{BindArgs, KubeArgs, PodFromArgs, RecoverArgs};
use crate::failure::{Failure, Verdict};
use kubechaos_core::scenario;
use kubechaos_engine::recover::{self, Cleanup, Workload};

/// A client for the cluster the flags name.
async fn client(k: &KubeArgs) -> Result<kube::Client, Failure> {
    Ok(kubechaos_engine::kubeclient::client(
        k.kubeconfig.as_deref(),
        k.context.as_deref(),
        Some(Duration::from_secs(10)),
    )
    .await?)
}

/// `kubechaos recover pod-from`: a pod from a workload's template, pre-bound to a node; with
/// `--cleanup`, deleted once the workload's own pods are Ready again.
pub fn pod_from(args: &PodFromArgs) -> End {
    let w = Workload::parse(&args.kube.namespace, &args.workload)
        .map_err(|e| Failure::Input(format!("kubechaos recover: {e}")))?;
    if args.cleanup && w.kind == recover::Kind::PodTemplate {
        return Err(Failure::Input("kubechaos recover: --cleanup needs a workload that reports availability; a podtemplate does not (expected a deployment, daemonset, statefulset or replicaset)".to_owned()));
    }
    let rt = runtime()?;
    rt.block_on(async {
        let client = client(&args.kube).await?;
        let (_, pod) = recover::prepare(&client, &w, &args.node, &recover::suffix()).await?;
        if args.dry_run {
            let text = if args.output == "json" {
                serde_json::to_string_pretty(&pod).expect("json") + "\n"
            } else {
                serde_saphyr::to_string(&pod).expect("yaml")
            };
            print!("{text}");
            return Ok(Verdict::Held);
        }
        let created = recover::create(&client, &pod).await?;
        let name = created.metadata.name.unwrap_or_default();
        let ns = &w.namespace;
        println!(
            "pod/{name} created in {ns} from {w}'s template, bound to {}",
            args.node
        );
        if !args.cleanup {
            println!("delete it once {w} is available again: kubectl delete pod -n {ns} {name} (or use --cleanup)");
            return Ok(Verdict::Held);
        }
        let started = Instant::now();
        let mut next_say = started;
        loop {
            match recover::cleanup(&client, &w, &name).await? {
                Cleanup::Done(ready, desired) => {
                    println!(
                        "{w} has its pods Ready again ({ready}/{desired}); deleted pod/{name}"
                    );
                    return Ok(Verdict::Held);
                }
                Cleanup::Waiting(Some((ready, desired))) if Instant::now() >= next_say => {
                    eprintln!(
                        "waiting for {w} to be available: {ready}/{desired} ({}s)",
                        started.elapsed().as_secs()
                    );
                    next_say += Duration::from_secs(10);
                }
                Cleanup::Waiting(_) => {}
            }
            if started.elapsed() > args.timeout {
                eprintln!(
                    "kubechaos recover: {w} was not available within {}; pod/{name} is left running",
                    scenario::duration::human(args.timeout)
                );
                return Ok(Verdict::Violated);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    })
}

/// `kubechaos recover bind`: pending pods bound to a node with a Binding. Each pod that could
/// not be bound is said; the command ends with the worst.
pub fn bind(args: &BindArgs) -> End {
    let rt = runtime()?;
    let ns = &args.kube.namespace;
    rt.block_on(async {
        let client = client(&args.kube).await?;
        recover::check_node(&client, &args.node, None).await?;
        let pods = match &args.pod {
            Some(p) => vec![p.clone()],
            None => recover::pending(&client, ns, &args.selector).await?,
        };
        if pods.is_empty() {
            println!(
                "no pending pod in {ns}{}",
                if args.selector.is_empty() {
                    String::new()
                } else {
                    format!(" matching {}", args.selector)
                }
            );
            return Ok(Verdict::Held);
        }
        let mut worst: Option<Failure> = None;
        for pod in pods {
            match recover::bind(&client, ns, &pod, &args.node).await {
                Ok(()) => println!("pod/{pod} bound to {}", args.node),
                Err(e) => {
                    let failure = Failure::from(e);
                    match worst.take() {
                        Some(w) if w.code() >= failure.code() => {
                            failure.report();
                            worst = Some(w);
                        }
                        Some(w) => {
                            w.report();
                            worst = Some(failure);
                        }
                        None => worst = Some(failure),
                    }
                }
            }
        }
        worst.map_or(Ok(Verdict::Held), Err)
    })
}

/// `kubechaos recover --cleanup`: undo what a run killed outright left in a kind or k3d cluster,
/// in its nodes (through Docker) and then in its objects (through the API, once it answers).
pub fn leftovers(args: &RecoverArgs) -> End {
    use kubechaos_engine::backend::kube::leftovers;
    if !args.cleanup {
        return Err(Failure::Input(
            "kubechaos recover: expected a subcommand (pod-from, bind) or --cleanup; see `kubechaos recover --help`".to_owned(),
        ));
    }
    let target = args.target.guarded(crate::cli::Backend::Kube)?;
    let context = target.context.clone().unwrap_or_default();
    let Some(cluster) = leftovers::cluster_of(target.provider, &context) else {
        return Err(Failure::Input(format!(
            "kubechaos recover --cleanup: the context {context} ({} provider) names no kind or k3d cluster; expected a context kind-NAME or k3d-NAME (as kind and k3d name them), where a run's changes in the nodes can be found",
            target.provider.name()
        )));
    };
    let said = leftovers::undo_in_nodes(target.provider, cluster).map_err(|e| {
        Failure::Kube(kubechaos_engine::backend::kube::error::KubeError::NodeContainers { what: e })
    })?;
    let mut left = said.iter().any(leftovers::Outcome::left);
    for o in &said {
        println!("{}", o.text());
    }
    if said.is_empty() {
        println!("nothing of a run in the nodes of {context}");
    }
    // On this machine: the directories of runs killed outright (their agents' kubeconfigs).
    let here = leftovers::undo_on_this_machine(&std::env::temp_dir());
    left |= here.iter().any(leftovers::Outcome::left);
    for o in &here {
        println!("{}", o.text());
    }
    let rt = runtime()?;
    let done = rt.block_on(async {
        let client = kubechaos_engine::kubeclient::client(
            target.kubeconfig.as_deref(),
            Some(&context),
            Some(Duration::from_secs(10)),
        )
        .await?;
        let started = Instant::now();
        let mut next_say = started + Duration::from_secs(10);
        loop {
            let tried = async {
                client.apiserver_version().await?;
                leftovers::undo_in_cluster(&client).await
            };
            match tried.await {
                Ok(said) => return Ok::<_, Failure>(Some(said)),
                Err(e) if started.elapsed() < args.timeout => {
                    if Instant::now() >= next_say {
                        eprintln!(
                            "waiting for the API server of {context} ({}s): {e}",
                            started.elapsed().as_secs()
                        );
                        next_say += Duration::from_secs(10);
                    }
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                Err(e) => {
                    eprintln!(
                        "kubechaos recover --cleanup: the API server of {context} did not answer within {}: {e}; what a run made in the cluster is left (run this again once it answers)",
                        scenario::duration::human(args.timeout)
                    );
                    return Ok(None);
                }
            }
        }
    })?;
    match done {
        Some(said) => {
            left |= said.iter().any(leftovers::Outcome::left);
            for o in &said {
                println!("{}", o.text());
            }
            if said.is_empty() {
                println!("nothing of a run in the cluster's objects");
            }
        }
        None => left = true,
    }
    Ok(Verdict::of(!left))
}
