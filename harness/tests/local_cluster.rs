//! The local control plane, for real: upstream etcd, kube-apiserver, kube-scheduler and
//! kube-controller-manager started by `kubechaos cluster up`. These tests need the binaries
//! (`kubechaos cluster build`, which `ci/test` runs first); without them `cluster up` builds
//! them, and if it cannot, the tests fail: they never skip.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;
use common::{processes_mentioning, wait_until_gone};

fn kubechaos() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubechaos"));
    cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .env("RUST_LOG", "off");
    cmd
}

/// A `cluster up` running in the background. If a test fails before it stops the cluster, the
/// guard kills kubechaos, and the parent-death signal of its children takes the control plane
/// with it: a failed test leaves no process behind.
struct Running {
    child: Child,
    dir: PathBuf,
}

impl Running {
    fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id() as i32)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            wait_until_gone(&self.dir.to_string_lossy());
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One node, one scheduler, one controller-manager.
const ONE: &[&str] = &[
    "--nodes",
    "1",
    "--schedulers",
    "1",
    "--controller-managers",
    "1",
];

/// Two nodes, one scheduler, one controller-manager.
const SMALL: &[&str] = &[
    "--nodes",
    "2",
    "--schedulers",
    "1",
    "--controller-managers",
    "1",
];

/// Start `cluster up` in the background; returns once it is ready.
fn up(args: &[&str]) -> Running {
    let mut child = kubechaos()
        .args(["cluster", "up"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let first = lines
        .next()
        .expect("cluster up prints the kubeconfig when ready")
        .unwrap();
    let kubeconfig = first
        .strip_prefix("export KUBECONFIG=")
        .unwrap_or_else(|| panic!("unexpected first line: {first}"));
    let dir = Path::new(kubeconfig).parent().unwrap().to_path_buf();
    std::thread::spawn(move || for _ in lines {});
    Running { child, dir }
}

/// Run `cluster up` with one replica of everything for one second; returns its stderr and run
/// directory, after checking it succeeded.
fn up_for_a_second(extra: &[&str]) -> (String, PathBuf) {
    let out = kubechaos()
        .args(["cluster", "up"])
        .args(ONE)
        .args(["--for", "1s"])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let kubeconfig = stdout
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("export KUBECONFIG="))
        .expect("kubeconfig line");
    (
        stderr,
        Path::new(kubeconfig).parent().unwrap().to_path_buf(),
    )
}

/// A namespace's phase (`Active`, `Terminating`), or nothing once it is gone.
fn namespace_phase(dir: &Path, ns: &str) -> String {
    kubectl(
        dir,
        &[
            "get",
            "namespace",
            ns,
            "--ignore-not-found",
            "-o",
            "jsonpath={.status.phase}",
        ],
    )
}

fn kubectl(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", dir.join("admin.kubeconfig"))
        .args(args)
        .output()
        .expect("kubectl is installed");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn cluster_up_serves_kubectl_with_leases_held_and_nodes_ready_then_cleans_up() {
    let mut cluster = up(&[
        "--nodes",
        "2",
        "--schedulers",
        "2",
        "--controller-managers",
        "2",
    ]);
    let dir = cluster.dir.clone();
    let leases = kubectl(
        &dir,
        &[
            "get",
            "leases",
            "-A",
            "-o",
            "custom-columns=NS:.metadata.namespace,NAME:.metadata.name,HOLDER:.spec.holderIdentity",
            "--no-headers",
        ],
    );
    let holder = |name: &str| {
        leases
            .lines()
            .find(|l| {
                l.contains(&format!("kube-system {name} "))
                    || l.split_whitespace().nth(1) == Some(name)
            })
            .map(|l| l.split_whitespace().nth(2).unwrap_or("").to_owned())
    };
    let scheduler = holder("kube-scheduler").expect("the scheduler lease exists");
    assert!(
        scheduler.starts_with("kube-scheduler-0_") || scheduler.starts_with("kube-scheduler-1_"),
        "holder identities name the replica: {scheduler}"
    );
    let kcm = holder("kube-controller-manager").expect("the controller-manager lease exists");
    assert!(kcm.starts_with("kube-controller-manager-"), "{kcm}");
    let nodes = kubectl(&dir, &["get", "nodes", "--no-headers"]);
    assert_eq!(
        nodes
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count(),
        2,
        "{nodes}"
    );
    let version = kubectl(&dir, &["version", "-o", "json"]);
    assert!(
        version.contains("\"gitVersion\": \"v1.3"),
        "the server reports the pinned version: {version}"
    );

    // A component that ends by itself (upstream's exit when they lose their Lease) is started
    // again after the kubelet's back-off, as a kubelet restarts a static pod's container.
    let scheduler_pid = |dir: &Path| pid_of(dir, "kube-scheduler", "kube-scheduler-0");
    let before = scheduler_pid(&dir).expect("kube-scheduler-0 runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(before),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let again = loop {
        match scheduler_pid(&dir) {
            Some(pid) if pid != before => break Some(pid),
            _ if std::time::Instant::now() > deadline => break None,
            _ => std::thread::sleep(Duration::from_millis(250)),
        }
    };
    assert!(again.is_some(), "kube-scheduler-0 was not started again");

    nix::sys::signal::kill(cluster.pid(), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = cluster.child.wait().unwrap();
    assert!(status.success(), "Ctrl-C is a clean stop: {status}");
    let needle = dir.to_string_lossy().into_owned();
    assert_eq!(
        wait_until_gone(&needle),
        Vec::<String>::new(),
        "no process of the run is left"
    );
    assert!(!dir.exists(), "the run directory is removed");
}

#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn killing_kubechaos_outright_takes_every_child_with_it() {
    let mut cluster = up(ONE);
    let needle = cluster.dir.to_string_lossy().into_owned();
    assert!(
        processes_mentioning(&needle).len() >= 4,
        "etcd, kube-apiserver, scheduler and controller-manager run"
    );
    cluster.child.kill().unwrap(); // SIGKILL: no cleanup code runs in kubechaos
    cluster.child.wait().unwrap();
    assert_eq!(
        wait_until_gone(&needle),
        Vec::<String>::new(),
        "the parent-death signal ends every child"
    );
    let _ = std::fs::remove_dir_all(&cluster.dir);
}

#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn cluster_up_for_a_duration_stops_by_itself() {
    let (stderr, dir) = up_for_a_second(&[]);
    assert!(stderr.contains("ready after"), "{stderr}");
    assert!(
        stderr.contains("every process ended and the run directory was removed"),
        "{stderr}"
    );
    assert!(!dir.exists());
    assert_eq!(
        wait_until_gone(&dir.to_string_lossy()),
        Vec::<String>::new()
    );
}

/// Agents on an existing cluster: kubechaos runs them on this machine with the cluster's
/// credentials, each through its own proxy, so a partition cuts the leader off and the other
/// replica takes over (exit 0); a `give-up` agent alone never leads again (exit 1, the verdict
/// naming the lease and its last holder). What the run made (the agents' namespace and Lease,
/// their processes and directory) is gone afterwards.
#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn agents_run_on_an_existing_cluster_through_their_own_proxies() {
    let cluster = up(SMALL);
    let dir = cluster.dir.clone();
    let kubeconfig = dir.join("admin.kubeconfig");
    let scenarios = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = scenarios.path().join(format!("{name}.yaml"));
        std::fs::write(&path, format!("name: {name}\n{text}")).unwrap();
        path
    };
    let correct = write(
        "kube-agents",
        "cluster:
  nodes: 2
  agents: [{name: agent, replicas: 2, lease: kube-agents/agent-lock}]
faults:
  - {at: 10s, partition: [agent/agent/leader, api-server], for: 30s}
  - {at: 50s, kill: agent/agent/leader}
expect:
  - leader-reacquired: {lease: kube-agents/agent-lock, within: 30s}
  - single-leader: {lease: kube-agents/agent-lock}
  - valid-lease-while-leading: {lease: kube-agents/agent-lock}
duration: 1m25s
",
    );
    let play = |file: &Path| {
        let (code, text) = common::play_on_kube(file, &kubeconfig);
        (Some(code), text)
    };
    let (code, text) = play(&correct);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("partition: [agent/agent/leader, api-server]"),
        "{text}"
    );
    assert!(
        text.contains("PASS  single-leader kube-agents/agent-lock"),
        "{text}"
    );
    assert!(
        text.contains("deleted the Lease kube-agents/agent-lock its agents made")
            && text.contains("deleted the namespace kube-agents it made for its agents")
            && text.contains("stopped 2 agent processes on this machine"),
        "{text}"
    );
    let trap = write(
        "kube-agent-gives-up",
        "cluster:
  nodes: 2
  agents: [{name: agent, replicas: 1, lease: kube-trap/give-up-lock, mode: give-up}]
faults:
  - {at: 5s, partition: [agent/agent/leader, api-server], for: 25s}
expect:
  - leader-reacquired: {lease: kube-trap/give-up-lock, within: 20s}
duration: 55s
",
    );
    let (code, text) = play(&trap);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("FAIL  leader-reacquired kube-trap/give-up-lock")
            && text.contains("last holder agent-0_1"),
        "{text}"
    );
    // Nothing of the runs is left: no agent process, no Lease, the namespace going or gone.
    assert_eq!(wait_until_gone("kubechaos-agents-"), Vec::<String>::new());
    let leases = kubectl(&dir, &["get", "leases", "-A", "-o", "name"]);
    assert!(
        !leases.contains("agent-lock") && !leases.contains("give-up-lock"),
        "{leases}"
    );
    let ns = namespace_phase(&dir, "kube-agents");
    assert!(ns.trim().is_empty() || ns.trim() == "Terminating", "{ns}");
}

/// Pod agents on an existing cluster (the local control plane through its kubeconfig, whose nodes
/// run pods' commands and serve their logs): the run creates the scenario's manifests, follows the
/// Deployment's pods as the agent's candidates (a start per running container, an exit when a pod
/// goes) and their logs (the reference agent's JSON reports), `kill`
/// of the leader deletes that pod (its ReplicaSet makes another) and the other pod takes over;
/// at the end it deletes what it created. A selector that matches no pod ends the start (exit 3)
/// and what was created is deleted too; so does one whose pods run and never take the Lease (no
/// Role), saying what they logged.
#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn pod_agents_follow_a_workload_on_an_existing_cluster() {
    let cluster = up(SMALL);
    let dir = cluster.dir.clone();
    let kubeconfig = dir.join("admin.kubeconfig");
    let scenarios = tempfile::tempdir().unwrap();
    std::fs::copy(
        common::repo().join("examples/manifests/reference-agent.yaml"),
        scenarios.path().join("reference-agent.yaml"),
    )
    .unwrap();
    let write = |name: &str, selector: &str, rest: &str| {
        let path = scenarios.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!("name: {name}\ncluster:\n  nodes: 2\n  manifests: [reference-agent.yaml]\n  agents:\n    - {{name: op, lease: reference-agent/reference-agent-lock, pods: {{namespace: reference-agent, selector: {selector}}}}}\n{rest}"),
        )
        .unwrap();
        path
    };
    let play = |file: &Path| {
        let (code, text) = common::play_on_kube(file, &kubeconfig);
        (Some(code), text)
    };
    let killed = write(
        "kube-pod-agent",
        "app=reference-agent",
        "faults:\n  - {at: 10s, id: kill, kill: agent/op/leader}\nexpect:\n  - leader-reacquired: {lease: reference-agent/reference-agent-lock, within: 40s, after: kill}\n  - single-leader: {lease: reference-agent/reference-agent-lock}\nduration: 55s\n",
    );
    let (code, text) = play(&killed);
    assert_eq!(code, Some(0), "{text}");
    for expected in [
        "created 5 object(s) of the manifests: Namespace reference-agent,",
        "candidate reference-agent/reference-agent-",
        "fault     kill: agent/op/leader  [reference-agent/reference-agent-",
        "PASS  leader-reacquired reference-agent/reference-agent-lock: held by reference-agent-",
        "PASS  single-leader reference-agent/reference-agent-lock",
        "deleted Deployment reference-agent/reference-agent it created",
        "deleted Namespace reference-agent it created",
    ] {
        assert!(text.contains(expected), "{expected}:\n{text}");
    }
    // The pods' logs are followed through the API (`pods/log`, which the local control plane's
    // nodes serve as a kubelet does): the reference agent's JSON reports are judged.
    assert!(
        !text.contains("cannot follow this pod's log")
            && !text.contains("(0 leadership terms observed)"),
        "{text}"
    );
    let killed_pod = text
        .lines()
        .find(|l| l.contains("fault     kill: agent/op/leader"))
        .and_then(|l| l.rsplit("reference-agent/").next())
        .map(|p| p.trim_end_matches(']').to_owned())
        .unwrap();
    assert!(
        text.contains(&format!("exit      {killed_pod}: its pod")),
        "the deleted pod's process ended in the timeline:\n{text}"
    );

    // With a provider that reaches the nodes (kind, told by `--provider`; its docker CLI a
    // recording stand-in, as no kind cluster runs here), the leader pod is cut off by rules on
    // its own address in its node's container, mended by `for:`, and killed there by crictl: the
    // wiring from the API's view of the pod (node, podIP) to the commands is what is checked.
    let docker_dir = tempfile::tempdir().unwrap();
    let (docker, docker_log) = common::docker_stand_in(docker_dir.path(), "");
    let cut = write(
        "kube-pod-cut",
        "app=reference-agent",
        "faults:\n  - {at: 5s, partition: [agent/op/leader, api-server], for: 4s}\n  - {at: 11s, kill: agent/op/leader}\nexpect:\n  - single-leader: {lease: reference-agent/reference-agent-lock}\nduration: 14s\n",
    );
    let (code, text) = common::play_on_kind(&cut, &kubeconfig, &docker);
    assert_eq!(code, 0, "{text}");
    let calls = std::fs::read_to_string(&docker_log).unwrap_or_default();
    assert!(
        text.contains("fault     partition: [agent/op/leader, api-server]  [reference-agent-"),
        "the cut names the leader pod:\n{text}"
    );
    for expected in [
        "iptables -I INPUT -s 127.0.0.1 -p tcp --dport 6443 -m comment --comment kubechaos -j DROP",
        "iptables -I OUTPUT -d 127.0.0.1 -p tcp --sport 6443 -m comment --comment kubechaos -j DROP",
        "iptables -D INPUT -s 127.0.0.1 -p tcp --dport 6443 -m comment --comment kubechaos -j DROP",
        "iptables -D FORWARD -d 127.0.0.1 -p tcp --sport 6443 -m comment --comment kubechaos -j DROP",
        "--label io.kubernetes.pod.namespace=reference-agent --label io.kubernetes.pod.name=",
    ] {
        assert!(calls.contains(expected), "{expected}:\n{calls}\n{text}");
    }
    assert_eq!(calls.matches(" -I ").count(), 4, "{calls}");
    assert_eq!(calls.matches(" -D ").count(), 4, "{calls}");
    // Each command runs in the container named as the pod's node, after the check that the
    // nodes are running containers here.
    assert!(
        calls
            .lines()
            .next()
            .is_some_and(|c| c.starts_with("inspect -f "))
            && calls.lines().skip(1).all(|c| c.starts_with("exec node-")),
        "{calls}"
    );

    // The namespace the run deleted may still be going away: the next run waits for it before
    // it makes it again (an object being deleted is not "found already there").
    let podless = write(
        "kube-podless",
        "app=not-there",
        "expect:\n  - single-leader: {lease: reference-agent/reference-agent-lock}\nduration: 20s\n",
    );
    let (code, text) = play(&podless);
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("no pod in namespace reference-agent matches the selector `app=not-there` of agent op and runs")
            && text.contains("deleted Namespace reference-agent it created"),
        "{text}"
    );
    let ns = namespace_phase(&dir, "reference-agent");
    assert!(ns.trim().is_empty() || ns.trim() == "Terminating", "{ns}");

    // The usual first mistake, the Deployment without a Role for its Lease: its pods run and
    // never take it. The start ends (exit 3) saying that the workload did not take its Lease,
    // with each pod's starts and last log lines, where the reference agent's refused request
    // names the verb, the resource and the service account; what it created is deleted.
    let roleless: String = std::fs::read_to_string(scenarios.path().join("reference-agent.yaml"))
        .unwrap()
        .replace("reference-agent", "roleless-agent")
        .split("\n---\n")
        .filter(|doc| !doc.contains("kind: Role"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    std::fs::write(scenarios.path().join("roleless-agent.yaml"), roleless).unwrap();
    let path = scenarios.path().join("kube-roleless.yaml");
    std::fs::write(
        &path,
        "name: kube-roleless\ncluster:\n  manifests: [roleless-agent.yaml]\n  agents:\n    - {name: op, lease: roleless-agent/roleless-agent-lock, pods: {namespace: roleless-agent, selector: app=roleless-agent}}\nexpect:\n  - single-leader: {lease: roleless-agent/roleless-agent-lock}\nduration: 20s\n",
    )
    .unwrap();
    let (code, text) = play(&path);
    assert_eq!(code, Some(3), "{text}");
    for expected in [
        "the pod agents' pods ran, but the workload did not take its Lease within 60s:",
        "agent op: no pod took Lease roleless-agent/roleless-agent-lock; no other Lease in namespace roleless-agent; its pods:",
        "roleless-agent/roleless-agent-",
        "running; its log ends:",
        "error retrieving resource lock: leases.coordination.k8s.io \"roleless-agent-lock\" is forbidden: User \"system:serviceaccount:roleless-agent:roleless-agent\" cannot get resource \"leases\"",
        "deleted Namespace roleless-agent it created",
    ] {
        assert!(text.contains(expected), "{expected}:\n{text}");
    }

    // An object the API server refuses for what it is: exit 2 at the manifest's line, and what
    // the start made before it (a namespace of its own) is deleted.
    std::fs::write(
        scenarios.path().join("invalid.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: kubechaos-invalid}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad, namespace: kubechaos-invalid}\nspec:\n  replicas: -1\n  selector: {matchLabels: {app: bad}}\n  template:\n    metadata: {labels: {app: bad}}\n    spec: {containers: [{name: c, image: x, command: [x]}]}\n",
    )
    .unwrap();
    let refused = scenarios.path().join("kube-refused.yaml");
    std::fs::write(
        &refused,
        "name: kube-refused\ncluster:\n  manifests: [invalid.yaml]\nexpect:\n  - available: {deployment: kubechaos-invalid/bad, within: 10s}\nduration: 10s\n",
    )
    .unwrap();
    let (code, text) = play(&refused);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("kube-refused.yaml:3:15: `cluster.manifests` (invalid.yaml): the API server refused Deployment kubechaos-invalid/bad:")
            && text.contains("restored: deleted Namespace kubechaos-invalid it created"),
        "{text}"
    );
}

/// The pid of the process of the control plane in `dir` that runs `program` (its path ends so)
/// and whose command line also mentions `also`.
fn pid_of(dir: &Path, program: &str, also: &str) -> Option<i32> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_string_lossy().parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        (cmdline.split(' ').next()?.ends_with(&format!("/{program}"))
            && cmdline.contains(&needle)
            && cmdline.contains(also))
        .then_some(pid)
    })
}

/// The member of the etcd members (`--listen-client-urls` each) whose metrics say it leads raft.
fn etcd_leader_of(clients: &[String]) -> Option<usize> {
    clients.iter().position(|url| {
        Command::new("curl")
            .args(["-s", "--max-time", "2", &format!("{url}/metrics")])
            .output()
            .is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.trim() == "etcd_server_is_leader 1")
            })
    })
}

/// kind with three control-plane nodes, each running an API server and an etcd member
/// (kubeadm's stacked etcd): a control plane of three API servers and three etcd members of its
/// own, dressed as one (node-0..2 its control-plane nodes), whose docker CLI is a stand-in that
/// answers as kind's containers would: the node's cluster label and its load balancer's address,
/// each node's etcd metrics with the real member's (`curl` of member N for node-N), and the hold
/// of a node's etcd static pod with SIGSTOP of that real member (SIGCONT when the manifest is
/// moved back). `remove: etcd/leader` must hold the member that really leads, and the real
/// members then elect another; an API server's cut from etcd is a rule on its node's loopback,
/// and a node's cut from the API servers drops its packets to the load balancer too.
#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn on_kind_with_three_control_plane_nodes_the_etcd_leader_is_the_real_one() {
    let cluster = up(&["--nodes", "3", "--api-servers", "3", "--etcd-members", "3"]);
    let dir = cluster.dir.clone();
    let kubeconfig = dir.join("admin.kubeconfig");
    for node in ["node-0", "node-1", "node-2"] {
        kubectl(
            &dir,
            &[
                "label",
                "node",
                node,
                "node-role.kubernetes.io/control-plane=",
            ],
        );
    }
    // The members: their processes and client addresses.
    let members: Vec<(i32, String)> = (0..3)
        .map(|i| {
            let pid = pid_of(&dir, "etcd", &format!("--name=etcd-{i} ")).expect("its etcd runs");
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
            let url = String::from_utf8_lossy(&cmdline)
                .split('\0')
                .find_map(|a| a.strip_prefix("--listen-client-urls=").map(str::to_owned))
                .expect("a client address");
            (pid, url)
        })
        .collect();
    let clients: Vec<String> = members.iter().map(|(_, u)| u.clone()).collect();
    let leader = etcd_leader_of(&clients).expect("a member leads");
    let mut answer = String::from(
        "case \"$*\" in\n  *io.x-k8s.kind.cluster*) echo chaos ;;\n  *chaos-external-load-balancer) echo '10.9.9.9 ' ;;\n",
    );
    for (i, (pid, url)) in members.iter().enumerate() {
        answer.push_str(&format!(
            "  'exec node-{i} curl'*) curl -s --max-time 2 {url}/metrics ;;\n  'exec node-{i} sh -c mkdir'*etcd.yaml*) kill -STOP {pid} ;;\n  'exec node-{i} sh -c mv /etc/kubernetes/kubechaos-held/etcd.yaml'*) kill -CONT {pid} ;;\n"
        ));
    }
    answer.push_str("esac");
    let work = tempfile::tempdir().unwrap();
    let (docker, log) = common::docker_stand_in(work.path(), &answer);
    let path = work.path().join("kube-kind-ha.yaml");
    std::fs::write(
        &path,
        "name: kube-kind-ha
cluster:
  nodes: 3
  api-servers: 3
  etcd: {members: 3}
  components: {kube-scheduler: {replicas: 2}, kube-controller-manager: {replicas: 2}}
faults:
  - {at: 5s, id: lose-leader, remove: etcd/leader, for: 12s}
  - {at: 6s, partition: [api-server/1, etcd], for: 3s}
  - {at: 7s, partition: [node/node-2, api-server], for: 3s}
expect:
  - schedulable: {within: 30s, after: lose-leader}
duration: 40s
",
    )
    .unwrap();
    // Which members lead while the run plays (read from their metrics every half second).
    let playing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (playing, clients) = (playing.clone(), clients.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            while playing.load(std::sync::atomic::Ordering::Relaxed) {
                seen.extend(etcd_leader_of(&clients));
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            seen
        })
    };
    let (code, text) = common::play_on_kind(&path, &kubeconfig, &docker);
    playing.store(false, std::sync::atomic::Ordering::Relaxed);
    let leaders = watcher.join().unwrap();
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(code, 0, "{text}\n{calls}");
    assert!(
        text.contains(&format!("remove: etcd/leader  [etcd-{leader}]")),
        "the member that led (etcd-{leader}) was the one removed:\n{text}"
    );
    for expected in [
        format!("exec node-{leader} sh -c mkdir -p /etc/kubernetes/kubechaos-held && mv /etc/kubernetes/manifests/etcd.yaml"),
        format!("exec node-{leader} sh -c mv /etc/kubernetes/kubechaos-held/etcd.yaml /etc/kubernetes/manifests/etcd.yaml"),
        "exec node-1 iptables -I OUTPUT -d 127.0.0.1 -p tcp --dport 2379 -m comment --comment kubechaos -j DROP".to_owned(),
        "exec node-1 iptables -D OUTPUT -d 127.0.0.1 -p tcp --sport 2379 -m comment --comment kubechaos -j DROP".to_owned(),
        "exec node-2 iptables -I OUTPUT -d 10.9.9.9 -p tcp --dport 6443 -m comment --comment kubechaos -j DROP".to_owned(),
        "exec node-2 iptables -D OUTPUT -d 10.9.9.9 -p tcp --dport 6443 -m comment --comment kubechaos -j DROP".to_owned(),
    ] {
        assert!(calls.contains(&expected), "{expected}:\n{calls}");
    }
    // Only node-1's API server was cut off from etcd: no rule between it and another node's
    // member (raft's traffic between members is left alone).
    assert_eq!(calls.matches("--dport 2379").count(), 2, "{calls}");
    // While it was held, the two others elected a new leader. (Whether that one still leads
    // after the run is for etcd to say: on a loaded machine another election may follow the
    // held member's return.)
    assert!(
        leaders.iter().any(|&l| l != leader),
        "etcd-{leader} led before the run, and the members seen leading during it were {leaders:?}"
    );
}

/// Play the client-go fixture in `mode` as a Deployment of one replica, installed in an existing
/// cluster and named by a pod agent, through a real API outage: a control plane of its own dressed
/// as a kind cluster (node-0 its control plane) whose docker CLI is a stand-in that carries out
/// kind's hold of the API server's static pod on this control plane (SIGSTOP of its
/// kube-apiserver: unreachable, as the seed's API server was; SIGCONT when the manifest is moved
/// back). One cluster per run: after an outage its controller-manager, which exits when it loses
/// its lease, is not brought back (nothing supervises `cluster up`'s components), so a second
/// workload would never get pods. Returns the exit code, the output, and the docker calls.
fn client_go_through_an_outage_on_kube(mode: &str) -> (i32, String, String) {
    let cluster = up(SMALL);
    let dir = cluster.dir.clone();
    let kubeconfig = dir.join("admin.kubeconfig");
    kubectl(
        &dir,
        &[
            "label",
            "node",
            "node-0",
            "node-role.kubernetes.io/control-plane=",
        ],
    );
    let work = tempfile::tempdir().unwrap();
    let bin = common::build_client_go_agent(work.path());
    let pid = pid_of(&dir, "kube-apiserver", "").expect("its kube-apiserver runs");
    let (docker, log) = common::docker_stand_in(
        work.path(),
        &format!("case \"$*\" in\n  *'mv /etc/kubernetes/manifests/kube-apiserver.yaml'*) kill -STOP {pid} ;;\n  *'kubechaos-held/kube-apiserver.yaml /etc/kubernetes/manifests'*) kill -CONT {pid} ;;\nesac"),
    );
    let ns = format!("cg-{mode}");
    let manifest =
        std::fs::read_to_string(common::repo().join("examples/manifests/client-go-agent.yaml"))
            .unwrap()
            .replace("client-go-agent", &ns)
            .replace(&format!("target/{ns}"), &bin.display().to_string())
            .replace("--mode, correct", &format!("--mode, {mode}"))
            .replace("replicas: 2", "replicas: 1");
    std::fs::write(work.path().join(format!("{ns}.yaml")), manifest).unwrap();
    let path = work.path().join(format!("kube-client-go-{mode}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: kube-client-go-{mode}
cluster:
  manifests: [{ns}.yaml]
  agents:
    - name: controller
      lease: {ns}/{ns}-lock
      pods: {{namespace: {ns}, selector: app={ns}}}
      leading: {{started: 'Successfully acquired lease', stopped: 'Failed to renew lease'}}
faults:
  - {{at: 5s, api-server: stop, for: 20s}}
expect:
  - leader-reacquired: {{lease: {ns}/{ns}-lock, within: 30s}}
  - single-leader: {{lease: {ns}/{ns}-lock}}
"
        ),
    )
    .unwrap();
    let (code, text) = common::play_on_kind(&path, &kubeconfig, &docker);
    assert_eq!(
        wait_until_gone(&bin.display().to_string()),
        Vec::<String>::new()
    );
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    (code, text, calls)
}

/// The seed's bug (`--mode give-up`) in an existing cluster fails `leader-reacquired`, naming
/// the lease and its last holder's pod; the correct build passes. Everything the runs created is
/// deleted. (Both at once, each on a cluster of its own.)
#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn a_client_go_deployment_is_judged_through_an_api_outage_on_an_existing_cluster() {
    let (give_up, correct) = std::thread::scope(|scope| {
        let give_up = scope.spawn(|| client_go_through_an_outage_on_kube("give-up"));
        let correct = scope.spawn(|| client_go_through_an_outage_on_kube("correct"));
        (give_up.join().unwrap(), correct.join().unwrap())
    });
    let (code, text, calls) = give_up;
    assert_eq!(code, 1, "{text}");
    let violation = text
        .lines()
        .find(|l| l.contains("FAIL  leader-reacquired cg-give-up/cg-give-up-lock"))
        .unwrap_or_else(|| panic!("no leader-reacquired violation:\n{text}"));
    assert!(
        violation.contains("last holder cg-give-up-") && violation.contains("none is trying"),
        "{violation}"
    );
    assert!(
        text.contains("deleted Deployment cg-give-up/cg-give-up it created"),
        "{text}"
    );
    assert!(
        calls.contains("exec node-0 sh -c mkdir -p /etc/kubernetes/kubechaos-held && mv /etc/kubernetes/manifests/kube-apiserver.yaml"),
        "{calls}"
    );
    let (code, text, _) = correct;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("PASS  leader-reacquired cg-correct/cg-correct-lock: held by cg-correct-")
            && !text.contains("(0 leadership terms observed)"),
        "{text}"
    );
}

/// A control plane that cannot start says which process failed, how it exited and the last
/// lines of its log (exit 3), and leaves nothing behind: no process, no run directory. The
/// binaries are stand-ins in a cache of their own (etcd fails at once; the rest would run).
#[test]
#[ignore = "real tier: starts processes as the local backend does (root: unshare --uts); ci/test runs it"]
fn a_failed_start_names_the_process_its_exit_and_its_log_and_leaves_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let pins = kubechaos_engine::backend::local::build::Pins::embedded().unwrap();
    let bins = cache.path().join(pins.cache_dir().file_name().unwrap());
    std::fs::create_dir_all(&bins).unwrap();
    for b in kubechaos_engine::backend::local::build::BINARIES {
        let script = if b == "etcd" {
            "#!/bin/sh\necho 'etcdmain: starting' >&2\necho 'etcdmain: listen tcp 127.0.0.1:2379: bind: address already in use' >&2\nexit 7\n"
        } else {
            "#!/bin/sh\nexec sleep 600\n"
        };
        let path = bins.join(b);
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = kubechaos()
        .args(["cluster", "up", "--nodes", "1"])
        .env("KUBECHAOS_CACHE", cache.path())
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the local control plane did not start: etcd exited (exit status: 7)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("its log ends:") && stderr.contains("bind: address already in use"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(
        wait_until_gone(&cache.path().to_string_lossy()),
        Vec::<String>::new()
    );
}

#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn keep_leaves_the_run_directory_with_logs_and_kubeconfigs() {
    let (stderr, dir) = up_for_a_second(&["--keep"]);
    let kubeconfig = dir.join("admin.kubeconfig");
    assert!(
        stderr.contains(&format!("kept {}", dir.display())),
        "{stderr}"
    );
    assert!(kubeconfig.is_file(), "the kubeconfig is kept");
    for log in [
        "etcd",
        "api-server",
        "kube-scheduler-0",
        "kube-controller-manager-0",
    ] {
        let path = dir.join("logs").join(format!("{log}.log"));
        assert!(
            std::fs::metadata(&path)
                .map(|m| m.len() > 0)
                .unwrap_or(false),
            "{} is kept and not empty",
            path.display()
        );
    }
    assert_eq!(
        wait_until_gone(&dir.to_string_lossy()),
        Vec::<String>::new(),
        "processes still end"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn cluster_status_shows_a_running_cluster_and_cluster_down_stops_it() {
    let mut cluster = up(ONE);
    let dir = cluster.dir.clone();
    let status = kubechaos().args(["cluster", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.status.success(), "{text}");
    let ours: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with(&*dir.to_string_lossy()))
        .take(6)
        .collect();
    let ours = ours.join("\n");
    assert!(
        ours.contains("cluster up") && ours.contains("running"),
        "{text}"
    );
    assert!(ours.contains("API: ready"), "{text}");
    assert!(
        ours.contains("lease kube-system/kube-scheduler: kube-scheduler-0_"),
        "{text}"
    );
    assert!(ours.contains("nodes: 1/1 Ready and schedulable"), "{text}");

    let down = kubechaos()
        .args(["cluster", "down"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    assert!(String::from_utf8_lossy(&down.stdout).contains(&format!("stopped {}", dir.display())));
    assert!(
        cluster.child.wait().unwrap().success(),
        "`cluster up` ends cleanly"
    );
    assert_eq!(
        wait_until_gone(&dir.to_string_lossy()),
        Vec::<String>::new()
    );
    assert!(!dir.exists());

    let again = kubechaos()
        .args(["cluster", "down"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(2),
        "a directory that is gone is bad input"
    );
}

/// `kubechaos recover` against the real API server: a pod made from a Deployment's template,
/// pre-bound and not adopted; `--dry-run`; `--cleanup` once the Deployment is available; Bindings
/// for pending pods; and every refusal with its exit code.
#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn recover_runs_pods_without_a_scheduler_against_the_real_api_server() {
    let cluster = up(SMALL);
    let dir = cluster.dir.clone();
    let kubeconfig = dir.join("admin.kubeconfig");
    let recover = |args: &[&str]| -> (i32, String, String) {
        let out = kubechaos()
            .arg("recover")
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let pause = "--image=registry.k8s.io/pause:3.10";
    kubectl(&dir, &["create", "deployment", "web", pause]);

    let (code, out, err) = recover(&[
        "pod-from",
        "deployment/web",
        "--node",
        "node-0",
        "--dry-run",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("nodeName: node-0")
            && out.contains("kubechaos.io/recovery-for: deployment.web"),
        "{out}"
    );
    let recovery_pods = || {
        kubectl(
            &dir,
            &[
                "get",
                "pods",
                "-l",
                "kubechaos.io/recovery-for",
                "-o",
                "name",
            ],
        )
    };
    assert_eq!(recovery_pods(), "", "--dry-run creates nothing");

    let (code, out, err) = recover(&["pod-from", "deploy/web", "--node", "node-1"]);
    assert_eq!(code, 0, "{err}");
    let name = out
        .split_whitespace()
        .next()
        .and_then(|w| w.strip_prefix("pod/"))
        .expect("it names the pod")
        .to_owned();
    let field = |pod: &str, path: &str| {
        kubectl(
            &dir,
            &["get", "pod", pod, "-o", &format!("jsonpath={{{path}}}")],
        )
    };
    assert_eq!(
        field(&name, ".spec.nodeName"),
        "node-1",
        "bound without a scheduler"
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        field(&name, ".metadata.ownerReferences"),
        "",
        "the ReplicaSet did not adopt it"
    );

    // --cleanup: waits for the Deployment to be available (its pod reported Ready, as a kubelet
    // would), then deletes the recovery pod.
    let waiting = kubechaos()
        .args([
            "recover",
            "pod-from",
            "deployment/web",
            "--node",
            "node-0",
            "--cleanup",
            "--timeout",
            "90s",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The Deployment's own pod, once the controller-manager made it (a cluster is ready before
    // its controllers' first passes).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let web = loop {
        let names = kubectl(&dir, &["get", "pods", "-l", "app=web", "-o", "name"]);
        let own = names
            .lines()
            .filter_map(|n| n.strip_prefix("pod/"))
            .find(|n| !n.starts_with("web-recovery-"))
            .map(str::to_owned);
        if let Some(own) = own {
            break own;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "deployment/web made no pod within 60s: {names}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    kubectl(
        &dir,
        &[
            "patch",
            "pod",
            &web,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#,
        ],
    );
    let done = waiting.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&done.stdout);
    assert_eq!(
        done.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        out.contains("deployment/web has its pods Ready again (1/1); deleted pod/web-recovery-"),
        "{out}"
    );

    // Bindings for pending pods (a scheduler nobody runs keeps them Pending).
    for pod in ["pend-a", "pend-b"] {
        kubectl(
            &dir,
            &[
                "run",
                pod,
                pause,
                "-l",
                "hold=yes",
                "--overrides",
                r#"{"spec":{"schedulerName":"nobody"}}"#,
            ],
        );
    }
    let (code, out, err) = recover(&["bind", "pend-a", "--node", "node-0"]);
    assert_eq!(
        (code, out.trim()),
        (0, "pod/pend-a bound to node-0"),
        "{err}"
    );
    let (code, out, err) = recover(&[
        "bind",
        "--all-pending",
        "-l",
        "hold=yes",
        "--node",
        "node-1",
    ]);
    assert_eq!(
        (code, out.trim()),
        (0, "pod/pend-b bound to node-1"),
        "{err}"
    );
    assert_eq!(field("pend-b", ".spec.nodeName"), "node-1");

    // Refusals: exit 2 with what was expected; an unreachable cluster is exit 3.
    let unready = dir.join("unready-node.json");
    std::fs::write(
        &unready,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-x"}}"#,
    )
    .unwrap();
    kubectl(&dir, &["create", "-f", unready.to_str().unwrap()]);
    for (args, expected) in [
        (
            vec!["pod-from", "deployment/nope", "--node", "node-0"],
            "deployment/nope not found in namespace default; expected an existing workload",
        ),
        (
            vec!["pod-from", "deployment/web", "--node", "node-9"],
            "node node-9 does not exist; expected a Ready node: node-0, node-1",
        ),
        (
            vec!["pod-from", "deployment/web", "--node", "node-x"],
            "node node-x is not Ready; expected a Ready node: node-0, node-1",
        ),
        (
            vec!["pod-from", "job/web", "--node", "node-0"],
            "`job` is not a workload with a pod template",
        ),
        (
            vec!["bind", "pend-a", "--node", "node-1"],
            "pod default/pend-a is already bound to node-0; expected a pending pod",
        ),
        (
            vec!["bind", "ghost", "--node", "node-1"],
            "pod default/ghost not found",
        ),
    ] {
        let (code, _, err) = recover(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    let out = kubechaos()
        .args([
            "recover",
            "bind",
            "x",
            "--node",
            "n",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(cluster);
}

/// The kube backend against a real cluster it did not start (the local control plane, reached
/// through its kubeconfig as any cluster would be): the generic provider's faults, the same
/// observer and invariants, and the cluster left as it was found (probe pods and the namespace
/// the run created deleted). The safety guard lets kubechaos's own context through.
#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn the_kube_backend_plays_api_faults_on_an_existing_cluster_and_restores_it() {
    let cluster = up(SMALL);
    let dir = cluster.dir.clone();
    let kubeconfig = dir.join("admin.kubeconfig");
    // The local launcher made the probe namespace; remove it to see the run make and delete it.
    kubectl(&dir, &["delete", "namespace", "kubechaos", "--wait=true"]);
    // CoreDNS as kind, k3s and kubeadm run it, for the shipped scenarios-kube/delete-coredns.
    let manifest = dir.join("coredns.yaml");
    std::fs::write(
        &manifest,
        r#"{"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "coredns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                     "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                                  "spec": {"containers": [{"name": "coredns", "image": "registry.k8s.io/pause:3.10"}]}}}}"#,
    )
    .unwrap();
    kubectl(&dir, &["apply", "-f", manifest.to_str().unwrap()]);
    let json = dir.join("summary.json");
    let out = kubechaos()
        .args([
            "scenario",
            "scenarios-kube/delete-coredns.yaml",
            "--backend",
            "kube",
            "--json",
        ])
        .arg(&json)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("on kube"), "{stdout}");
    assert!(
        stdout.contains("delete-pods: 2 pod(s) deleted and gone"),
        "{stdout}"
    );
    assert!(
        stdout.contains("PASS  available kube-system/coredns"),
        "{stdout}"
    );
    assert!(
        stderr.contains("restored: deleted the probe pods")
            && stderr.contains("deleted the namespace kubechaos it created"),
        "{stderr}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["backend"], "kube");
    assert_eq!(v["scenarios"][0]["result"], "held");
    // Left as found: no probe pod, and the namespace is going or gone.
    let left = kubectl(
        &dir,
        &[
            "get",
            "pods",
            "-A",
            "-l",
            "app.kubernetes.io/managed-by=kubechaos",
            "-o",
            "name",
        ],
    );
    assert_eq!(left.trim(), "", "probe pods left behind");
    let ns = namespace_phase(&dir, "kubechaos");
    assert!(ns.trim().is_empty() || ns.trim() == "Terminating", "{ns}");

    // The guard: the same cluster under a name that does not look disposable is refused (exit
    // 2, nothing touched) unless allowed by name.
    let renamed = dir.join("renamed.kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig)
        .unwrap()
        .replace("kubechaos-local", "prod-eu-1");
    std::fs::write(&renamed, text).unwrap();
    let refused = kubechaos()
        .args([
            "scenario",
            "harness/tests/fixtures/kube-generic.yaml",
            "--backend",
            "kube",
        ])
        .arg("--kubeconfig")
        .arg(&renamed)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("refusing to touch context `prod-eu-1`")
    );
    let dry = kubechaos()
        .args([
            "scenario",
            "harness/tests/fixtures/kube-generic.yaml",
            "--backend",
            "kube",
            "--allow-context",
            "prod-eu-1",
            "--dry-run",
        ])
        .arg("--kubeconfig")
        .arg(&renamed)
        .output()
        .unwrap();
    assert_eq!(dry.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&dry.stdout).contains("the plan (nothing is touched)"));

    // The kind provider's commands, against a recording stand-in for docker: this cluster plays
    // a kind cluster whose node-0 is the control plane (labelled as kubeadm does) and whose
    // nodes report documentation addresses (192.0.2.0/24: no traffic is sent, docker is not real).
    kubectl(
        &dir,
        &[
            "label",
            "node",
            "node-0",
            "node-role.kubernetes.io/control-plane=",
        ],
    );
    for (node, ip) in [("node-0", "192.0.2.10"), ("node-1", "192.0.2.11")] {
        let patch =
            format!(r#"{{"status":{{"addresses":[{{"type":"InternalIP","address":"{ip}"}}]}}}}"#);
        kubectl(
            &dir,
            &[
                "patch",
                "node",
                node,
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch,
            ],
        );
    }
    let bin = dir.join("stand-in");
    std::fs::create_dir_all(&bin).unwrap();
    let (_, log) = common::docker_stand_in(&bin, "");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = kubechaos()
        .env("PATH", path)
        .args([
            "scenario",
            "harness/tests/fixtures/kube-kind.yaml",
            "--backend",
            "kube",
            "--provider",
            "kind",
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // The API server did not really stop (docker is a stand-in): the verdict is not the point.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stdout}{stderr}");
    assert!(
        stderr.contains("provider: kind (set with --provider)"),
        "{stderr}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    let held =
        "exec node-0 sh -c mkdir -p /etc/kubernetes/kubechaos-held && mv /etc/kubernetes/manifests";
    assert_eq!(
        calls,
        [
            // Before anything: every node is a running container here.
            "inspect -f {{.Name}} {{.State.Running}} node-0 node-1",
            format!("{held}/kube-apiserver.yaml /etc/kubernetes/kubechaos-held/kube-apiserver.yaml && ((ids=$(crictl --timeout 20s ps -q --name '^kube-apiserver$') || exit 1; [ -n \"$ids\" ] || {{ echo 'no running container matched' >&2; exit 3; }}; crictl --timeout 20s stop --timeout 30 $ids) >/dev/null 2>&1 &)").as_str(),
            "exec node-0 sh -c mv /etc/kubernetes/kubechaos-held/kube-apiserver.yaml /etc/kubernetes/manifests/kube-apiserver.yaml",
            "exec node-0 sh -c (ids=$(crictl --timeout 20s ps -q --name '^kube-scheduler$') || exit 1; [ -n \"$ids\" ] || { echo 'no running container matched' >&2; exit 3; }; crictl --timeout 20s stop --timeout 0 $ids)",
            "exec node-1 iptables -I OUTPUT -d 192.0.2.10 -p tcp --dport 6443 -m comment --comment kubechaos -j DROP",
            "exec node-0 iptables -I OUTPUT -d 192.0.2.11 -p tcp --sport 6443 -m comment --comment kubechaos -j DROP",
            "exec node-1 iptables -D OUTPUT -d 192.0.2.10 -p tcp --dport 6443 -m comment --comment kubechaos -j DROP",
            "exec node-0 iptables -D OUTPUT -d 192.0.2.11 -p tcp --sport 6443 -m comment --comment kubechaos -j DROP",
            "pause node-1",
            format!("{held}/etcd.yaml /etc/kubernetes/kubechaos-held/etcd.yaml && ((ids=$(crictl --timeout 20s ps -q --name '^etcd$') || exit 1; [ -n \"$ids\" ] || {{ echo 'no running container matched' >&2; exit 3; }}; crictl --timeout 20s stop --timeout 30 $ids) >/dev/null 2>&1 &)").as_str(),
            "exec node-0 sh -c mv /etc/kubernetes/kubechaos-held/etcd.yaml /etc/kubernetes/manifests/etcd.yaml",
            // The end of the run: what no `for:` undid.
            "unpause node-1",
        ],
        "{stderr}"
    );
    assert!(stderr.contains("restored: unpaused node-1"), "{stderr}");

    // (The Jobs ci/kubernetes ships are validated by the real API server in
    // kubechaos_in_a_pod_judges_its_own_cluster_with_the_shipped_rbac, once their namespace
    // exists.)
}

fn repo_path(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// kubechaos run as a pod judges the cluster it runs in: the shipped RBAC (ci/kubernetes/rbac.yaml)
/// applied for real, kubechaos as a pod with that ServiceAccount and the suite Job's arguments
/// (`--context in-cluster --allow-context in-cluster`), its in-cluster configuration the pod's
/// bound token, CA and `KUBERNETES_SERVICE_*`. The pods of a Deployment are deleted and the run
/// judges that the Deployment is available again and that pods schedule; its JSON summary says
/// so. The shipped Jobs pass the real API server's validation.
#[test]
#[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
fn kubechaos_in_a_pod_judges_its_own_cluster_with_the_shipped_rbac() {
    let cluster = up(ONE);
    let dir = cluster.dir.clone();
    let rbac = repo_path("ci/kubernetes/rbac.yaml");
    let applied = kubectl(&dir, &["apply", "-f", rbac.to_str().unwrap()]);
    assert!(
        applied.contains("serviceaccount/kubechaos created"),
        "{applied}"
    );
    for (file, job) in [
        ("ci/kubernetes/suite-job.yaml", "kubechaos-suite"),
        (
            "ci/kubernetes/explore-indexed-job.yaml",
            "kubechaos-explore",
        ),
    ] {
        let path = repo_path(file);
        let out = kubectl(
            &dir,
            &["apply", "--dry-run=server", "-f", path.to_str().unwrap()],
        );
        assert!(
            out.contains(&format!("job.batch/{job} created (server dry run)")),
            "{file}: {out}"
        );
    }

    let work = tempfile::tempdir().unwrap();
    let scenario = work.path().join("in-cluster.yaml");
    std::fs::write(
        &scenario,
        "name: in-cluster
cluster: {nodes: 1}
faults:
  - {at: 5s, id: delete, delete-pods: {namespace: demo, selector: app=demo}}
expect:
  - available: {deployment: demo/demo, within: 45s, after: delete}
  - schedulable: {within: 30s, after: delete}
duration: 1m
",
    )
    .unwrap();
    let summary = work.path().join("summary.json");
    // The suite Job's arguments, the scenario and summary at paths of this machine (a local pod's
    // process sees its files; `kubechaos` as the command is this kubechaos).
    let manifest = work.path().join("pods.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1
kind: Namespace
metadata: {{name: demo}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: demo, namespace: demo}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: demo}}}}
  template:
    metadata: {{labels: {{app: demo}}}}
    spec:
      containers: [{{name: demo, image: demo, command: [sleep, '600']}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: kubechaos-in-cluster, namespace: kubechaos-system}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: kubechaos}}}}
  template:
    metadata: {{labels: {{app: kubechaos}}}}
    spec:
      serviceAccountName: kubechaos
      containers:
        - name: suite
          image: ghcr.io/kubechaos/kubechaos:v0.1.0
          command: [kubechaos]
          args: [suite, '{scenario}', --backend=kube, --context=in-cluster, --allow-context=in-cluster, '--json={summary}']
",
            scenario = scenario.display(),
            summary = summary.display()
        ),
    )
    .unwrap();
    kubectl(&dir, &["apply", "-f", manifest.to_str().unwrap()]);
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    let verdict = loop {
        if let Some(v) = std::fs::read_to_string(&summary)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no summary from kubechaos in its pod after 4 minutes; its pods: {}\nits log: {}",
            kubectl(&dir, &["get", "pods", "-A", "-o", "wide"]),
            kubectl(
                &dir,
                &[
                    "logs",
                    "-n",
                    "kubechaos-system",
                    "deployment/kubechaos-in-cluster",
                    "--tail=30"
                ]
            )
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let _ = kubectl(
        &dir,
        &[
            "delete",
            "deployment",
            "-n",
            "kubechaos-system",
            "kubechaos-in-cluster",
            "--wait=false",
        ],
    );
    assert_eq!(verdict["backend"], "kube", "{verdict}");
    assert_eq!(verdict["exit_code"], 0, "{verdict:#}");
    let invariants = verdict["scenarios"][0]["invariants"].as_array().unwrap();
    assert_eq!(invariants.len(), 2, "{verdict:#}");
    assert!(invariants.iter().all(|i| i["held"] == true), "{verdict:#}");
    assert!(
        invariants[0]["label"]
            .as_str()
            .unwrap()
            .contains("demo/demo"),
        "{verdict:#}"
    );
}
