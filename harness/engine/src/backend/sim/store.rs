//! The simulated API server's storage: what etcd holds. It lives outside the API server's host,
//! so it outlives a stop or a crash of the API server, as etcd would.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// A resource the simulated API server serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Resource {
    /// URL prefix: `api/v1`, `apis/apps/v1`, …
    pub(crate) prefix: &'static str,
    /// Plural name in URLs.
    pub(crate) plural: &'static str,
    /// Kind.
    pub(crate) kind: &'static str,
    /// apiVersion.
    pub(crate) api_version: &'static str,
    /// Namespaced or cluster-scoped.
    pub(crate) namespaced: bool,
    /// Has a `status` subresource (main-resource updates keep the stored status).
    pub(crate) has_status: bool,
}

/// Pods (with `binding` and `status`).
pub(crate) const PODS: Resource = Resource {
    prefix: "api/v1",
    plural: "pods",
    kind: "Pod",
    api_version: "v1",
    namespaced: true,
    has_status: true,
};
/// Nodes (with `status`).
pub(crate) const NODES: Resource = Resource {
    prefix: "api/v1",
    plural: "nodes",
    kind: "Node",
    api_version: "v1",
    namespaced: false,
    has_status: true,
};
/// Leases.
pub const LEASES: Resource = Resource {
    prefix: "apis/coordination.k8s.io/v1",
    plural: "leases",
    kind: "Lease",
    api_version: "coordination.k8s.io/v1",
    namespaced: true,
    has_status: false,
};
/// Deployments (with `status`).
pub(crate) const DEPLOYMENTS: Resource = Resource {
    prefix: "apis/apps/v1",
    plural: "deployments",
    kind: "Deployment",
    api_version: "apps/v1",
    namespaced: true,
    has_status: true,
};
/// ReplicaSets (with `status`).
pub(crate) const REPLICASETS: Resource = Resource {
    prefix: "apis/apps/v1",
    plural: "replicasets",
    kind: "ReplicaSet",
    api_version: "apps/v1",
    namespaced: true,
    has_status: true,
};

/// Every resource the simulation serves: the subset the components use.
pub(crate) const RESOURCES: &[Resource] = &[PODS, NODES, LEASES, DEPLOYMENTS, REPLICASETS];

/// Key of a stored object.
pub(crate) type Key = (&'static str, String, String);

/// Why a write was refused; maps onto a Kubernetes `Status`.
#[derive(Debug, PartialEq, Eq)]
pub enum StoreError {
    /// 404.
    NotFound(String),
    /// 409, resourceVersion mismatch or already bound.
    Conflict(String),
    /// 409, name taken.
    AlreadyExists(String),
    /// 400.
    BadRequest(String),
}

/// One change to a stored object, as a watch reports it.
#[derive(Clone, Debug)]
pub(crate) struct Change {
    /// The revision the change made.
    pub(crate) revision: u64,
    /// Plural of the resource.
    pub(crate) plural: &'static str,
    /// Namespace ("" for cluster-scoped resources).
    pub(crate) namespace: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub(crate) kind: &'static str,
    /// The object after the change (for DELETED, as it was, with the new resourceVersion).
    pub(crate) object: Value,
}

/// How many changes the store keeps for watchers; an older resourceVersion is "too old" (410
/// Gone), as etcd's compaction makes it upstream, and the watcher must list again.
pub(crate) const CHANGE_WINDOW: usize = 10_000;

/// Who writes an object, and when: kube-apiserver's `managedFields` entry for a write, whose
/// `time` (to the second) is when the API server took it. A renewal held up on its way (a cut,
/// a delay) reaches it after the `renewTime` its client wrote, and the observer places it then.
pub struct Writer {
    manager: String,
    at: k8s_openapi::jiff::Timestamp,
}

impl Writer {
    /// A write by the client that authenticates as `user`, taken at `now`.
    pub fn new(user: &str, now: k8s_openapi::jiff::Timestamp) -> Writer {
        Writer {
            manager: user.to_owned(),
            at: now,
        }
    }

    #[cfg(test)]
    pub(crate) fn test() -> Writer {
        Writer::new("test", "2026-01-01T00:00:00Z".parse().expect("a timestamp"))
    }

    /// Set `obj`'s `managedFields`: the entries of the other managers in `before` (the object's
    /// as stored), and this one's, as upstream keeps one entry per manager and operation.
    fn stamp(&self, r: &Resource, obj: &mut Value, before: Option<&Value>) {
        let mut entries: Vec<Value> = before
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|e| e.get("manager").and_then(Value::as_str) != Some(&self.manager))
            .cloned()
            .collect();
        // (to the second, as upstream keeps it)
        let time = k8s_openapi::jiff::Timestamp::from_second(self.at.as_second())
            .unwrap_or(self.at)
            .to_string();
        entries.push(json!({
            "manager": self.manager,
            "operation": "Update",
            "apiVersion": r.api_version,
            "time": time,
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }));
        obj["metadata"]["managedFields"] = Value::Array(entries);
    }
}

/// Objects by (plural, namespace, name), with a global resourceVersion counter and the recent
/// changes (for watches).
#[derive(Debug, Default)]
pub struct Store {
    objects: BTreeMap<Key, Value>,
    revision: u64,
    uid: u64,
    changes: std::collections::VecDeque<Change>,
    /// The newest revision no longer in `changes`.
    compacted: u64,
}

/// The key of `name` in namespace `ns` (ignored for cluster-scoped resources).
fn key(r: &Resource, ns: &str, name: &str) -> Key {
    (
        r.plural,
        if r.namespaced {
            ns.to_owned()
        } else {
            String::new()
        },
        name.to_owned(),
    )
}

fn meta(obj: &Value, field: &str) -> Option<String> {
    obj.get("metadata")?.get(field)?.as_str().map(str::to_owned)
}

/// Labels of an object.
pub(crate) fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

impl Store {
    /// Current revision (the newest resourceVersion).
    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }

    /// One object.
    pub fn get(&self, r: &Resource, ns: &str, name: &str) -> Option<&Value> {
        self.objects.get(&key(r, ns, name))
    }

    /// Objects of a resource, in one namespace or all (`ns` None), in name order.
    pub(crate) fn list(&self, r: &Resource, ns: Option<&str>) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|((p, n, _), _)| *p == r.plural && ns.is_none_or(|ns| ns == n))
            .map(|(_, v)| v)
            .collect()
    }

    /// etcd's compaction at the current revision: every change kept is forgotten (a watch or a
    /// read from an older revision is too old).
    pub fn compact(&mut self) {
        self.changes.clear();
        self.compacted = self.revision;
    }

    /// Objects of a resource as they were at revision `at` (etcd's read at a past revision), in
    /// name order: the last change to each at or before `at`, else the object as it is, if it
    /// has not changed since. `Err(compacted)` when `at` is older than the changes kept, or an
    /// object's version then is no longer known (its first change kept, after `at`, is not its
    /// creation), as etcd refuses a compacted revision.
    pub(crate) fn list_at(
        &self,
        r: &Resource,
        ns: Option<&str>,
        at: u64,
    ) -> Result<Vec<Value>, u64> {
        if at < self.compacted {
            return Err(self.compacted);
        }
        let mut then: BTreeMap<Key, Option<Value>> = BTreeMap::new();
        let mut later: BTreeMap<Key, &'static str> = BTreeMap::new();
        for c in self.changes.iter().filter(|c| c.plural == r.plural) {
            if ns.is_some_and(|ns| ns != c.namespace) {
                continue;
            }
            let name = meta(&c.object, "name").unwrap_or_default();
            let k = key(r, &c.namespace, &name);
            if c.revision <= at {
                then.insert(k, (c.kind != "DELETED").then(|| c.object.clone()));
            } else if !then.contains_key(&k) {
                later.entry(k).or_insert(c.kind);
            }
        }
        for (k, first_later) in later {
            if first_later != "ADDED" {
                return Err(self.compacted);
            }
            then.insert(k, None);
        }
        for (k, v) in &self.objects {
            if k.0 == r.plural && ns.is_none_or(|ns| ns == k.1) {
                then.entry(k.clone()).or_insert_with(|| Some(v.clone()));
            }
        }
        Ok(then.into_values().flatten().collect())
    }

    fn bump(&mut self, obj: &mut Value) {
        self.revision += 1;
        obj["metadata"]["resourceVersion"] = json!(self.revision.to_string());
    }

    /// Remember a change (made at the current revision) for watchers.
    fn log(&mut self, r: &Resource, kind: &'static str, object: &Value) {
        if self.changes.len() == CHANGE_WINDOW {
            if let Some(old) = self.changes.pop_front() {
                self.compacted = old.revision;
            }
        }
        self.changes.push_back(Change {
            revision: self.revision,
            plural: r.plural,
            namespace: meta(object, "namespace").unwrap_or_default(),
            kind,
            object: object.clone(),
        });
    }

    /// Changes to a resource (in one namespace, or all) after revision `after`, oldest first.
    /// `Err(compacted)` when `after` is older than the changes kept.
    pub(crate) fn changes_since(
        &self,
        r: &Resource,
        ns: Option<&str>,
        after: u64,
    ) -> Result<Vec<&Change>, u64> {
        if after < self.compacted {
            return Err(self.compacted);
        }
        Ok(self
            .changes
            .iter()
            .filter(|c| c.revision > after && c.plural == r.plural)
            .filter(|c| ns.is_none_or(|ns| ns == c.namespace))
            .collect())
    }

    /// Create: `by` who writes it, and when (its `creationTimestamp`).
    pub fn create(
        &mut self,
        r: &Resource,
        ns: &str,
        mut obj: Value,
        by: &Writer,
    ) -> Result<Value, StoreError> {
        if !obj.is_object() {
            return Err(StoreError::BadRequest("body is not a JSON object".into()));
        }
        if obj.get("metadata").is_none_or(|m| !m.is_object()) {
            obj["metadata"] = json!({});
        }
        let name = match meta(&obj, "name") {
            Some(n) if !n.is_empty() => n,
            _ => match meta(&obj, "generateName") {
                Some(prefix) => {
                    // Deterministic suffix: five characters from the uid counter.
                    let alphabet = b"bcdfghjklmnpqrstvwxz2456789";
                    let mut n = self.uid.wrapping_mul(2_654_435_761).wrapping_add(12345);
                    let mut suffix = String::new();
                    for _ in 0..5 {
                        suffix.push(alphabet[(n % alphabet.len() as u64) as usize] as char);
                        n /= alphabet.len() as u64;
                    }
                    format!("{prefix}{suffix}")
                }
                None => {
                    return Err(StoreError::BadRequest(
                        "metadata.name or metadata.generateName is required".into(),
                    ))
                }
            },
        };
        let key = key(r, ns, &name);
        if self.objects.contains_key(&key) {
            return Err(StoreError::AlreadyExists(format!(
                "{}.{} \"{name}\" already exists",
                r.plural,
                group(r)
            )));
        }
        self.uid += 1;
        obj["apiVersion"] = json!(r.api_version);
        obj["kind"] = json!(r.kind);
        obj["metadata"]["name"] = json!(name);
        if r.namespaced {
            obj["metadata"]["namespace"] = json!(ns);
        }
        obj["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{:012}", self.uid));
        obj["metadata"]["creationTimestamp"] = json!(by.at.to_string());
        if r.plural == "pods" && obj.pointer("/status/phase").is_none() {
            obj["status"] = json!({"phase": "Pending"});
        }
        by.stamp(r, &mut obj, None);
        self.bump(&mut obj);
        self.log(r, "ADDED", &obj);
        self.objects.insert(key, obj.clone());
        Ok(obj)
    }

    /// Update (PUT). `status_only`: the status subresource. A given resourceVersion must match.
    /// `by`: who writes it, and when.
    pub fn update(
        &mut self,
        r: &Resource,
        ns: &str,
        name: &str,
        mut obj: Value,
        status_only: bool,
        by: &Writer,
    ) -> Result<Value, StoreError> {
        let key = key(r, ns, name);
        let Some(old) = self.objects.get(&key) else {
            return Err(StoreError::NotFound(format!(
                "{}.{} \"{name}\" not found",
                r.plural,
                group(r)
            )));
        };
        if let Some(rv) = meta(&obj, "resourceVersion") {
            if Some(rv) != meta(old, "resourceVersion") {
                return Err(StoreError::Conflict(format!(
                    "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    r.plural,
                    group(r)
                )));
            }
        }
        let mut new = if status_only {
            let mut n = old.clone();
            n["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
            n
        } else {
            if obj.get("metadata").is_none_or(|m| !m.is_object()) {
                obj["metadata"] = json!({});
            }
            for field in ["uid", "creationTimestamp", "name", "namespace"] {
                if let Some(v) = old["metadata"].get(field) {
                    obj["metadata"][field] = v.clone();
                }
            }
            obj["apiVersion"] = json!(r.api_version);
            obj["kind"] = json!(r.kind);
            if r.has_status {
                obj["status"] = old.get("status").cloned().unwrap_or(Value::Null);
            }
            obj
        };
        by.stamp(r, &mut new, old["metadata"].get("managedFields"));
        self.bump(&mut new);
        self.log(r, "MODIFIED", &new);
        self.objects.insert(key, new.clone());
        Ok(new)
    }

    /// Delete.
    ///
    /// Pods bound to a node are deleted gracefully, as upstream does (`pkg/registry/core/pod`
    /// `CheckGracefulDelete`): the first delete sets `deletionTimestamp` (now, `now` being its RFC
    /// 3339 text) and `deletionGracePeriodSeconds` (the request's `grace`, else 30s) and the pod
    /// stays until a delete with grace 0 comes (the kubelet's, once its containers stopped).
    /// Unbound pods and every other object go at once.
    pub(crate) fn delete(
        &mut self,
        r: &Resource,
        ns: &str,
        name: &str,
        grace: Option<i64>,
        now: &str,
    ) -> Result<Value, StoreError> {
        let key = key(r, ns, name);
        let not_found =
            || StoreError::NotFound(format!("{}.{} \"{name}\" not found", r.plural, group(r)));
        let obj = self.objects.get(&key).ok_or_else(not_found)?;
        let bound = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if r.plural == "pods" && bound && grace != Some(0) {
            let mut obj = obj.clone();
            if obj.pointer("/metadata/deletionTimestamp").is_none() {
                obj["metadata"]["deletionTimestamp"] = json!(now);
                obj["metadata"]["deletionGracePeriodSeconds"] = json!(grace.unwrap_or(30));
                self.bump(&mut obj);
                self.log(r, "MODIFIED", &obj);
                self.objects.insert(key, obj.clone());
            }
            return Ok(obj);
        }
        let mut obj = self.objects.remove(&key).ok_or_else(not_found)?;
        self.bump(&mut obj);
        self.log(r, "DELETED", &obj);
        Ok(obj)
    }

    /// Bind a pending pod to a node (the `pods/binding` subresource).
    pub(crate) fn bind(&mut self, ns: &str, pod: &str, node: &str) -> Result<Value, StoreError> {
        let r = &PODS;
        let key = key(r, ns, pod);
        let Some(obj) = self.objects.get(&key) else {
            return Err(StoreError::NotFound(format!("pods \"{pod}\" not found")));
        };
        if let Some(bound) = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(StoreError::Conflict(format!(
                "pod {pod} is already assigned to node \"{bound}\""
            )));
        }
        let mut obj = obj.clone();
        obj["spec"]["nodeName"] = json!(node);
        obj["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True"}]);
        self.bump(&mut obj);
        self.log(r, "MODIFIED", &obj);
        self.objects.insert(key, obj);
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }
}

fn group(r: &Resource) -> &'static str {
    match r.prefix {
        "api/v1" => "",
        "apis/coordination.k8s.io/v1" => "coordination.k8s.io",
        _ => "apps",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_updates_conflict() {
        let mut s = Store::default();
        let created = s
            .create(
                &LEASES,
                "ns",
                json!({"metadata": {"name": "l"}, "spec": {}}),
                &Writer::test(),
            )
            .unwrap();
        let mut a = created.clone();
        a["spec"]["holderIdentity"] = json!("a");
        s.update(&LEASES, "ns", "l", a, false, &Writer::test())
            .unwrap();
        let mut b = created;
        b["spec"]["holderIdentity"] = json!("b");
        assert!(matches!(
            s.update(&LEASES, "ns", "l", b, false, &Writer::test()),
            Err(StoreError::Conflict(_))
        ));
    }

    #[test]
    fn watchers_see_changes_after_a_revision_until_they_are_compacted() {
        let mut s = Store::default();
        let l = json!({"metadata": {"name": "l"}, "spec": {}});
        let created = s.create(&LEASES, "ns", l, &Writer::test()).unwrap();
        let after_create = s.revision();
        s.update(&LEASES, "ns", "l", created, false, &Writer::test())
            .unwrap();
        s.delete(&LEASES, "ns", "l", None, "2026-01-01T00:00:00Z")
            .unwrap();
        let kinds = |from| -> Vec<&str> {
            s.changes_since(&LEASES, Some("ns"), from)
                .unwrap()
                .iter()
                .map(|c| c.kind)
                .collect()
        };
        assert_eq!(kinds(0), ["ADDED", "MODIFIED", "DELETED"]);
        assert_eq!(kinds(after_create), ["MODIFIED", "DELETED"]);
        assert!(s.changes_since(&PODS, None, 0).unwrap().is_empty());
        assert!(s
            .changes_since(&LEASES, Some("other"), 0)
            .unwrap()
            .is_empty());
        for i in 0..CHANGE_WINDOW {
            let n = json!({"metadata": {"name": format!("n{i}")}});
            s.create(&NODES, "", n, &Writer::test()).unwrap();
        }
        assert_eq!(
            s.changes_since(&LEASES, None, after_create).unwrap_err(),
            3,
            "the lease's changes were compacted away"
        );
    }

    /// etcd's read at a past revision: each object as it was then, none that did not exist, a
    /// revision older than the changes kept refused.
    #[test]
    fn a_list_at_a_past_revision_gives_the_objects_as_they_were() {
        let r = &LEASES;
        let mut s = Store::default();
        let lease = |holder: &str| json!({"metadata": {"name": "lock", "namespace": "ns"}, "spec": {"holderIdentity": holder}});
        let a = s.create(r, "ns", lease("a"), &Writer::test()).unwrap();
        let created = s.revision();
        let mut b = a.clone();
        b["spec"]["holderIdentity"] = json!("b");
        s.update(r, "ns", "lock", b, false, &Writer::test())
            .unwrap();
        let holders = |at: u64| -> Vec<String> {
            s.list_at(r, Some("ns"), at)
                .unwrap()
                .iter()
                .map(|o| o["spec"]["holderIdentity"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(holders(created - 1), Vec::<String>::new());
        assert_eq!(holders(created), ["a"]);
        assert_eq!(holders(s.revision()), ["b"]);
        assert_eq!(
            s.list_at(r, Some("ns"), created).unwrap()[0]["metadata"]["resourceVersion"],
            json!(created.to_string())
        );
        s.compacted = created;
        assert_eq!(s.list_at(r, Some("ns"), created - 1), Err(created));
    }

    #[test]
    fn binding_twice_conflicts() {
        let mut s = Store::default();
        s.create(
            &PODS,
            "ns",
            json!({"metadata": {"name": "p"}, "spec": {}}),
            &Writer::test(),
        )
        .unwrap();
        s.bind("ns", "p", "node-0").unwrap();
        assert!(matches!(
            s.bind("ns", "p", "node-1"),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            s.bind("ns", "q", "node-1"),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn main_resource_updates_keep_status() {
        let mut s = Store::default();
        let pods = &PODS;
        let p = s
            .create(
                pods,
                "ns",
                json!({"metadata": {"name": "p"}, "spec": {}}),
                &Writer::test(),
            )
            .unwrap();
        let mut changed = p.clone();
        changed["status"]["phase"] = json!("Running");
        let after = s
            .update(pods, "ns", "p", changed, false, &Writer::test())
            .unwrap();
        assert_eq!(after["status"]["phase"], "Pending");
    }
}
