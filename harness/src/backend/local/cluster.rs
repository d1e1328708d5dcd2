//! A real control plane on this machine: upstream etcd, kube-apiserver, kube-scheduler and
//! kube-controller-manager as child processes, with certificates, kubeconfigs, data and logs in
//! one run directory, and fake nodes that heartbeat like KWOK's.
//!
//! Every child runs as `setpriv --pdeathsig KILL -- unshare --uts -- sh -c 'hostname NAME; exec BIN …'`:
//! - the parent-death signal kills it if kubechaos itself dies, even by SIGKILL, so no run leaves
//!   a process behind;
//! - its own UTS namespace gives it the hostname `NAME` (`kube-scheduler-1`), so the identity that
//!   upstream writes into the Lease (`hostname_uuid`) says which replica holds it, in the same
//!   `PROCESS_x` shape as the sim (this needs root: `unshare --uts` needs CAP_SYS_ADMIN).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::process::{Child, Command};

use super::build;
use super::pki::{self, Pki};
use crate::clock::SystemClock;
use crate::scenario::validate::process_name;
use crate::scenario::Component;

/// What to start.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Fake nodes `node-0` … .
    pub nodes: u32,
    /// Replicas per component.
    pub components: BTreeMap<Component, u32>,
}

/// The context name written into kubeconfigs.
pub const CONTEXT: &str = "kubechaos-local";

/// How long `up` waits for the control plane to be ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// A running local control plane. Dropping it kills every child.
pub struct LocalCluster {
    tempdir: Option<tempfile::TempDir>,
    /// The run directory.
    pub dir: PathBuf,
    /// The API server's URL.
    pub server: String,
    /// kubeconfig of the admin identity (for kubectl and the harness).
    pub admin_kubeconfig: PathBuf,
    /// A client as admin.
    pub admin: kube::Client,
    bins: PathBuf,
    pki: Pki,
    ports: Ports,
    advertise: IpAddr,
    children: BTreeMap<String, Child>,
    nodes: Vec<tokio::task::JoinHandle<()>>,
}

#[derive(Clone, Copy, Debug)]
struct Ports {
    etcd_client: u16,
    etcd_peer: u16,
    api: u16,
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

/// A non-loopback IPv4 address of this machine: kube-apiserver rejects a loopback
/// `--advertise-address`. Nothing connects to it (the API server binds 127.0.0.1 only).
fn advertise_address() -> Result<IpAddr, String> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    let mut prev = "";
    for line in trie.lines() {
        if line.contains("/32 host LOCAL") {
            if let Some(ip) = prev
                .split_whitespace()
                .last()
                .and_then(|s| s.parse::<IpAddr>().ok())
            {
                if !ip.is_loopback() {
                    return Ok(ip);
                }
            }
        }
        prev = line;
    }
    Err("this machine has no non-loopback IPv4 address, and kube-apiserver rejects a loopback --advertise-address".into())
}

impl LocalCluster {
    /// Build (once) and start a control plane; returns when the API is ready, every component's
    /// lease is held and every node is Ready. `keep`: leave the run directory after `down`.
    pub async fn up(
        spec: &Spec,
        keep: bool,
        say: &mut dyn FnMut(&str),
    ) -> Result<LocalCluster, String> {
        let fixtures = build::fixtures_dir();
        let pins = build::Pins::read(&fixtures).map_err(|e| e.to_string())?;
        let bins = build::ensure(&pins, &fixtures, say).map_err(|e| e.to_string())?;
        let tempdir = tempfile::Builder::new()
            .prefix("kubechaos-")
            .tempdir()
            .map_err(|e| format!("cannot create a run directory: {e}"))?;
        let dir = tempdir.path().to_path_buf();
        let advertise = advertise_address()?;
        let pki = pki::generate(
            &dir.join("pki"),
            &["127.0.0.1".parse().expect("ip"), advertise],
        )?;
        std::fs::create_dir_all(dir.join("logs")).map_err(|e| e.to_string())?;
        let ports = Ports {
            etcd_client: free_port()?,
            etcd_peer: free_port()?,
            api: free_port()?,
        };
        let server = format!("https://127.0.0.1:{}", ports.api);
        let mut kubeconfigs = BTreeMap::new();
        for id in pki::IDENTITIES {
            let path = dir.join(format!("{}.kubeconfig", id.name));
            std::fs::write(&path, pki::kubeconfig(&pki, id.name, &server, CONTEXT)?)
                .map_err(|e| e.to_string())?;
            kubeconfigs.insert(id.name, path);
        }
        let admin_kubeconfig = kubeconfigs["admin"].clone();
        let admin = client_for(&admin_kubeconfig).await?;
        let mut cluster = LocalCluster {
            tempdir: if keep {
                // Detach it: the directory outlives this run.
                let _ = tempdir.keep();
                None
            } else {
                Some(tempdir)
            },
            dir,
            server,
            admin_kubeconfig,
            admin,
            bins,
            pki,
            ports,
            advertise,
            children: BTreeMap::new(),
            nodes: Vec::new(),
        };
        let started = Instant::now();
        say(&format!(
            "starting etcd and kube-apiserver ({})",
            cluster.dir.display()
        ));
        cluster.start("etcd")?;
        cluster.start("api-server")?;
        cluster.wait_api(started).await?;
        say(&format!(
            "API ready after {:.1}s; starting components and {} fake node(s)",
            started.elapsed().as_secs_f64(),
            spec.nodes
        ));
        for (c, replicas) in &spec.components {
            for i in 0..*replicas {
                cluster.start(&process_name(c.name(), i))?;
            }
        }
        for i in 0..spec.nodes {
            let client = cluster.admin.clone();
            let name = process_name("node", i);
            cluster.nodes.push(tokio::spawn(async move {
                crate::fake_node::run(client, &name, &SystemClock).await
            }));
        }
        cluster.wait_ready(spec, started).await?;
        say(&format!(
            "ready after {:.1}s: leases held, {} node(s) Ready",
            started.elapsed().as_secs_f64(),
            spec.nodes
        ));
        Ok(cluster)
    }

    /// The command line of a process by name.
    fn argv(&self, name: &str) -> Result<(PathBuf, Vec<String>), String> {
        let d = &self.dir;
        let p = &self.pki;
        let s = |p: PathBuf| p.display().to_string();
        let ports = self.ports;
        if name == "etcd" {
            let peer = format!("http://127.0.0.1:{}", ports.etcd_peer);
            let client = format!("http://127.0.0.1:{}", ports.etcd_client);
            return Ok((
                self.bins.join("etcd"),
                vec![
                    "--name=kubechaos".into(),
                    format!("--data-dir={}", s(d.join("etcd"))),
                    format!("--listen-client-urls={client}"),
                    format!("--advertise-client-urls={client}"),
                    format!("--listen-peer-urls={peer}"),
                    format!("--initial-advertise-peer-urls={peer}"),
                    format!("--initial-cluster=kubechaos={peer}"),
                    "--log-level=warn".into(),
                ],
            ));
        }
        if name == "api-server" {
            return Ok((
                self.bins.join("kube-apiserver"),
                vec![
                    format!("--etcd-servers=http://127.0.0.1:{}", ports.etcd_client),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", ports.api),
                    format!("--advertise-address={}", self.advertise),
                    format!("--tls-cert-file={}", s(p.cert("apiserver"))),
                    format!("--tls-private-key-file={}", s(p.key("apiserver"))),
                    format!("--client-ca-file={}", s(p.cert("ca"))),
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                    format!("--service-account-key-file={}", s(p.sa_pub())),
                    format!("--service-account-signing-key-file={}", s(p.key("sa"))),
                    "--service-cluster-ip-range=10.96.0.0/16".into(),
                    "--authorization-mode=Node,RBAC".into(),
                    "--allow-privileged=true".into(),
                    "--profiling=false".into(),
                    "--v=1".into(),
                ],
            ));
        }
        let (component, _) = name
            .rsplit_once('-')
            .ok_or_else(|| format!("unknown process {name}"))?;
        let kubeconfig = s(d.join(format!("{component}.kubeconfig")));
        let mut args = vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            "--leader-elect=true".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
            "--v=1".into(),
        ];
        match Component::from_name(component) {
            Some(Component::KubeScheduler) => Ok((self.bins.join("kube-scheduler"), args)),
            Some(Component::KubeControllerManager) => {
                args.extend([
                    format!("--service-account-private-key-file={}", s(p.key("sa"))),
                    format!("--root-ca-file={}", s(p.cert("ca"))),
                    format!("--cluster-signing-cert-file={}", s(p.cert("ca"))),
                    format!("--cluster-signing-key-file={}", s(p.key("ca"))),
                    // As kubeadm: each controller acts as its own service account, so the RBAC
                    // bootstrap policy grants it what it needs.
                    "--use-service-account-credentials=true".into(),
                ]);
                Ok((self.bins.join("kube-controller-manager"), args))
            }
            None => Err(format!("unknown process {name}")),
        }
    }

    /// Start a process by name (`etcd`, `api-server`, `kube-scheduler-0`, …).
    pub fn start(&mut self, name: &str) -> Result<(), String> {
        let (bin, args) = self.argv(name)?;
        let log_path = self.dir.join("logs").join(format!("{name}.log"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new("setpriv")
            .args([
                "--pdeathsig",
                "KILL",
                "--",
                "unshare",
                "--uts",
                "--",
                "sh",
                "-c",
                "hostname \"$0\" && exec \"$@\"",
                name,
            ])
            .arg(bin)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!("cannot start {name} (setpriv and unshare from util-linux are needed): {e}")
            })?;
        self.children.insert(name.to_owned(), child);
        Ok(())
    }

    /// The last lines of a process's log, for error messages.
    fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join("logs").join(format!("{name}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(8).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n    ")
    }

    fn check_alive(&mut self) -> Result<(), String> {
        let mut dead = Vec::new();
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                dead.push((name.clone(), status));
            }
        }
        match dead.first() {
            None => Ok(()),
            Some((name, status)) => Err(format!(
                "{name} exited ({status}) while the cluster was starting; its log ends:\n    {}",
                self.log_tail(name)
            )),
        }
    }

    async fn wait_api(&mut self, started: Instant) -> Result<(), String> {
        loop {
            self.check_alive()?;
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("request");
            if let Ok(text) = self.admin.request_text(req).await {
                if text.trim() == "ok" {
                    return Ok(());
                }
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "the API server was not ready after {}s; its log ends:\n    {}",
                    READY_TIMEOUT.as_secs(),
                    self.log_tail("api-server")
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn wait_ready(&mut self, spec: &Spec, started: Instant) -> Result<(), String> {
        loop {
            self.check_alive()?;
            let mut missing = Vec::new();
            let leases = Api::<Lease>::namespaced(self.admin.clone(), "kube-system");
            for (c, replicas) in &spec.components {
                if *replicas == 0 {
                    continue;
                }
                let held = leases
                    .get_opt(c.name())
                    .await
                    .ok()
                    .flatten()
                    .and_then(|l| l.spec)
                    .and_then(|s| s.holder_identity)
                    .is_some_and(|h| !h.is_empty());
                if !held {
                    missing.push(format!("lease kube-system/{} not held", c.name()));
                }
            }
            let nodes = Api::<Node>::all(self.admin.clone())
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            for i in 0..spec.nodes {
                let name = process_name("node", i);
                let ok = nodes
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
                    .is_some_and(crate::backend::sim::scheduler::schedulable);
                if !ok {
                    missing.push(format!("{name} not Ready and schedulable"));
                }
            }
            if missing.is_empty() {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "the control plane was not ready after {}s: {}",
                    READY_TIMEOUT.as_secs(),
                    missing.join(", ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stop everything: children (SIGTERM, then SIGKILL after 5s), node heartbeats; remove the
    /// run directory unless it is kept. Returns the directory when kept.
    pub async fn down(mut self) -> Option<PathBuf> {
        for task in self.nodes.drain(..) {
            task.abort();
        }
        for child in self.children.values() {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        for (_, mut child) in std::mem::take(&mut self.children) {
            if tokio::time::timeout_at(deadline, child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
        match self.tempdir.take() {
            Some(t) => {
                let _ = t.close();
                None
            }
            None => Some(self.dir.clone()),
        }
    }
}

/// A kube-rs client from a kubeconfig file.
pub async fn client_for(path: &Path) -> Result<kube::Client, String> {
    let kc =
        Kubeconfig::read_from(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("invalid kubeconfig {}: {e}", path.display()))?;
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))
}
