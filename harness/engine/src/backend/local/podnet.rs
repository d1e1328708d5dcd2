//! A program pod's own network, as a pod sandbox gives one: a network namespace of its own (its
//! own loopback and ports, so that two replicas of a Deployment both bind `:8080` and `:8081`,
//! as kubebuilder's managers do), in which the API server is reached at `127.0.0.1:443`, as a
//! pod reaches the `kubernetes` Service. kubechaos listens there itself and carries each
//! connection to the pod's own proxy on this machine's loopback, so the pod's traffic to the API
//! server still crosses its link (a partition of the pod cuts it).
//!
//! The namespace is made by a thread of kubechaos that leaves it at once: what keeps it is the
//! listener bound in it and a handle on it, which the pod's processes join by path
//! (`nsenter --net=/proc/PID/fd/N`). It lasts as long as the pod, across its container's
//! restarts, and goes when the pod is gone or the run ends; no packet leaves the machine, and
//! nothing of it outlives kubechaos.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use super::error::LocalError;

/// The port at which a pod reaches the API server inside its namespace (the `kubernetes`
/// Service's).
pub(crate) const SERVICE_PORT: u16 = 443;

/// A pod's network namespace, and the forwarding of its API server address to its proxy.
pub(crate) struct PodNetwork {
    /// Keeps the namespace; the pod's processes join it through this file's `/proc` path.
    ns: std::fs::File,
    /// Accepts the pod's connections to the API server and carries each to the proxy.
    forward: tokio::task::JoinHandle<()>,
}

impl PodNetwork {
    /// A new namespace with its loopback up, in which `127.0.0.1:443` leads to `proxy`. Needs
    /// root and iproute2's `ip`.
    pub(crate) fn new(proxy: SocketAddr) -> Result<PodNetwork, LocalError> {
        let made = std::thread::spawn(|| -> Result<_, String> {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("cannot make a network namespace: {e}"))?;
            // The child is made by this thread, so it starts in the new namespace.
            let up = std::process::Command::new("ip")
                .args(["link", "set", "lo", "up"])
                .output()
                .map_err(|e| format!("cannot run `ip link set lo up`: {e}"))?;
            if !up.status.success() {
                return Err(format!(
                    "`ip link set lo up` failed in a pod's namespace: {}",
                    String::from_utf8_lossy(&up.stderr).trim()
                ));
            }
            let listener =
                std::net::TcpListener::bind(("127.0.0.1", SERVICE_PORT)).map_err(|e| {
                    format!("cannot listen on 127.0.0.1:{SERVICE_PORT} in a pod's namespace: {e}")
                })?;
            listener.set_nonblocking(true).map_err(|e| e.to_string())?;
            let ns = std::fs::File::open("/proc/thread-self/ns/net")
                .map_err(|e| format!("cannot open the pod's network namespace: {e}"))?;
            Ok((ns, listener))
        })
        .join()
        .map_err(|_| LocalError::Launch("the thread making a pod's network panicked".into()))?;
        let (ns, listener) = made.map_err(|why| LocalError::Machine {
            what: why,
            source: None,
        })?;
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(|e| LocalError::Machine {
                what: "cannot watch a pod's API server address".to_owned(),
                source: Some(e),
            })?;
        let forward = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(proxy).await else {
                        // As an API server that is not there: the connection is refused.
                        super::proxy::abort(&inbound);
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    if tokio::io::copy_bidirectional(&mut inbound, &mut outbound)
                        .await
                        .is_err()
                    {
                        // The proxy reset the connection (a partition in `reset` mode): so is
                        // the pod's.
                        super::proxy::abort(&inbound);
                    }
                });
            }
        });
        Ok(PodNetwork { ns, forward })
    }

    /// The path by which a process joins the namespace (while this kubechaos holds it).
    pub(crate) fn path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            self.ns.as_raw_fd()
        ))
    }
}

impl Drop for PodNetwork {
    fn drop(&mut self) {
        self.forward.abort();
    }
}
