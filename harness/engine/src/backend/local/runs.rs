//! The local control planes of this machine, found through their run directories: what
//! `kubechaos cluster status` shows and what `kubechaos cluster down` stops or removes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use super::error::LocalError;

/// What a run directory says about the kubechaos process that owns it (`cluster.json`), so that
/// `kubechaos cluster status|down` can find running control planes.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RunRecord {
    /// The kubechaos process.
    pub pid: u32,
    /// `cluster up`, `scenario NAME`.
    pub purpose: String,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The directory outlives the run.
    pub keep: bool,
}

impl RunRecord {
    /// Its file name in the run directory.
    pub const FILE: &'static str = "cluster.json";

    /// Whether its kubechaos process is still running (not ended, not a zombie waiting for its
    /// parent, and not another program that got the same pid since).
    pub fn alive(&self) -> bool {
        let proc = PathBuf::from(format!("/proc/{}", self.pid));
        let running = std::fs::read_to_string(proc.join("stat"))
            .ok()
            .and_then(|stat| {
                let state = stat.rsplit_once(") ")?.1.chars().next()?;
                Some(state != 'Z' && state != 'X')
            })
            .unwrap_or(false);
        let ours = std::fs::read(proc.join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains("kubechaos"))
            .unwrap_or(false);
        running && ours
    }

    /// Every run directory under the temporary directory, oldest first.
    pub fn all() -> Vec<(PathBuf, RunRecord)> {
        let mut out: Vec<(std::time::SystemTime, PathBuf, RunRecord)> = Vec::new();
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return Vec::new();
        };
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with("kubechaos-") {
                continue;
            }
            let path = e.path().join(Self::FILE);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if let Ok(r) = serde_json::from_str::<RunRecord>(&text) {
                let at = std::fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                out.push((at, e.path(), r));
            }
        }
        out.sort_by_key(|a| a.0);
        out.into_iter().map(|(_, p, r)| (p, r)).collect()
    }
}

/// What a running control plane's API server says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiState {
    /// `/readyz` answered `ok`.
    Ready,
    /// It answered, not ready: what it said (its failing checks).
    NotReady(String),
    /// It did not answer: why.
    Unreachable(String),
    /// Its kubeconfig could not be read.
    NoKubeconfig(String),
}

/// What a running control plane looks like now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// Its API server.
    pub api: ApiState,
    /// Each Lease (`NAMESPACE/NAME`) but nodes' and API servers' own, and who holds it.
    pub leases: Vec<(String, Option<String>)>,
    /// Nodes Ready and schedulable, and all nodes (when they could be listed).
    pub nodes: Option<(usize, usize)>,
}

/// How `cluster down` left a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Down {
    /// Its kubechaos stopped (SIGTERM); the directory is kept if it was to be kept.
    Stopped,
    /// Its kubechaos was gone (killed); the directory it left was removed.
    Removed,
    /// Nothing to do: it ended and its directory is kept on purpose.
    Kept,
}

impl RunRecord {
    /// What its control plane looks like now (answers within a few seconds).
    pub async fn status(&self) -> Status {
        let mut status = Status {
            api: ApiState::Ready,
            leases: Vec::new(),
            nodes: None,
        };
        let t = Some(Duration::from_secs(3));
        let client = match crate::kubeclient::client(Some(&self.kubeconfig), None, t).await {
            Ok(c) => c,
            Err(e) => {
                status.api = ApiState::NoKubeconfig(kubechaos_core::error::chain(&e));
                return status;
            }
        };
        let req = http::Request::get("/readyz")
            .body(Vec::new())
            .expect("request");
        match client.request_text(req).await {
            Ok(text) if text.trim() == "ok" => {}
            Ok(text) => status.api = ApiState::NotReady(text.trim().to_owned()),
            Err(kube::Error::Api(s)) => {
                let failing: Vec<&str> =
                    s.message.lines().filter(|l| l.starts_with("[-]")).collect();
                status.api = ApiState::NotReady(format!(
                    "readyz answered {}: {}",
                    s.code,
                    failing.join(" ")
                ));
                return status;
            }
            Err(e) => {
                status.api = ApiState::Unreachable(e.to_string());
                return status;
            }
        }
        if let Ok(leases) = Api::<Lease>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            for l in leases.items {
                let ns = l.metadata.namespace.unwrap_or_default();
                let name = l.metadata.name.unwrap_or_default();
                if ns == "kube-node-lease" || name.starts_with("apiserver-") {
                    continue;
                }
                let holder = l
                    .spec
                    .and_then(|s| s.holder_identity)
                    .filter(|h| !h.is_empty());
                status.leases.push((format!("{ns}/{name}"), holder));
            }
        }
        if let Ok(nodes) = Api::<Node>::all(client).list(&ListParams::default()).await {
            let ready = nodes
                .items
                .iter()
                .filter(|n| crate::kubeclient::schedulable(n))
                .count();
            status.nodes = Some((ready, nodes.items.len()));
        }
        status
    }

    /// Stop the run in `dir`: SIGTERM to its kubechaos, which stops every process and removes
    /// the directory (unless kept), waited for up to `wait`; a run whose kubechaos was killed has
    /// only its directory left, which is removed.
    /// `remove_kept`: a directory kept on purpose (`--keep`) is removed too, once its run has
    /// ended (`cluster down DIR` names it).
    pub fn down(&self, dir: &Path, wait: Duration, remove_kept: bool) -> Result<Down, LocalError> {
        if self.alive() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + wait;
            while self.alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            if self.alive() {
                return Err(LocalError::Machine {
                    what: format!("pid {} did not stop within {}s", self.pid, wait.as_secs()),
                    source: None,
                });
            }
            Ok(Down::Stopped)
        } else if !self.keep || remove_kept {
            // Its children ended with it (parent-death signal); only the directory is left.
            std::fs::remove_dir_all(dir).map_err(LocalError::file("remove", dir))?;
            Ok(Down::Removed)
        } else {
            Ok(Down::Kept)
        }
    }
}
