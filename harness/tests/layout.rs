//! The workspace's boundaries, checked: the core (`kubechaos-core`: scenario, plan, events,
//! invariants, reports) knows no cluster, so it depends on no runtime, Kubernetes client, HTTP
//! stack or simulator, not even indirectly; and the engine does not know the command line.

use std::process::Command;

/// Every package in `package`'s normal dependency tree (its `[dependencies]`, transitively).
fn dependency_tree(package: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--locked",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["-p", package])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn forbidden_in(package: &str, forbidden: &[&str]) -> Vec<String> {
    let tree = dependency_tree(package);
    assert!(
        tree.iter().any(|n| n == package),
        "cargo tree did not list {package} itself: {tree:?}"
    );
    tree.into_iter()
        .filter(|n| forbidden.contains(&n.as_str()))
        .collect()
}

#[test]
fn the_core_depends_on_no_runtime_client_or_simulator() {
    let found = forbidden_in(
        "kubechaos-core",
        &[
            "tokio",
            "kube",
            "kube-client",
            "k8s-openapi",
            "hyper",
            "http",
            "turmoil",
            "kubechaos-engine",
            "clap",
        ],
    );
    assert!(
        found.is_empty(),
        "kubechaos-core must know no cluster, but depends on {found:?}"
    );
}

#[test]
fn the_engine_does_not_know_the_command_line() {
    let found = forbidden_in("kubechaos-engine", &["clap", "kubechaos"]);
    assert!(
        found.is_empty(),
        "kubechaos-engine depends on {found:?}: argument parsing belongs to the binary"
    );
}
