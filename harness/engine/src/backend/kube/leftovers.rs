//! What a run on kind or k3d leaves in its nodes when kubechaos is killed outright (SIGKILL: no
//! ledger, no restore at its end), found and undone by `kubechaos recover --cleanup`.
//!
//! Every change kubechaos makes in a node is its own record there, so nothing has to outlive the
//! process but the change itself:
//! - a static pod held down is its manifest moved from [`MANIFESTS`] into [`HELD`] (kind);
//! - a static pod crashing is a loop in its node that kills its container each time the kubelet
//!   starts it, whose PID a file in [`HELD`] holds (kind; ended by [`end_crash_loops`]);
//! - a partition is an iptables rule in a node's filter table with the comment
//!   [`RULE_COMMENT`];
//! - a node stopped is its container paused (neither kind nor k3d ever pauses one).
//!
//! The nodes are the cluster's containers as Docker knows them, by kind's and k3d's labels (not
//! through the API server, which a held manifest may have stopped).
//!
//! On this machine, a run's own directory under `$TMPDIR` (`kubechaos-agents-*`: its agents'
//! kubeconfigs, which hold the cluster's credentials, and their logs) names the process that made
//! it ([`RUN_MARK`]), so that one whose run was killed outright is removed and one whose run
//! still goes is not touched.

use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::discovery::{verbs, Scope};

use super::docker::Docker;
use super::error::DockerError;
use super::machine::{end_crash_loops, HELD, MANIFESTS, RULE_COMMENT};
use super::Provider;

use crate::manifests::MADE_BY_RUN;

/// One thing `recover --cleanup` found of a run, and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Undone (a sentence saying what was done).
    Undone(String),
    /// Found and left on purpose (a recovery pod the cluster may still need): said, no failure.
    Kept(String),
    /// Could not be undone, or not looked into: something of a run may be left.
    Left(String),
}

impl Outcome {
    /// The sentence.
    pub fn text(&self) -> &str {
        match self {
            Outcome::Undone(t) | Outcome::Kept(t) | Outcome::Left(t) => t,
        }
    }

    /// Whether something of a run may be left.
    pub fn left(&self) -> bool {
        matches!(self, Outcome::Left(_))
    }

    fn in_node(self, node: &str) -> Outcome {
        match self {
            Outcome::Undone(t) => Outcome::Undone(format!("{node}: {t}")),
            Outcome::Kept(t) => Outcome::Kept(format!("{node}: {t}")),
            Outcome::Left(t) => Outcome::Left(format!("{node}: {t}")),
        }
    }
}

/// A node container of a cluster: its name and whether Docker says it is paused.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NodeContainer {
    name: String,
    paused: bool,
    running: bool,
}

/// The label that names a container's cluster, and the one that gives its role, with the roles
/// that are nodes (kind's load balancer is a container of the cluster too, and no node).
fn labels(provider: Provider) -> Option<(&'static str, &'static str, &'static [&'static str])> {
    match provider {
        Provider::Kind => Some((
            "io.x-k8s.kind.cluster",
            "io.x-k8s.kind.role",
            &["control-plane", "worker"],
        )),
        Provider::K3s => Some(("k3d.cluster", "k3d.role", &["server", "agent"])),
        Provider::Auto | Provider::Generic | Provider::K3sContainer => None,
    }
}

/// The cluster a context names, as kind (`kind-NAME`) and k3d (`k3d-NAME`) name their contexts.
pub fn cluster_of(provider: Provider, context: &str) -> Option<&str> {
    let prefix = match provider {
        Provider::Kind => "kind-",
        Provider::K3s => "k3d-",
        Provider::Auto | Provider::Generic | Provider::K3sContainer => return None,
    };
    context.strip_prefix(prefix).filter(|n| !n.is_empty())
}

/// The node containers of cluster `cluster`.
fn nodes(
    docker: &Docker,
    provider: Provider,
    cluster: &str,
) -> Result<Vec<NodeContainer>, DockerError> {
    let Some((cluster_label, role_label, roles)) = labels(provider) else {
        return Ok(Vec::new());
    };
    let out = docker.run(&[
        "ps".into(),
        "-a".into(),
        "--filter".into(),
        format!("label={cluster_label}={cluster}"),
        "--format".into(),
        format!("{{{{.Names}}}} {{{{.State}}}} {{{{.Label \"{role_label}\"}}}}"),
    ])?;
    let mut found: Vec<NodeContainer> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (name, state, role) = (f.next()?, f.next()?, f.next().unwrap_or(""));
            roles.contains(&role).then(|| NodeContainer {
                name: name.to_owned(),
                paused: state == "paused",
                running: state == "running" || state == "paused",
            })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// The shell run in each node: crash loops ended, held manifests moved back, then every
/// iptables rule with kubechaos's comment deleted. Each line it prints says one thing it did (`+ `) or could not
/// undo (`! `): a held manifest whose name kubelet's directory has again is left where it is
/// (which of the two is the one to keep is for a person to say).
fn undo_script(static_pods: bool) -> String {
    let mut script = String::new();
    if static_pods {
        script.push_str(&end_crash_loops(HELD));
        script.push_str(&format!(
            "for f in {HELD}/*.yaml; do [ -e \"$f\" ] || continue; b=${{f##*/}}; \
             if [ -e {MANIFESTS}/$b ]; then echo \"! left {HELD}/$b: {MANIFESTS} has a $b again (compare the two, keep one, delete {HELD}/$b)\"; \
             elif mv \"$f\" {MANIFESTS}/$b; then echo \"+ moved $b back into {MANIFESTS}\"; \
             else echo \"! could not move $b back into {MANIFESTS}\"; fi; done; "
        ));
    }
    // (iptables-save writes a comment without spaces bare: `--comment kubechaos`; `-A` becomes
    // `-D` for the same rule, and eval reads back any quoting iptables-save used)
    script.push_str(&format!(
        "iptables-save -t filter | grep -e ' --comment {RULE_COMMENT} ' -e ' --comment {RULE_COMMENT}$' | sed 's/^-A /-D /' | \
         while read -r rule; do if eval \"iptables -t filter $rule\"; then echo \"+ removed the iptables rule \\`${{rule#-D }}\\`\"; \
         else echo \"! could not remove the iptables rule \\`${{rule#-D }}\\`\"; fi; done"
    ));
    script
}

/// A line of [`undo_script`]'s output as what it says; a line without its mark (the shell's
/// own complaint) counts as something not undone.
fn outcome_of(line: &str) -> Outcome {
    match (line.strip_prefix("+ "), line.strip_prefix("! ")) {
        (Some(done), _) => Outcome::Undone(done.to_owned()),
        (_, Some(left)) => Outcome::Left(left.to_owned()),
        _ => Outcome::Left(line.to_owned()),
    }
}

/// Find and undo, in every node container of `cluster`, what a run of kubechaos left there,
/// each found thing's node first. `Err` when Docker could not list the cluster's containers,
/// or it has none.
pub fn undo_in_nodes(provider: Provider, cluster: &str) -> Result<Vec<Outcome>, String> {
    undo_with(&Docker::default(), provider, cluster)
}

fn undo_with(docker: &Docker, provider: Provider, cluster: &str) -> Result<Vec<Outcome>, String> {
    let found = nodes(docker, provider, cluster).map_err(|e| kubechaos_core::error::chain(&e))?;
    if found.is_empty() {
        return Err(format!(
            "Docker has no node container of the {} cluster {cluster} (is it made on this machine? `docker ps` lists its nodes)",
            provider.name()
        ));
    }
    let mut said = Vec::new();
    for n in &found {
        if n.paused {
            said.push(
                match docker.run(&["unpause".into(), n.name.clone()]) {
                    Ok(_) => Outcome::Undone("unpaused it".to_owned()),
                    Err(e) => Outcome::Left(format!(
                        "could not unpause it: {}",
                        kubechaos_core::error::chain(&e)
                    )),
                }
                .in_node(&n.name),
            );
        }
        if !n.running {
            said.push(
                Outcome::Left(format!(
                    "not running, not looked into (`docker start {}`, then run this again)",
                    n.name
                ))
                .in_node(&n.name),
            );
            continue;
        }
        let script = undo_script(provider == Provider::Kind);
        match docker.run(&[
            "exec".into(),
            n.name.clone(),
            "sh".into(),
            "-c".into(),
            script,
        ]) {
            Ok(out) => said.extend(
                out.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| outcome_of(l).in_node(&n.name)),
            ),
            Err(e) => said.push(
                Outcome::Left(format!(
                    "could not look for what kubechaos left: {}",
                    kubechaos_core::error::chain(&e)
                ))
                .in_node(&n.name),
            ),
        }
    }
    Ok(said)
}

/// Delete, through the API, what a run made in the cluster: the namespaces it made (for probe
/// pods, and for its agents' Leases; `app.kubernetes.io/managed-by=kubechaos`) with everything
/// in them, probe pods left in a namespace it did not make, and every object of any kind it
/// created elsewhere ([`MADE_BY_RUN`]: the objects of `cluster.manifests`, its agents'
/// Leases), each deleted in the background as the run's own end deletes them. Recovery pods
/// stay (the cluster may need them until their workload is back): named, to delete with
/// `recover pod-from --cleanup` or kubectl.
pub async fn undo_in_cluster(client: &kube::Client) -> Result<Vec<Outcome>, kube::Error> {
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    let managed = ListParams::default().labels("app.kubernetes.io/managed-by=kubechaos");
    let mut said = Vec::new();
    let namespaces = Api::<Namespace>::all(client.clone());
    let mut gone = Vec::new();
    let mut made_namespaces = namespaces.list(&managed).await?.items;
    made_namespaces.extend(
        namespaces
            .list(&ListParams::default().labels(MADE_BY_RUN))
            .await?
            .items,
    );
    for ns in made_namespaces {
        let name = ns.metadata.name.unwrap_or_default();
        if ns.metadata.deletion_timestamp.is_some() {
            said.push(Outcome::Undone(format!(
                "namespace {name}: being deleted already"
            )));
        } else {
            namespaces.delete(&name, &DeleteParams::default()).await?;
            said.push(Outcome::Undone(format!(
                "deleted the namespace {name} a run made"
            )));
        }
        gone.push(name);
    }
    let probe = crate::observer::PROBE_NAMESPACE;
    if !gone.iter().any(|n| n == probe) {
        let pods = Api::<Pod>::namespaced(client.clone(), probe);
        for p in pods.list(&managed).await?.items {
            let name = p.metadata.name.unwrap_or_default();
            pods.delete(&name, &DeleteParams::default().grace_period(0))
                .await?;
            said.push(Outcome::Undone(format!(
                "deleted the probe pod {probe}/{name}"
            )));
        }
    }
    // Every kind the cluster serves that can be listed and deleted (a CRD's too), each object
    // a run created: a namespaced one in a namespace deleted above goes with it. A group or a
    // kind that cannot be read (an aggregated API whose server is down) is said, not a reason to
    // stop looking.
    let made = ListParams::default().labels(MADE_BY_RUN);
    let mut groups = vec![kube::discovery::ApiGroup::CORE_GROUP.to_owned()];
    groups.extend(
        client
            .list_api_groups()
            .await?
            .groups
            .into_iter()
            .map(|g| g.name),
    );
    for name in groups {
        let group = match kube::discovery::group(client, &name).await {
            Ok(g) => g,
            Err(e) => {
                said.push(Outcome::Left(format!(
                    "could not look into the API group {name} for what a run created: {e}"
                )));
                continue;
            }
        };
        for (resource, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) || !caps.supports_operation(verbs::DELETE) {
                continue;
            }
            let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
            let listed = match api.list(&made).await {
                Ok(l) => l.items,
                Err(e) => {
                    said.push(Outcome::Left(format!(
                        "could not look for {} objects a run created: {e}",
                        resource.kind
                    )));
                    continue;
                }
            };
            for o in listed {
                let name = o.metadata.name.clone().unwrap_or_default();
                if resource.kind == "Namespace" && gone.contains(&name) {
                    continue;
                }
                let (api, what) = match (&caps.scope, o.metadata.namespace.as_deref()) {
                    (Scope::Namespaced, Some(ns)) => {
                        if gone.iter().any(|g| g == ns) {
                            continue;
                        }
                        (
                            Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource),
                            format!("{} {ns}/{name}", resource.kind),
                        )
                    }
                    _ => (api.clone(), format!("{} {name}", resource.kind)),
                };
                if o.metadata.deletion_timestamp.is_some() {
                    said.push(Outcome::Undone(format!("{what}: being deleted already")));
                    continue;
                }
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => said.push(Outcome::Undone(format!("deleted {what} a run created"))),
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => said.push(Outcome::Left(format!("could not delete {what}: {e}"))),
                }
            }
        }
    }
    let recovery = ListParams::default().labels(crate::recover::RECOVERY_LABEL);
    for p in Api::<Pod>::all(client.clone()).list(&recovery).await?.items {
        let ns = p.metadata.namespace.unwrap_or_default();
        if gone.contains(&ns) {
            continue;
        }
        let name = p.metadata.name.unwrap_or_default();
        said.push(Outcome::Kept(format!(
            "left the recovery pod {ns}/{name} (the cluster may need it until its workload is back: `kubectl delete pod -n {ns} {name}` then)"
        )));
    }
    Ok(said)
}

/// The prefix of a run's own directory under `$TMPDIR` (its agents' kubeconfigs and logs).
pub(crate) const AGENTS_DIR: &str = "kubechaos-agents-";

/// The file in that directory that names the process that made it: `PID START`, START being when
/// it started (clock ticks since boot, the 22nd field of `/proc/PID/stat`), so that a pid used
/// again by another process is not taken for the run.
pub(crate) const RUN_MARK: &str = "kubechaos-run";

/// When process `pid` started (clock ticks since boot), if it is running (`/proc` tells).
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Its name (the 2nd field) is in parentheses and may hold spaces: count from the last ')',
    // after which the 3rd field comes.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(22 - 3)?
        .parse()
        .ok()
}

/// Mark `dir` as this process's own ([`RUN_MARK`]), readable by its user only (it is to hold
/// kubeconfigs). Where `/proc` cannot tell when this process started, the mark is not written and
/// `recover --cleanup` keeps the directory, saying so.
pub(crate) fn mark_own(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let pid = std::process::id();
    match process_start(pid) {
        Some(start) => std::fs::write(dir.join(RUN_MARK), format!("{pid} {start}\n")),
        None => Ok(()),
    }
}

/// The directories under `tmp` that runs killed outright left ([`AGENTS_DIR`]): each removed
/// once the process its mark names has ended, and said; one whose run still goes, or without a
/// mark (its run cannot be told), is kept and said. Only the directories of this user are looked
/// at.
pub fn undo_on_this_machine(tmp: &std::path::Path) -> Vec<Outcome> {
    use std::os::unix::fs::MetadataExt;
    // (its owner is this process's user)
    let Ok(me) = std::fs::metadata("/proc/self") else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut dirs: Vec<std::path::PathBuf> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(AGENTS_DIR))
                && e.metadata()
                    .is_ok_and(|m| m.is_dir() && m.uid() == me.uid())
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let shown = dir.display();
            let mark = std::fs::read_to_string(dir.join(RUN_MARK)).unwrap_or_default();
            let named = mark
                .split_once(' ')
                .and_then(|(pid, start)| Some((pid.parse().ok()?, start.trim().parse().ok()?)));
            match named {
                None => Outcome::Kept(format!(
                    "kept {shown}: no mark of the run that made it, which cannot be told from one still going (remove it once no kubechaos runs here)"
                )),
                Some((pid, start)) if process_start(pid) == Some(start) => Outcome::Kept(format!(
                    "kept {shown}: its run (process {pid}) is still going"
                )),
                Some((pid, _)) => match std::fs::remove_dir_all(&dir) {
                    Ok(()) => Outcome::Undone(format!(
                        "removed {shown}, which a run killed outright (process {pid}) left: its agents' kubeconfigs and logs"
                    )),
                    Err(e) => Outcome::Left(format!(
                        "could not remove {shown}, which a run killed outright (process {pid}) left: {e}"
                    )),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// A run's directory is removed once its process has ended (or its pid names another
    /// process now), kept while it goes or when it bears no mark; nothing else is touched.
    #[test]
    fn the_directories_of_runs_killed_outright_are_removed_and_only_those() {
        let tmp = tempfile::tempdir().unwrap();
        let made = |name: &str, mark: Option<String>| {
            let dir = tmp.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("agent-0.kubeconfig"), "credentials").unwrap();
            if let Some(mark) = mark {
                std::fs::write(dir.join(super::RUN_MARK), mark).unwrap();
            }
            dir
        };
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        ended.wait().unwrap();
        let going = tmp.path().join("kubechaos-agents-going");
        std::fs::create_dir(&going).unwrap();
        super::mark_own(&going).unwrap();
        let me = std::process::id();
        let start = super::process_start(me).unwrap();
        let killed = made(
            "kubechaos-agents-killed",
            Some(format!("{} 1\n", ended.id())),
        );
        let reused = made(
            "kubechaos-agents-reused",
            Some(format!("{me} {}\n", start + 1)),
        );
        let unmarked = made("kubechaos-agents-unmarked", None);
        let other = made("other-dir", Some(format!("{} 1\n", ended.id())));
        use super::Outcome::{Kept, Undone};
        let said = super::undo_on_this_machine(tmp.path());
        let shown = |p: &std::path::Path| p.display().to_string();
        assert!(
            matches!(&said[..], [Kept(going_said), Undone(killed_said), Undone(reused_said), Kept(unmarked_said)]
                if going_said.starts_with(&format!("kept {}: its run (process {me}) is still going", shown(&going)))
                    && killed_said.starts_with(&format!("removed {}, which a run killed outright (process {})", shown(&killed), ended.id()))
                    && reused_said.starts_with(&format!("removed {}", shown(&reused)))
                    && unmarked_said.starts_with(&format!("kept {}: no mark", shown(&unmarked)))),
            "{said:#?}"
        );
        assert!(going.exists() && unmarked.exists() && other.exists());
        assert!(!killed.exists() && !reused.exists());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&going).unwrap().permissions().mode() & 0o777,
            0o700,
            "a run's own directory is its user's only"
        );
        // Run again: the same directories kept, nothing more removed.
        assert_eq!(super::undo_on_this_machine(tmp.path()).len(), 2);
    }

    use super::*;

    #[test]
    fn a_context_names_its_cluster_as_kind_and_k3d_name_them() {
        assert_eq!(cluster_of(Provider::Kind, "kind-ci"), Some("ci"));
        assert_eq!(cluster_of(Provider::K3s, "k3d-dev"), Some("dev"));
        assert_eq!(cluster_of(Provider::Kind, "kind-"), None);
        assert_eq!(cluster_of(Provider::Kind, "prod"), None);
        assert_eq!(cluster_of(Provider::Generic, "kind-ci"), None);
    }

    /// The script, run by a real shell with `iptables-save` and `iptables` stand-ins on its
    /// PATH and the held and kubelet's directories under a temp dir: a held manifest goes back,
    /// one whose name kubelet's directory has again stays, and only kubechaos's rules go.
    #[test]
    fn the_script_in_a_node_moves_held_manifests_back_and_removes_only_kubechaos_rules() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (held, manifests) = (root.join("held"), root.join("manifests"));
        std::fs::create_dir_all(&held).unwrap();
        std::fs::create_dir_all(&manifests).unwrap();
        std::fs::write(held.join("kube-apiserver.yaml"), "a").unwrap();
        std::fs::write(held.join("etcd.yaml"), "held").unwrap();
        std::fs::write(manifests.join("etcd.yaml"), "back").unwrap();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let log = root.join("calls");
        let stand_in = |name: &str, body: &str| {
            use std::os::unix::fs::PermissionsExt;
            let p = bin.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        stand_in(
            "iptables-save",
            "cat <<'EOF'\n*filter\n:INPUT ACCEPT [0:0]\n-A OUTPUT -d 172.18.0.2/32 -p tcp -m tcp --dport 6443 -m comment --comment kubechaos -j DROP\n-A FORWARD -s 10.244.1.7/32 -p tcp -m tcp --dport 6443 -m comment --comment \"kubechaos other\" -j DROP\n-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding rules\" -j ACCEPT\nCOMMIT\nEOF",
        );
        stand_in("iptables", &format!("echo \"$*\" >> {}", log.display()));
        let script = undo_script(true)
            .replace(HELD, &held.display().to_string())
            .replace(MANIFESTS, &manifests.display().to_string());
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        let said: Vec<Outcome> = text.lines().map(outcome_of).collect();
        assert_eq!(
            said,
            [
                Outcome::Left(format!(
                    "left {held}/etcd.yaml: {manifests} has a etcd.yaml again (compare the two, keep one, delete {held}/etcd.yaml)",
                    held = held.display(),
                    manifests = manifests.display()
                )),
                Outcome::Undone(format!(
                    "moved kube-apiserver.yaml back into {}",
                    manifests.display()
                )),
                Outcome::Undone("removed the iptables rule `OUTPUT -d 172.18.0.2/32 -p tcp -m tcp --dport 6443 -m comment --comment kubechaos -j DROP`".to_owned()),
            ]
        );
        assert_eq!(
            std::fs::read_to_string(manifests.join("kube-apiserver.yaml")).unwrap(),
            "a"
        );
        assert_eq!(
            std::fs::read_to_string(manifests.join("etcd.yaml")).unwrap(),
            "back"
        );
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "-t filter -D OUTPUT -d 172.18.0.2/32 -p tcp -m tcp --dport 6443 -m comment --comment kubechaos -j DROP\n"
        );
    }

    /// A line the script did not mark (the shell's own complaint) is taken as something left.
    #[test]
    fn an_unmarked_line_of_the_node_script_counts_as_left() {
        assert!(outcome_of("sh: 1: iptables-save: not found").left());
        assert!(!outcome_of("+ moved a.yaml back").left());
        assert!(outcome_of("! could not move a.yaml back").left());
    }

    /// The cluster's node containers by kind's labels (its load balancer is none): a paused one
    /// is unpaused, a stopped one is named and not looked into, the others are each looked into.
    #[test]
    fn every_node_container_of_the_cluster_is_looked_into_and_a_paused_one_unpaused() {
        let (_dir, docker, log) = super::super::docker::tests::stand_in_answering(
            "[ \"$1\" = ps ] && printf 'ci-control-plane running control-plane\\nci-worker paused worker\\nci-worker2 exited worker\\nci-external-load-balancer running external-load-balancer\\n'; exit 0",
        );
        let said = undo_with(&docker, Provider::Kind, "ci").unwrap();
        let calls = std::fs::read_to_string(&log).unwrap();
        assert!(
            calls.contains("ps -a --filter label=io.x-k8s.kind.cluster=ci"),
            "{calls}"
        );
        assert!(calls.contains("unpause ci-worker"), "{calls}");
        assert!(calls.contains("exec ci-control-plane sh -c"), "{calls}");
        assert!(calls.contains("exec ci-worker sh -c"), "{calls}");
        assert!(!calls.contains("exec ci-worker2"), "{calls}");
        assert!(!calls.contains("exec ci-external-load-balancer"), "{calls}");
        assert!(
            said.contains(&Outcome::Undone("ci-worker: unpaused it".to_owned())),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|o| o.left() && o.text().starts_with("ci-worker2: not running")),
            "{said:?}"
        );
    }
}
