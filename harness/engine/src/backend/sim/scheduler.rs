//! A model of kube-scheduler.
//!
//! Mirrors upstream v1.3x (`cmd/kube-scheduler/app/server.go`, `pkg/scheduler`):
//! - leader-elected on `kube-system/kube-scheduler` with 15s/10s/2s;
//! - `OnStoppedLeading` exits the process ("leaderelection lost", status 1): something outside
//!   (the kubelet, for a static pod) must restart it;
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

use super::process::Proc;
use kubechaos_core::scenario::Component;

/// How often the leader looks for pending pods.
pub(crate) const SCHEDULE_PERIOD: Duration = Duration::from_secs(1);

/// Run one scheduler process until it exits.
pub async fn run(p: Proc) {
    let inc = p.start();
    let client = p.client();
    let mut elector = p.elector(client.clone(), &Component::KubeScheduler.lease(), inc);
    elector.run(schedule_loop(client)).await;
    p.exit("exited: leaderelection lost (upstream exits with status 1)");
}

async fn schedule_loop(client: kube::Client) {
    loop {
        if let Err(e) = schedule_once(&client).await {
            tracing::debug!(error = %e, "scheduling cycle failed");
        }
        tokio::time::sleep(SCHEDULE_PERIOD).await;
    }
}

async fn schedule_once(client: &kube::Client) -> Result<(), kube::Error> {
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?;
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
        return Ok(());
    }
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
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
    for pod in pending {
        let Some((node, _)) = load
            .iter()
            .min_by_key(|(name, count)| (**count, (*name).clone()))
        else {
            return Ok(()); // no feasible node: the pod stays Pending
        };
        let node = node.clone();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let api = Api::<Pod>::namespaced(client.clone(), &ns);
        match api
            .create_subresource::<_, serde_json::Value>(
                "binding",
                &name,
                &PostParams::default(),
                &binding,
            )
            .await
        {
            Ok(_) => *load.get_mut(&node).expect("chosen from load") += 1,
            Err(e) => tracing::debug!(pod = %name, error = %e, "binding failed"),
        }
    }
    Ok(())
}
