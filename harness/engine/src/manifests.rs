//! `cluster.manifests`: the objects a scenario carries, applied to the cluster before time zero
//! (server-side apply, field manager `kubechaos`), as `kubectl apply --server-side` does.
//! Namespaces go first; an object whose kind is not served yet (a CRD just applied) or whose
//! namespace is being made is tried again for up to [`APPLY_WAIT`].

use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;

use kubechaos_core::scenario::Manifest;

/// How long objects that the API server refuses are tried again.
pub(crate) const APPLY_WAIT: Duration = Duration::from_secs(30);

/// An object of a manifest that could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("cannot apply {kind} {name} of {file}: {why}")]
pub struct ManifestError {
    /// The manifest file.
    pub file: String,
    /// The object's kind.
    pub kind: String,
    /// `NAMESPACE/NAME` or `NAME`.
    pub name: String,
    /// What the API server said.
    pub why: String,
}

/// One object: its file, its JSON.
struct Item<'a> {
    file: &'a str,
    value: &'a serde_json::Value,
}

impl Item<'_> {
    fn text(&self, path: &str) -> String {
        self.value
            .pointer(path)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    }

    fn gvk(&self) -> GroupVersionKind {
        let api_version = self.text("/apiVersion");
        let (group, version) = api_version
            .split_once('/')
            .map(|(g, v)| (g.to_owned(), v.to_owned()))
            .unwrap_or((String::new(), api_version.clone()));
        GroupVersionKind::gvk(&group, &version, &self.text("/kind"))
    }

    fn error(&self, why: String) -> ManifestError {
        let ns = self.text("/metadata/namespace");
        let name = self.text("/metadata/name");
        ManifestError {
            file: self.file.to_owned(),
            kind: self.text("/kind"),
            name: if ns.is_empty() {
                name
            } else {
                format!("{ns}/{name}")
            },
            why,
        }
    }

    /// Apply it; `Err` with what went wrong.
    async fn apply(&self, client: &kube::Client) -> Result<String, String> {
        let (resource, caps) = kube::discovery::pinned_kind(client, &self.gvk())
            .await
            .map_err(|e| format!("its kind is not served: {e}"))?;
        let name = self.text("/metadata/name");
        let mut ns = self.text("/metadata/namespace");
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                if ns.is_empty() {
                    ns = "default".to_owned();
                }
                Api::namespaced_with(client.clone(), &ns, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let mut object = self.value.clone();
        if caps.scope == Scope::Namespaced {
            object["metadata"]["namespace"] = serde_json::json!(ns);
        }
        api.patch(
            &name,
            &PatchParams::apply("kubechaos").force(),
            &Patch::Apply(&object),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(if caps.scope == Scope::Namespaced {
            format!("{} {ns}/{name}", self.text("/kind"))
        } else {
            format!("{} {name}", self.text("/kind"))
        })
    }
}

/// Apply every object of `manifests`; returns what was applied (`Kind NS/NAME`), in order.
pub(crate) async fn apply(
    client: &kube::Client,
    manifests: &[Manifest],
) -> Result<Vec<String>, ManifestError> {
    let mut pending: Vec<Item<'_>> = Vec::new();
    for m in manifests {
        for value in &m.objects {
            pending.push(Item {
                file: &m.written,
                value,
            });
        }
    }
    // Namespaces first, as their objects need them; otherwise file order.
    pending.sort_by_key(|i| i.text("/kind") != "Namespace");
    let deadline = tokio::time::Instant::now() + APPLY_WAIT;
    let mut applied = Vec::new();
    loop {
        let mut failed = Vec::new();
        for item in pending {
            match item.apply(client).await {
                Ok(what) => applied.push(what),
                Err(why) => failed.push((item, why)),
            }
        }
        if failed.is_empty() {
            return Ok(applied);
        }
        if tokio::time::Instant::now() >= deadline {
            let (item, why) = failed.remove(0);
            return Err(item.error(why));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        pending = failed.into_iter().map(|(i, _)| i).collect();
    }
}
