//! Clients for real API servers, found the way kubectl finds them: `--kubeconfig` (or
//! `$KUBECONFIG`, or `~/.kube/config`), `--context`, or the in-cluster service account.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

use kubechaos_core::scenario::LeaseRef;

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file named could not be read or parsed.
    #[error("cannot read kubeconfig {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The kubeconfig file named does not give a usable configuration.
    #[error("invalid kubeconfig {}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// No kubeconfig in the default places, and not in a pod.
    #[error("no kubeconfig found and not running in a cluster; expected --kubeconfig FILE or $KUBECONFIG")]
    NotFound(#[source] KubeconfigError),
    /// The context named is not usable.
    #[error("cannot use context {context}")]
    Context {
        /// The context.
        context: String,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The configuration could not make a client.
    #[error("cannot build a client")]
    Build(#[source] kube::Error),
    /// `--context in-cluster`, and the pod's service account cannot be used.
    #[error("cannot use this pod's service account (--context {IN_CLUSTER})")]
    InCluster(#[source] kube::config::InClusterError),
}

/// The context name that stands for the pod kubechaos runs in: its service account, as
/// client-go's in-cluster configuration. It is a context like any other to the safety guard,
/// which never takes it as disposable (`--allow-context in-cluster`).
pub const IN_CLUSTER: &str = "in-cluster";

/// Where a pod's service account token, CA and namespace are mounted.
const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Whether this process runs in a pod: the API server's address in its environment and a service
/// account token mounted (what client-go's `InClusterConfig` needs).
pub fn in_a_pod() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        && std::env::var_os("KUBERNETES_SERVICE_PORT").is_some()
        && Path::new(SERVICE_ACCOUNT).join("token").is_file()
}

/// The kubeconfig the pod's service account amounts to, with one context, [`IN_CLUSTER`]: the
/// API server from `KUBERNETES_SERVICE_HOST`/`PORT`, the mounted CA and token file (read again
/// when it rotates), the pod's namespace. `None` outside a pod. What needs a kubeconfig (the
/// agents' own, through their proxies) is made from it as from any other.
pub fn in_cluster_kubeconfig() -> Option<Kubeconfig> {
    if !in_a_pod() {
        return None;
    }
    let host = std::env::var("KUBERNETES_SERVICE_HOST").ok()?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").ok()?;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let namespace = std::fs::read_to_string(Path::new(SERVICE_ACCOUNT).join("namespace"))
        .ok()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty());
    serde_json::from_value(serde_json::json!({
        "clusters": [{"name": IN_CLUSTER, "cluster": {
            "server": format!("https://{host}:{port}"),
            "certificate-authority": format!("{SERVICE_ACCOUNT}/ca.crt"),
        }}],
        "users": [{"name": IN_CLUSTER, "user": {"tokenFile": format!("{SERVICE_ACCOUNT}/token")}}],
        "contexts": [{"name": IN_CLUSTER, "context": {
            "cluster": IN_CLUSTER, "user": IN_CLUSTER, "namespace": namespace,
        }}],
        "current-context": IN_CLUSTER,
    }))
    .ok()
}

/// A kubeconfig as kubectl reads it (`path`, else `$KUBECONFIG`, else `~/.kube/config`), or the
/// pod's own for context [`IN_CLUSTER`] when no file is named.
pub fn read_kubeconfig(
    path: Option<&Path>,
    context: Option<&str>,
) -> Result<Kubeconfig, KubeconfigError> {
    if path.is_none() && context == Some(IN_CLUSTER) {
        if let Some(kc) = in_cluster_kubeconfig() {
            return Ok(kc);
        }
    }
    match path {
        Some(p) => Kubeconfig::read_from(p),
        None => Kubeconfig::read(),
    }
}

/// A client from a kubeconfig file (or the default places), for a context (or the current
/// one), with an optional per-request timeout on connect, read and write.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    timeout: Option<Duration>,
) -> Result<kube::Client, ClientError> {
    kube::Client::try_from(config(kubeconfig, context, timeout).await?).map_err(ClientError::Build)
}

/// The configuration [`client`] makes its client from.
pub async fn config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    timeout: Option<Duration>,
) -> Result<kube::Config, ClientError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let mut config = match kubeconfig {
        None if context == Some(IN_CLUSTER) => {
            kube::Config::incluster().map_err(ClientError::InCluster)?
        }
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|source| ClientError::Read {
                path: path.to_owned(),
                source,
            })?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|source| ClientError::Invalid {
                    path: path.to_owned(),
                    source,
                })?
        }
        None => match kube::Config::from_kubeconfig(&options).await {
            Ok(c) => c,
            Err(kc_err) if context.is_none() => {
                kube::Config::incluster().map_err(|_| ClientError::NotFound(kc_err))?
            }
            Err(source) => {
                return Err(ClientError::Context {
                    context: context.unwrap_or("").to_owned(),
                    source,
                })
            }
        },
    };
    if let Some(t) = timeout {
        config.connect_timeout = Some(t);
        config.read_timeout = Some(t);
        config.write_timeout = Some(t);
    }
    Ok(config)
}

/// The environment variable of [`self_delay`].
pub const SELF_DELAY_ENV: &str = "KUBECHAOS_SELF_DELAY";

/// `$KUBECHAOS_SELF_DELAY` (a duration, `5s`): chaos on kubechaos itself. Its own connections to
/// the API server that read the evidence (the observer, the pod agents' followers) go through a
/// proxy that holds every byte this long each way, as a slow API server or a starved CI runner
/// makes it read late; the verdicts must not change, since every fact is placed when it
/// happened. The reports say the largest lag seen. kubechaos's own tests use it.
pub fn self_delay() -> Result<Option<Duration>, String> {
    match std::env::var(SELF_DELAY_ENV) {
        Err(_) => Ok(None),
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => kubechaos_core::scenario::duration::parse(v.trim())
            .map(Some)
            .map_err(|e| format!("${SELF_DELAY_ENV}={v}: {e}; expected a duration such as 5s")),
    }
}

/// A client of `config`'s API server whose connections go through a proxy on 127.0.0.1 that
/// holds every byte `delay` each way ([`self_delay`]; within a Tokio runtime). The proxy lives
/// as long as the returned handle.
pub(crate) async fn delayed(
    mut config: kube::Config,
    delay: Duration,
) -> Result<(kube::Client, crate::backend::local::proxy::Proxy), ClientError> {
    let unusable = |why: String| ClientError::Build(kube::Error::Service(why.into()));
    let url = config.cluster_url.clone();
    let host = url
        .host()
        .ok_or_else(|| unusable(format!("{url} names no host")))?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = url.port_u16().unwrap_or(443);
    let target = tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| unusable(format!("cannot resolve {host}:{port}")))?;
    let proxy = crate::backend::local::proxy::Proxy::start(target)
        .map_err(|e| unusable(format!("cannot start a proxy on 127.0.0.1: {e}")))?;
    let held = crate::backend::link::LinkState {
        latency: delay,
        ..Default::default()
    };
    proxy.set(true, &held);
    proxy.set(false, &held);
    // A TLS handshake takes two round trips through the proxy, a request one: the timeouts
    // grow by what the proxy holds, so that only the reading is late, not refused.
    let held_back = delay * 4;
    config.connect_timeout = config.connect_timeout.map(|t| t + held_back);
    config.read_timeout = config.read_timeout.map(|t| t + held_back);
    config.write_timeout = config.write_timeout.map(|t| t + held_back);
    // The server's certificate still names the host it was reached at.
    if config.tls_server_name.is_none() {
        config.tls_server_name = Some(host.clone());
    }
    config.cluster_url = format!("https://{}", proxy.addr)
        .parse()
        .map_err(|e| unusable(format!("the proxy's address: {e}")))?;
    let client = kube::Client::try_from(config).map_err(ClientError::Build)?;
    Ok((client, proxy))
}

/// The holder identity of a Lease (`Ok(None)`: it does not exist or nobody holds it).
pub(crate) async fn lease_holder(
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

/// Why pod agent `agent`'s pods did not take `lease` (the start's words on every backend that
/// runs them): which Leases its namespace has instead (a program that takes another Lease than
/// the scenario names), and `pods`, a sentence each, with their starts and last log lines (a
/// missing Role's 403, a port already bound).
pub(crate) async fn lease_not_taken(
    client: &kube::Client,
    agent: &str,
    lease: &LeaseRef,
    pods: &[String],
) -> String {
    let listed = Api::<Lease>::namespaced(client.clone(), &lease.namespace)
        .list(&kube::api::ListParams::default())
        .await;
    let others = match listed {
        Ok(l) => {
            let held: Vec<String> = l
                .items
                .iter()
                .filter(|l| l.metadata.name.as_deref() != Some(lease.name.as_str()))
                .map(|l| {
                    let holder = l
                        .spec
                        .as_ref()
                        .and_then(|s| s.holder_identity.clone())
                        .filter(|h| !h.is_empty())
                        .unwrap_or_else(|| "nobody".into());
                    format!(
                        "{} (held by {holder})",
                        l.metadata.name.clone().unwrap_or_default()
                    )
                })
                .collect();
            if held.is_empty() {
                format!("no other Lease in namespace {}", lease.namespace)
            } else {
                format!(
                    "Leases taken in namespace {} instead: {} (does the program take another Lease than the scenario names?)",
                    lease.namespace,
                    held.join(", ")
                )
            }
        }
        Err(e) => format!(
            "the Leases of namespace {} could not be listed: {e}",
            lease.namespace
        ),
    };
    format!(
        "agent {agent}: no pod took Lease {lease}; {others}; its pods:\n      {}",
        if pods.is_empty() {
            "none ran".to_owned()
        } else {
            pods.join("\n      ")
        }
    )
}

/// How often a starting cluster is checked for readiness. Time zero of a run is the first
/// check that finds it ready, on every backend, so the components' renew cycles stand in the same
/// relation to the scenario's times on the sim as on a real control plane.
pub(crate) const READY_POLL: Duration = Duration::from_millis(250);

/// What keeps a starting cluster from being ready: each of `leases` held, `nodes` fake nodes
/// (`node-0` …) Ready and schedulable. Empty: ready.
pub(crate) async fn not_ready(
    client: &kube::Client,
    leases: &[LeaseRef],
    nodes: u32,
) -> Vec<String> {
    let mut missing = Vec::new();
    for lease in leases {
        if !lease_holder(client, lease).await.is_ok_and(|h| h.is_some()) {
            missing.push(format!("lease {lease} not held"));
        }
    }
    let listed = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&kube::api::ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    for i in 0..nodes {
        let name = kubechaos_core::scenario::validate::process_name("node", i);
        let ok = listed
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
            .is_some_and(schedulable);
        if !ok {
            missing.push(format!("{name} not Ready and schedulable"));
        }
    }
    missing
}

/// Whether a node's Ready condition is True.
pub(crate) fn node_ready(n: &k8s_openapi::api::core::v1::Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether a node can take new pods: Ready, not cordoned, without a `NoSchedule` or `NoExecute`
/// taint (what the scheduler's filters ask of a pod without tolerations).
pub(crate) fn schedulable(n: &k8s_openapi::api::core::v1::Node) -> bool {
    let spec = n.spec.as_ref();
    let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    let tainted = spec.and_then(|s| s.taints.as_ref()).is_some_and(|ts| {
        ts.iter()
            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
    });
    node_ready(n) && !cordoned && !tainted
}

/// Whether a pod's Ready condition is True.
pub(crate) fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// How long a call of a run's set-up is tried again while the API server cannot do it now.
pub(crate) const SETTLE_WAIT: Duration = Duration::from_secs(30);

/// Whether the API server said it could not do a request now, rather than that the request is
/// wrong: a 5xx (etcd's "request timed out" on a loaded machine, seen in CI), 429, or no answer
/// at all. client-go's `rest` client retries such answers too (429 and 5xx that carry
/// Retry-After; connection resets on reads).
pub(crate) fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::Service(_) | kube::Error::HyperError(_) => true,
        _ => false,
    }
}

/// `call`, tried again each second for up to [`SETTLE_WAIT`] while its error is transient.
pub(crate) async fn patiently<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let due = std::time::Instant::now() + SETTLE_WAIT;
    loop {
        match call().await {
            Err(e) if is_transient(&e) && std::time::Instant::now() < due => {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("etcdserver: request timed out", "InternalError")
                .with_code(code)
                .boxed(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_start_call_outlasts_etcds_timeouts_but_not_a_refusal() {
        let mut calls = 0;
        let settled = patiently(|| {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(status(500))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(settled.unwrap(), 3, "two 500s, then it is made");

        let mut calls = 0;
        let refused: Result<(), _> = patiently(|| {
            calls += 1;
            async { Err(status(403)) }
        })
        .await;
        assert!(matches!(refused, Err(kube::Error::Api(s)) if s.code == 403));
        assert_eq!(calls, 1, "a refusal is not asked again");
    }
}
