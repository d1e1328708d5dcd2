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
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use super::error::LocalError;
use super::proxy::Proxy;
use crate::fake_node::{ContainerOp, Containers, PodBook, PodGroup, Program, Workload};
use crate::selfhosted::HOST_CONFIG_DIR;

/// When something the hooks are told of happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// As it is told: a child's start, a line read from its pipe, its exit as it is reaped.
    Now,
    /// At this wall-clock time, told later: a pod's log line at its container runtime's
    /// timestamp, a container's start or exit as its node's runtime (or its status) says.
    At(k8s_openapi::jiff::Timestamp),
    /// Somewhere in the whole second that begins at this wall-clock time: a container's start
    /// or exit as its pod's status tells it through the API (`startedAt`, `finishedAt`: whole
    /// seconds, truncated).
    Second(k8s_openapi::jiff::Timestamp),
}

/// Told about what the processes do: starts, and every line they print.
pub trait Hooks: Send + Sync {
    /// Incarnation `incarnation` (from 1) of `process` started.
    fn started(&self, _process: &str, _incarnation: u32, _at: When) {}
    /// A line of a process's output (stdout or stderr), as it is printed.
    fn line(&self, _process: &str, _incarnation: u32, _line: &str, _at: When) {}
    /// Incarnation `incarnation` of a pod's process ended (stopped by its node, or by itself),
    /// and why. The driver records the ends of the processes it supervises itself.
    fn exited(&self, _process: &str, _incarnation: u32, _reason: &str, _at: When) {}
    /// Incarnation `incarnation` of API server `process` answered its readiness check for the
    /// first time since it started or since an etcd member started, with the check sent at
    /// `at`.
    fn serving(&self, _process: &str, _incarnation: u32, _at: When) {}
    /// Pod `pod` (`NAMESPACE/NAME`) of pod agent `agent` runs for the first time, as `process`.
    fn candidate(&self, _agent: &str, _pod: &str, _process: &str) {}
    /// Something kubechaos has to say about a process (what it cannot see of it).
    fn note(&self, _process: &str, _message: &str) {}
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Its own UTS namespace, its hostname its process name (as a pod's is its name), so that
    /// upstream components' Lease identities (`HOSTNAME_UUID`) say which process leads. Needs
    /// root (`unshare --uts`).
    OwnHostname,
    /// As [`Isolation::OwnHostname`], and what a pod's container sees: its pod's network
    /// namespace (`netns`, [`super::podnet`]), only the environment it is given, and its own
    /// mount namespace in which `/var/run/secrets/kubernetes.io/serviceaccount` is the directory
    /// `secrets` (bind-mounted over an overlay of `/run` whose writable layer is a tmpfs on
    /// `scratch`; a plain tmpfs on `/run` where overlays cannot be made). Nothing of it outlives
    /// the process: the mounts exist only in its namespace.
    Pod {
        /// The pod's network namespace, as a path to join.
        netns: PathBuf,
        /// The token, CA and namespace files.
        secrets: PathBuf,
        /// An empty directory for the overlay's writable layer.
        scratch: PathBuf,
        /// The working directory.
        cwd: PathBuf,
        /// This incarnation's container log, each line after its time (RFC 3339), as the
        /// kubelet keeps it: what the kubelet log endpoint serves.
        container_log: PathBuf,
    },
    /// The machine's hostname: an agent of an existing cluster, run by any user.
    None,
}

/// The shell that sets a pod's process up before it `exec`s it: hostname, then the service
/// account's files at the path client-go, controller-runtime and kube-rs read them from.
/// `$0` is the hostname, `$1` the scratch directory, `$2` the secrets directory.
const POD_SETUP: &str = r#"hostname "$0" && run=$(readlink -f /var/run) && mount -t tmpfs kubechaos "$1" && mkdir "$1/upper" "$1/work" && { mount -t overlay overlay -o "lowerdir=$run,upperdir=$1/upper,workdir=$1/work" "$run" 2>/dev/null || mount -t tmpfs kubechaos "$run"; } && mkdir -p "$run/secrets/kubernetes.io/serviceaccount" && mount --bind "$2" "$run/secrets/kubernetes.io/serviceaccount" && shift 2 && exec "$@""#;

/// Start incarnation `inc` of process `name`: `bin args` with extra `env`, as
/// `setpriv --pdeathsig KILL -- [unshare --uts -- sh -c 'hostname NAME && exec …']` in its own
/// process group (see [`super::cluster`]), its output appended to `log` and shown to `hooks`.
pub(crate) fn spawn(
    name: &str,
    inc: u32,
    (bin, args, env): &Launch,
    log: &Path,
    hooks: &Arc<dyn Hooks>,
    isolation: &Isolation,
) -> Result<Child, LocalError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(LocalError::file("open", log))?;
    let mut command = Command::new("setpriv");
    command.args(["--pdeathsig", "KILL", "--"]);
    match isolation {
        Isolation::OwnHostname => {
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
        Isolation::Pod {
            netns,
            secrets,
            scratch,
            cwd,
            ..
        } => {
            command
                .arg("nsenter")
                .arg(format!("--net={}", netns.display()))
                .args([
                    "--", "unshare", "--uts", "--mount", "--", "sh", "-c", POD_SETUP, name,
                ])
                .arg(scratch)
                .arg(secrets)
                .current_dir(cwd)
                // A container gets only its own environment (the caller gives PATH).
                .env_clear();
        }
        Isolation::None => {}
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
    let stamped = match isolation {
        Isolation::Pod { container_log, .. } => Some(Arc::new(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(container_log)
                .map_err(LocalError::file("open", container_log))?,
        ))),
        _ => None,
    };
    let file = Arc::new(Mutex::new(file));
    if let Some(out) = child.stdout.take() {
        pump(out, file.clone(), stamped.clone(), name, inc, hooks.clone());
    }
    if let Some(err) = child.stderr.take() {
        pump(err, file, stamped, name, inc, hooks.clone());
    }
    hooks.started(name, inc, When::Now);
    Ok(child)
}

/// Copy a child's output into its log (and, stamped with its time, into its container log), line
/// by line, and show each line to the hooks.
fn pump(
    from: impl AsyncRead + Unpin + Send + 'static,
    log: Arc<Mutex<std::fs::File>>,
    stamped: Option<Arc<Mutex<std::fs::File>>>,
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
            if let Some(Ok(mut f)) = stamped.as_ref().map(|f| f.lock()) {
                let now = k8s_openapi::jiff::Timestamp::now();
                let _ = writeln!(f, "{now:.9} {line}");
            }
            hooks.line(&name, inc, &line, When::Now);
        }
    });
}

/// The last lines of the log of a process that has just exited, for an error message: its
/// output pumps may still be copying what was left in its pipes, so the log is read once it has
/// stopped growing (for 100 ms, at most a second after the exit was seen).
pub(crate) async fn exit_log_tail(path: &Path, lines: usize) -> String {
    let size = || std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut last = size();
    let mut stable_since = std::time::Instant::now();
    while std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let now = size();
        if now != last {
            last = now;
            stable_since = std::time::Instant::now();
        } else if stable_since.elapsed() >= std::time::Duration::from_millis(100) && now > 0 {
            break;
        }
    }
    log_tail(path, lines)
}

/// A pod agent's pod as a start that failed says it, on every backend: its starts, whether it
/// runs, and `tail`, the last lines of its log ([`telling_tail`]).
pub(crate) fn pod_report(pod: &str, starts: u32, running: bool, tail: &str) -> String {
    format!(
        "{pod}: started {starts} time{} ({} restart{}), {}; its log ends:\n        {}",
        if starts == 1 { "" } else { "s" },
        starts.saturating_sub(1),
        if starts == 2 { "" } else { "s" },
        if running { "running" } else { "not running" },
        if tail.is_empty() {
            "(nothing)".to_owned()
        } else {
            tail.replace("\n    ", "\n        ")
        }
    )
}

/// The last lines of a log file, joined for an error message ([`telling_tail`]).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    telling_tail(&std::fs::read_to_string(path).unwrap_or_default(), lines)
}

/// The last `lines` lines of a log that say what went wrong: a stack trace at its end (Go's
/// goroutine dump after a panic or a `klog.Fatal`) is left out and said, since the line that
/// says why (`forbidden`, `panic: …`) stands above it; once a program whose Role was missing
/// was shown by three lines of its trace.
pub(crate) fn telling_tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let trace = |l: &str| {
        let t = l.trim_end();
        t.is_empty()
            || l.starts_with(['\t', ' '])
            || t.starts_with("goroutine ")
            || t.starts_with("created by ")
            || t.starts_with("exit status ")
            // a frame's function: `main.main()`, `k8s.io/x/y.(*T).Run(0xc0001, ...)`
            || (t.ends_with(')') && !t.contains(' ') && t.contains('('))
    };
    let end = all.iter().rposition(|l| !trace(l)).map_or(0, |i| i + 1);
    let cut = all.len() - end;
    let start = end.saturating_sub(lines);
    let mut out = all[start..end].join("\n    ");
    if cut > 0 && end > 0 {
        out.push_str(&format!("\n    (then {cut} lines of a stack trace)"));
    }
    if end == 0 {
        // Nothing but a trace: its last lines, as they are.
        out = all[all.len().saturating_sub(lines)..].join("\n    ");
    }
    out
}

/// The directory of program pod `pod` (`NAMESPACE/NAME`): its service-account files, home,
/// scratch space and container logs (`logs/INCARNATION.log`).
pub(crate) fn pod_dir(dir: &Path, pod: &str) -> PathBuf {
    dir.join("pods").join(pod.replace('/', "_"))
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
    /// Each program pod's own link to the API server (kept across its container's restarts, as
    /// a pod's network is).
    proxies: BTreeMap<String, Proxy>,
    /// Each program pod's own network namespace, in which its proxy is the API server.
    networks: BTreeMap<String, super::podnet::PodNetwork>,
}

/// A pod agent, as the fake nodes know it: which pods are its candidates.
#[derive(Clone, Debug)]
pub struct PodAgent {
    /// The group name.
    pub name: String,
    /// Its pods' namespace.
    pub namespace: String,
    /// Its pods' selector.
    pub selector: kubechaos_core::selector::Selector,
}

/// What program pods need of their cluster.
#[derive(Clone, Debug, Default)]
pub(crate) struct PodEnvironment {
    /// The API servers, for each pod's own proxy (which balances among them as
    /// [`crate::backend::landing`] says).
    pub(crate) apis: Vec<SocketAddr>,
    /// The cluster CA certificate (`ca.crt` of the service account's files).
    pub(crate) ca: PathBuf,
    /// The program a command of `kubechaos` runs: this executable.
    pub(crate) kubechaos: PathBuf,
    /// The pod agents.
    pub(crate) agents: Vec<PodAgent>,
    /// Where the pods' logs are served ([`super::kubelet`]).
    pub(crate) kubelet_port: Option<u16>,
}

/// The containers of every fake node of a local cluster: real binaries.
pub(crate) struct LocalContainers {
    bins: PathBuf,
    dir: PathBuf,
    hooks: Arc<dyn Hooks>,
    env: PodEnvironment,
    state: Arc<Mutex<State>>,
}

/// How often a pod's process is looked at for its exit, which is recorded then (the node agent
/// restarts it at its own pace): an exit is on the timeline when it happens, API server or not.
const EXIT_WATCH: Duration = Duration::from_millis(100);

impl LocalContainers {
    /// Containers that run the binaries in `bins`, with run directory `dir`; program pods get
    /// `env`.
    pub(crate) fn new(
        bins: PathBuf,
        dir: PathBuf,
        hooks: Arc<dyn Hooks>,
        env: PodEnvironment,
    ) -> Self {
        LocalContainers {
            bins,
            dir,
            hooks,
            env,
            state: Arc::default(),
        }
    }

    /// The processes of `group`'s pods that run now.
    pub(crate) fn pods(&self, group: &PodGroup) -> Vec<String> {
        let st = self.state.lock().expect("containers");
        st.book
            .of(group)
            .into_iter()
            .filter(|p| st.running.contains_key(p))
            .map(|p| Self::process(&p).to_owned())
            .collect()
    }

    /// What each pod of pod agent `agent` did, for a start that failed: its starts, whether it
    /// runs, and the last lines of its log.
    pub(crate) fn report(&self, agent: &str) -> Vec<String> {
        let st = self.state.lock().expect("containers");
        st.book
            .of(&PodGroup::Agent(agent.to_owned()))
            .into_iter()
            .map(|pod| {
                let starts = st.incarnations.get(&pod).copied().unwrap_or(0);
                let tail = log_tail(&self.log(&pod), 3);
                pod_report(&pod, starts, st.running.contains_key(&pod), &tail)
            })
            .collect()
    }

    /// Whether a pod agent's pod has run yet (for the start: a selector that matches nothing).
    pub(crate) fn ran_any(&self, agent: &str) -> bool {
        let st = self.state.lock().expect("containers");
        !st.book.of(&PodGroup::Agent(agent.to_owned())).is_empty()
    }

    /// Set the condition of one direction of program pod `process`'s link to API server number
    /// `api_server`: `up` is pod to server. False when no such pod runs.
    pub(crate) fn set_link(
        &self,
        process: &str,
        api_server: usize,
        up: bool,
        state: &crate::backend::link::LinkState,
    ) -> bool {
        let st = self.state.lock().expect("containers");
        let Some(proxy) = st
            .proxies
            .iter()
            .find(|(pod, _)| Self::process(pod) == process)
            .map(|(_, p)| p)
        else {
            return false;
        };
        proxy.set_to(api_server, up, state);
        true
    }

    /// The pod agent whose pods a pod with these labels in `namespace` is.
    fn agent_of(&self, pod: &str, labels: &BTreeMap<String, String>) -> Option<&PodAgent> {
        let ns = pod.split('/').next().unwrap_or("");
        self.env
            .agents
            .iter()
            .find(|a| a.namespace == ns && a.selector.matches(labels))
    }

    /// How to start program pod `pod`: its files (token, CA, namespace; a home; scratch), its
    /// own proxy and network namespace, and its environment as a pod's: `KUBERNETES_SERVICE_*`
    /// naming `127.0.0.1:443` in its namespace (its proxy), `PATH`
    /// of this machine, `HOSTNAME`, `HOME`, then the container's own variables.
    fn program_launch(
        &self,
        st: &mut State,
        pod: &str,
        incarnation: u32,
        program: &Program,
    ) -> Result<(Launch, Isolation), LocalError> {
        let root = pod_dir(&self.dir, pod);
        let secrets = root.join("serviceaccount");
        let scratch = root.join("scratch");
        let home = root.join("home");
        let logs = root.join("logs");
        for d in [&secrets, &scratch, &home, &logs] {
            std::fs::create_dir_all(d).map_err(LocalError::file("create", d))?;
        }
        let ns = pod.split('/').next().unwrap_or("default");
        std::fs::write(secrets.join("token"), &program.token)
            .map_err(LocalError::file("write", secrets.join("token")))?;
        std::fs::write(secrets.join("namespace"), ns)
            .map_err(LocalError::file("write", secrets.join("namespace")))?;
        std::fs::copy(&self.env.ca, secrets.join("ca.crt"))
            .map_err(LocalError::file("copy", &self.env.ca))?;
        if self.env.apis.is_empty() {
            return Err(LocalError::Launch("no API server address for pods".into()));
        }
        if !st.proxies.contains_key(pod) {
            let first = crate::backend::landing(Self::process(pod), self.env.apis.len());
            let proxy = Proxy::balance(self.env.apis.clone(), first, None).map_err(|e| {
                LocalError::Machine {
                    what: "cannot start a proxy on 127.0.0.1".to_owned(),
                    source: Some(e),
                }
            })?;
            st.proxies.insert(pod.to_owned(), proxy);
        }
        if !st.networks.contains_key(pod) {
            let network = super::podnet::PodNetwork::new(st.proxies[pod].addr)?;
            st.networks.insert(pod.to_owned(), network);
        }
        let netns = st.networks[pod].path();
        let port = super::podnet::SERVICE_PORT.to_string();
        let (first, args) = program
            .argv
            .split_first()
            .ok_or_else(|| LocalError::Launch(format!("pod {pod} has an empty command")))?;
        let bin = if first == "kubechaos" {
            self.env.kubechaos.clone()
        } else {
            PathBuf::from(first)
        };
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let cwd = match &program.working_dir {
            Some(d) if !d.is_empty() => cwd.join(d),
            _ => cwd,
        };
        let mut env = vec![
            (
                "PATH".to_owned(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            ("HOSTNAME".to_owned(), Self::process(pod).to_owned()),
            ("HOME".to_owned(), home.display().to_string()),
            ("KUBERNETES_SERVICE_HOST".to_owned(), "127.0.0.1".to_owned()),
            ("KUBERNETES_SERVICE_PORT".to_owned(), port.clone()),
            ("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), port.clone()),
            (
                "KUBERNETES_PORT".to_owned(),
                format!("tcp://127.0.0.1:{port}"),
            ),
        ];
        env.extend(program.env.iter().cloned());
        Ok((
            (bin, args.to_vec(), env),
            Isolation::Pod {
                netns,
                secrets,
                scratch,
                cwd,
                container_log: logs.join(format!("{incarnation}.log")),
            },
        ))
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
            let inc = st.incarnations.get(pod).copied().unwrap_or(1);
            self.hooks
                .exited(Self::process(pod), inc, reason, When::Now);
        }
        // Forget what has exited.
        st.stopping.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    }

    /// A `kill`, `remove` or `start` step on a self-hosted component's or a pod agent's pods
    /// (all, or only pod `only`). Returns the pods touched.
    pub(crate) fn act(&self, group: &PodGroup, only: Option<&str>, op: ContainerOp) -> Vec<String> {
        let mut st = self.state.lock().expect("containers");
        let running: BTreeSet<String> = st.running.keys().cloned().collect();
        let (stop, touched) = st.book.plan(group, only, op, |p| running.contains(p));
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

    /// Watch incarnation `inc` of pod `pod`'s process until it ends: an exit of its own is
    /// recorded when it happens (with the last line of its log, once its output is copied),
    /// whatever the node agent or the API server are doing. A stop by kubechaos or by the node
    /// records itself ([`Self::stop_locked`]), and ends the watch.
    fn watch(&self, pod: &str, inc: u32) {
        let state = self.state.clone();
        let hooks = self.hooks.clone();
        let log = self.log(pod);
        let pod = pod.to_owned();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(EXIT_WATCH).await;
                // (when it was reaped: its exit is placed then, after its last line)
                let reaped = k8s_openapi::jiff::Timestamp::now();
                let status = {
                    let mut st = state.lock().expect("containers");
                    if st.incarnations.get(&pod) != Some(&inc) {
                        return;
                    }
                    let Some(child) = st.running.get_mut(&pod) else {
                        return;
                    };
                    match child.try_wait() {
                        Ok(None) => continue,
                        Ok(Some(status)) => {
                            st.running.remove(&pod);
                            status.to_string()
                        }
                        Err(e) => {
                            st.running.remove(&pod);
                            format!("cannot be waited for: {e}")
                        }
                    }
                };
                let tail = exit_log_tail(&log, 1).await;
                let why = if tail.is_empty() {
                    format!("exited: {status}")
                } else {
                    format!("exited: {status}; last log line: {tail}")
                };
                hooks.exited(Self::process(&pod), inc, &why, When::At(reaped));
                return;
            }
        });
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
        workload: &Workload,
    ) -> Result<(), crate::fake_node::ContainerError> {
        let name = Self::process(pod);
        let mut st = self.state.lock().expect("containers");
        let (launch, isolation, group) = match workload {
            Workload::Component(c, args) => {
                let root = node_root(&self.dir, node);
                let args: Vec<String> = args.iter().map(|a| on_node(a, &root)).collect();
                (
                    (self.bins.join(c.name()), args, Vec::new()),
                    Isolation::OwnHostname,
                    Some(PodGroup::Component(*c)),
                )
            }
            Workload::Program(program) => {
                let inc = st.incarnations.get(pod).copied().unwrap_or(0) + 1;
                let (launch, isolation) = self.program_launch(&mut st, pod, inc, program)?;
                let agent = self.agent_of(pod, &program.labels).map(|a| a.name.clone());
                (launch, isolation, agent.map(PodGroup::Agent))
            }
        };
        let inc = st.incarnations.get(pod).copied().unwrap_or(0) + 1;
        if inc == 1 {
            if let Some(PodGroup::Agent(agent)) = &group {
                self.hooks.candidate(agent, pod, name);
            }
        }
        let child = spawn(name, inc, &launch, &self.log(pod), &self.hooks, &isolation)?;
        st.incarnations.insert(pod.to_owned(), inc);
        st.book.started(pod, node, group);
        st.running.insert(pod.to_owned(), child);
        self.watch(pod, inc);
        Ok(())
    }

    fn stop(&self, pod: &str, reason: &str) {
        let mut st = self.state.lock().expect("containers");
        self.stop_locked(&mut st, pod, true, reason);
        st.book.forget(pod);
        st.proxies.remove(pod);
        st.networks.remove(pod);
    }

    fn held(&self, pod: &str) -> bool {
        self.state.lock().expect("containers").book.held(pod)
    }

    fn kubelet_port(&self) -> Option<u16> {
        self.env.kubelet_port
    }

    /// Whether it runs, as its watch ([`Self::watch`]) last saw it.
    fn running(&self, pod: &str) -> bool {
        self.state
            .lock()
            .expect("containers")
            .running
            .contains_key(pod)
    }
}

#[cfg(test)]
mod tests {
    /// A log that ends in a Go stack trace is shown by the lines above it, the one that says
    /// what went wrong (a missing Role's `forbidden`) among them, and the trace is said.
    #[test]
    fn a_stack_trace_at_a_logs_end_gives_way_to_the_line_that_says_why() {
        let log = "I1204 starting manager\nE1204 leaderelection.go:448] error retrieving resource lock ops/op: leases.coordination.k8s.io \"op\" is forbidden: User \"system:serviceaccount:ops:default\" cannot get resource \"leases\"\npanic: lost the lease\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:120 +0x1d5\nexit status 2\n";
        let tail = super::telling_tail(log, 2);
        assert!(tail.contains("is forbidden"), "{tail}");
        assert!(tail.contains("panic: lost the lease"), "{tail}");
        assert!(tail.ends_with("(then 5 lines of a stack trace)"), "{tail}");
        assert_eq!(super::telling_tail("a\nb\nc\n", 2), "b\n    c");
    }

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
