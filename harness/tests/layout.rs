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

/// Each source file of `crate_dir`'s `src/` by its module path (`["backend", "driver"]`).
fn modules(crate_dir: &std::path::Path) -> Vec<(Vec<String>, String)> {
    let src = crate_dir.join("src");
    let mut out = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap();
            let mut segs: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if matches!(
                segs.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                segs.pop();
            }
            out.push((segs, std::fs::read_to_string(&path).unwrap()));
        }
    }
    out
}

/// The paths a file names through `crate::` and `super::` (groups `{a, b::c}` expanded one
/// level), each as the module path it starts from and the segments after it.
fn references(module: &[String], is_mod_rs: bool, text: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (start, base) in [("crate::", None), ("super::", Some(()))] {
        let mut rest = text;
        while let Some(i) = rest.find(start) {
            rest = &rest[i + start.len()..];
            let mut root: Vec<String> = match base {
                None => Vec::new(),
                Some(()) => {
                    // `super` of a `mod.rs` is its directory's parent; of a file, its directory.
                    let mut m = module.to_vec();
                    if !is_mod_rs || !m.is_empty() {
                        m.pop();
                    }
                    m
                }
            };
            let mut tail = rest;
            while let Some(stripped) = tail.strip_prefix("super::") {
                root.pop();
                tail = stripped;
            }
            let heads: Vec<&str> = if let Some(group) = tail.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                group.split(',').map(str::trim).collect()
            } else {
                vec![tail]
            };
            for head in heads {
                let mut path = root.clone();
                for seg in head.split("::") {
                    let id = ident(seg);
                    if id.is_empty() {
                        break;
                    }
                    path.push(id);
                    if seg.len() != path.last().unwrap().len() {
                        break;
                    }
                }
                out.push(path);
            }
        }
    }
    out
}

/// Dependency cycles between the source files of a crate: file A names something in file B and
/// B in A, directly or through others. A module and its own submodules are one unit (a parent
/// declares its children, children use what their parent shares).
fn file_cycles(crate_dir: &std::path::Path) -> Vec<String> {
    let mods = modules(crate_dir);
    let known: Vec<Vec<String>> = mods.iter().map(|(m, _)| m.clone()).collect();
    let related = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    let mut edges: std::collections::BTreeMap<
        Vec<String>,
        std::collections::BTreeSet<Vec<String>>,
    > = Default::default();
    for (m, text) in &mods {
        // Tests may reach anywhere; comments (doc links among them) are not dependencies.
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let text = code.as_str();
        let is_mod_rs = known.iter().any(|k| k.len() > m.len() && k.starts_with(m)) || m.is_empty();
        for path in references(m, is_mod_rs, text) {
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| known.contains(p));
            if let Some(t) = target.filter(|t| !related(m, t)) {
                edges.entry(m.clone()).or_default().insert(t);
            }
        }
    }
    let mut cycles = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            // Does b reach a?
            let mut seen = std::collections::BTreeSet::new();
            let mut todo = vec![b.clone()];
            while let Some(x) = todo.pop() {
                if &x == a {
                    cycles.push(format!("{} <-> {}", a.join("/"), b.join("/")));
                    break;
                }
                if seen.insert(x.clone()) {
                    todo.extend(edges.get(&x).into_iter().flatten().cloned());
                }
            }
        }
    }
    cycles
}

#[test]
fn no_two_source_files_depend_on_each_other() {
    let harness = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in ["core", "engine"] {
        let cycles = file_cycles(&harness.join(krate));
        assert!(
            cycles.is_empty(),
            "kubechaos-{krate} has files that depend on each other (move what both need where both can use it): {cycles:#?}"
        );
    }
}

/// The repository is self-contained: nothing it ships cites a path outside it (the project's
/// shared design folder lives beside the repository, not in it).
#[test]
fn nothing_cites_a_path_outside_the_repository() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let this = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/layout.rs");
    let outside = ["shared/design", "shared/seeds", "../shared"];
    let mut found = Vec::new();
    let mut stack = vec![repo.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    stack.push(path);
                }
                continue;
            }
            // Sources, docs, configuration, the fixtures' programs, and scripts (which have no
            // extension: `ci/test`); a binary file reads as nothing.
            let text_file = [
                "rs", "md", "yml", "yaml", "toml", "json", "js", "css", "go", "sh", "txt",
            ]
            .iter()
            .any(|e| name.ends_with(&format!(".{e}")))
                || !name.contains('.');
            if !text_file || path.canonicalize().ok() == this.canonicalize().ok() {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                if outside.iter().any(|o| line.contains(o)) {
                    found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "cite the repository's own copy instead (docs/scenario-format.md, the README):\n{}",
        found.join("\n")
    );
}
