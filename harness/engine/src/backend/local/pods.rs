//! Child processes on this machine: how every child is started ([`spawn`]), and the containers
//! of the fake nodes' agents ([`LocalContainers`]): a self-hosted component's pod runs as the
//! real upstream binary, with the arguments of the pod's container.
//!
//! A node's files: each fake node has its own root, `RUN/nodes/NODE/`, so the hostPath
//! `/etc/kubernetes` that the components' pods mount is `RUN/nodes/NODE/etc/kubernetes` (its
//! kubeconfigs reach the API server through the node's proxy: a partition of the node cuts
//! its pods too, as on a real machine; `pki/` holds the cluster's certificates).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use super::error::LocalError;
use crate::fake_node::{ContainerOp, Containers, PodBook};
use crate::selfhosted::HOST_CONFIG_DIR;
use kubechaos_core::scenario::Component;

/// Told about what the processes do: starts, and every line they print.
pub trait Hooks: Send + Sync {
    /// Incarnation `incarnation` (from 1) of `process` started.
    fn started(&self, _process: &str, _incarnation: u32) {}
    /// A line of a process's output (stdout or stderr), as it is printed.
    fn line(&self, _process: &str, _incarnation: u32, _line: &str) {}
    /// A pod's process ended (stopped by its node, or by itself), and why. The driver records
    /// the ends of the processes it supervises itself.
    fn exited(&self, _process: &str, _reason: &str) {}
}

/// Hooks that do nothing (`cluster up`).
pub struct Quiet;
impl Hooks for Quiet {}

/// How long a gracefully stopped process may take to exit before it is killed (the kubelet's
/// default `terminationGracePeriodSeconds`). kube-apiserver can take that long: it drains open
/// watches before it exits.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(30);

/// Send a signal to a child's process group (it leads its own).
pub(crate) fn signal_group(child: &Child, sig: Signal) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-(pid as i32)), sig);
    }
}

/// SIGTERM a child's process group now and SIGKILL it after [`STOP_GRACE`] (as the kubelet).
pub(crate) fn terminate(child: &Child) {
    signal_group(child, Signal::SIGTERM);
    if let Some(pid) = child.id() {
        tokio::spawn(async move {
            tokio::time::sleep(STOP_GRACE).await;
            let group = nix::unistd::Pid::from_raw(-(pid as i32));
            let _ = nix::sys::signal::kill(group, Signal::SIGKILL);
        });
    }
}

/// Stop a child: SIGTERM (`graceful`, SIGKILL after [`STOP_GRACE`]) or SIGKILL, to its process
/// group. Returns at once; [`reap`] waits for it to be gone.
pub(crate) fn stop(child: &Child, graceful: bool) {
    if graceful {
        // As the kubelet: what has not exited after the grace period is killed.
        terminate(child);
    } else {
        signal_group(child, Signal::SIGKILL);
    }
}

/// Wait (blocking) up to `wait` for a stopped child to exit, then kill it and wait until it
/// has: so that it frees its ports and files before it starts again.
pub(crate) fn reap(mut child: Child, wait: Duration) {
    let deadline = std::time::Instant::now() + wait;
    while std::time::Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_group(&child, Signal::SIGKILL);
    while let Ok(None) = child.try_wait() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `Some(why)` once a running child has ended by itself (it is then dropped from `running`),
/// with the last line of its log at `log`.
pub(crate) fn exited(
    running: &mut std::collections::BTreeMap<String, Child>,
    name: &str,
    log: &Path,
) -> Option<String> {
    let status = running.get_mut(name)?.try_wait().ok()??;
    running.remove(name);
    let tail = log_tail(log, 1);
    Some(if tail.is_empty() {
        format!("exited: {status}")
    } else {
        format!("exited: {status}; last log line: {tail}")
    })
}

/// How to start a child: program, arguments, extra environment.
pub(crate) type Launch = (PathBuf, Vec<String>, Vec<(String, String)>);

/// How a child process is set apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Its own UTS namespace, its hostname its process name (as a pod's is its name), so that
    /// upstream components' Lease identities (`HOSTNAME_UUID`) say which process leads. Needs
    /// root (`unshare --uts`).
    OwnHostname,
    /// The machine's hostname: an agent of an existing cluster, run by any user.
    None,
}

/// Start incarnation `inc` of process `name`: `bin args` with extra `env`, as
/// `setpriv --pdeathsig KILL -- [unshare --uts -- sh -c 'hostname NAME && exec …']` in its own
/// process group (see [`super::cluster`]), its output appended to `log` and shown to `hooks`.
pub(crate) fn spawn(
    name: &str,
    inc: u32,
    (bin, args, env): &Launch,
    log: &Path,
    hooks: &Arc<dyn Hooks>,
    isolation: Isolation,
) -> Result<Child, LocalError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(LocalError::file("open", log))?;
    let mut command = Command::new("setpriv");
    command.args(["--pdeathsig", "KILL", "--"]);
    if isolation == Isolation::OwnHostname {
        command.args([
            "unshare",
            "--uts",
            "--",
            "sh",
            "-c",
            "hostname \"$0\" && exec \"$@\"",
            name,
        ]);
    }
    let mut child = command
        .arg(bin)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| LocalError::Spawn {
            process: name.to_owned(),
            source,
        })?;
    let file = Arc::new(Mutex::new(file));
    if let Some(out) = child.stdout.take() {
        pump(out, file.clone(), name, inc, hooks.clone());
    }
    if let Some(err) = child.stderr.take() {
        pump(err, file, name, inc, hooks.clone());
    }
    hooks.started(name, inc);
    Ok(child)
}

/// Copy a child's output into its log, line by line, and show each line to the hooks.
fn pump(
    from: impl AsyncRead + Unpin + Send + 'static,
    log: Arc<Mutex<std::fs::File>>,
    name: &str,
    inc: u32,
    hooks: Arc<dyn Hooks>,
) {
    let name = name.to_owned();
    tokio::spawn(async move {
        let mut lines = BufReader::new(from).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(mut f) = log.lock() {
                let _ = writeln!(f, "{line}");
            }
            hooks.line(&name, inc, &line);
        }
    });
}

/// The last lines of a log file, joined for an error message.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let last: Vec<&str> = text.lines().rev().take(lines).collect();
    last.into_iter().rev().collect::<Vec<_>>().join("\n    ")
}

/// The root directory of a fake node's files.
pub(crate) fn node_root(dir: &Path, node: &str) -> PathBuf {
    dir.join("nodes").join(node)
}

#[derive(Default)]
struct State {
    /// Running containers by pod (`NAMESPACE/NAME`).
    running: BTreeMap<String, Child>,
    /// Stopped, maybe not exited yet.
    stopping: Vec<Child>,
    incarnations: BTreeMap<String, u32>,
    /// The pods started, their nodes, and which are held down (`remove`).
    book: PodBook,
}

/// The containers of every fake node of a local cluster: real binaries.
pub(crate) struct LocalContainers {
    bins: PathBuf,
    dir: PathBuf,
    hooks: Arc<dyn Hooks>,
    state: Mutex<State>,
}

impl LocalContainers {
    /// Containers that run the binaries in `bins`, with run directory `dir`.
    pub(crate) fn new(bins: PathBuf, dir: PathBuf, hooks: Arc<dyn Hooks>) -> Self {
        LocalContainers {
            bins,
            dir,
            hooks,
            state: Mutex::default(),
        }
    }

    /// Every child, running or stopping (for stopping them all).
    pub(crate) fn take_all(&self) -> Vec<Child> {
        let mut st = self.state.lock().expect("containers");
        let mut all: Vec<Child> = std::mem::take(&mut st.running).into_values().collect();
        all.append(&mut st.stopping);
        all
    }

    /// SIGKILL every child now (the cluster is being dropped).
    pub(crate) fn kill_all(&self) {
        let st = self.state.lock().expect("containers");
        for child in st.running.values().chain(st.stopping.iter()) {
            signal_group(child, Signal::SIGKILL);
        }
    }

    /// Stop pod `pod`'s process: SIGTERM (`graceful`, then SIGKILL after the grace period) or
    /// SIGKILL; its end is recorded as `reason`.
    fn stop_locked(&self, st: &mut State, pod: &str, graceful: bool, reason: &str) {
        if let Some(child) = st.running.remove(pod) {
            if graceful {
                terminate(&child);
            } else {
                signal_group(&child, Signal::SIGKILL);
            }
            st.stopping.push(child);
            self.hooks.exited(Self::process(pod), reason);
        }
        // Forget what has exited.
        st.stopping.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    }

    /// A `kill`, `remove` or `start` step on self-hosted component `c` (all its pods, or only
    /// pod `only`). Returns the pods touched.
    pub(crate) fn act(&self, c: Component, only: Option<&str>, op: ContainerOp) -> Vec<String> {
        let mut st = self.state.lock().expect("containers");
        let running: BTreeSet<String> = st.running.keys().cloned().collect();
        let (stop, touched) = st.book.plan(c, only, op, |p| running.contains(p));
        let reason = match op {
            ContainerOp::Remove => "removed: its container is held down (SIGKILL)",
            _ => "killed (SIGKILL)",
        };
        for pod in stop {
            self.stop_locked(&mut st, &pod, false, reason);
        }
        touched
    }

    /// Node `node` stopped (its machine died): its pods' processes die with it.
    pub(crate) fn node_stopped(&self, node: &str) {
        let mut st = self.state.lock().expect("containers");
        for pod in st.book.on_node(node) {
            self.stop_locked(&mut st, &pod, false, "its node stopped");
        }
    }

    fn process(pod: &str) -> &str {
        pod.rsplit('/').next().unwrap_or(pod)
    }

    fn log(&self, pod: &str) -> PathBuf {
        self.dir
            .join("logs")
            .join(format!("{}.log", Self::process(pod)))
    }
}

/// A container argument with the hostPath [`HOST_CONFIG_DIR`] mapped to the node's own files.
fn on_node(arg: &str, root: &Path) -> String {
    let mapped = format!("{}{HOST_CONFIG_DIR}", root.display());
    match arg.split_once('=') {
        Some((flag, value)) if value.starts_with(HOST_CONFIG_DIR) => {
            format!("{flag}={mapped}{}", &value[HOST_CONFIG_DIR.len()..])
        }
        _ if arg.starts_with(HOST_CONFIG_DIR) => {
            format!("{mapped}{}", &arg[HOST_CONFIG_DIR.len()..])
        }
        _ => arg.to_owned(),
    }
}

impl Containers for LocalContainers {
    fn start(
        &self,
        node: &str,
        pod: &str,
        c: Component,
        args: &[String],
    ) -> Result<(), crate::fake_node::ContainerError> {
        let root = node_root(&self.dir, node);
        let args: Vec<String> = args.iter().map(|a| on_node(a, &root)).collect();
        let name = Self::process(pod);
        let mut st = self.state.lock().expect("containers");
        let inc = st.incarnations.get(pod).copied().unwrap_or(0) + 1;
        let child = spawn(
            name,
            inc,
            &(self.bins.join(c.name()), args, Vec::new()),
            &self.log(pod),
            &self.hooks,
            Isolation::OwnHostname,
        )?;
        st.incarnations.insert(pod.to_owned(), inc);
        st.book.started(pod, node, c);
        st.running.insert(pod.to_owned(), child);
        Ok(())
    }

    fn stop(&self, pod: &str, reason: &str) {
        let mut st = self.state.lock().expect("containers");
        self.stop_locked(&mut st, pod, true, reason);
        st.book.forget(pod);
    }

    fn held(&self, pod: &str) -> bool {
        self.state.lock().expect("containers").book.held(pod)
    }

    fn running(&self, pod: &str) -> bool {
        let mut st = self.state.lock().expect("containers");
        let Some(child) = st.running.get_mut(pod) else {
            return false;
        };
        match child.try_wait() {
            Ok(None) => true,
            Ok(Some(status)) => {
                st.running.remove(pod);
                let tail = log_tail(&self.log(pod), 1);
                self.hooks.exited(
                    Self::process(pod),
                    &if tail.is_empty() {
                        format!("exited: {status}")
                    } else {
                        format!("exited: {status}; last log line: {tail}")
                    },
                );
                false
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_map_to_the_nodes_files() {
        let root = Path::new("/tmp/run/nodes/node-1");
        assert_eq!(
            on_node("--kubeconfig=/etc/kubernetes/scheduler.conf", root),
            "--kubeconfig=/tmp/run/nodes/node-1/etc/kubernetes/scheduler.conf"
        );
        assert_eq!(
            on_node("/etc/kubernetes/pki/ca.crt", root),
            "/tmp/run/nodes/node-1/etc/kubernetes/pki/ca.crt"
        );
        assert_eq!(on_node("--v=1", root), "--v=1");
        assert_eq!(on_node("--leader-elect=true", root), "--leader-elect=true");
    }
}
