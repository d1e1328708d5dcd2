//! The kind tier (issue 28): kubechaos against a real kind cluster, made on this machine by
//! `ci/kind up` (kind v0.33.0 itself, from a node image built here from the pinned parts), with
//! real kubelets, containerd, iptables and kubeadm's static pods.
//!
//! As Kubernetes runs its `[Disruptive]` e2e tests (`[Serial]`) and cluster-api its e2e on one
//! bootstrap cluster, each lane of the tier is one cluster (one control-plane node, two workers)
//! made by `ci/real-tier` and named to each test in `KUBECHAOS_KIND_CLUSTER` (its kubeconfig in
//! `KUBECONFIG`); the tests of a lane play on its cluster one after another (one lane by
//! default, `KUBECHAOS_KIND_LANES` more). Each test first starts the cluster's kubelets afresh
//! and checks that the cluster is as a fresh one (nothing in its nodes, every node Ready), and
//! after its plays that they left the cluster as they found it: the cleanup of every fault is
//! tested on every play.
//! A test run alone (`cargo test --test kind -- --ignored NAME`) makes a cluster of its own and
//! deletes it, even when it fails. If a cluster cannot be made, the test fails and says why.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{play_scenario_with, repo};

/// The workers of the tier's cluster (and of one a test makes alone).
const WORKERS: u32 = 2;

/// The static pods kubeadm runs on a control-plane node.
const STATIC_PODS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// A kind cluster to play on: the tier's, or one made for a test alone (deleted when dropped).
struct Kind {
    name: String,
    kubeconfig: PathBuf,
    /// The kubeconfig's directory of a cluster made for this test alone.
    own: Option<tempfile::TempDir>,
}

/// What a play must leave of the cluster as it found it (see [`Kind::state`]).
#[derive(Debug, PartialEq, Eq)]
struct State {
    /// Every namespace.
    namespaces: BTreeSet<String>,
    /// Every pod outside kube-system (`NAMESPACE/NAME`): kube-system's restart under faults.
    pods: BTreeSet<String>,
    /// Every object labelled as a run's (`kubechaos.io/made-by-run`) of the kinds a scenario's
    /// manifests and agents make here.
    made: BTreeSet<String>,
}

/// The label of what a run creates outside the namespaces it makes.
const MADE_BY_RUN: &str = "kubechaos.io/made-by-run";

impl Kind {
    /// The tier's cluster (`KUBECHAOS_KIND_CLUSTER`, made by `ci/real-tier`), its kubelets
    /// started afresh and checked to be as a fresh one; else a cluster made for this test alone,
    /// `kc-SHORT`.
    fn for_test(short: &str) -> Kind {
        if let Some(name) = std::env::var_os("KUBECHAOS_KIND_CLUSTER") {
            let kubeconfig = std::env::var_os("KUBECONFIG")
                .map(PathBuf::from)
                .expect("KUBECHAOS_KIND_CLUSTER comes with KUBECONFIG (ci/real-tier sets both)");
            let kind = Kind {
                name: name.to_string_lossy().into_owned(),
                kubeconfig,
                own: None,
            };
            kind.restart_kubelets();
            return kind;
        }
        let name = format!("kc-{short}");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let out = Command::new(repo().join("ci/kind"))
            .args(["up", &name, "--workers", &WORKERS.to_string()])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap();
        let kind = Kind {
            name: name.clone(),
            kubeconfig,
            own: Some(dir),
        };
        assert!(
            out.status.success(),
            "ci/kind up {name} failed ({}): a kind-tier test needs a real kind cluster\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        kind
    }

    fn context(&self) -> String {
        format!("kind-{}", self.name)
    }

    /// `kubechaos scenario FILE --backend kube --context kind-NAME`: exit code and output.
    fn play(&self, file: &Path) -> (i32, String) {
        self.play_with(file, &[])
    }

    /// [`Kind::play`] with more environment.
    fn play_with(&self, file: &Path, env: &[(&str, &std::ffi::OsStr)]) -> (i32, String) {
        let context = self.context();
        play_scenario_with(
            file,
            "kube",
            &[
                "--kubeconfig".as_ref(),
                self.kubeconfig.as_os_str(),
                "--context".as_ref(),
                context.as_ref(),
            ],
            env,
        )
    }

    /// Restart the kubelet in every node and wait for the nodes and kube-system to be Ready, as
    /// on a fresh cluster: what a kubelet keeps in memory from the plays before goes with it,
    /// while the containers run on. That is its crash-loop back-off above all, kept per container
    /// for 10 minutes and doubling from 10 s to 5 minutes: each API-server outage makes the
    /// scheduler and the controller-manager exit once, and played three times in a row on one
    /// cluster, the third play found their back-off at 20 s (measured), so that a test's
    /// figures depended on the tests before it.
    fn restart_kubelets(&self) {
        for node in self.nodes() {
            let out = Command::new("docker")
                .args(["exec", &node, "systemctl", "restart", "kubelet"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "restarting the kubelet in {node}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Each says Ready again once it has synced its pods: give them that moment first.
        std::thread::sleep(Duration::from_secs(5));
        self.assert_fresh();
    }

    /// `kubectl --kubeconfig … --context kind-NAME ARGS`.
    fn kubectl(&self, args: &[&str]) -> std::process::Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--context", &self.context()])
            .args(args)
            .output()
            .unwrap()
    }

    /// [`Kind::kubectl`] that must succeed: its stdout.
    fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The node containers' names.
    fn nodes(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args(["ps", "-a", "--format", "{{.Names}}", "--filter"])
            .arg(format!("label=io.x-k8s.kind.cluster={}", self.name))
            .output()
            .unwrap();
        let mut nodes: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        nodes.sort();
        assert!(
            !nodes.is_empty(),
            "no node container of kind cluster {}",
            self.name
        );
        nodes
    }

    /// What a run left in the nodes: a node container not running (or paused), iptables rules
    /// with kubechaos's comment, static pod manifests held aside or missing from kubelet's
    /// directory.
    fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        for node in self.nodes() {
            let out = Command::new("docker")
                .args(["inspect", "-f", "{{.State.Status}}", &node])
                .output()
                .unwrap();
            let status = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if status != "running" {
                left.push(format!("{node}: its container is {status}, not running"));
                continue;
            }
            let out = Command::new("docker")
                .args(["exec", &node, "sh", "-c"])
                .arg("for x in iptables ip6tables; do $x -S | grep -e '--comment kubechaos '; $x -t nat -S | grep -e '--comment kubechaos '; done; ls /etc/kubernetes/kubechaos-held 2>/dev/null; true")
                .output()
                .unwrap();
            left.extend(
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(|l| format!("{node}: {l}")),
            );
            if node.ends_with("control-plane") {
                let out = Command::new("docker")
                    .args(["exec", &node, "ls", "/etc/kubernetes/manifests"])
                    .output()
                    .unwrap();
                let have = String::from_utf8_lossy(&out.stdout).to_string();
                for pod in STATIC_PODS {
                    if !have.lines().any(|l| l == format!("{pod}.yaml")) {
                        left.push(format!(
                            "{node}: {pod}.yaml is not in /etc/kubernetes/manifests"
                        ));
                    }
                }
            }
        }
        left
    }

    /// The cluster as a fresh one: nothing left in its nodes, every node Ready and every
    /// kube-system pod Ready (within 6 minutes: a play before may have ended with a component
    /// still coming back, and after several API-server outages in a row the scheduler and the
    /// controller-manager, which exit on their lost Leases and cannot start while the API server
    /// is down, wait out kubelet's crash-loop back-off, up to its maximum of 5 minutes: seen in
    /// a flake gate that played three outages three times, the tests after it waited 140 s of
    /// the 3 minutes this once allowed).
    fn assert_fresh(&self) {
        assert_eq!(
            self.leftovers(),
            Vec::<String>::new(),
            "the tier's cluster {} is not as a fresh one before this test",
            self.name
        );
        for what in [
            vec!["node", "--all"],
            vec!["pod", "--all", "-n", "kube-system"],
        ] {
            let mut args = vec!["wait", "--for=condition=Ready", "--timeout=6m"];
            args.extend(what);
            let out = self.kubectl(&args);
            assert!(
                out.status.success(),
                "the tier's cluster {}: not Ready within 6 minutes ({}): {}\n{}\n{}",
                self.name,
                args.join(" "),
                String::from_utf8_lossy(&out.stderr),
                self.kubectl_ok(&["get", "nodes,pods", "-A", "-o", "wide"]),
                self.why_not_ready()
            );
        }
    }

    /// What tells why a kube-system pod is not Ready (once seen in the tier: the scheduler
    /// Running, not Ready, minutes after a play's API outage): each such pod described (its
    /// probes' failures among its events) with the last lines of its log and of its previous
    /// container's.
    fn why_not_ready(&self) -> String {
        let listed = self.kubectl(&[
            "get",
            "pods",
            "-n",
            "kube-system",
            "--no-headers",
            "-o",
            "custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type==\"Ready\")].status",
        ]);
        let mut out = String::new();
        for line in String::from_utf8_lossy(&listed.stdout).lines() {
            let mut cols = line.split_whitespace();
            let (Some(pod), Some(ready)) = (cols.next(), cols.next()) else {
                continue;
            };
            if ready == "True" {
                continue;
            }
            let logs = |tail, previous: &[&'static str]| {
                let mut args = vec![
                    "logs",
                    "-n",
                    "kube-system",
                    pod,
                    "--tail",
                    tail,
                    "--timestamps",
                ];
                args.extend(previous);
                args
            };
            for args in [
                vec!["describe", "pod", "-n", "kube-system", pod],
                logs("40", &[]),
                logs("20", &["--previous"]),
            ] {
                let o = self.kubectl(&args);
                out.push_str(&format!(
                    "--- kubectl {}\n{}{}",
                    args.join(" "),
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
        }
        out
    }

    /// The namespaces and the pods outside kube-system, once no namespace is being deleted
    /// (a run waits up to 2 minutes for what it deleted to be gone, and says what was not;
    /// waited for here up to 2 minutes more, as before a run waited: a saturated kind node's
    /// namespace controller has taken longer).
    fn state(&self) -> State {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let out = self.kubectl_ok(&[
                "get",
                "namespaces",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}",
            ]);
            let going = out.lines().any(|l| l.ends_with(" Terminating"));
            if !going || Instant::now() > deadline {
                let namespaces = out
                    .lines()
                    .filter_map(|l| l.split_whitespace().next())
                    .map(str::to_owned)
                    .collect();
                let pods = self
                    .kubectl_ok(&[
                        "get",
                        "pods",
                        "-A",
                        "-o",
                        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
                    ])
                    .lines()
                    .filter(|l| !l.starts_with("kube-system/"))
                    .map(str::to_owned)
                    .collect();
                let made = self
                    .kubectl_ok(&[
                        "get",
                        "deployments,replicasets,pods,services,configmaps,secrets,serviceaccounts,roles,rolebindings,leases",
                        "-A",
                        "-l",
                        MADE_BY_RUN,
                        "-o",
                        "jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
                    ])
                    .lines()
                    .map(str::to_owned)
                    .collect();
                return State {
                    namespaces,
                    pods,
                    made,
                };
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    /// That the plays since `before` left the cluster as they found it: nothing in the nodes,
    /// the same namespaces, no pod of theirs.
    fn assert_left_as(&self, before: &State) {
        assert_eq!(self.leftovers(), Vec::<String>::new(), "left in the nodes");
        assert_eq!(&self.state(), before, "left in the cluster");
    }
}

impl Drop for Kind {
    fn drop(&mut self) {
        if self.own.is_some() {
            let _ = Command::new(repo().join("ci/kind"))
                .args(["down", &self.name])
                .env("KUBECONFIG", &self.kubeconfig)
                .output();
        }
    }
}

fn assert_has(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "expected {n:?} in:\n{text}");
    }
}

/// The API server's static pod moved out of kubelet's sight and back (`api-server: stop`):
/// the API is really gone (the observer loses it, both component Leases expire), comes back
/// when the manifest does, and the scheduler and controller-manager lead again and a new pod
/// schedules; nothing is left in the cluster or its nodes.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_the_api_server_stops_for_real_and_the_control_plane_heals() {
    let kind = Kind::for_test("api");
    let before = kind.state();
    let (code, text) = kind.play(&repo().join("scenarios-kube/api-server-restart.yaml"));
    assert_eq!(code, 0, "{text}");
    assert_has(
        &text,
        &[
            &format!("provider: kind (from the context name kind-{})", kind.name),
            "fault     api-server: stop  [api-server]",
            "observer: cannot reach the API server",
            "lease     kube-system/kube-scheduler: expired (not renewed by kube-scheduler-0)",
            "lease     kube-system/kube-controller-manager: expired (not renewed by kube-controller-manager-0)",
            "observer: reached the API server again",
            "PASS  leader-reacquired kube-system/kube-scheduler",
            "PASS  leader-reacquired kube-system/kube-controller-manager",
            "PASS  schedulable: probe pod kubechaos/probe-",
        ],
    );
    kind.assert_left_as(&before);
    // No pull leaves a node: every registry is an address that refuses.
    for node in kind.nodes() {
        let out = Command::new("docker")
            .args([
                "exec",
                &node,
                "crictl",
                "pull",
                "example.com/kubechaos/no-pull:1",
            ])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains("http://127.0.0.1:9/v2/"),
            "{node}: {said}"
        );
    }
}

/// The scheduler's static pod removed (the seed's "lost every scheduler" on a kubeadm cluster):
/// a new pod really stays Pending while it is gone, and schedules once it is back.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_a_removed_scheduler_leaves_pods_pending_until_it_returns() {
    let kind = Kind::for_test("sched");
    let before = kind.state();
    let (code, text) = kind.play(&repo().join("scenarios-kind/remove-the-scheduler.yaml"));
    assert_eq!(code, 0, "{text}");
    assert_has(
        &text,
        &[
            "fault     remove: kube-scheduler",
            "PASS  unschedulable",
            "PASS  leader-reacquired kube-system/kube-scheduler",
            "PASS  schedulable",
        ],
    );
    kind.assert_left_as(&before);
}

/// The API server cut off from its etcd (iptables on the node's loopback: kubeadm's stacked
/// member) for 150 s: the cut is real (the Leases run out), kubeadm's liveness probe has the
/// kubelet restart the API server (seen here: about 90-110 s into the cut; it then crash-loops
/// until etcd is back), and the cluster heals once the cut ends. The controller-manager, which
/// exits on its lost Lease and is started again at once, waits in leader election through the
/// rest of the cut (kubeadm gives it both CA files, so it reads no ConfigMap at start): the sim
/// and the local backend once had it crash-loop instead.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_an_api_server_cut_off_from_etcd_is_restarted_by_its_liveness_probe_and_heals() {
    let kind = Kind::for_test("etcd-cut");
    // (Its kubelet was started afresh by `for_test`: played three times in a row, this test
    // would otherwise find the API server's crash-loop back-off at 40 s, then 80 s, after the
    // cut.)
    let before = kind.state();
    let api_before = restarts(&kind, "kube-apiserver");
    let cm_before = restarts(&kind, "kube-controller-manager");
    let (code, text) = kind.play(&repo().join("scenarios-kind/api-server-loses-etcd.yaml"));
    assert_eq!(code, 0, "{text}");
    assert_has(
        &text,
        &[
            "fault     partition: [api-server, etcd]  [api-server <-> etcd]",
            "lease     kube-system/kube-scheduler: expired (not renewed by kube-scheduler-0)",
            "lease     kube-system/kube-controller-manager: expired (not renewed by kube-controller-manager-0)",
            "fault     heal only [api-server, etcd]",
            "PASS  leader-reacquired kube-system/kube-scheduler",
            "PASS  leader-reacquired kube-system/kube-controller-manager",
            "PASS  schedulable: probe pod kubechaos/probe-",
        ],
    );
    // The liveness probe's restart: kubechaos lost the API server in the cut (the one killed
    // and those started without etcd do not serve), and the kubelet counted the restart.
    assert_has(&text, &["observer: cannot reach the API server"]);
    let api_after = restarts(&kind, "kube-apiserver");
    assert!(
        api_after > api_before,
        "kube-apiserver's container was not restarted in the cut (restarts {api_before} before, {api_after} after)\n{text}"
    );
    // The controller-manager exited once, on its lost Lease, and waited in leader election
    // from its restart on: it did not crash-loop while the API server could not answer.
    let cm_after = restarts(&kind, "kube-controller-manager");
    assert_eq!(
        cm_after,
        cm_before + 1,
        "kube-controller-manager's restarts: {cm_before} before, {cm_after} after\n{text}"
    );
    kind.assert_left_as(&before);
}

/// How many times the kubelet of the control-plane node restarted `container`, the one container
/// of its static pod (`kube-apiserver`, `etcd`, …).
fn restarts(kind: &Kind, container: &str) -> u32 {
    let pod = format!("{container}-{}-control-plane", kind.name);
    kind.kubectl_ok(&[
        "get",
        "pod",
        "-n",
        "kube-system",
        &pod,
        "-o",
        "jsonpath={.status.containerStatuses[0].restartCount}",
    ])
    .trim()
    .parse()
    .unwrap_or_else(|e| panic!("the restart count of {pod}: {e}"))
}

/// The controller-manager's container killed (`crictl stop --timeout 0`: it cannot release its
/// Lease), then etcd crashed for 30 s (its container killed each time the kubelet started it,
/// its manifest in place): both faults are real (the kubelet starts the controller-manager
/// again, which leads once its old Lease ran out; without etcd the Leases run out; the kubelet
/// restarted etcd's container, in the same pod), and the cluster heals once etcd is back;
/// nothing of either is left. (etcd's manifest once was held aside instead: back with the same
/// pod UID, the kubelet started it only from its housekeeping, after a mirror-pod delete that
/// waited 34 s on an API server without etcd, and the heal came past its 2 minutes about half
/// the time.)
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_a_killed_controller_manager_and_a_crashed_etcd_heal() {
    let kind = Kind::for_test("etcd-crash");
    let before = kind.state();
    let etcd_before = restarts(&kind, "etcd");
    let (code, text) = kind.play(&repo().join("scenarios-kind/etcd-crash.yaml"));
    assert_eq!(code, 0, "{text}");
    let etcd_after = restarts(&kind, "etcd");
    assert!(
        etcd_after > etcd_before,
        "etcd's container was not restarted by its kubelet (restarts {etcd_before} before, {etcd_after} after)\n{text}"
    );
    assert_has(
        &text,
        &[
            "fault     kill: kube-controller-manager",
            "fault     etcd: crash",
            "lease     kube-system/kube-controller-manager: expired (not renewed by kube-controller-manager-0)",
            "lease     kube-system/kube-scheduler: expired (not renewed by kube-scheduler-0)",
            "PASS  leader-reacquired kube-system/kube-scheduler",
            "PASS  schedulable",
            "4 held, 0 violated",
        ],
    );
    // Both of the controller-manager's: after its kill, and after etcd's return.
    assert_eq!(
        text.matches("PASS  leader-reacquired kube-system/kube-controller-manager")
            .count(),
        2,
        "{text}"
    );
    kind.assert_left_as(&before);
}

/// Your software as pods on real kubelets (issue 36): the reference agent's Deployment from the
/// kubechaos image, its leader cut off by iptables in its node, the one leading then killed
/// with `crictl`, then the API server's static pod moved out for 40 s; a give-up Deployment
/// beside it. Its pods' starts and exits are read in their nodes (containerd's events), their
/// lines at the runtime's timestamps: the correct agent passes every invariant through the
/// outage (its "lost the lease" line, written while the API server was down and read after,
/// once failed `valid-lease-while-leading`), and so does one whose identity is its pod's name,
/// which exits in the outage and takes the Lease back from its restarted container (once a
/// false FAIL of `leader-reacquired`); the give-up one is caught.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_the_evidence_scenario_gives_its_verdicts_idle() {
    let kind = Kind::for_test("evidence");
    let before = kind.state();
    let (code, text) = kind.play(&common::evidence_scenario());
    common::assert_evidence_verdicts(code, &text);
    assert!(
        text.contains("fault     kill: agent/reference-agent/leader"),
        "{text}"
    );
    kind.assert_left_as(&before);
}

/// The same with kubechaos's own reads of the API server held 5 s each way: the verdicts are
/// the idle ones, and the report says how late it read.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_the_evidence_scenario_gives_its_verdicts_with_kubechaos_reading_5s_late() {
    let kind = Kind::for_test("evidence-late");
    let before = kind.state();
    let (code, text) = kind.play_with(
        &common::evidence_scenario(),
        &[("KUBECHAOS_SELF_DELAY", "5s".as_ref())],
    );
    common::assert_evidence_verdicts(code, &text);
    assert!(text.contains("INFO  evidence was read up to "), "{text}");
    kind.assert_left_as(&before);
}

/// The same with both cores kept busy for the whole run.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_the_evidence_scenario_gives_its_verdicts_with_every_core_saturated() {
    let kind = Kind::for_test("evidence-busy");
    let before = kind.state();
    let (code, text) = {
        let _busy = common::Saturated::every_core();
        kind.play(&common::evidence_scenario())
    };
    common::assert_evidence_verdicts(code, &text);
    kind.assert_left_as(&before);
}

/// `kubechaos scenario FILE --backend kube` on `kind`, in the background, its output into
/// `run.out` and `run.err` beside the file.
fn spawn_play(kind: &Kind, file: &Path) -> std::process::Child {
    let dir = file.parent().unwrap();
    Command::new(env!("CARGO_BIN_EXE_kubechaos"))
        .current_dir(repo())
        .env("RUST_LOG", "off")
        .arg("scenario")
        .arg(file)
        .args(["--backend", "kube", "--kubeconfig"])
        .arg(&kind.kubeconfig)
        .args(["--context", &kind.context()])
        .stdout(std::fs::File::create(dir.join("run.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("run.err")).unwrap())
        .spawn()
        .unwrap()
}

/// `kubechaos recover --cleanup` on `kind`: its exit code, and what it said.
fn recover_cleanup(kind: &Kind) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubechaos"))
        .current_dir(repo())
        .args(["recover", "--cleanup", "--kubeconfig"])
        .arg(&kind.kubeconfig)
        .args(["--context", &kind.context()])
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The ConfigMaps and Leases labelled as a run's (`Kind NS/NAME`), read while the API server
/// answers (nothing when it does not).
fn made_by_a_run(kind: &Kind) -> BTreeSet<String> {
    let out = kind.kubectl(&[
        "--request-timeout=3s",
        "get",
        "configmaps,leases",
        "-A",
        "-l",
        MADE_BY_RUN,
        "-o",
        "jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
    ]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Play `file` (its agent's Lease `default/killed-lock`, its manifest's ConfigMap
/// `default/killed-config`) and SIGKILL kubechaos once `ready` says so (within 4 minutes),
/// once both objects were seen labelled as the run's; then no process of the run is left.
fn kill_outright_when(kind: &Kind, file: &Path, ready: &dyn Fn() -> bool) {
    let said = || {
        ["run.out", "run.err"]
            .map(|f| std::fs::read_to_string(file.parent().unwrap().join(f)).unwrap_or_default())
            .join("\n")
    };
    let mut run = spawn_play(kind, file);
    let mut seen_made = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    while seen_made.len() < 2 || !ready() {
        if seen_made.len() < 2 {
            seen_made.extend(made_by_a_run(kind));
        }
        if let Some(status) = run.try_wait().unwrap() {
            panic!(
                "kubechaos ended ({status}) before it was to be killed:\n{}",
                said()
            );
        }
        assert!(
            Instant::now() < deadline,
            "not ready to be killed 4 minutes after the run started (labelled as the run's: {seen_made:?}):\n{}",
            said()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    assert_eq!(
        seen_made,
        [
            "ConfigMap default/killed-config".to_owned(),
            "Lease default/killed-lock".to_owned()
        ]
        .into_iter()
        .collect::<BTreeSet<_>>(),
        "the objects the killed run made, labelled as its own"
    );
    // Its agent process dies with it (its parent-death signal).
    let gone = Instant::now() + Duration::from_secs(10);
    while Command::new("pgrep")
        .args(["-f", "killed-lock"])
        .status()
        .unwrap()
        .success()
    {
        assert!(
            Instant::now() < gone,
            "the killed run's agent process outlived it by 10 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Nothing left behind, even after SIGKILL (issue 28), at two moments of a kind run: in its
/// start (its probe namespace, a manifest's ConfigMap and its agent's Lease made, no fault yet),
/// and with its faults in place (a worker cut off from the API server by iptables, another
/// paused, the scheduler's and the API server's manifests moved out). A run killed outright
/// restores nothing; `kubechaos recover --cleanup --context kind-NAME` finds each of those in
/// the nodes and the cluster and undoes it, saying what it did: then every static pod runs
/// again, no rule with kubechaos's comment is in any node, every node is Ready and no object of
/// the run is left; run again, it finds nothing.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_recover_cleanup_undoes_what_a_run_killed_outright_left() {
    let kind = Kind::for_test("killed");
    let before = kind.state();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("killed-config.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: killed-config, namespace: default}\ndata: {made: by-the-run}\n",
    )
    .unwrap();
    let scenario = |name: &str, faults: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}
description: a run for kubechaos to be killed in
cluster:
  nodes: 1
  components:
    kube-scheduler: {{replicas: 1}}
    kube-controller-manager: {{replicas: 1}}
  agents:
    - {{name: killed-agent, replicas: 1, lease: default/killed-lock, mode: correct}}
  manifests: [killed-config.yaml]
faults:
{faults}expect:
  - schedulable: {{within: 5m}}
duration: 11m
"
            ),
        )
        .unwrap();
        path
    };
    let context = kind.context();
    let (control_plane, worker, worker2) = (
        format!("{}-control-plane", kind.name),
        format!("{}-worker", kind.name),
        format!("{}-worker2", kind.name),
    );

    // Killed in its start: what it made in the cluster, nothing in the nodes yet.
    let in_start = scenario(
        "killed-in-start",
        "  - {at: 5m, remove: kube-scheduler, for: 1m}\n",
    );
    kill_outright_when(&kind, &in_start, &|| true);
    assert_eq!(kind.leftovers(), Vec::<String>::new(), "left in the nodes");
    let (code, said) = recover_cleanup(&kind);
    assert_eq!(code, Some(0), "{said}");
    assert_has(
        &said,
        &[
            &format!("nothing of a run in the nodes of {context}"),
            "deleted the namespace kubechaos a run made",
            "deleted ConfigMap default/killed-config a run created",
            "deleted Lease default/killed-lock a run created",
        ],
    );
    kind.assert_left_as(&before);

    // Killed with every fault in place.
    let in_faults = scenario(
        "killed-in-faults",
        &format!(
            "  - {{at: 2s, partition: [node/{worker}, api-server], for: 5m}}
  - {{at: 4s, remove: node/{worker2}, for: 5m}}
  - {{at: 6s, remove: kube-scheduler, for: 5m}}
  - {{at: 20s, api-server: stop, for: 5m}}
"
        ),
    );
    let in_place = || {
        let held = Command::new("docker")
            .args([
                "exec",
                &control_plane,
                "ls",
                "/etc/kubernetes/kubechaos-held",
            ])
            .output()
            .unwrap();
        let held = String::from_utf8_lossy(&held.stdout);
        let paused = Command::new("docker")
            .args(["inspect", "-f", "{{.State.Status}}", &worker2])
            .output()
            .unwrap();
        held.contains("kube-apiserver.yaml")
            && held.contains("kube-scheduler.yaml")
            && String::from_utf8_lossy(&paused.stdout).trim() == "paused"
    };
    kill_outright_when(&kind, &in_faults, &in_place);
    let left = kind.leftovers();
    assert!(
        left.iter().any(|l| l.contains("--comment kubechaos"))
            && left.iter().any(|l| l.contains("kube-apiserver.yaml"))
            && left.iter().any(|l| l.contains("paused")),
        "the killed run left no fault in place to clean up: {left:?}"
    );
    let (code, said) = recover_cleanup(&kind);
    assert_eq!(code, Some(0), "{said}");
    assert_has(
        &said,
        &[
            &format!("{worker2}: unpaused it"),
            &format!(
                "{control_plane}: moved kube-apiserver.yaml back into /etc/kubernetes/manifests"
            ),
            &format!(
                "{control_plane}: moved kube-scheduler.yaml back into /etc/kubernetes/manifests"
            ),
            &format!("{worker}: removed the iptables rule `OUTPUT"),
            "deleted the namespace kubechaos a run made",
            "deleted ConfigMap default/killed-config a run created",
            "deleted Lease default/killed-lock a run created",
        ],
    );
    // Every static pod, node and kube-system pod back (waited for up to 3 minutes each), and
    // nothing of the run in the nodes or the cluster.
    kind.assert_fresh();
    kind.assert_left_as(&before);
    // Run again, it finds nothing.
    let (code, said) = recover_cleanup(&kind);
    assert_eq!(code, Some(0), "{said}");
    assert_has(
        &said,
        &[
            &format!("nothing of a run in the nodes of {context}"),
            "nothing of a run in the cluster's objects",
        ],
    );
}

/// What [`on_kind_the_shipped_jobs_run_from_the_kubechaos_image`] applied, undone when dropped
/// (on a failure too): the namespaces, with the Jobs in them, the cluster-wide RBAC, the
/// volume and its directory in the node.
struct Applied<'a> {
    kind: &'a Kind,
    /// The node holding the explore Job's volume.
    node: String,
}

/// The explore Job's volume: a directory of a worker (kind's default StorageClass names a
/// provisioner whose image is not built here, and the pods share one node with it).
const FOUND_DIR: &str = "/var/kubechaos-test-found";

impl Drop for Applied<'_> {
    fn drop(&mut self) {
        for args in [
            vec![
                "delete",
                "namespace",
                "kubechaos-system",
                "kubechaos-test-demo",
                "--ignore-not-found",
                "--wait=false",
            ],
            vec![
                "delete",
                "clusterrolebinding,clusterrole",
                "kubechaos",
                "--ignore-not-found",
            ],
            vec![
                "delete",
                "persistentvolume",
                "kubechaos-test-explore-found",
                "--ignore-not-found",
                "--wait=false",
            ],
        ] {
            let _ = self.kind.kubectl(&args);
        }
        let _ = Command::new("docker")
            .args(["exec", &self.node, "rm", "-rf", FOUND_DIR])
            .output();
    }
}

/// A shipped file with what this test changes in it, each change checked to be there.
fn shipped_with(file: &str, changes: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(repo().join(file)).unwrap();
    for (from, to) in changes {
        assert!(text.contains(from), "{file} no longer has {from:?}");
        text = text.replace(from, to);
    }
    text
}

/// The Job `job` in kubechaos-system, once it completed or failed (within 5 minutes): whether
/// it completed, and what tells about it otherwise.
fn job_ends(kind: &Kind, job: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let out = kind.kubectl_ok(&[
            "get",
            "job",
            "-n",
            "kubechaos-system",
            job,
            "-o",
            "jsonpath={range .status.conditions[?(@.status==\"True\")]}{.type} {end}",
        ]);
        let ended = out
            .split_whitespace()
            .find(|c| ["Complete", "Failed"].contains(c));
        if ended == Some("Complete") {
            return Ok(());
        }
        if ended.is_some() || Instant::now() > deadline {
            let mut said = format!("job {job}: {}\n", out.trim());
            for args in [
                vec!["get", "pods", "-n", "kubechaos-system", "-o", "wide"],
                vec!["get", "pv,pvc", "-A"],
                vec!["describe", "job", "-n", "kubechaos-system", job],
                vec![
                    "logs",
                    "-n",
                    "kubechaos-system",
                    "-l",
                    &format!("job-name={job}"),
                    "--prefix",
                    "--tail=40",
                ],
            ] {
                let o = kind.kubectl(&args);
                said.push_str(&format!(
                    "--- kubectl {}\n{}{}",
                    args.join(" "),
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            return Err(said);
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The Jobs `ci/kubernetes` ships, run as they are on real kubelets from the kubechaos image
/// built from this checkout (`kubechaos:dev`, which `ci/kind up` loads): `rbac.yaml` applied,
/// then `suite-job.yaml` judging the cluster it runs in through its ServiceAccount (a
/// Deployment's pods deleted, `available` and `schedulable` held), under its own security
/// context (non-root, read-only root filesystem), judged from the summary in its log, which says
/// too why it plays with the generic provider (the nodes say kind, and a pod reaches no
/// Docker). Beside it, `explore-indexed-job.yaml` with a small budget: eight pods, each
/// its shard from `$(JOB_COMPLETION_INDEX)` as kubelet expands it, writing to the claimed volume
/// (explore checks it can before it runs). Only the image, the budget and the CPU requests are
/// changed. Then everything goes, and the cluster is as it was.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_the_shipped_jobs_run_from_the_kubechaos_image() {
    let kind = Kind::for_test("jobs");
    let before = kind.state();
    let work = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = work.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let node = format!("{}-worker", kind.name);
    let applied = Applied {
        kind: &kind,
        node: node.clone(),
    };
    let image = [(
        "image: ghcr.io/kubechaos/kubechaos:v0.1.0",
        "image: kubechaos:dev",
    )];

    let rbac = repo().join("ci/kubernetes/rbac.yaml");
    kind.kubectl_ok(&["apply", "-f", rbac.to_str().unwrap()]);
    // What the suite judges: a Deployment of two pods, and its scenario in the ConfigMap the
    // Job mounts (as its comment says to make it).
    let demo = file(
        "demo.yaml",
        "apiVersion: v1
kind: Namespace
metadata: {name: kubechaos-test-demo}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: demo, namespace: kubechaos-test-demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: demo, image: 'kubechaos:dev', command: [sleep, infinity]}]
",
    );
    kind.kubectl_ok(&["apply", "-f", &demo]);
    kind.kubectl_ok(&[
        "wait",
        "-n",
        "kubechaos-test-demo",
        "--for=condition=Available",
        "deployment/demo",
        "--timeout=3m",
    ]);
    let scenarios = work.path().join("scenarios");
    std::fs::create_dir(&scenarios).unwrap();
    std::fs::write(
        scenarios.join("in-cluster.yaml"),
        "name: in-cluster
description: the demo Deployment's pods deleted; kubechaos in a pod judges that they come back
cluster: {nodes: 3}
faults:
  - {at: 5s, id: delete, delete-pods: {namespace: kubechaos-test-demo, selector: app=demo}}
expect:
  - available: {deployment: kubechaos-test-demo/demo, within: 50s, after: delete}
  - schedulable: {within: 50s, after: delete}
duration: 1m
",
    )
    .unwrap();
    kind.kubectl_ok(&[
        "create",
        "configmap",
        "kubechaos-scenarios",
        "-n",
        "kubechaos-system",
        &format!("--from-file={}", scenarios.display()),
    ]);
    kind.kubectl_ok(&[
        "apply",
        "-f",
        &file(
            "suite-job.yaml",
            &shipped_with("ci/kubernetes/suite-job.yaml", &image),
        ),
    ]);

    // The explore Job beside it: its claim bound to a directory of one worker that the image's
    // user owns, made before the claim in the class the claim will be given (the cluster's
    // default, if any). (The default class of a cluster ci/kind makes is the controller-manager's
    // host-path provisioner: a directory made as root, and on no node in particular.)
    let explore = shipped_with(
        "ci/kubernetes/explore-indexed-job.yaml",
        &[
            image[0],
            ("--runs=80000", "--runs=16"),
            ("cpu: \"2\"", "cpu: 10m"),
        ],
    );
    let out = Command::new("docker")
        .args(["exec", &node, "sh", "-c"])
        .arg(format!(
            "mkdir -p {FOUND_DIR} && chown 65532:65532 {FOUND_DIR}"
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let class = kind.kubectl_ok(&[
        "get",
        "storageclass",
        "-o",
        "jsonpath={range .items[?(@.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class==\"true\")]}{.metadata.name}{end}",
    ]);
    let volume = file(
        "volume.yaml",
        &format!(
            "apiVersion: v1
kind: PersistentVolume
metadata: {{name: kubechaos-test-explore-found}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: '{class}'
  persistentVolumeReclaimPolicy: Retain
  claimRef: {{namespace: kubechaos-system, name: kubechaos-explore-found}}
  hostPath: {{path: {FOUND_DIR}, type: Directory}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: ['{node}']}}]
"
        ),
    );
    kind.kubectl_ok(&["apply", "-f", &volume]);
    kind.kubectl_ok(&["apply", "-f", &file("explore-indexed-job.yaml", &explore)]);

    // The suite: completed (it exits 0 only when every invariant held), and its log says with
    // which provider and what it judged. (The reports it writes to its emptyDir go with the
    // pod: kubelet removes an emptyDir's files once the pod has ended, as the Job's comment
    // says; the log is what stays.)
    job_ends(&kind, "kubechaos-suite").unwrap_or_else(|said| panic!("{said}"));
    let log = kind.kubectl_ok(&["logs", "-n", "kubechaos-system", "job/kubechaos-suite"]);
    assert_has(
        &log,
        &[
            "kubechaos: suite of 1 scenario(s) on kube",
            "provider: generic (node ",
            " has providerID kind://docker/",
            "but its node containers cannot be reached from here",
            "API-level faults only",
            "delete-pods: {namespace: kubechaos-test-demo, selector: app=demo}",
            "suite: 1 scenario(s): 1 held, 0 violated, 0 could not run",
        ],
    );
    let line = log
        .lines()
        .find(|l| l.contains("PASS  in-cluster"))
        .unwrap_or_else(|| panic!("no PASS line of the scenario:\n{log}"));
    assert!(line.contains("2 held, 0 violated"), "{log}");

    // The exploration: every index ran its own shard and found nothing, and nothing was left
    // in the volume (explore's check that it can write there leaves no file).
    job_ends(&kind, "kubechaos-explore").unwrap_or_else(|said| panic!("{said}"));
    let logs = kind.kubectl_ok(&[
        "logs",
        "-n",
        "kubechaos-system",
        "-l",
        "job-name=kubechaos-explore",
        "--tail=-1",
        "--max-log-requests=8",
    ]);
    let shards: BTreeSet<String> = logs
        .match_indices("(shard ")
        .map(|(i, _)| logs[i..].split(')').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        shards,
        (0..8)
            .map(|i| format!("(shard {i}/8 of 16"))
            .collect::<BTreeSet<_>>(),
        "{logs}"
    );
    assert_eq!(logs.matches("nothing found").count(), 8, "{logs}");
    let left = Command::new("docker")
        .args(["exec", &node, "ls", "-A", FOUND_DIR])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&left.stdout), "", "{left:?}");

    drop(applied);
    kind.assert_left_as(&before);
}
