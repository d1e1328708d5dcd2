//! `kubechaos init`: a chaos directory of their own in a user's repository: a first scenario for
//! their Lease that the sim plays (`chaos/NAME-api-outage.yaml`), one for their software as it
//! runs in their cluster (`chaos/cluster/NAME.yaml`, a pod agent, for `--backend kube`), and the
//! JSON Schema the files' first line points editors at; with `--ci`, the nightly pipeline that plays
//! them (GitHub: a workflow using kubechaos's action; GitLab: jobs extending kubechaos's template).
//! Running it again changes nothing; a file that differs is never overwritten without `--force`.

use std::path::{Path, PathBuf};

use super::End;
use crate::cli::{CiSystem, InitArgs};
use crate::failure::{Failure, Verdict};

/// A name made of what a scenario name may hold (lower-case letters, digits, `-`).
fn dns_name(text: &str) -> String {
    let mut out: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').to_owned()
}

/// What the software is called when `--name` does not say: the value of the selector's `app`
/// label (`app=X`, `app.kubernetes.io/name=X`), else the Lease's name without what names it a
/// lock (`my-operator-lock` is `my-operator`'s).
fn app_name(selector: Option<&str>, lease_name: &str) -> String {
    let from_selector = selector.and_then(|sel| {
        sel.split(',').find_map(|term| {
            let (key, value) = term.split_once('=')?;
            let key = key.trim();
            (key == "app" || key == "app.kubernetes.io/name")
                .then(|| value.trim_start_matches('=').trim().to_owned())
        })
    });
    if let Some(app) = from_selector.filter(|a| !a.is_empty()) {
        return app;
    }
    let mut name = lease_name;
    for suffix in [
        "-leader-election",
        "-leader-lock",
        "-election",
        "-leader",
        "-lock",
        ".lock",
    ] {
        if let Some(rest) = name.strip_suffix(suffix).filter(|r| !r.is_empty()) {
            name = rest;
            break;
        }
    }
    name.to_owned()
}

/// The files to write: (path under the directory, content).
fn files(lease: &str, name: &str, selector: &str, namespace: &str) -> Vec<(PathBuf, String)> {
    let outage = format!("{name}-api-outage");
    let sim = format!(
        "# yaml-language-server: $schema=./scenario.schema.json
name: {outage}
description: |
  Not your software: kubechaos's reference agent (client-go's elector, in two replicas) competes
  for a Lease named as yours ({lease}) on the simulated cluster, while the API server is down for
  longer than the renew deadline. It proves the scenario's shape (leadership comes back, never two
  replicas lead at once) and that the invariants can fail and pass; it says nothing of {name}
  itself, which cluster/{name}.yaml judges in your cluster. `kubechaos suite chaos/` plays it (and
  every file beside it) on the sim; `--backend local` on a real control plane on this machine.
cluster:
  nodes: 1
  components:
    kube-scheduler: {{replicas: 1}}
    kube-controller-manager: {{replicas: 1}}
  agents:
    - name: {name}
      replicas: 2
      lease: {lease}
faults:
  - at: 20s
    id: outage
    api-server: stop
    for: 30s
expect:
  - leader-reacquired: {{lease: {lease}, within: 45s}}
  - single-leader: {{lease: {lease}}}
"
    );
    let cluster = format!(
        "# yaml-language-server: $schema=../scenario.schema.json
name: {name}
description: |
  Your software as it runs in your cluster (a kind cluster, nightly): the pods in namespace
  {namespace} matching `{selector}` compete for {lease}. The API server is stopped for longer than
  the renew deadline (kind: its static pod is held), then the pod that leads is killed. Proves that
  a pod leads again each time and that never two lead at once. Play it with
  `kubechaos suite chaos/cluster/ --backend kube --context kind-chaos`.
cluster:
  agents:
    - name: {name}
      lease: {lease}
      pods: {{namespace: {namespace}, selector: '{selector}'}}
      # How its log lines say it leads, so that two pods both believing they lead are caught:
      # client-go's leaderelection (and controller-runtime, which uses it) logs these; the
      # patterns are case-sensitive regular expressions. If no line matches, single-leader fails
      # with `no evidence` rather than passing on nothing.
      leading: {{started: 'Successfully acquired lease', stopped: 'Failed to renew lease|leader election lost'}}
faults:
  - at: 20s
    id: outage
    api-server: stop
    for: 30s
  - at: 1m50s
    id: kill
    kill: agent/{name}/leader
expect:
  - leader-reacquired: {{lease: {lease}, within: 45s, after: outage.end}}   # 45 s after the API server is back
  - leader-reacquired: {{lease: {lease}, within: 45s, after: kill}}
  - single-leader: {{lease: {lease}}}
"
    );
    vec![
        (
            PathBuf::from("scenario.schema.json"),
            kubechaos_core::scenario::json_schema(),
        ),
        (PathBuf::from(format!("{outage}.yaml")), sim),
        (PathBuf::from(format!("cluster/{name}.yaml")), cluster),
    ]
}

/// What the pipelines need to know of the scenarios.
struct Pipeline<'a> {
    /// The chaos directory, as given (`chaos`).
    dir: &'a str,
    /// The agent's name.
    name: &'a str,
    /// The pods' namespace and selector (said in the deploy step's comment).
    namespace: &'a str,
    selector: &'a str,
}

/// kubechaos's repository (`owner/name`) and the tag of this version: where the action and the
/// GitLab template the pipelines use are published.
fn published() -> (String, String) {
    let repo = env!("CARGO_PKG_REPOSITORY")
        .trim_end_matches('/')
        .trim_start_matches("https://github.com/")
        .to_owned();
    (repo, format!("v{}", env!("CARGO_PKG_VERSION")))
}

/// The nightly pipeline's files for a CI system: (path from the repository's root, content).
fn pipeline(ci: CiSystem, p: &Pipeline<'_>) -> Vec<(PathBuf, String)> {
    let (repo, tag) = published();
    let Pipeline {
        dir,
        name,
        namespace,
        selector,
    } = p;
    let version = env!("CARGO_PKG_VERSION");
    match ci {
        CiSystem::Github => vec![(
            PathBuf::from(".github/workflows/kubechaos.yml"),
            format!(
                "# kubechaos every night, written by `kubechaos init --ci github` (kubechaos {version}).
# The first job plays {dir}/ on the simulated cluster (seconds, any runner); the second creates a
# kind cluster, deploys {name} into it and plays {dir}/cluster/ against it. Each job's summary shows
# the verdicts as a table; its artifact holds the reports (JUnit, JSON, events, HTML timelines).
name: kubechaos

on:
  schedule:
    - cron: \"17 3 * * *\"
  workflow_dispatch: {{}}
  pull_request:
    paths: [\"{dir}/**\"]

permissions:
  contents: read

jobs:
  sim:
    name: scenarios on the simulated cluster
    runs-on: ubuntu-24.04
    timeout-minutes: 30
    steps:
      - uses: actions/checkout@v6
      - uses: {repo}@{tag}
        with:
          scenarios: {dir}/
          backend: sim
          artifact-name: kubechaos-sim

  cluster:
    name: {name} in a kind cluster
    runs-on: ubuntu-24.04
    timeout-minutes: 60
    steps:
      - uses: actions/checkout@v6
      - name: Create a kind cluster
        uses: helm/kind-action@v1
        with:
          version: v0.33.0
          cluster_name: chaos
      - name: Deploy {name}
        # How your software gets into the cluster: make this yours (kubectl apply -k config/default,
        # helm install ...). {dir}/cluster/{name}.yaml finds its pods in namespace {namespace} by `{selector}`.
        run: kubectl apply -f deploy/
      - uses: {repo}@{tag}
        with:
          scenarios: {dir}/cluster/
          backend: kube
          context: kind-chaos
          artifact-name: kubechaos-kind
"
            ),
        )],
        CiSystem::Gitlab => vec![(
            PathBuf::from(".gitlab/kubechaos.gitlab-ci.yml"),
            format!(
                "# kubechaos every night, written by `kubechaos init --ci gitlab` (kubechaos {version}).
# Included from .gitlab-ci.yml (`include: [{{local: .gitlab/kubechaos.gitlab-ci.yml}}]`); add a
# pipeline schedule. kubechaos:sim plays {dir}/ on the simulated cluster (any runner);
# kubechaos:kind creates a kind cluster, deploys {name} and plays {dir}/cluster/ against it: Docker
# in Docker needs a privileged runner (the job is tagged `privileged`: set the tag to yours).
include:
  - remote: https://raw.githubusercontent.com/{repo}/{tag}/ci/gitlab/kubechaos.gitlab-ci.yml

.kubechaos-when:
  rules:
    - if: $CI_PIPELINE_SOURCE == \"schedule\"
    - if: $CI_PIPELINE_SOURCE == \"web\"
    - changes: [\"{dir}/**/*\"]

kubechaos:sim:
  extends: [.kubechaos, .kubechaos-when]
  variables:
    KUBECHAOS_SCENARIOS: {dir}/

kubechaos:kind:
  extends: [.kubechaos-kind, .kubechaos-when]
  variables:
    KUBECHAOS_SCENARIOS: {dir}/cluster/
    # How your software gets into the cluster: make this yours (kubectl apply -k config/default,
    # helm install ...). {dir}/cluster/{name}.yaml finds its pods in namespace {namespace} by `{selector}`.
    KUBECHAOS_DEPLOY: kubectl apply -f deploy/
"
            ),
        )],
    }
}

/// GitLab reads `.gitlab-ci.yml` only: where there is none, init writes one that includes its
/// pipeline; an existing one is the user's and is never changed (init says what to add).
const GITLAB_ROOT: &str = ".gitlab-ci.yml";
const GITLAB_INCLUDE: &str = "include:\n  - local: .gitlab/kubechaos.gitlab-ci.yml\n";

/// `kubechaos init`.
pub fn init(args: &InitArgs) -> End {
    let (namespace, lease_name) =
        super::lease_arg("init", &args.lease, "my-operator/my-operator-lock")?;
    let name = dns_name(
        &args
            .name
            .clone()
            .unwrap_or_else(|| app_name(args.selector.as_deref(), lease_name)),
    );
    if name.is_empty() {
        return Err(Failure::Input(format!(
            "kubechaos init: no name can be made of `{lease_name}`; expected --name NAME (lower-case letters, digits, `-`)"
        )));
    }
    let selector = args
        .selector
        .clone()
        .unwrap_or_else(|| format!("app={name}"));
    if let Err(e) = kubechaos_core::selector::parse(&selector) {
        return Err(Failure::Input(format!(
            "kubechaos init: --selector {selector}: {e}; expected a label selector like app=my-operator"
        )));
    }
    let pods_namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| namespace.to_owned());
    let lease = format!("{namespace}/{lease_name}");
    let mut wanted: Vec<(PathBuf, String)> = files(&lease, &name, &selector, &pods_namespace)
        .into_iter()
        .map(|(rel, content)| (args.dir.join(rel), content))
        .collect();
    let dir = args.dir.display().to_string();
    let dir = dir.trim_end_matches('/');
    let mut include_by_hand = false;
    if let Some(ci) = args.ci {
        wanted.extend(pipeline(
            ci,
            &Pipeline {
                dir,
                name: &name,
                namespace: &pods_namespace,
                selector: &selector,
            },
        ));
        if ci == CiSystem::Gitlab {
            match std::fs::read_to_string(GITLAB_ROOT) {
                Err(_) => wanted.push((PathBuf::from(GITLAB_ROOT), GITLAB_INCLUDE.to_owned())),
                Ok(there) => include_by_hand = !there.contains(".gitlab/kubechaos.gitlab-ci.yml"),
            }
        }
    }

    // Nothing is written unless all of it can be: a file that differs stops it (without --force).
    let mut differ = Vec::new();
    for (path, content) in &wanted {
        if let Ok(there) = std::fs::read_to_string(path) {
            if there != *content {
                differ.push(path.display().to_string());
            }
        }
    }
    if !differ.is_empty() && !args.force {
        return Err(Failure::Input(format!(
            "kubechaos init: {} already exist{} and differ{} from what init writes; nothing was written (expected --force to overwrite them)",
            differ.join(", "),
            if differ.len() == 1 { "s" } else { "" },
            if differ.len() == 1 { "s" } else { "" },
        )));
    }
    for (path, content) in &wanted {
        let state = match std::fs::read_to_string(path) {
            Ok(there) if there == *content => "unchanged",
            Ok(_) => "overwritten",
            Err(_) => "written",
        };
        if state != "unchanged" {
            write(path, content)?;
        }
        println!("{state:<11} {}", path.display());
    }
    println!(
        "\n{dir}/{name}-api-outage.yaml plays kubechaos's reference agent on the sim, not {name}: it shows the scenario's shape.\n{dir}/cluster/{name}.yaml judges {name} itself: its pods in namespace {pods_namespace} matching `{selector}`.\n\nnext:\n  kubechaos suite {dir}         # the sim, here and now (the reference agent)\n  kubechaos suite {dir}/cluster --backend kube --context kind-chaos   # {name} in your cluster"
    );
    if args.ci.is_some() {
        println!("  then make the pipeline's deploy step yours: it deploys with `kubectl apply -f deploy/`");
    }
    if include_by_hand {
        println!(
            "  {GITLAB_ROOT} is yours and was left as it is: add to it\n{}",
            GITLAB_INCLUDE
                .lines()
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    Ok(Verdict::Held)
}

fn write(path: &Path, content: &str) -> Result<(), Failure> {
    let io = |source| Failure::Write {
        what: "file",
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, content).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The software's name: `--name`, else the selector's app label, else the Lease's name
    /// without its lock suffix (init once deployed "my-operator-lock").
    #[test]
    fn the_app_is_named_from_the_selector_or_the_lease() {
        assert_eq!(app_name(None, "my-operator-lock"), "my-operator");
        assert_eq!(
            app_name(None, "cert-manager-leader-election"),
            "cert-manager"
        );
        assert_eq!(app_name(None, "lock"), "lock");
        assert_eq!(app_name(Some("app=ingress,tier=x"), "x-lock"), "ingress");
        assert_eq!(
            app_name(Some("app.kubernetes.io/name=my-op"), "abc.example.com"),
            "my-op"
        );
        assert_eq!(
            app_name(Some("tier=x"), "abc.example.com"),
            "abc.example.com"
        );
    }

    #[test]
    fn names_are_made_of_what_a_scenario_name_holds() {
        assert_eq!(dns_name("my-operator-lock"), "my-operator-lock");
        assert_eq!(dns_name("Cert.Manager__Lock"), "cert-manager-lock");
        assert_eq!(dns_name("..."), "");
    }

    /// What init writes is valid for the backends it names.
    #[test]
    fn the_files_it_writes_are_valid_scenarios() {
        let dir = tempfile::tempdir().unwrap();
        for (rel, content) in files("ops/op-lock", "op-lock", "app=op", "ops") {
            let path = dir.path().join(&rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &content).unwrap();
            if rel.extension().is_some_and(|e| e == "yaml") {
                let s = kubechaos_core::scenario::load(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
                assert_eq!(
                    s.name,
                    rel.file_stem().unwrap().to_string_lossy(),
                    "{content}"
                );
            }
        }
    }
}
