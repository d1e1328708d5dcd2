//! A model of kube-controller-manager.
//!
//! Mirrors upstream v1.3x (`cmd/kube-controller-manager/app/controllermanager.go`,
//! `pkg/controller/{deployment,replicaset,nodelifecycle}`):
//! - it takes 0.25-0.55 s from its start to its first request ([`super::process::START_UP`],
//!   measured on the pinned v1.37.2);
//! - leader-elected on `kube-system/kube-controller-manager` with 15s/10s/2s, and like upstream
//!   it exits when it loses the lease ("leaderelection lost");
//! - deployment controller: one ReplicaSet per pod template (`NAME-HASH`, labelled
//!   `pod-template-hash`), old ones deleted; `status.availableReplicas` counts owned pods whose
//!   Ready condition is True (no kubelet sets it for plain fake nodes, as on the local backend);
//! - replicaset controller: creates (`generateName: RS-`) or deletes owned pods to match replicas;
//! - node lifecycle controller: every 5s (`--node-monitor-period`), a node whose Lease in
//!   `kube-node-lease` has not changed for 50s (`--node-monitor-grace-period`; both defaults
//!   checked against `kube-controller-manager --help` of the pinned v1.37.2), judged by the time
//!   this controller *observed* the change, gets
//!   Ready=Unknown and the `node.kubernetes.io/unreachable:NoSchedule` taint; the taint goes when
//!   the node reports Ready again.
//!
//! - it is started as kubeadm starts it (kind's control-plane nodes, the local backend): with
//!   `--client-ca-file` and `--requestheader-client-ca-file` given, its delegated authentication
//!   reads no ConfigMap at start, so a controller-manager started while the API server cannot
//!   answer goes straight to leader election and waits there, retrying (seen on a real kind node,
//!   v1.37.2: started 15 s into a cut between the API server and etcd, it tried the Lease every
//!   2 s for 2 minutes and led 20 s after the API server answered again). Without those flags
//!   upstream would read `kube-system/extension-apiserver-authentication` first and exit with
//!   status 1 when that fails ("unable to load configmap based request-header-client-ca-file"),
//!   which the local backend's controller-manager did before it was given them.
//!
//! Not modelled: eviction, rolling-update strategy, garbage collection of orphans.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::process::Proc;
use crate::kubeclient::pod_ready;
use kubechaos_core::scenario::Component;

/// `--node-monitor-period`.
pub(crate) const NODE_MONITOR_PERIOD: Duration = Duration::from_secs(5);
/// `--node-monitor-grace-period`.
pub(crate) const NODE_MONITOR_GRACE: Duration = Duration::from_secs(50);
/// The taint the node lifecycle controller puts on unreachable nodes.
pub(crate) const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
/// How often the workload controllers sync when no pod changes. Upstream's react to watch
/// events within milliseconds (a deleted pod's replacement is created at once, before its
/// kubelet has stopped it): the model wakes on a watch of pods too
/// ([`pods_changed`](super::process::pods_changed)).
pub(crate) const SYNC_PERIOD: Duration = Duration::from_secs(1);

/// Run one controller-manager process until it exits.
pub async fn run(p: Proc) {
    let inc = p.start();
    p.start_up(inc).await;
    let client = p.client();
    let mut elector = p.elector(
        client.clone(),
        &Component::KubeControllerManager.lease(),
        inc,
    );
    // Asked to terminate (its pod deleted: SIGTERM), upstream cancels its context and exits 0
    // without releasing the lease: `ReleaseOnCancel` follows the feature gate
    // ControllerManagerReleaseLeaderElectionLockOnExit, alpha and off by default in v1.36-1.37.
    let asked = tokio::select! {
        () = elector.run(controllers(client)) => false,
        () = p.terminated(inc) => true,
    };
    if asked {
        elector.stop_without_release();
        p.exit(
            "exited: status 0: requested to terminate (SIGTERM), the lease kept until it expires",
        );
    } else {
        p.exit("exited: leaderelection lost (upstream exits with status 1)");
    }
}

async fn controllers(client: kube::Client) {
    let mut lifecycle = NodeLifecycle::default();
    let mut next_monitor = Instant::now();
    let replicasets = |client: kube::Client| async move {
        match sync_replicasets(&client).await {
            Ok(rv) => rv,
            Err(e) => {
                tracing::debug!(error = %e, "replicaset sync failed");
                None
            }
        }
    };
    loop {
        // The replicaset controller first: what woke the loop is a pod that changed (a deleted
        // one is replaced at once), then the deployments, then the replicasets they changed.
        replicasets(client.clone()).await;
        if let Err(e) = sync_deployments(&client).await {
            tracing::debug!(error = %e, "deployment sync failed");
        }
        let seen = replicasets(client.clone()).await;
        if Instant::now() >= next_monitor {
            if let Err(e) = lifecycle.monitor(&client).await {
                tracing::debug!(error = %e, "node monitor failed");
            }
            next_monitor = Instant::now() + NODE_MONITOR_PERIOD;
        }
        super::process::pods_changed(&client, seen.as_deref(), SYNC_PERIOD).await;
    }
}

fn template_hash(template: &Value) -> String {
    let text = serde_json::to_string(template).unwrap_or_default();
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
        .chars()
        .map(|c| {
            if c.is_ascii_digit() {
                (b'b' + (c as u8 - b'0')) as char
            } else {
                c
            }
        })
        .collect()
}

fn owned_by(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|r| r.uid == uid))
}

fn owner_ref(kind: &str, api_version: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}])
}

async fn sync_deployments(client: &kube::Client) -> Result<(), kube::Error> {
    let deployments = Api::<Deployment>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    if deployments.items.is_empty() {
        return Ok(());
    }
    let replicasets = Api::<ReplicaSet>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    for d in &deployments.items {
        let (Some(name), Some(ns), Some(uid)) = (
            d.metadata.name.clone(),
            d.metadata.namespace.clone(),
            d.metadata.uid.clone(),
        ) else {
            continue;
        };
        let spec = d.spec.clone();
        let template = serde_json::to_value(&spec.template).unwrap_or(Value::Null);
        let hash = template_hash(&template);
        let rs_name = format!("{name}-{hash}");
        let rs_api = Api::<ReplicaSet>::namespaced(client.clone(), &ns);
        let owned: Vec<&ReplicaSet> = replicasets
            .items
            .iter()
            .filter(|rs| owned_by(&rs.metadata, &uid))
            .collect();
        let replicas = spec.replicas.unwrap_or(1);
        let current = owned
            .iter()
            .find(|rs| rs.metadata.name.as_deref() == Some(rs_name.as_str()));
        match current {
            None => {
                let mut template = template.clone();
                template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
                let mut selector = serde_json::to_value(&spec.selector).unwrap_or(json!({}));
                selector["matchLabels"]["pod-template-hash"] = json!(hash);
                let rs: ReplicaSet = serde_json::from_value(json!({
                    "metadata": {"name": rs_name, "namespace": ns, "labels": template["metadata"]["labels"].clone(),
                                 "ownerReferences": owner_ref("Deployment", "apps/v1", &name, &uid)},
                    "spec": {"replicas": replicas, "selector": selector, "template": template},
                }))
                .expect("replicaset shape");
                rs_api.create(&PostParams::default(), &rs).await?;
            }
            Some(rs) if rs.spec.replicas != Some(replicas) => {
                let mut rs = (*rs).clone();
                rs.spec.replicas = Some(replicas);
                rs_api
                    .replace(&rs_name, &PostParams::default(), &rs)
                    .await?;
            }
            Some(_) => {}
        }
        for old in owned
            .iter()
            .filter(|rs| rs.metadata.name.as_deref() != Some(rs_name.as_str()))
        {
            let _ = rs_api
                .delete(
                    old.metadata.name.as_deref().unwrap_or_default(),
                    &DeleteParams::default(),
                )
                .await;
        }
        // Status: pods of the current ReplicaSet that are Ready.
        let rs_uid = current.and_then(|rs| rs.metadata.uid.clone());
        let available = rs_uid
            .map(|u| {
                pods.items
                    .iter()
                    .filter(|p| owned_by(&p.metadata, &u) && pod_ready(p))
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .count() as i32
            })
            .unwrap_or(0);
        let have = d
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        let have_replicas = d.status.as_ref().and_then(|s| s.replicas);
        if have != available || have_replicas != Some(replicas) {
            let mut d = d.clone();
            let status = d.status.get_or_insert_with(Default::default);
            status.available_replicas = Some(available);
            status.ready_replicas = Some(available);
            status.replicas = Some(replicas);
            let api = Api::<Deployment>::namespaced(client.clone(), &ns);
            api.replace_status(&name, &PostParams::default(), &d)
                .await?;
        }
    }
    Ok(())
}

/// One sync of every ReplicaSet; returns the resourceVersion of the pods it saw (`None` when
/// there is no ReplicaSet: nothing to wake for).
async fn sync_replicasets(client: &kube::Client) -> Result<Option<String>, kube::Error> {
    let replicasets = Api::<ReplicaSet>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    if replicasets.items.is_empty() {
        return Ok(None);
    }
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let seen = pods.metadata.resource_version.clone();
    for rs in &replicasets.items {
        let (Some(name), Some(ns), Some(uid)) = (
            rs.metadata.name.clone(),
            rs.metadata.namespace.clone(),
            rs.metadata.uid.clone(),
        ) else {
            continue;
        };
        let want = rs.spec.replicas.unwrap_or(1).max(0) as usize;
        let mut owned: Vec<&Pod> = pods
            .items
            .iter()
            .filter(|p| owned_by(&p.metadata, &uid))
            // Active pods only, as upstream's `controller.FilterActivePods`: a terminating pod
            // is replaced at once.
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        owned.sort_by_key(|p| p.metadata.name.clone());
        let api = Api::<Pod>::namespaced(client.clone(), &ns);
        if owned.len() < want {
            let template = rs.spec.template.clone().unwrap_or_default();
            // Created together, as upstream's slow-start batch does for a few pods.
            let mut creates = Vec::new();
            for _ in owned.len()..want {
                let mut pod = json!({
                    "metadata": {"generateName": format!("{name}-"), "namespace": ns,
                                 "ownerReferences": owner_ref("ReplicaSet", "apps/v1", &name, &uid)},
                    "spec": serde_json::to_value(&template.spec).unwrap_or(json!({})),
                });
                if let Some(labels) = template.metadata.as_ref().and_then(|m| m.labels.clone()) {
                    pod["metadata"]["labels"] = json!(labels);
                }
                let pod: Pod = serde_json::from_value(pod).expect("pod shape");
                let api = api.clone();
                creates.push(async move { api.create(&PostParams::default(), &pod).await });
            }
            for created in futures::future::join_all(creates).await {
                created?;
            }
        } else {
            for extra in owned.iter().skip(want) {
                let _ = api
                    .delete(
                        extra.metadata.name.as_deref().unwrap_or_default(),
                        &DeleteParams::default(),
                    )
                    .await;
            }
        }
    }
    Ok(seen)
}

/// The node lifecycle controller's memory: when it last saw each node's lease change.
#[derive(Default)]
struct NodeLifecycle {
    probe: BTreeMap<String, (Option<String>, Instant)>,
}

impl NodeLifecycle {
    async fn monitor(&mut self, client: &kube::Client) -> Result<(), kube::Error> {
        let now = Instant::now();
        let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
            .list(&ListParams::default())
            .await?;
        for l in &leases.items {
            let name = l.metadata.name.clone().unwrap_or_default();
            let renew = l
                .spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0.to_string());
            let entry = self.probe.entry(name).or_insert((renew.clone(), now));
            if entry.0 != renew {
                *entry = (renew, now);
            }
        }
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await?;
        let api = Api::<Node>::all(client.clone());
        for node in &nodes.items {
            let name = node.metadata.name.clone().unwrap_or_default();
            let seen = self.probe.entry(name.clone()).or_insert((None, now)).1;
            let stale = now.duration_since(seen) > NODE_MONITOR_GRACE;
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.status.clone())
                .unwrap_or_default();
            let tainted = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|ts| ts.iter().any(|t| t.key == UNREACHABLE_TAINT));
            if stale && ready != "Unknown" {
                let mut n = node.clone();
                let conditions = n
                    .status
                    .get_or_insert_with(Default::default)
                    .conditions
                    .get_or_insert_with(Vec::new);
                conditions.retain(|c| c.type_ != "Ready");
                conditions.push(NodeCondition {
                    type_: "Ready".into(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusUnknown".into()),
                    message: Some("Kubelet stopped posting node status.".into()),
                    ..NodeCondition::default()
                });
                api.replace_status(&name, &PostParams::default(), &n)
                    .await?;
            }
            if stale && !tainted {
                let mut n = api.get(&name).await?;
                n.spec
                    .get_or_insert_with(Default::default)
                    .taints
                    .get_or_insert_with(Vec::new)
                    .push(Taint {
                        key: UNREACHABLE_TAINT.into(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    });
                api.replace(&name, &PostParams::default(), &n).await?;
            }
            if !stale && ready == "True" && tainted {
                let mut n = node.clone();
                if let Some(ts) = n.spec.as_mut().and_then(|s| s.taints.as_mut()) {
                    ts.retain(|t| t.key != UNREACHABLE_TAINT);
                }
                api.replace(&name, &PostParams::default(), &n).await?;
            }
        }
        Ok(())
    }
}
