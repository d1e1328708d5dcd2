//! The `kube` backend: a cluster that already exists, reached through a kubeconfig context as
//! kubectl reaches it, behind a safety guard.
//!
//! Faults that the API alone can do (`delete-pods`, `recover`, `bind`, and the probe pods of
//! `schedulable`/`unschedulable`) work on every cluster: this is the `generic` provider. Faults
//! that need the machine the cluster runs on (stopping the API server, partitions, killing a
//! component) need a provider for it (kind, k3s), which is not built yet: such a scenario is
//! refused before anything runs, with the list of what can be done.
//!
//! The run is the same as on the other backends: the shared [`Driver`] plays the plan in real
//! time, the same [`Observer`] watches the API server, the same invariants judge. At the end the
//! cluster is left as it was found: the probe pods are deleted, and the `kubechaos` namespace if
//! the run created it; the run says what it restored and what it left (a recovery pod without
//! `cleanup`, which a recovered cluster may still need).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;

use super::driver::{Driver, Exit, World};
use super::realtime::{self, Interrupt};
use super::BackendError;
use crate::events::{fmt_ms, identity_process, Event, EventKind};
use crate::fake_node::ContainerOp;
use crate::observer::{Command, Observer, PROBE_NAMESPACE};
use crate::plan::Plan;
use crate::scenario::{Action, Component, LeaseRef, Pos, Scenario};

/// Which existing cluster, and what may be touched.
#[derive(Clone, Debug, Default)]
pub struct KubeTarget {
    /// The kubeconfig file (default: `$KUBECONFIG`, then `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// The context (default: the kubeconfig's current context).
    pub context: Option<String>,
    /// Contexts allowed besides the disposable ones (`--allow-context`).
    pub allow: Vec<String>,
}

/// What the `generic` provider can do: the API alone.
pub const GENERIC_CAN: &[&str] = &["delete-pods", "recover", "bind"];

/// What the kube backend (generic provider) cannot do with a scenario.
pub fn check(s: &Scenario) -> Vec<(Pos, String)> {
    let can = GENERIC_CAN.join(", ");
    let mut problems = Vec::new();
    for step in &s.faults {
        if !matches!(
            step.action,
            Action::DeletePods(_) | Action::Recover(_) | Action::Bind(_)
        ) {
            problems.push((step.pos, format!(
                "`{}` needs the machine the cluster runs on, and the kind and k3s providers are not built yet; on an existing cluster the generic provider can do: {can} (and the probe pods of schedulable/unschedulable)",
                step.action.key()
            )));
        }
    }
    for a in &s.cluster.agents {
        problems.push((a.pos, format!(
            "agent `{}`: kubechaos does not start agents on an existing cluster yet; expected a scenario without `agents:` on `--backend kube` (run agent scenarios with `--backend local`)",
            a.name
        )));
    }
    problems
}

/// The context a run would use: `--context`, else the kubeconfig's current context.
pub fn resolve_context(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<String, String> {
    if let Some(c) = context {
        return Ok(c.to_owned());
    }
    let kc = match kubeconfig {
        Some(p) => kube::config::Kubeconfig::read_from(p)
            .map_err(|e| format!("cannot read kubeconfig {}: {e}", p.display()))?,
        None => kube::config::Kubeconfig::read().map_err(|e| {
            format!("no kubeconfig found ({e}); expected --kubeconfig FILE or $KUBECONFIG")
        })?,
    };
    kc.current_context
        .filter(|c| !c.is_empty())
        .ok_or_else(|| "the kubeconfig has no current context; expected --context NAME".into())
}

/// The safety guard: only contexts that are obviously disposable, or allowed by name.
pub fn guard(context: &str, allow: &[String]) -> Result<(), String> {
    let disposable = context.starts_with("kind-")
        || context.starts_with("k3d-")
        || context == super::local::cluster::CONTEXT;
    if disposable || allow.iter().any(|a| a == context) {
        Ok(())
    } else {
        Err(format!(
            "refusing to touch context `{context}`: it does not look disposable; expected a `kind-*` or `k3d-*` context, kubechaos's own `{}`, or `--allow-context {context}` if this cluster may be broken on purpose",
            super::local::cluster::CONTEXT
        ))
    }
}

/// The plan as it would be carried out, touching nothing (`--dry-run`).
pub fn dry_run(s: &Scenario, plan: &Plan) -> String {
    let mut out = String::new();
    for a in &plan.actions {
        let at = fmt_ms(a.at.as_millis() as u64);
        match &a.kind {
            crate::plan::PlannedKind::Fault { step } => {
                let action = &s.faults[*step].action;
                let (how, undo) = match action {
                    Action::DeletePods(d) => (
                        format!(
                            "DELETE the pods in {} matching `{}`, wait until they are gone",
                            d.namespace, d.selector
                        ),
                        "nothing: their controllers replace them".to_owned(),
                    ),
                    Action::Recover(r) => (
                        format!(
                            "read {}, CREATE a pod from its template bound to {}",
                            r.pod_from, r.node
                        ),
                        if r.cleanup {
                            "its cleanup deletes it once the workload's pods are Ready".to_owned()
                        } else {
                            "nothing: it is left running (the run says so)".to_owned()
                        },
                    ),
                    Action::Bind(b) => (
                        format!("POST a Binding of {} to {}", b.pod, b.node),
                        "nothing".to_owned(),
                    ),
                    other => (format!("{other}"), "—".to_owned()),
                };
                out.push_str(&format!("{at:>9}  {action}\n           via the API: {how}\n           undone by: {undo}\n"));
            }
            crate::plan::PlannedKind::Undo { step } => {
                out.push_str(&format!("{at:>9}  undo `{}`\n", s.faults[*step].action));
            }
            crate::plan::PlannedKind::Probe { invariant } => {
                out.push_str(&format!(
                    "{at:>9}  CREATE probe pod {PROBE_NAMESPACE}/probe-{invariant} for `{}` (deleted at the end)\n",
                    s.expect[*invariant].value.label()
                ));
            }
        }
    }
    out
}

/// The world of an existing cluster: only the API. The driver supervises no process here.
struct KubeWorld {
    rt: tokio::runtime::Handle,
    client: kube::Client,
    commands: mpsc::UnboundedSender<Command>,
}

impl World for KubeWorld {
    fn stop(&mut self, _: &str, _: bool) {
        unreachable!("refused by the kube backend's check")
    }
    fn start(&mut self, _: &str) {
        unreachable!("refused by the kube backend's check")
    }
    fn exited(&mut self, _: &str) -> Option<Exit> {
        None
    }
    fn cut(&mut self, _: &str, _: &str) {
        unreachable!("refused by the kube backend's check")
    }
    fn mend(&mut self, _: &str, _: &str) {
        unreachable!("refused by the kube backend's check")
    }
    fn lease_holder(&mut self, lease: &LeaseRef) -> Option<String> {
        let client = self.client.clone();
        self.rt
            .block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(2),
                    crate::kubeclient::lease_holder(&client, lease),
                )
                .await
            })
            .ok()?
            .ok()?
            .map(|h| identity_process(&h).to_owned())
    }
    fn command(&mut self, c: Command) {
        let _ = self.commands.send(c);
    }
    fn containers(&mut self, _: Component, _: Option<&str>, _: ContainerOp) -> Vec<String> {
        unreachable!("refused by the kube backend's check")
    }
}

/// Play a validated scenario's plan on an existing cluster (the guard was passed). Returns the
/// recorded timeline; what the run created is deleted before it returns.
pub fn run(
    s: &Scenario,
    plan: &Plan,
    target: &KubeTarget,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Event>, BackendError> {
    let rt = realtime::runtime()?;
    let _entered = rt.enter();
    let env = |e: String| BackendError::Environment(e);
    let client = rt
        .block_on(crate::kubeclient::client(
            target.kubeconfig.as_deref(),
            target.context.as_deref(),
            Some(Duration::from_secs(10)),
        ))
        .map_err(env)?;
    let version = rt
        .block_on(client.apiserver_version())
        .map_err(|e| env(format!("cannot reach the cluster's API server: {e}")))?;
    progress(&format!(
        "reached the API server (Kubernetes {}.{})",
        version.major, version.minor
    ));
    let namespaces = Api::<Namespace>::all(client.clone());
    let created_namespace = rt
        .block_on(async {
            if namespaces.get_opt(PROBE_NAMESPACE).await?.is_some() {
                return Ok::<bool, kube::Error>(false);
            }
            let ns: Namespace =
                serde_json::from_value(json!({"metadata": {"name": PROBE_NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "kubechaos"}}}))
                    .expect("namespace");
            namespaces.create(&PostParams::default(), &ns).await?;
            Ok(true)
        })
        .map_err(|e| env(format!("cannot create the namespace {PROBE_NAMESPACE} for probe pods: {e}")))?;

    let (recorder, zero) = realtime::recorder("kube", s, plan);
    let interrupt = Interrupt::listen(&rt);
    let _ = zero.set(Instant::now());
    let (tx, rx) = mpsc::unbounded_channel();
    let observer = Observer {
        recorder: recorder.clone(),
        epoch: k8s_openapi::jiff::Timestamp::now(),
        deployments: s.deployments(),
        leases: s.leases().keys().map(|l| l.to_string()).collect(),
        watch_timeout: 60,
    };
    let observer = rt.spawn(observer.run(client.clone(), rx));
    let world = KubeWorld {
        rt: rt.handle().clone(),
        client: client.clone(),
        commands: tx,
    };
    let mut driver = Driver::new(world, recorder.clone(), Vec::<String>::new());
    let ended_at = realtime::play(&mut driver, s, plan, &interrupt, progress);
    let end_ms = ended_at.as_millis() as u64;
    recorder.record_at(end_ms, EventKind::RunEnded {});
    observer.abort();
    interrupt.stop();

    // Leave the cluster as it was found.
    let restored = rt.block_on(restore(&client, created_namespace));
    progress(&restored);
    drop(_entered);
    rt.shutdown_timeout(Duration::from_secs(2));
    if interrupt.came() {
        return Err(BackendError::Interrupted(format!(
            "interrupted at t={}; {restored}",
            fmt_ms(end_ms)
        )));
    }
    Ok(recorder.snapshot())
}

/// Delete what the run created (probe pods; the namespace if it made it) and say what was
/// restored and what was left.
async fn restore(client: &kube::Client, created_namespace: bool) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), PROBE_NAMESPACE);
    let managed = ListParams::default().labels("app.kubernetes.io/managed-by=kubechaos");
    let mut said = Vec::new();
    match pods.list(&managed).await {
        Ok(list) => {
            let names: Vec<String> = list
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            for n in &names {
                let _ = pods
                    .delete(n, &DeleteParams::default().grace_period(0))
                    .await;
            }
            if !names.is_empty() {
                said.push(format!("deleted the probe pods ({})", names.join(", ")));
            }
        }
        Err(e) => said.push(format!("could not list the probe pods to delete them: {e}")),
    }
    if created_namespace {
        match Api::<Namespace>::all(client.clone())
            .delete(PROBE_NAMESPACE, &DeleteParams::default())
            .await
        {
            Ok(_) => said.push(format!(
                "deleted the namespace {PROBE_NAMESPACE} it created"
            )),
            Err(e) => said.push(format!(
                "could not delete the namespace {PROBE_NAMESPACE}: {e}"
            )),
        }
    }
    // Recovery pods of steps without cleanup stay: the recovered cluster may need them.
    let recovery = ListParams::default().labels(crate::recover::RECOVERY_LABEL);
    if let Ok(list) = Api::<Pod>::all(client.clone()).list(&recovery).await {
        let left: Vec<String> = list
            .items
            .iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.clone().unwrap_or_default(),
                    p.metadata.name.clone().unwrap_or_default()
                )
            })
            .collect();
        if !left.is_empty() {
            said.push(format!(
                "left running: recovery pod(s) {} (delete them once their workloads are available again)",
                left.join(", ")
            ));
        }
    }
    if said.is_empty() {
        "restored: nothing to undo".to_owned()
    } else {
        format!("restored: {}", said.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_lets_only_disposable_or_named_contexts_through() {
        for ok in ["kind-chaos", "k3d-nightly", "kubechaos-local"] {
            assert!(guard(ok, &[]).is_ok(), "{ok}");
        }
        let err = guard("prod-eu-1", &[]).unwrap_err();
        assert!(
            err.contains("refusing to touch context `prod-eu-1`"),
            "{err}"
        );
        assert!(err.contains("--allow-context prod-eu-1"), "{err}");
        assert!(guard("staging", &["staging".to_owned()]).is_ok());
        assert!(guard("kind", &[]).is_err(), "only the kind- prefix");
    }
}
