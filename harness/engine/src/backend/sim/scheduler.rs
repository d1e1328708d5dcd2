//! A model of kube-scheduler.
//!
//! Mirrors upstream v1.3x (`cmd/kube-scheduler/app/server.go`, `pkg/scheduler`):
//! - it takes 0.25-0.55 s from its start to its first request ([`super::process::START_UP`],
//!   measured on the pinned v1.37.2);
//! - leader-elected on `kube-system/kube-scheduler` with 15s/10s/2s;
//! - a renew that fails is followed by client-go's release (`ReleaseOnCancel`: read the Lease,
//!   give it up if the last record seen was its own; bounded by the renew deadline, each request
//!   by the lock client's timeout), then `OnStoppedLeading` exits the process ("leaderelection
//!   lost", status 1): something outside (the kubelet, for a static pod) must restart it;
//! - on SIGTERM (its pod deleted) it releases the lease (`ReleaseOnCancel`) and exits 0;
//! - binds pending pods (no `spec.nodeName`) to nodes whose Ready condition is True, that are not
//!   `spec.unschedulable` and carry no NoSchedule/NoExecute taint, through `pods/binding`;
//!   among feasible nodes it picks the one with the fewest pods (a stand-in for scoring).
//!
//! Not modelled: queues and back-off, resources, affinity, tolerations, preemption.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::process::{pods_changed, Proc};
use kubechaos_core::scenario::Component;

/// How often the leader looks for pending pods when no pod changes. Upstream's scheduling queue
/// is fed by a watch and binds a new pod within milliseconds (a scheduler whose pod is being
/// deleted binds its own replacements before its kubelet stops it): the model wakes on a watch
/// of pods too ([`pods_changed`]).
pub(crate) const SCHEDULE_PERIOD: Duration = Duration::from_secs(1);

/// Run one scheduler process until it exits: it lost its lease (status 1), or it was asked to
/// terminate (its pod deleted: SIGTERM), when upstream cancels its context, releases the lease
/// (`ReleaseOnCancel: true`, `cmd/kube-scheduler/app/options`) and exits 0 ("Requested to
/// terminate, exiting"). Until the signal it schedules as ever: a scheduler whose pod is being
/// deleted still binds what is pending, its own replacements among them.
pub async fn run(p: Proc) {
    let inc = p.start();
    p.start_up(inc).await;
    let client = p.client();
    let mut elector = p.elector(client.clone(), &Component::KubeScheduler.lease(), inc);
    let asked = tokio::select! {
        () = elector.run(schedule_loop(client)) => false,
        () = p.terminated(inc) => true,
    };
    if asked {
        elector.release().await;
        p.exit("exited: status 0: requested to terminate (SIGTERM), the lease released first");
    } else {
        elector.release_lost().await;
        p.exit("exited: leaderelection lost (upstream exits with status 1)");
    }
}

async fn schedule_loop(client: kube::Client) {
    loop {
        let seen = match schedule_once(&client).await {
            Ok(rv) => rv,
            Err(e) => {
                tracing::debug!(error = %e, "scheduling cycle failed");
                None
            }
        };
        pods_changed(&client, seen.as_deref(), SCHEDULE_PERIOD).await;
    }
}

/// One scheduling cycle; returns the resourceVersion of the pods it saw.
async fn schedule_once(client: &kube::Client) -> Result<Option<String>, kube::Error> {
    let (pod_api, node_api) = (
        Api::<Pod>::all(client.clone()),
        Api::<Node>::all(client.clone()),
    );
    let everything = ListParams::default();
    let (pods, nodes) = tokio::join!(pod_api.list(&everything), node_api.list(&everything));
    let (pods, nodes) = (pods?, nodes?);
    let seen = pods.metadata.resource_version.clone();
    let pending: Vec<&Pod> = pods
        .items
        .iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or("")
                .is_empty()
        })
        .collect();
    if pending.is_empty() {
        return Ok(seen);
    }
    let mut load: BTreeMap<String, usize> = nodes
        .items
        .iter()
        .filter(|n| crate::kubeclient::schedulable(n))
        .filter_map(|n| n.metadata.name.clone())
        .map(|n| (n, 0))
        .collect();
    for p in &pods.items {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_ref()) {
            if let Some(count) = load.get_mut(n) {
                *count += 1;
            }
        }
    }
    // Each pending pod placed in turn, then bound together (upstream binds asynchronously).
    let mut binds = Vec::new();
    for pod in pending {
        let Some((node, _)) = load
            .iter()
            .min_by_key(|(name, count)| (**count, (*name).clone()))
        else {
            break; // no feasible node: the pod stays Pending
        };
        let node = node.clone();
        *load.get_mut(&node).expect("chosen from load") += 1;
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let api = Api::<Pod>::namespaced(client.clone(), &ns);
        binds.push(async move {
            if let Err(e) = api
                .create_subresource::<_, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await
            {
                tracing::debug!(pod = %name, error = %e, "binding failed");
            }
        });
    }
    futures::future::join_all(binds).await;
    Ok(seen)
}
