//! Clients for real API servers, found the way kubectl finds them: `--kubeconfig` (or
//! `$KUBECONFIG`, or `~/.kube/config`), `--context`, or the in-cluster service account.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use kubechaos_core::scenario::LeaseRef;

/// A client from a kubeconfig file (or the default places), for a context (or the current
/// one), with an optional per-request timeout on connect, read and write.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    timeout: Option<Duration>,
) -> Result<kube::Client, String> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| format!("invalid kubeconfig {}: {e}", path.display()))?
        }
        None => match kube::Config::from_kubeconfig(&options).await {
            Ok(c) => c,
            Err(kc_err) if context.is_none() => kube::Config::incluster().map_err(|_| {
                format!("no kubeconfig found ({kc_err}) and not running in a cluster; expected --kubeconfig FILE or $KUBECONFIG")
            })?,
            Err(e) => return Err(format!("cannot use context {}: {e}", context.unwrap_or(""))),
        },
    };
    if let Some(t) = timeout {
        config.connect_timeout = Some(t);
        config.read_timeout = Some(t);
        config.write_timeout = Some(t);
    }
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))
}

/// The holder identity of a Lease (`Ok(None)`: it does not exist or nobody holds it).
pub async fn lease_holder(
    client: &kube::Client,
    lease: &LeaseRef,
) -> Result<Option<String>, kube::Error> {
    Ok(Api::<Lease>::namespaced(client.clone(), &lease.namespace)
        .get_opt(&lease.name)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// Whether a node's Ready condition is True.
pub fn node_ready(n: &k8s_openapi::api::core::v1::Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether a node can take new pods: Ready, not cordoned, without a `NoSchedule` or `NoExecute`
/// taint (what the scheduler's filters ask of a pod without tolerations).
pub fn schedulable(n: &k8s_openapi::api::core::v1::Node) -> bool {
    let spec = n.spec.as_ref();
    let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    let tainted = spec.and_then(|s| s.taints.as_ref()).is_some_and(|ts| {
        ts.iter()
            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
    });
    node_ready(n) && !cordoned && !tainted
}

/// Whether a pod's Ready condition is True.
pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
