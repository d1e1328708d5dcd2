//! A self-hosted control plane (`cluster: {self-hosted: true}`): kube-scheduler and
//! kube-controller-manager run as Deployments in `kube-system`, their pods labelled
//! `component: NAME, tier: control-plane` as kubeadm labels its static pods, and run by the
//! node agents of the fake nodes ([`crate::fake_node`]) like a kubelet runs containers.
//!
//! This is the trap of the second seed: with every scheduler pod gone, the replacements the
//! ReplicaSet controller makes stay Pending (nothing binds them); with every controller-manager
//! pod gone, nothing makes the replacements at all.
//!
//! [`bootstrap`] brings it up as bootkube did, with a temporary control plane that hands over:
//! the temporary control plane is one pre-bound pod per component made from its Deployment's
//! template (the same mechanism as `kubechaos recover pod-from`, named `NAME-bootstrap`); once
//! the Deployments are available the bootstrap pods are deleted and the Deployments' own pods
//! take the leases.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::recover::{self, Workload};
use kubechaos_core::events::identity_process;
use kubechaos_core::scenario::validate::process_name;
use kubechaos_core::scenario::{Component, LeaseRef};

/// The Kubernetes release whose images the Deployments name (the pinned local build:
/// `fixtures/control-plane/kubernetes/go.mod`; a test keeps them equal).
pub(crate) const KUBERNETES_VERSION: &str = "v1.37.2";
/// Where the self-hosted components run.
pub(crate) const NAMESPACE: &str = "kube-system";
/// Suffix of the bootstrap pods' names: `kube-scheduler-bootstrap`.
pub(crate) const BOOTSTRAP: &str = "bootstrap";
/// The leader-election flags of the bootstrap pods: a short lease, so that the Deployments' own
/// pods take over soon after the bootstrap pods are deleted. (The sim's component models keep
/// upstream's 15 s whatever their flags; their hand-over costs only virtual time.)
pub(crate) const BOOTSTRAP_LEASE: [&str; 3] = [
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];
/// The controllers the bootstrap controller-manager runs: only what makes the Deployments'
/// pods. Upstream's default set takes about 5 s to start on 2 cores (each controller's
/// informers and service account), and nothing else of it is needed before the hand-over.
pub(crate) const BOOTSTRAP_CONTROLLERS: &str =
    "--controllers=deployment-controller,replicaset-controller";
/// The host directory that the components' pods mount (kubeadm's): kubeconfigs and `pki/`.
pub(crate) const HOST_CONFIG_DIR: &str = "/etc/kubernetes";

/// The container image of a component.
pub(crate) fn image(c: Component) -> String {
    format!("registry.k8s.io/{}:{KUBERNETES_VERSION}", c.name())
}

/// The component a container image runs, if it is one of the control-plane images that the node
/// agents can run (`registry.k8s.io/kube-scheduler:v1.37.2`, any registry or tag).
pub(crate) fn component_of_image(image: &str) -> Option<Component> {
    let path = image.split('@').next().unwrap_or(image);
    let last = path.rsplit('/').next().unwrap_or(path);
    let repo = last.split(':').next().unwrap_or(last);
    Component::ALL.into_iter().find(|c| c.name() == repo)
}

/// The arguments of a component's container, as kubeadm writes them (paths under
/// [`HOST_CONFIG_DIR`], which the node agent maps to its node's files). `--secure-port=0`:
/// every fake node shares this machine's network, so two replicas on one host could not both
/// take kubeadm's fixed ports; nothing here needs the components' HTTPS endpoints.
pub(crate) fn args(c: Component) -> Vec<String> {
    let conf = |f: &str| format!("{HOST_CONFIG_DIR}/{f}");
    let mut args = vec![
        format!(
            "--kubeconfig={}",
            conf(match c {
                Component::KubeScheduler => "scheduler.conf",
                Component::KubeControllerManager => "controller-manager.conf",
            })
        ),
        "--leader-elect=true".to_owned(),
        "--secure-port=0".to_owned(),
        "--v=1".to_owned(),
    ];
    if c == Component::KubeControllerManager {
        args.extend([
            format!("--service-account-private-key-file={}", conf("pki/sa.key")),
            format!("--root-ca-file={}", conf("pki/ca.crt")),
            format!("--cluster-signing-cert-file={}", conf("pki/ca.crt")),
            format!("--cluster-signing-key-file={}", conf("pki/ca.key")),
            "--use-service-account-credentials=true".to_owned(),
        ]);
    }
    args
}

/// The Deployment of a self-hosted component.
pub(crate) fn deployment(c: Component, replicas: u32) -> Deployment {
    let name = c.name();
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE,
                     "labels": {"component": name, "tier": "control-plane"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"component": name}},
            "template": {
                "metadata": {"labels": {"component": name, "tier": "control-plane"}},
                "spec": {
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": name,
                        "image": image(c),
                        "command": [name],
                        "args": args(c),
                        "volumeMounts": [{"name": "k8s", "mountPath": HOST_CONFIG_DIR, "readOnly": true}],
                    }],
                    "volumes": [{"name": "k8s", "hostPath": {"path": HOST_CONFIG_DIR, "type": "Directory"}}],
                },
            },
        },
    }))
    .expect("deployment shape")
}

/// Why the self-hosted components did not come up.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// Not every Deployment was available and leading in time; `missing` says what was not.
    #[error("the self-hosted control plane was not up after {}s: {}", limit.as_secs(), missing.join(", "))]
    NotUp {
        /// How long it was given.
        limit: Duration,
        /// What was missing when the time was up (each with its cause).
        missing: Vec<String>,
    },
    /// Not every Lease was held and every node Ready in time (the simulated cluster).
    #[error("the cluster was not ready after {}s: {}", limit.as_secs(), missing.join(", "))]
    NotReady {
        /// How long it was given.
        limit: Duration,
        /// What was missing when the time was up.
        missing: Vec<String>,
    },
}

/// Bring up the self-hosted components through a temporary control plane, then hand over (see
/// the module docs). `components`: replicas per component; `nodes`: how many fake nodes run
/// (`node-0` …; their node agents must be running). Gives up after `limit` (the caller's clock:
/// virtual on the sim) saying what was missing. `say` hears each phase.
pub(crate) async fn bootstrap(
    client: &kube::Client,
    components: &BTreeMap<Component, u32>,
    nodes: u32,
    limit: Duration,
    say: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), BootstrapError> {
    let deadline = tokio::time::Instant::now() + limit;
    let wanted: Vec<(Component, u32)> = components
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(c, n)| (*c, *n))
        .collect();
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    let mut missing: Vec<String>;
    let give_up = |missing: Vec<String>| BootstrapError::NotUp { limit, missing };
    let pause = || tokio::time::sleep(Duration::from_secs(1));

    // 1. The Deployments, and one bootstrap pod each, pre-bound to a node.
    say("self-hosted: creating the Deployments and the bootstrap pods");
    for (i, (c, replicas)) in wanted.iter().enumerate() {
        let node = process_name("node", i as u32 % nodes.max(1));
        loop {
            let step = async {
                match deployments
                    .create(&PostParams::default(), &deployment(*c, *replicas))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => {
                        return Err(format!(
                            "cannot create deployment/{}: {}",
                            c.name(),
                            kubechaos_core::error::chain(&e)
                        ))
                    }
                }
                let w = Workload {
                    kind: recover::Kind::Deployment,
                    namespace: NAMESPACE.to_owned(),
                    name: c.name().to_owned(),
                };
                let (_, mut pod) = recover::prepare(client, &w, &node, BOOTSTRAP)
                    .await
                    .map_err(|e| kubechaos_core::error::chain(&e))?;
                pod.metadata.name = Some(format!("{}-{BOOTSTRAP}", c.name()));
                // The temporary control plane hands over quickly: its Lease expires 4 s after
                // its pod is gone (kube-controller-manager does not release it when stopped),
                // not the 15 s of the Deployments' own pods. Nothing judges it.
                if let Some(container) = pod
                    .spec
                    .as_mut()
                    .and_then(|spec| spec.containers.first_mut())
                {
                    container
                        .args
                        .get_or_insert_default()
                        .extend(BOOTSTRAP_LEASE.map(str::to_owned));
                    if *c == Component::KubeControllerManager {
                        container
                            .args
                            .get_or_insert_default()
                            .push(BOOTSTRAP_CONTROLLERS.to_owned());
                    }
                }
                pod.metadata.annotations.get_or_insert_default().insert(
                    "kubechaos.io/recovery".into(),
                    format!("the temporary control plane that brings deployment/{} up; deleted once it is available", c.name()),
                );
                match recover::create(client, &pod).await {
                    Ok(_) => Ok(()),
                    Err(_)
                        if pods
                            .get_opt(&format!("{}-{BOOTSTRAP}", c.name()))
                            .await
                            .ok()
                            .flatten()
                            .is_some() =>
                    {
                        Ok(())
                    }
                    Err(e) => Err(kubechaos_core::error::chain(&e)),
                }
            };
            match step.await {
                Ok(()) => break,
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(give_up(vec![e])),
                Err(_) => pause().await,
            }
        }
    }

    // 2. Wait until every Deployment is available: the bootstrap controller-manager made their
    //    pods, the bootstrap scheduler bound them, the node agents run them.
    say("self-hosted: waiting for the Deployments to be available");
    loop {
        missing = Vec::new();
        for (c, replicas) in &wanted {
            let seen = deployments
                .get_opt(c.name())
                .await
                .ok()
                .flatten()
                .and_then(|d| d.status)
                .and_then(|s| s.available_replicas)
                .unwrap_or(0);
            if seen < *replicas as i32 {
                missing.push(format!(
                    "deployment/{} has {seen}/{replicas} available",
                    c.name()
                ));
            }
        }
        if missing.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(give_up(missing));
        }
        pause().await;
    }

    // 3. Hand over: delete the bootstrap pods; wait until they are gone and the Deployments'
    //    pods hold the leases.
    say("self-hosted: handing over from the bootstrap pods");
    loop {
        missing = Vec::new();
        for (c, _) in &wanted {
            let name = format!("{}-{BOOTSTRAP}", c.name());
            let lease = c.lease();
            match pods.get_opt(&name).await {
                // Its process has ended (its node removes the pod once it has): release the
                // Lease it may still hold, as client-go's `ReleaseOnCancel` would (upstream's
                // kube-controller-manager does not), so that a Deployment's pod takes it at its
                // next try rather than after the lease expires by each candidate's clock.
                Ok(None) => release(client, &lease, &name).await,
                Ok(Some(p)) => {
                    if p.metadata.deletion_timestamp.is_none() {
                        let _ = pods.delete(&name, &DeleteParams::default()).await;
                    }
                    missing.push(format!("pod {name} still exists"));
                }
                Err(e) => missing.push(format!("cannot read pod {name}: {e}")),
            }
            let holder = crate::kubeclient::lease_holder(client, &lease)
                .await
                .ok()
                .flatten()
                .unwrap_or_default();
            let process = identity_process(&holder);
            if holder.is_empty() || process == name {
                missing.push(format!(
                    "lease {lease} is held by {}",
                    if holder.is_empty() { "nobody" } else { process }
                ));
            }
        }
        if missing.is_empty() {
            say("self-hosted: the Deployments' pods hold the leases");
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(give_up(missing));
        }
        pause().await;
    }
}

/// Clear the holder of `lease` if process `process` holds it (a conflict or an error leaves it:
/// the caller tries again).
async fn release(client: &kube::Client, lease: &LeaseRef, process: &str) {
    let api = Api::<Lease>::namespaced(client.clone(), &lease.namespace);
    let Ok(Some(mut l)) = api.get_opt(&lease.name).await else {
        return;
    };
    let Some(spec) = l.spec.as_mut() else {
        return;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() || identity_process(holder) != process {
        return;
    }
    spec.holder_identity = None;
    let _ = api.replace(&lease.name, &PostParams::default(), &l).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_name_their_component() {
        for c in Component::ALL {
            assert_eq!(component_of_image(&image(c)), Some(c));
        }
        assert_eq!(
            component_of_image("localhost:5000/k8s/kube-scheduler:v1.30.0"),
            Some(Component::KubeScheduler)
        );
        assert_eq!(
            component_of_image("registry.k8s.io/kube-controller-manager@sha256:abc"),
            Some(Component::KubeControllerManager)
        );
        assert_eq!(component_of_image("registry.k8s.io/pause:3.10"), None);
        assert_eq!(component_of_image("kube-apiserver:v1.37.2"), None);
    }

    #[test]
    fn the_images_are_the_pinned_release() {
        let pins = crate::backend::local::build::Pins::embedded().expect("the pins");
        assert!(
            pins.kubernetes == KUBERNETES_VERSION,
            "KUBERNETES_VERSION ({KUBERNETES_VERSION}) differs from fixtures/control-plane/kubernetes/go.mod"
        );
    }

    #[test]
    fn deployments_select_their_pods_by_component() {
        let d = serde_json::to_value(deployment(Component::KubeScheduler, 2)).unwrap();
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(
            d["spec"]["selector"]["matchLabels"]["component"],
            "kube-scheduler"
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"],
            image(Component::KubeScheduler)
        );
    }
}
