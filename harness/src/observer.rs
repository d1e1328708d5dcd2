//! The observer: watches a cluster through its API server (polling every second, as an
//! informer's relist would), records what changed as [`events`](crate::events), and carries out
//! the plan's API-level actions (probe pods, `delete-pods`).
//!
//! It only needs a `kube::Client`, so every backend runs the same observer: the sim runs it as
//! the `kubechaos` host (never partitioned or crashed), real backends as a task.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;

use crate::events::{EventKind, Recorder};

/// How often the observer polls.
pub const POLL_PERIOD: Duration = Duration::from_secs(1);
/// Namespace of probe pods.
pub const PROBE_NAMESPACE: &str = "kubechaos";

/// An API-level action for the harness host to carry out.
#[derive(Clone, Debug)]
pub enum Command {
    /// Create the probe pod of invariant `invariant`.
    Probe {
        /// Index in `expect:`.
        invariant: usize,
    },
    /// Delete the pods matching a selector.
    DeletePods {
        /// Namespace.
        namespace: String,
        /// Label selector.
        selector: String,
    },
}

/// What the observer last reported, so it records changes only.
#[derive(Default)]
struct Seen {
    leases: BTreeMap<String, (Option<String>, Option<u64>, u32)>,
    nodes: BTreeMap<String, (bool, bool)>,
    bound: BTreeMap<String, String>,
    deployments: BTreeMap<String, (u32, u32)>,
    /// Whether the last poll reached the API server (None before the first).
    reachable: Option<bool>,
}

/// The observer/actuator.
pub struct Observer {
    /// Where events go.
    pub recorder: Recorder,
    /// The wall-clock time at the start of the run (renew times are recorded relative to it).
    pub epoch: k8s_openapi::jiff::Timestamp,
    /// Whether Deployments need watching (an `available` invariant exists).
    pub watch_deployments: bool,
    /// The Leases to record (`NAMESPACE/NAME`); a real cluster holds many others (the API
    /// servers' identity leases, other controllers').
    pub leases: std::collections::BTreeSet<String>,
}

impl Observer {
    /// Run until the simulation ends.
    pub async fn run(self, client: kube::Client, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut seen = Seen::default();
        let mut pending: Vec<Command> = Vec::new();
        let mut next_poll = tokio::time::Instant::now();
        loop {
            while let Ok(c) = commands.try_recv() {
                pending.push(c);
            }
            let mut still = Vec::new();
            for c in pending.drain(..) {
                if !self.execute(&client, &c).await {
                    still.push(c);
                }
            }
            pending = still;
            if tokio::time::Instant::now() >= next_poll {
                self.poll(&client, &mut seen).await;
                next_poll = tokio::time::Instant::now() + POLL_PERIOD;
            }
            tokio::select! {
                biased;
                Some(c) = commands.recv() => pending.push(c),
                () = tokio::time::sleep_until(next_poll) => {}
            }
        }
    }

    /// Carry out a command; false when it must be retried (the API server did not answer).
    async fn execute(&self, client: &kube::Client, c: &Command) -> bool {
        match c {
            Command::Probe { invariant } => {
                let name = format!("probe-{invariant}");
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": PROBE_NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "kubechaos"}},
                    "spec": {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]},
                }))
                .expect("probe pod shape");
                match Api::<Pod>::namespaced(client.clone(), PROBE_NAMESPACE)
                    .create(&PostParams::default(), &pod)
                    .await
                {
                    Ok(_) => {
                        self.recorder.record(EventKind::ProbeCreated {
                            invariant: *invariant,
                            pod: format!("{PROBE_NAMESPACE}/{name}"),
                        });
                        true
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "probe pod not created yet");
                        false
                    }
                }
            }
            Command::DeletePods {
                namespace,
                selector,
            } => {
                let api = Api::<Pod>::namespaced(client.clone(), namespace);
                match api.list(&ListParams::default().labels(selector)).await {
                    Ok(list) => {
                        for p in list.items {
                            let _ = api
                                .delete(
                                    p.metadata.name.as_deref().unwrap_or_default(),
                                    &DeleteParams::default(),
                                )
                                .await;
                        }
                        true
                    }
                    Err(_) => false,
                }
            }
        }
    }

    fn since_start_ms(&self, t: &k8s_openapi::jiff::Timestamp) -> u64 {
        let d = t.duration_since(self.epoch);
        d.as_millis().max(0) as u64
    }

    /// Say in the timeline when the observer loses the API server and when it has it back: the
    /// observer never fails a run, but a gap in what it saw must be visible.
    fn reach(&self, seen: &mut Seen, result: Result<(), String>) {
        let ok = result.is_ok();
        if seen.reachable == Some(ok) || (seen.reachable.is_none() && ok) {
            seen.reachable = Some(ok);
            return;
        }
        seen.reachable = Some(ok);
        self.recorder.record(EventKind::ProcessNote {
            process: "kubechaos".into(),
            message: match result {
                Ok(()) => "observer: reached the API server again".into(),
                Err(e) => {
                    format!("observer: cannot reach the API server ({e}); retrying every second")
                }
            },
        });
    }

    async fn poll(&self, client: &kube::Client, seen: &mut Seen) {
        let leases = Api::<Lease>::all(client.clone())
            .list(&ListParams::default())
            .await;
        self.reach(seen, leases.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        if let Ok(leases) = leases {
            for l in leases.items {
                let ns = l.metadata.namespace.clone().unwrap_or_default();
                let key = format!("{ns}/{}", l.metadata.name.clone().unwrap_or_default());
                if !self.leases.contains(&key) {
                    continue;
                }
                let spec = l.spec.unwrap_or_default();
                let now = (
                    spec.holder_identity.clone().filter(|h| !h.is_empty()),
                    spec.renew_time.as_ref().map(|t| self.since_start_ms(&t.0)),
                    spec.lease_transitions.unwrap_or(0).max(0) as u32,
                );
                if seen.leases.get(&key) != Some(&now) {
                    self.recorder.record(EventKind::LeaseObserved {
                        lease: key.clone(),
                        holder: now.0.clone(),
                        renew_ms: now.1,
                        transitions: now.2,
                    });
                    seen.leases.insert(key, now);
                }
            }
        }
        if let Ok(nodes) = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            for n in nodes.items {
                let name = n.metadata.name.clone().unwrap_or_default();
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                let tainted = n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|ts| {
                        ts.iter()
                            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                    });
                if seen.nodes.get(&name) != Some(&(ready, tainted)) {
                    self.recorder.record(EventKind::NodeObserved {
                        node: name.clone(),
                        ready,
                        tainted,
                    });
                    seen.nodes.insert(name, (ready, tainted));
                }
            }
        }
        if let Ok(pods) = Api::<Pod>::namespaced(client.clone(), PROBE_NAMESPACE)
            .list(&ListParams::default())
            .await
        {
            for p in pods.items {
                let key = format!(
                    "{PROBE_NAMESPACE}/{}",
                    p.metadata.name.clone().unwrap_or_default()
                );
                if let Some(node) = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .filter(|n| !n.is_empty())
                {
                    if seen.bound.get(&key) != Some(&node) {
                        self.recorder.record(EventKind::PodBound {
                            pod: key.clone(),
                            node: node.clone(),
                        });
                        seen.bound.insert(key, node);
                    }
                }
            }
        }
        if self.watch_deployments {
            if let Ok(ds) = Api::<Deployment>::all(client.clone())
                .list(&ListParams::default())
                .await
            {
                for d in ds.items {
                    let key = format!(
                        "{}/{}",
                        d.metadata.namespace.clone().unwrap_or_default(),
                        d.metadata.name.clone().unwrap_or_default()
                    );
                    let desired = d.spec.replicas.unwrap_or(1).max(0) as u32;
                    let available = d
                        .status
                        .as_ref()
                        .and_then(|s| s.available_replicas)
                        .unwrap_or(0)
                        .max(0) as u32;
                    if seen.deployments.get(&key) != Some(&(available, desired)) {
                        self.recorder.record(EventKind::DeploymentObserved {
                            deployment: key.clone(),
                            available,
                            desired,
                        });
                        seen.deployments.insert(key, (available, desired));
                    }
                }
            }
        }
    }
}
