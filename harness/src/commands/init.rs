//! `kubechaos init`: a chaos directory of their own in a user's repository: a first scenario for
//! their Lease that the sim plays (`chaos/NAME-api-outage.yaml`), one for their software as it
//! runs in their cluster (`chaos/cluster/NAME.yaml`, a pod agent, for `--backend kube`), and the
//! JSON Schema the files' first line points editors at. Running it again changes nothing; a file
//! that differs is never overwritten without `--force`.

use std::path::{Path, PathBuf};

use super::End;
use crate::cli::InitArgs;
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

/// The files to write: (path under the directory, content).
fn files(lease: &str, name: &str, selector: &str, namespace: &str) -> Vec<(PathBuf, String)> {
    let outage = format!("{name}-api-outage");
    let sim = format!(
        "# yaml-language-server: $schema=./scenario.schema.json
name: {outage}
description: |
  The shape of {lease} proven on the simulated cluster first: kubechaos's reference agent
  (client-go's elector) competes for a Lease named as yours, in two replicas, while the API server
  is down for longer than the renew deadline. Proves that leadership comes back and that never two
  replicas lead at once. `kubechaos suite chaos/` plays it (and every file beside it) on the sim;
  `--backend local` on a real control plane on this machine.
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
      # How its log lines say it leads, so that two pods both believing they lead are caught
      # (client-go's own lines shown; yours may differ):
      # leading: {{started: 'successfully acquired lease', stopped: 'failed to renew lease|leader election lost'}}
faults:
  - at: 20s
    id: outage
    api-server: stop
    for: 30s
  - at: 1m50s
    id: kill
    kill: agent/{name}/leader
expect:
  - leader-reacquired: {{lease: {lease}, within: 60s, after: outage}}
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

/// `kubechaos init`.
pub fn init(args: &InitArgs) -> End {
    let (namespace, lease_name) =
        super::lease_arg("init", &args.lease, "my-operator/my-operator-lock")?;
    let name = dns_name(args.name.as_deref().unwrap_or(lease_name));
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
    let wanted = files(&lease, &name, &selector, &pods_namespace);

    // Nothing is written unless all of it can be: a file that differs stops it (without --force).
    let mut differ = Vec::new();
    for (rel, content) in &wanted {
        let path = args.dir.join(rel);
        if let Ok(there) = std::fs::read_to_string(&path) {
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
    for (rel, content) in &wanted {
        let path = args.dir.join(rel);
        let state = match std::fs::read_to_string(&path) {
            Ok(there) if there == *content => "unchanged",
            Ok(_) => "overwritten",
            Err(_) => "written",
        };
        if state != "unchanged" {
            write(&path, content)?;
        }
        println!("{state:<11} {}", path.display());
    }
    println!(
        "\nnext:\n  kubechaos suite {dir}         # the sim, here and now\n  kubechaos suite {dir}/cluster --backend kube --context kind-chaos   # your software in your cluster",
        dir = args.dir.display().to_string().trim_end_matches('/')
    );
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
