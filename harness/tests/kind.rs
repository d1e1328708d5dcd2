//! The kind tier (issue 28): kubechaos against real kind clusters, made on this machine by
//! `ci/kind up` (kind v0.33.0 itself, from a node image built here from the pinned parts), with
//! real kubelets, containerd, iptables and kubeadm's static pods. Every claim of the kind
//! provider that these tests play was, until them, checked only against a recording stand-in
//! for `docker`. Each test makes its own cluster (they run side by side in ci/real-tier) and
//! deletes it, even when it fails; if a cluster cannot be made, the test fails and says why.
//! (A pod agent on kind is played by hand only until its log lines are stamped when written:
//! docs/benchmarks.md, "Real kind clusters".)

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{play_scenario, repo};

/// A kind cluster made by `ci/kind up` for one test, with a kubeconfig of its own; deleted when
/// dropped.
struct Kind {
    name: String,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kind {
    fn up(name: &str, workers: u32) -> Kind {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        // (no test here runs a kubechaos pod: its image is not loaded, and the cluster is up
        // sooner)
        let out = Command::new(repo().join("ci/kind"))
            .args(["up", name, "--workers", &workers.to_string()])
            .arg("--no-kubechaos-image")
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap();
        let kind = Kind {
            name: name.to_owned(),
            kubeconfig,
            _dir: dir,
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

    /// `kubechaos scenario FILE --backend kube --context kind-NAME`: exit code and output.
    fn play(&self, file: &Path) -> (i32, String) {
        let context = format!("kind-{}", self.name);
        play_scenario(
            file,
            "kube",
            &[
                "--kubeconfig".as_ref(),
                self.kubeconfig.as_os_str(),
                "--context".as_ref(),
                context.as_ref(),
            ],
        )
    }

    /// The node containers' names.
    fn nodes(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args(["ps", "--format", "{{.Names}}", "--filter"])
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

    /// What a run left in the nodes: iptables rules with kubechaos's comment, static pod
    /// manifests held aside, static pods missing from kubelet's directory.
    fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        for node in self.nodes() {
            let out = Command::new("docker")
                .args(["exec", &node, "sh", "-c"])
                .arg("iptables -S | grep -e '--comment kubechaos '; iptables -t nat -S | grep -e '--comment kubechaos '; ls /etc/kubernetes/kubechaos-held 2>/dev/null; true")
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
                for pod in [
                    "etcd",
                    "kube-apiserver",
                    "kube-controller-manager",
                    "kube-scheduler",
                ] {
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
}

impl Drop for Kind {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("ci/kind"))
            .args(["down", &self.name])
            .env("KUBECONFIG", &self.kubeconfig)
            .output();
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
/// schedules; nothing is left in the node.
#[test]
#[ignore = "kind tier: a real kind cluster (ci/kind: Docker, the node image built here); ci/test runs it"]
fn on_kind_the_api_server_stops_for_real_and_the_control_plane_heals() {
    let kind = Kind::up("kc-api", 1);
    let (code, text) = kind.play(&repo().join("scenarios-kube/api-server-restart.yaml"));
    assert_eq!(code, 0, "{text}");
    assert_has(
        &text,
        &[
            "provider: kind (from the context name kind-kc-api)",
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
    assert_eq!(kind.leftovers(), Vec::<String>::new());
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
    let kind = Kind::up("kc-sched", 1);
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
    assert_eq!(kind.leftovers(), Vec::<String>::new());
}
