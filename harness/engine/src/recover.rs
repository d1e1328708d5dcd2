//! Disaster recovery for control planes that lost every scheduler or controller-manager (the
//! second failure kubechaos exists for; README, "Disaster recovery").
//!
//! In a self-hosted cluster the scheduler and controller-manager run as workloads: with every
//! controller-manager gone nothing turns a Deployment into pods, and with every scheduler gone
//! nothing binds the new pods. The way out needs neither: a pod made from the workload's template
//! and pre-bound to a node with `spec.nodeName` ([`recovery_pod`]), or a `Binding` posted for a
//! pending pod ([`bind`]). Works against any cluster through a `kube::Client`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplate};
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// Label on every recovery pod: which workload it stands in for (`deployment.kube-scheduler`).
pub(crate) const RECOVERY_LABEL: &str = "kubechaos.io/recovery-for";

/// A workload kind that has a pod template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 ReplicaSet.
    ReplicaSet,
    /// v1 PodTemplate.
    PodTemplate,
}

impl Kind {
    /// Every kind, in the order they are listed in messages.
    pub(crate) const ALL: [Kind; 5] = [
        Kind::Deployment,
        Kind::DaemonSet,
        Kind::StatefulSet,
        Kind::ReplicaSet,
        Kind::PodTemplate,
    ];

    /// As kubectl spells the resource (singular, lower case).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Deployment => "deployment",
            Kind::DaemonSet => "daemonset",
            Kind::StatefulSet => "statefulset",
            Kind::ReplicaSet => "replicaset",
            Kind::PodTemplate => "podtemplate",
        }
    }

    /// The names kubectl accepts: singular, plural, short name, or the Kind itself.
    pub(crate) fn parse(s: &str) -> Option<Kind> {
        let s = s.to_ascii_lowercase();
        let s = s.split('.').next().unwrap_or(""); // deployments.apps
        Kind::ALL.into_iter().find(|k| {
            let short = match k {
                Kind::Deployment => "deploy",
                Kind::DaemonSet => "ds",
                Kind::StatefulSet => "sts",
                Kind::ReplicaSet => "rs",
                Kind::PodTemplate => "podtemplate",
            };
            s == k.name() || s == format!("{}s", k.name()) || s == short
        })
    }
}

/// A workload, by kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Its kind.
    pub kind: Kind,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub(crate) name: String,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind.name(), self.name)
    }
}

impl Workload {
    /// `KIND/NAME` as kubectl takes it, in namespace `namespace`.
    pub fn parse(namespace: &str, s: &str) -> Result<Workload, kubechaos_core::error::SyntaxError> {
        let kinds = Kind::ALL.map(Kind::name).join(", ");
        let (kind, name) = s.split_once('/').ok_or_else(|| {
            kubechaos_core::error::SyntaxError(format!(
                "`{s}`: expected KIND/NAME, for example deployment/kube-scheduler (kinds: {kinds})"
            ))
        })?;
        let kind = Kind::parse(kind).ok_or_else(|| {
            kubechaos_core::error::SyntaxError(format!(
                "`{kind}` is not a workload with a pod template; expected one of {kinds}"
            ))
        })?;
        if name.is_empty() || name.contains('/') {
            return Err(kubechaos_core::error::SyntaxError(format!(
                "`{s}`: expected KIND/NAME, for example deployment/kube-scheduler"
            )));
        }
        Ok(Workload {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// Why recovery could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// What was asked for does not fit the cluster (exit 2): no such workload or node, a node
    /// that is not Ready, a pod already bound.
    #[error("{0}")]
    Refused(String),
    /// The cluster could not be reached or failed (exit 3).
    #[error("{what}")]
    Cluster {
        /// What could not be done.
        what: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
}

fn cluster_error(what: &str, source: kube::Error) -> RecoverError {
    RecoverError::Cluster {
        what: what.to_owned(),
        source,
    }
}

async fn get_value<K>(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<Option<Value>, kube::Error>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + fmt::Debug
        + DeserializeOwned
        + serde::Serialize,
{
    let found = Api::<K>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?;
    Ok(found.map(|o| serde_json::to_value(o).expect("objects serialize")))
}

/// Read a workload as JSON.
pub(crate) async fn fetch(client: &kube::Client, w: &Workload) -> Result<Value, RecoverError> {
    let (ns, name) = (w.namespace.as_str(), w.name.as_str());
    let found = match w.kind {
        Kind::Deployment => get_value::<Deployment>(client, ns, name).await,
        Kind::DaemonSet => get_value::<DaemonSet>(client, ns, name).await,
        Kind::StatefulSet => get_value::<StatefulSet>(client, ns, name).await,
        Kind::ReplicaSet => get_value::<ReplicaSet>(client, ns, name).await,
        Kind::PodTemplate => get_value::<PodTemplate>(client, ns, name).await,
    }
    .map_err(|e| cluster_error(&format!("cannot read {w} in namespace {ns}"), e))?;
    found.ok_or_else(|| {
        RecoverError::Refused(format!(
            "{w} not found in namespace {ns}; expected an existing workload (kubectl get {}s -n {ns})",
            w.kind.name()
        ))
    })
}

/// The pod template of a workload object, and the label keys its selector uses.
fn template_of(kind: Kind, obj: &Value) -> (Value, BTreeSet<String>) {
    let template = match kind {
        Kind::PodTemplate => obj.get("template"),
        _ => obj.pointer("/spec/template"),
    }
    .cloned()
    .unwrap_or(Value::Null);
    let mut keys = BTreeSet::new();
    if let Some(sel) = obj.pointer("/spec/selector") {
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            keys.extend(m.keys().cloned());
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            keys.extend(
                exprs
                    .iter()
                    .filter_map(|e| e.get("key")?.as_str().map(str::to_owned)),
            );
        }
    }
    (template, keys)
}

/// A label value (at most 63 characters, alphanumeric at both ends).
fn label_value(s: &str) -> String {
    let cut: String = s.chars().take(63).collect();
    cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// The recovery pod for workload `w` (its object `obj`), pre-bound to `node`:
/// - named `NAME-recovery-SUFFIX`, labelled [`RECOVERY_LABEL`]`=KIND.NAME` and
///   `app.kubernetes.io/managed-by=kubechaos`, annotated with what it is and when to delete it;
/// - the template's labels without those the workload's selector uses, so that the workload's
///   controller does not adopt it (and then delete it as a surplus replica);
/// - the template's spec with `nodeName` set: no scheduler is needed.
pub(crate) fn recovery_pod(
    w: &Workload,
    obj: &Value,
    node: &str,
    suffix: &str,
) -> Result<Pod, RecoverError> {
    let (template, selector_keys) = template_of(w.kind, obj);
    let Some(spec) = template.get("spec").filter(|s| s.is_object()) else {
        return Err(RecoverError::Refused(format!(
            "{w} has no pod template spec"
        )));
    };
    let mut labels: BTreeMap<String, Value> = template
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !selector_keys.contains(*k) && *k != "pod-template-hash")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    labels.insert(
        RECOVERY_LABEL.into(),
        json!(label_value(&format!("{}.{}", w.kind.name(), w.name))),
    );
    labels.insert("app.kubernetes.io/managed-by".into(), json!("kubechaos"));
    let mut annotations = template
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    annotations.insert(
        "kubechaos.io/recovery".into(),
        json!(format!(
            "made by `kubechaos recover pod-from` from {w}'s pod template and bound to {node} without a scheduler; delete it once {w} is available again"
        )),
    );
    let mut spec = spec.clone();
    spec["nodeName"] = json!(node);
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{}-recovery-{suffix}", w.name),
            "namespace": w.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    });
    serde_json::from_value(pod)
        .map_err(|e| RecoverError::Refused(format!("{w}'s pod template is not a valid pod: {e}")))
}

/// A short random suffix for names, from the clock (as `generateName` would do server-side).
pub fn suffix() -> String {
    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id()).rotate_left(32);
    (0..5)
        .map(|_| {
            let c = alphabet[(n % alphabet.len() as u64) as usize] as char;
            n /= alphabet.len() as u64;
            c
        })
        .collect()
}

/// Check that `node` exists and is Ready, and that it has the labels a template's
/// `nodeSelector` asks for (the kubelet rejects a pre-bound pod that does not fit its node).
pub async fn check_node(
    client: &kube::Client,
    node: &str,
    node_selector: Option<&Value>,
) -> Result<(), RecoverError> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| cluster_error("cannot list nodes", e))?
        .items;
    let ready_names: Vec<String> = nodes
        .iter()
        .filter(|n| crate::kubeclient::node_ready(n))
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let expected = if ready_names.is_empty() {
        "no node is Ready".to_owned()
    } else {
        format!("expected a Ready node: {}", ready_names.join(", "))
    };
    let Some(n) = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
    else {
        return Err(RecoverError::Refused(format!(
            "node {node} does not exist; {expected}"
        )));
    };
    if !crate::kubeclient::node_ready(n) {
        return Err(RecoverError::Refused(format!(
            "node {node} is not Ready; {expected}"
        )));
    }
    if let Some(sel) = node_selector.and_then(Value::as_object) {
        let labels = n.metadata.labels.clone().unwrap_or_default();
        let missing: Vec<String> = sel
            .iter()
            .filter(|(k, v)| labels.get(*k).map(String::as_str) != v.as_str())
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect();
        if !missing.is_empty() {
            return Err(RecoverError::Refused(format!(
                "node {node} lacks the labels the pod template's nodeSelector asks for ({}); the kubelet would reject the pod; expected a node that has them",
                missing.join(", ")
            )));
        }
    }
    Ok(())
}

/// The template's `nodeSelector`, if any.
pub(crate) fn node_selector(kind: Kind, obj: &Value) -> Option<Value> {
    template_of(kind, obj)
        .0
        .pointer("/spec/nodeSelector")
        .cloned()
}

/// Read workload `w`, build its recovery pod for `node` and check that the node can run it:
/// everything [`create`] needs, touching nothing. Returns the workload object and the pod.
pub async fn prepare(
    client: &kube::Client,
    w: &Workload,
    node: &str,
    suffix: &str,
) -> Result<(Value, Pod), RecoverError> {
    let obj = fetch(client, w).await?;
    let pod = recovery_pod(w, &obj, node, suffix)?;
    check_node(client, node, node_selector(w.kind, &obj).as_ref()).await?;
    Ok((obj, pod))
}

/// Create the recovery pod.
pub async fn create(client: &kube::Client, pod: &Pod) -> Result<Pod, RecoverError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    Api::<Pod>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), pod)
        .await
        .map_err(|e| cluster_error("cannot create the recovery pod", e))
}

/// `(available, desired)` replicas of a workload, or None for a kind that does not report
/// availability (PodTemplate).
pub(crate) fn availability(kind: Kind, obj: &Value) -> Option<(u32, u32)> {
    let n = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0).max(0) as u32;
    match kind {
        Kind::Deployment | Kind::ReplicaSet | Kind::StatefulSet => Some((
            n("/status/availableReplicas"),
            obj.pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(0) as u32,
        )),
        Kind::DaemonSet => Some((
            n("/status/numberAvailable"),
            n("/status/desiredNumberScheduled"),
        )),
        Kind::PodTemplate => None,
    }
}

/// `(ready, desired)`: the workload's own pods (those its selector's `matchLabels` select, not
/// being deleted) that are Ready, against the replicas it wants; None for a kind that wants no
/// number (PodTemplate). Counted from the pods rather than read from the workload's status:
/// with no controller-manager running, that status is stale (it still says what was available
/// before the disaster), and a recovery pod deleted on its word leaves nothing running.
pub(crate) async fn ready_replicas(
    client: &kube::Client,
    w: &Workload,
) -> Result<Option<(u32, u32)>, RecoverError> {
    let obj = fetch(client, w).await?;
    let Some((_, desired)) = availability(w.kind, &obj) else {
        return Ok(None);
    };
    let selector: Vec<String> = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if selector.is_empty() {
        return Ok(Some((0, desired)));
    }
    let pods = Api::<Pod>::namespaced(client.clone(), &w.namespace)
        .list(&ListParams::default().labels(&selector.join(",")))
        .await
        .map_err(|e| cluster_error(&format!("cannot list the pods of {w}"), e))?;
    let ready = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            !p.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(RECOVERY_LABEL))
        })
        .filter(|p| crate::kubeclient::pod_ready(p))
        .count() as u32;
    Ok(Some((ready, desired)))
}

/// Where the cleanup of a recovery pod stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// The workload is not available yet: its (ready, desired) pods, when they could be read.
    Waiting(Option<(u32, u32)>),
    /// The workload has its pods Ready again (ready, desired), and the recovery pod is gone.
    Done(u32, u32),
}

/// One pass of a recovery pod's cleanup, as `recover --cleanup` and a scenario's
/// `recover: {cleanup: true}` do it: once workload `w` has every desired pod Ready (as
/// [`ready_replicas`] counts them), delete the recovery pod `pod` (one already gone counts). An error: the pod could not be
/// deleted; a workload that cannot be read is still waited for.
pub async fn cleanup(
    client: &kube::Client,
    w: &Workload,
    pod: &str,
) -> Result<Cleanup, RecoverError> {
    let seen = ready_replicas(client, w).await.ok().flatten();
    let Some((ready, desired)) = seen.filter(|(r, d)| *d > 0 && r >= d) else {
        return Ok(Cleanup::Waiting(seen));
    };
    match Api::<Pod>::namespaced(client.clone(), &w.namespace)
        .delete(pod, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(Cleanup::Done(ready, desired)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Cleanup::Done(ready, desired)),
        Err(e) => Err(cluster_error(
            &format!("{w} is available again, but pod/{pod} could not be deleted"),
            e,
        )),
    }
}

/// Bind a pending pod to a node with a `Binding` (what a scheduler does).
pub async fn bind(
    client: &kube::Client,
    ns: &str,
    pod: &str,
    node: &str,
) -> Result<(), RecoverError> {
    let api = Api::<Pod>::namespaced(client.clone(), ns);
    let found = api
        .get_opt(pod)
        .await
        .map_err(|e| cluster_error(&format!("cannot read pod {ns}/{pod}"), e))?
        .ok_or_else(|| RecoverError::Refused(format!("pod {ns}/{pod} not found; expected a pending pod (kubectl get pods -n {ns} --field-selector spec.nodeName=)")))?;
    if let Some(bound) = found
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
    {
        return Err(RecoverError::Refused(format!(
            "pod {ns}/{pod} is already bound to {bound}; expected a pending pod"
        )));
    }
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    api.create_subresource::<Value, Value>("binding", pod, &PostParams::default(), &binding)
        .await
        .map(|_| ())
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => {
                RecoverError::Refused(format!("pod {ns}/{pod} could not be bound: {}", s.message))
            }
            e => cluster_error(&format!("cannot bind pod {ns}/{pod}"), e),
        })
}

/// Names of the pending pods (not bound to a node) in a namespace that match a label selector.
pub async fn pending(
    client: &kube::Client,
    ns: &str,
    selector: &str,
) -> Result<Vec<String>, RecoverError> {
    let list = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| cluster_error(&format!("cannot list pods in {ns}"), e))?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty)
                && p.metadata.deletion_timestamp.is_none()
        })
        .filter_map(|p| p.metadata.name)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheduler_deployment() -> Value {
        json!({
            "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"component": "kube-scheduler"}},
                "template": {
                    "metadata": {"labels": {"component": "kube-scheduler", "tier": "control-plane"},
                                 "annotations": {"a": "b"}},
                    "spec": {"containers": [{"name": "kube-scheduler", "image": "registry.k8s.io/kube-scheduler:v1.37.2",
                                             "command": ["kube-scheduler", "--leader-elect=true"]}],
                             "nodeSelector": {"node-role.kubernetes.io/control-plane": ""}}
                }
            },
            "status": {"availableReplicas": 0}
        })
    }

    #[test]
    fn kinds_parse_as_kubectl_spells_them() {
        for (s, k) in [
            ("deployment", Kind::Deployment),
            ("deployments.apps", Kind::Deployment),
            ("deploy", Kind::Deployment),
            ("ds", Kind::DaemonSet),
            ("StatefulSet", Kind::StatefulSet),
            ("rs", Kind::ReplicaSet),
            ("podtemplates", Kind::PodTemplate),
        ] {
            assert_eq!(Kind::parse(s), Some(k), "{s}");
        }
        assert_eq!(Kind::parse("job"), None);
        let w = Workload::parse("kube-system", "deploy/kube-scheduler").unwrap();
        assert_eq!(w.to_string(), "deployment/kube-scheduler");
        assert!(Workload::parse("x", "kube-scheduler")
            .unwrap_err()
            .contains("expected KIND/NAME"));
        assert!(Workload::parse("x", "job/a")
            .unwrap_err()
            .contains("expected one of deployment"));
    }

    #[test]
    fn the_recovery_pod_is_pre_bound_and_not_adopted() {
        let w = Workload::parse("kube-system", "deployment/kube-scheduler").unwrap();
        let pod = recovery_pod(&w, &scheduler_deployment(), "node-0", "abcde").unwrap();
        let v = serde_json::to_value(&pod).unwrap();
        assert_eq!(v["metadata"]["name"], "kube-scheduler-recovery-abcde");
        assert_eq!(v["metadata"]["namespace"], "kube-system");
        assert_eq!(v["spec"]["nodeName"], "node-0", "bound without a scheduler");
        assert_eq!(
            v["spec"]["containers"][0]["command"][1],
            "--leader-elect=true"
        );
        let labels = &v["metadata"]["labels"];
        assert!(
            labels.get("component").is_none(),
            "the selector's labels are dropped: {labels}"
        );
        assert_eq!(labels["tier"], "control-plane");
        assert_eq!(labels[RECOVERY_LABEL], "deployment.kube-scheduler");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "kubechaos");
        assert_eq!(v["metadata"]["annotations"]["a"], "b");
        assert!(v.pointer("/metadata/ownerReferences").is_none());
        assert_eq!(availability(w.kind, &scheduler_deployment()), Some((0, 2)));
        assert_eq!(
            node_selector(w.kind, &scheduler_deployment()),
            Some(json!({"node-role.kubernetes.io/control-plane": ""}))
        );
    }

    #[test]
    fn a_workload_without_a_template_is_refused() {
        let w = Workload::parse("ns", "podtemplate/empty").unwrap();
        assert!(matches!(
            recovery_pod(&w, &json!({"metadata": {"name": "empty"}}), "n", "x"),
            Err(RecoverError::Refused(_))
        ));
        assert_eq!(label_value(&"a".repeat(70)).len(), 63);
        assert_eq!(label_value("abc.-"), "abc");
        assert_eq!(suffix().len(), 5);
    }
}
