//! `--provider k3s-container`: kubechaos starts k3s in a container through testcontainers
//! (the `testcontainers` cargo feature; it needs a Docker engine), plays the scenario on it with
//! the `k3s` provider, and removes the container at the end.
//!
//! The container's name and hostname are the same (`kubechaos-k3s-XXXXXX`), so its node is named
//! as its container and the k3s provider's docker commands reach it. The API port is mapped to a
//! fixed host port: a container stopped and started by `api-server: stop` keeps it.

use std::path::PathBuf;

use super::error::KubeError;

use testcontainers_modules::k3s::{K3s, KUBE_SECURE_PORT};
use testcontainers_modules::testcontainers::runners::AsyncRunner;
use testcontainers_modules::testcontainers::{ContainerAsync, ImageExt};

/// A running k3s container and the kubeconfig that reaches it.
pub(crate) struct K3sContainer {
    container: ContainerAsync<K3s>,
    /// Holds k3s's /etc/rancher/k3s and the kubeconfig kubechaos wrote.
    dir: tempfile::TempDir,
    /// The kubeconfig (server: 127.0.0.1 and the mapped port).
    pub(crate) kubeconfig: PathBuf,
    /// The container's name (= its node's name).
    pub(crate) name: String,
}

/// A free TCP port on the loopback address, for the API server's mapping.
fn free_port() -> Result<u16, KubeError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(failed("cannot find a free port for the k3s API server"))
}

/// A step of starting the container that failed, and why.
fn failed<E>(what: &str) -> impl FnOnce(E) -> KubeError
where
    E: std::error::Error + Send + Sync + 'static,
{
    let what = what.to_owned();
    move |e| KubeError::Container {
        what,
        source: Box::new(e),
    }
}

/// Start k3s and wait until its node controller has synced.
pub(crate) async fn start() -> Result<K3sContainer, KubeError> {
    let dir = tempfile::Builder::new()
        .prefix("kubechaos-k3s-")
        .tempdir()
        .map_err(failed("cannot create a directory for k3s's configuration"))?;
    let name = dir
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase().replace('_', "-"))
        .unwrap_or_else(|| "kubechaos-k3s".to_owned());
    let port = free_port()?;
    let container = K3s::default()
        .with_conf_mount(dir.path())
        .with_privileged(true)
        .with_userns_mode("host")
        .with_container_name(&name)
        .with_hostname(&name)
        .with_mapped_port(port, KUBE_SECURE_PORT)
        .start()
        .await
        .map_err(failed("cannot start k3s in a container through testcontainers (`--provider k3s-container` needs a Docker engine where kubechaos runs: DOCKER_HOST, or /var/run/docker.sock)"))?;
    let yaml = container
        .image()
        .read_kube_config()
        .map_err(failed("k3s started but its kubeconfig cannot be read"))?;
    let mut config = kube::config::Kubeconfig::from_yaml(&yaml)
        .map_err(failed("k3s's kubeconfig does not parse"))?;
    for c in &mut config.clusters {
        if let Some(cluster) = c.cluster.as_mut() {
            cluster.server = Some(format!("https://127.0.0.1:{port}"));
        }
    }
    let kubeconfig = dir.path().join("kubechaos.kubeconfig");
    // JSON is YAML: every kubeconfig reader takes it.
    let text =
        serde_json::to_string_pretty(&config).map_err(failed("cannot write the k3s kubeconfig"))?;
    std::fs::write(&kubeconfig, text)
        .map_err(failed(&format!("cannot write {}", kubeconfig.display())))?;
    Ok(K3sContainer {
        container,
        dir,
        kubeconfig,
        name,
    })
}

impl K3sContainer {
    /// Remove the container and its configuration directory.
    pub(crate) async fn remove(self) -> String {
        let name = self.name.clone();
        let said = match self.container.rm().await {
            Ok(()) => format!("removed the k3s container {name}"),
            Err(e) => {
                format!("could NOT remove the k3s container {name}: {e} (docker rm -f {name})")
            }
        };
        drop(self.dir);
        said
    }
}
