//! The kind tier (issue 28): kubechaos against a real kind cluster, made on this machine by
//! `ci/kind up` (kind v0.33.0 itself, from a node image built here from the pinned parts), with
//! real kubelets, containerd, iptables and kubeadm's static pods.
//!
//! As Kubernetes runs its `[Disruptive]` e2e tests (`[Serial]`) and cluster-api its e2e on one
//! bootstrap cluster, the tier is one cluster (one control-plane node, two workers) made once by
//! `ci/real-tier` and named to each test in `KUBECHAOS_KIND_CLUSTER` (its kubeconfig in
//! `KUBECONFIG`); the tests play on it one after another. Each test first checks that the
//! cluster is as a fresh one (nothing in its nodes, every node Ready), and after its plays that
//! they left the cluster as they found it: the cleanup of every fault is tested on every play.
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
    /// The tier's cluster (`KUBECHAOS_KIND_CLUSTER`, made by `ci/real-tier`), checked to be as a
    /// fresh one; else a cluster made for this test alone, `kc-SHORT`.
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
            kind.assert_fresh();
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
    /// kube-system pod Ready (within 3 minutes: a play before may have ended with a component
    /// still coming back).
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
            let mut args = vec!["wait", "--for=condition=Ready", "--timeout=3m"];
            args.extend(what);
            let out = self.kubectl(&args);
            assert!(
                out.status.success(),
                "the tier's cluster {}: not Ready within 3 minutes ({}): {}\n{}\n{}",
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
