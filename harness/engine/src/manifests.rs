//! `cluster.manifests`: the objects a scenario carries. On a cluster kubechaos builds (local)
//! they are applied before time zero (server-side apply, field manager `kubechaos`), as
//! `kubectl apply --server-side` does; on an existing cluster (kube) each is created unless it
//! exists (what exists is the cluster's and is not changed), labelled as the run's
//! ([`MADE_BY_RUN`], for `recover --cleanup` after a SIGKILL),
//! and what was created is deleted at the end and waited for until it is gone ([`gone`]).
//! Namespaces go first; an object whose kind is not served yet (a CRD just applied) or whose
//! namespace is being made is tried again for up to [`APPLY_WAIT`].

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;

use kubechaos_core::report::live::Progress;
use kubechaos_core::scenario::{Manifest, Pos};

/// The label on every object a run creates in a cluster that it does not make its own
/// namespace for (the objects of `cluster.manifests`, the Leases its agent processes made): the
/// record that outlives the run, so that `recover --cleanup` finds them after a SIGKILL.
pub const MADE_BY_RUN: &str = "kubechaos.io/made-by-run";

/// How long objects that the API server refuses are tried again.
pub(crate) const APPLY_WAIT: Duration = Duration::from_secs(30);

/// How long an object that exists but is being deleted (an earlier run's namespace) is waited
/// for before it is made anew.
pub(crate) const DELETING_WAIT: Duration = Duration::from_secs(120);

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
    /// Where the scenario file names the manifest.
    pub pos: Pos,
    /// The API server refused the object itself (invalid, a bad request): the file is wrong,
    /// not the cluster.
    pub refused: bool,
    /// What was made before it and deleted again, a sentence each.
    pub undone: Vec<String>,
}

impl ManifestError {
    /// If the object itself was refused: where the scenario names its manifest, and what to do.
    pub fn refusal(&self) -> Option<(Pos, String)> {
        self.refused.then(|| {
            (
                self.pos,
                format!(
                    "`cluster.manifests` ({file}): the API server refused {kind} {name}: {why}; expected an object it accepts: fix it in {file}",
                    file = self.file,
                    kind = self.kind,
                    name = self.name,
                    why = self.why
                ),
            )
        })
    }
}

/// Why an object could not be applied or created.
struct Failed {
    why: String,
    /// Refused for what it is (400, 422): trying again would not help.
    refused: bool,
    /// It exists and is going away (an earlier run's namespace): worth a longer wait.
    going: bool,
}

impl From<String> for Failed {
    fn from(why: String) -> Failed {
        Failed {
            why,
            refused: false,
            going: false,
        }
    }
}

impl From<kube::Error> for Failed {
    fn from(e: kube::Error) -> Failed {
        let refused = matches!(&e, kube::Error::Api(s) if s.code == 400 || s.code == 422);
        Failed {
            why: e.to_string(),
            refused,
            going: false,
        }
    }
}

/// One object: its file, its JSON, where the scenario names its file.
struct Item<'a> {
    file: &'a str,
    value: &'a serde_json::Value,
    pos: Pos,
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

    fn error(&self, failed: Failed) -> ManifestError {
        let ns = self.text("/metadata/namespace");
        let name = self.text("/metadata/name");
        ManifestError {
            pos: self.pos,
            refused: failed.refused,
            undone: Vec::new(),
            file: self.file.to_owned(),
            kind: self.text("/kind"),
            name: if ns.is_empty() {
                name
            } else {
                format!("{ns}/{name}")
            },
            why: failed.why,
        }
    }

    /// Its API (found by discovery), what it is (`Kind NS/NAME`), and the object with its
    /// namespace set (`default` for a namespaced object without one).
    async fn resolve(
        &self,
        client: &kube::Client,
    ) -> Result<(Api<DynamicObject>, String, serde_json::Value), String> {
        let (resource, caps) = kube::discovery::pinned_kind(client, &self.gvk())
            .await
            .map_err(|e| format!("its kind is not served: {e}"))?;
        let name = self.text("/metadata/name");
        let mut object = self.value.clone();
        Ok(match caps.scope {
            Scope::Namespaced => {
                let mut ns = self.text("/metadata/namespace");
                if ns.is_empty() {
                    ns = "default".to_owned();
                }
                object["metadata"]["namespace"] = serde_json::json!(ns);
                (
                    Api::namespaced_with(client.clone(), &ns, &resource),
                    format!("{} {ns}/{name}", self.text("/kind")),
                    object,
                )
            }
            Scope::Cluster => (
                Api::all_with(client.clone(), &resource),
                format!("{} {name}", self.text("/kind")),
                object,
            ),
        })
    }

    /// Apply it; `Err` with what went wrong.
    async fn apply(&self, client: &kube::Client) -> Result<String, Failed> {
        let (api, what, object) = self.resolve(client).await?;
        api.patch(
            &self.text("/metadata/name"),
            &PatchParams::apply("kubechaos").force(),
            &Patch::Apply(&object),
        )
        .await?;
        Ok(what)
    }

    /// Create it unless it exists: `Some` when this run made it.
    async fn create(&self, client: &kube::Client) -> Result<Option<Made>, Failed> {
        let (api, what, object) = self.resolve(client).await?;
        let name = self.text("/metadata/name");
        if let Some(there) = api.get_opt(&name).await? {
            if there.metadata.deletion_timestamp.is_some() {
                // Going away (a namespace of an earlier run): make it anew once it is gone.
                return Err(Failed {
                    why: format!(
                        "{what} is being deleted (waited {}s for it to go)",
                        DELETING_WAIT.as_secs()
                    ),
                    refused: false,
                    going: true,
                });
            }
            return Ok(None);
        }
        // (labelled as the run's, the record a `recover --cleanup` after a SIGKILL finds)
        let mut object = object;
        if let Some(meta) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            let labels = meta.entry("labels").or_insert(serde_json::Value::Null);
            if labels.is_null() {
                *labels = serde_json::json!({});
            }
            if let Some(labels) = labels.as_object_mut() {
                labels.insert(MADE_BY_RUN.to_owned(), serde_json::json!("true"));
            }
        }
        let object: DynamicObject = serde_json::from_value(object).map_err(|e| Failed {
            why: format!("not an object: {e}"),
            refused: true,
            going: false,
        })?;
        api.create(&PostParams::default(), &object).await?;
        Ok(Some(Made { api, name, what }))
    }
}

/// An object a run created on an existing cluster, to delete at its end.
pub(crate) struct Made {
    api: Api<DynamicObject>,
    name: String,
    /// `Kind NS/NAME`.
    pub(crate) what: String,
}

impl Made {
    /// A namespace the run made (for its agents, or for its probe pods).
    pub(crate) fn namespace(client: &kube::Client, name: &str) -> Made {
        Made {
            api: Api::all_with(
                client.clone(),
                &kube::core::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
            ),
            name: name.to_owned(),
            what: format!("Namespace {name}"),
        }
    }
}

/// The objects of `manifests`, Namespaces first, then in file order.
fn items(manifests: &[Manifest]) -> Vec<Item<'_>> {
    let mut all: Vec<Item<'_>> = Vec::new();
    for m in manifests {
        for value in &m.objects {
            all.push(Item {
                file: &m.written,
                value,
                pos: m.pos,
            });
        }
    }
    all.sort_by_key(|i| i.text("/kind") != "Namespace");
    all
}

/// On an existing cluster: create every object of `manifests` that does not exist yet (what
/// exists is the cluster's and is left as it is). Returns what was made (to delete at the end)
/// and what was found already there. On an error, what was made so far is deleted again.
pub(crate) async fn create(
    client: &kube::Client,
    manifests: &[Manifest],
) -> Result<(Vec<Made>, Vec<String>), ManifestError> {
    let mut made = Vec::new();
    let mut found = Vec::new();
    let mut pending = items(manifests);
    let started = tokio::time::Instant::now();
    let deadline = started + APPLY_WAIT;
    loop {
        let mut failed = Vec::new();
        for item in pending {
            match item.create(client).await {
                Ok(Some(m)) => made.push(m),
                Ok(None) => found.push(item.text("/kind") + " " + &item.text("/metadata/name")),
                Err(why) => failed.push((item, why)),
            }
        }
        if failed.is_empty() {
            return Ok((made, found));
        }
        // An object refused for what it is ends it at once; the rest are tried again for a
        // while (a namespace being made or deleted, a kind not served yet).
        // An object still going away is waited for longer: on a real cluster an earlier run's
        // namespace takes its pods' grace period and the namespace controller's passes to go
        // (seen on kind: more than 30 s).
        let refused = failed.iter().position(|(_, f)| f.refused);
        let now = tokio::time::Instant::now();
        // (what would go in a namespace that is going is refused meanwhile: it waits as long)
        let waited_out = now >= deadline
            && (!failed.iter().any(|(_, f)| f.going) || now >= started + DELETING_WAIT);
        if refused.is_some() || waited_out {
            let (item, why) = failed.remove(refused.unwrap_or(0));
            let mut e = item.error(why);
            e.undone = delete(made).await.0;
            return Err(e);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        pending = failed.into_iter().map(|(i, _)| i).collect();
    }
}

/// Delete what a run made, last made first (a Namespace last: it takes its objects with it).
/// Returns a sentence for each, and what was deleted, to wait for with [`gone`]. In the
/// background, as `kubectl delete` does: a namespace's controller deletes what is in it itself,
/// whereas an object deleted in the foreground waits for the garbage collector, which after a
/// controller-manager's restart resyncs first (seen on kind with both cores saturated: a
/// namespace still terminating with all its pods 2 minutes after the run).
pub(crate) async fn delete(made: Vec<Made>) -> (Vec<String>, Vec<Made>) {
    let mut said = Vec::new();
    let mut deleted = Vec::new();
    for m in made.into_iter().rev() {
        match m.api.delete(&m.name, &DeleteParams::background()).await {
            Ok(_) => {
                said.push(format!("deleted {} it created", m.what));
                deleted.push(m);
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => said.push(format!("could not delete {}: {e}", m.what)),
        }
    }
    (said, deleted)
}

/// How long the end of a run waits for what it deleted to be gone (a namespace takes its
/// pods' grace periods and the namespace controller's passes; a controller-manager that lost
/// its lease in the run may be restarting meanwhile).
pub(crate) const GONE_WAIT: Duration = Duration::from_secs(120);

/// Wait until every object of `deleted` is gone (read through the API), for up to
/// [`GONE_WAIT`], saying every 10 s what is still there: a run that ends leaves nothing of its
/// own running behind it. Returns a sentence naming what was still there, if anything.
pub(crate) async fn gone(deleted: Vec<Made>, progress: &mut dyn Progress) -> Option<String> {
    let started = tokio::time::Instant::now();
    let mut left = deleted;
    let mut told = started;
    loop {
        let mut still = Vec::new();
        for m in left {
            // An answer other than "not found" (the API server away a moment) counts as there.
            if !matches!(m.api.get_opt(&m.name).await, Ok(None)) {
                still.push(m);
            }
        }
        left = still;
        if left.is_empty() {
            return None;
        }
        let names = left
            .iter()
            .map(|m| m.what.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let now = tokio::time::Instant::now();
        if now >= started + GONE_WAIT {
            return Some(format!(
                "still going {}s after it was deleted: {names} (its controllers, the namespace controller and the garbage collector, finish it)",
                GONE_WAIT.as_secs()
            ));
        }
        if now >= told + Duration::from_secs(10) {
            told = now;
            progress.say(&format!(
                "waiting for what the run made to be gone: {names} ({}s of up to {}s)",
                (now - started).as_secs(),
                GONE_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Apply every object of `manifests`; returns what was applied (`Kind NS/NAME`), in order.
pub(crate) async fn apply(
    client: &kube::Client,
    manifests: &[Manifest],
) -> Result<Vec<String>, ManifestError> {
    let mut pending = items(manifests);
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
        let refused = failed.iter().position(|(_, f)| f.refused);
        if refused.is_some() || tokio::time::Instant::now() >= deadline {
            let (item, why) = failed.remove(refused.unwrap_or(0));
            return Err(item.error(why));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        pending = failed.into_iter().map(|(i, _)| i).collect();
    }
}
