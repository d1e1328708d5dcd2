//! A fake node, as KWOK plays one: it registers a Node with Ready=True and renews its Lease in
//! `kube-node-lease` every 10s (kubelet's default: a quarter of the 40s lease duration). When the
//! Node's Ready condition is not True (the node lifecycle controller marked it Unknown while the
//! node was cut off), it reports Ready=True again, as the kubelet's status update does.
//! It reports room for 110 pods and runs none of them. The sim runs it over turmoil; the local
//! backend against the real API server.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::clock::Clock;

/// Interval between lease renewals (kubelet default).
pub const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// `leaseDurationSeconds` of node leases (kubelet default).
pub const LEASE_SECONDS: i32 = 40;

/// Heartbeat as node `name` until the future is dropped.
pub async fn run(client: kube::Client, name: &str, clock: &dyn Clock) {
    loop {
        if let Err(e) = heartbeat(&client, name, clock).await {
            tracing::debug!(node = %name, error = %e, "heartbeat failed");
        }
        tokio::time::sleep(RENEW_INTERVAL).await;
    }
}

fn ready_node(name: &str, clock: &dyn Clock) -> Node {
    let now = clock.wall().to_string();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"}},
        "spec": {},
        // Room for pods, as KWOK's default node reports: the scheduler's NodeResourcesFit
        // filter counts pods against `allocatable.pods` even when they request nothing.
        "status": {"capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                   "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                                   "lastHeartbeatTime": now, "lastTransitionTime": now}]},
    }))
    .expect("node shape")
}

/// One heartbeat: register or re-report the Node as Ready, renew its Lease.
pub async fn heartbeat(
    client: &kube::Client,
    name: &str,
    clock: &dyn Clock,
) -> Result<(), kube::Error> {
    let nodes = Api::<Node>::all(client.clone());
    match nodes.get_opt(name).await? {
        None => {
            let created = nodes
                .create(&PostParams::default(), &ready_node(name, clock))
                .await?;
            // The status sent on create is dropped by the status subresource rules; report it.
            let mut n = created;
            n.status = ready_node(name, clock).status;
            nodes
                .replace_status(name, &PostParams::default(), &n)
                .await?;
        }
        Some(n) => {
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if !ready {
                let mut n = n;
                n.status = ready_node(name, clock).status;
                nodes
                    .replace_status(name, &PostParams::default(), &n)
                    .await?;
            }
        }
    }
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
    let now = MicroTime(clock.wall());
    match leases.get_opt(name).await? {
        None => {
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "kube-node-lease"},
            }))
            .expect("lease shape");
            let lease = Lease {
                spec: Some(LeaseSpec {
                    holder_identity: Some(name.to_owned()),
                    lease_duration_seconds: Some(LEASE_SECONDS),
                    renew_time: Some(now),
                    ..LeaseSpec::default()
                }),
                ..lease
            };
            leases.create(&PostParams::default(), &lease).await?;
        }
        Some(mut lease) => {
            if let Some(spec) = lease.spec.as_mut() {
                spec.renew_time = Some(now);
            }
            leases.replace(name, &PostParams::default(), &lease).await?;
        }
    }
    Ok(())
}
