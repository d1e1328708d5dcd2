//! Why the kube backend could not reach, read or act on a cluster.

use std::path::PathBuf;
use std::time::Duration;

use kube::config::KubeconfigError;

use crate::kubeclient::ClientError;

/// Why the kube backend could not go on. [`KubeError::NotDisposable`] and
/// [`KubeError::NoContext`] (and [`KubeError::NotInAPod`]) are the user's input (exit 2); the rest are the environment (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// No kubeconfig could be read to find the current context.
    #[error("{}", match path {
        Some(p) => format!("cannot read kubeconfig {}", p.display()),
        None => "no kubeconfig found; expected --kubeconfig FILE or $KUBECONFIG".to_owned(),
    })]
    Kubeconfig {
        /// The file named, if one was.
        path: Option<PathBuf>,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// Neither `--context` nor a current context.
    #[error("the kubeconfig has no current context; expected --context NAME")]
    NoContext,
    /// `--context in-cluster` outside a pod.
    #[error("--context in-cluster names the pod kubechaos runs in, and this is not a pod (no KUBERNETES_SERVICE_HOST, or no service account token in /var/run/secrets/kubernetes.io/serviceaccount); expected --context NAME of your kubeconfig")]
    NotInAPod,
    /// The safety guard refused the context.
    #[error("refusing to touch context `{context}`: it does not look disposable; expected a `kind-*` or `k3d-*` context, kubechaos's own `{own}`, or `--allow-context {context}` (or `allow-contexts: [{context}]` in kubechaos's configuration file) if this cluster may be broken on purpose")]
    NotDisposable {
        /// The context.
        context: String,
        /// kubechaos's own context name.
        own: &'static str,
    },
    /// No client could be made.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A request to the cluster failed.
    #[error("cannot {what}")]
    Api {
        /// What could not be done.
        what: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// A command on the provider's machines failed, so the run stopped there.
    #[error("a machine command failed at or before t={at}, so the run stopped there:\n  {}\n{restored}", errors.join("\n  "))]
    Machine {
        /// When, in the run's time (`1m20s`).
        at: String,
        /// Each failure, as [`DockerError`] said it.
        errors: Vec<String>,
        /// What was restored afterwards.
        restored: String,
    },
    /// The cluster's nodes are not running containers of the Docker engine here (before
    /// anything was changed).
    #[error("the cluster's node containers cannot be reached: {what}; nothing was changed")]
    NodeContainers {
        /// Why.
        what: String,
    },
    /// kind's load balancer in front of several control-plane nodes was not found (before
    /// anything was changed).
    #[error("kind's load balancer could not be found (a partition between a node and the API servers must drop the node's packets to it): {what}; nothing was changed")]
    LoadBalancer {
        /// Why.
        what: String,
    },
    /// The agents could not be started on this machine or did not lead in time, the
    /// manifests' objects or the pod agents' pods did not come up, or the cluster's Leases were
    /// not held in time.
    #[error("the run could not start: {what}")]
    Agents {
        /// What went wrong.
        what: String,
    },
    /// `--provider k3s-container` in a build without the `testcontainers` feature.
    #[error("`--provider k3s-container` needs kubechaos built with the `testcontainers` feature: cargo run --features testcontainers -- scenario ...")]
    NoTestcontainers,
    /// The k3s container could not be started or read.
    #[error("{what}")]
    Container {
        /// What could not be done.
        what: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Why a `docker` command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DockerError {
    /// The CLI could not be run.
    #[error("cannot run `{}`; the kind and k3s providers need the docker CLI and a Docker engine where kubechaos runs", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It did not finish in time (it was killed).
    #[error("`{shown}` did not finish within {limit:?}")]
    Timeout {
        /// The command line.
        shown: String,
        /// How long it was given.
        limit: Duration,
    },
    /// Its output could not be read.
    #[error("`{shown}`")]
    Output {
        /// The command line.
        shown: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It failed.
    #[error("`{shown}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        shown: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it said.
        stderr: String,
    },
}
