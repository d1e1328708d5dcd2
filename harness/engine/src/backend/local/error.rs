//! Why the local control plane could not start, or a process of it could not.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use super::build::BuildError;
use crate::kubeclient::ClientError;
use crate::selfhosted::BootstrapError;

/// Why the local control plane, or one of its processes, could not start. Every variant is an
/// environment failure (exit 3); each names what failed and keeps its cause.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The pinned binaries could not be had.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A file or directory of the run could not be made.
    #[error("cannot {what} {}", path.display())]
    File {
        /// `create`, `write`, `read`, `link`, `open`.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Something this machine must give could not be had (a port, an address, the executable).
    #[error("{what}")]
    Machine {
        /// What was needed.
        what: String,
        /// Why it could not be had.
        #[source]
        source: Option<std::io::Error>,
    },
    /// The certificates could not be generated.
    #[error("cannot generate certificates")]
    Certificates(#[source] rcgen::Error),
    /// A process could not be started at all.
    #[error("cannot start {process} (setpriv and unshare from util-linux are needed)")]
    Spawn {
        /// The process.
        process: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The command line of a process could not be made.
    #[error("{0}")]
    Launch(String),
    /// A process ended while the cluster was starting.
    #[error(
        "{process} exited ({status}) while the cluster was starting; its log ends:\n    {log_tail}"
    )]
    Exited {
        /// The process.
        process: String,
        /// How it ended.
        status: ExitStatus,
        /// The last lines of its log.
        log_tail: String,
    },
    /// The API server did not answer `/readyz` in time.
    #[error("the API server was not ready after {}s; its log ends:\n    {log_tail}", waited.as_secs())]
    ApiNotReady {
        /// How long it was waited for.
        waited: Duration,
        /// The last lines of its log.
        log_tail: String,
    },
    /// Leases or nodes were still missing when the time was up.
    #[error("the control plane was not ready after {}s: {}", waited.as_secs(), missing.join(", "))]
    NotReady {
        /// How long it was waited for.
        waited: Duration,
        /// What was missing.
        missing: Vec<String>,
    },
    /// The control plane started and its own Leases are held, but a pod agent's Lease is not:
    /// the workload of the manifests did not take it.
    #[error("the control plane started, but the workload did not take its Lease within {}s:\n    {}", waited.as_secs(), agents.join("\n    "))]
    WorkloadNotReady {
        /// How long it was waited for.
        waited: Duration,
        /// Per pod agent whose Lease is not held: what was seen instead.
        agents: Vec<String>,
    },
    /// An object of the scenario's `cluster.manifests` could not be applied.
    #[error("the scenario's manifests could not be applied")]
    Manifests(#[source] Box<crate::manifests::ManifestError>),
    /// A client for the API server could not be made.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// An object the run needs could not be created.
    #[error("cannot create {object}")]
    Api {
        /// The object.
        object: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The self-hosted components did not come up.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// Ctrl-C or SIGTERM came while the cluster was starting.
    #[error("interrupted while the control plane was starting")]
    Interrupted,
}

impl LocalError {
    /// A file operation that failed.
    pub(crate) fn file(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| LocalError::File { what, path, source }
    }
}
