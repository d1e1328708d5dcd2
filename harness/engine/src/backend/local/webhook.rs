//! `api-errors` on the local control plane: a validating admission webhook that kubechaos serves
//! and the real kube-apiserver calls for every write. While a rule is in effect, a matching
//! request is denied with the rule's status (and `retryAfterSeconds`), and kube-apiserver
//! answers the client with that code and its `Retry-After` header (`webhook/errors.ToStatusErr`
//! keeps a denial's code of 400 or more; `responsewriters.ErrorNegotiated` writes the header).
//! Otherwise every request is allowed.
//!
//! Admission sees writes only: `create`, `update`, `patch` (an UPDATE whose options are
//! `PatchOptions`) and `delete`; reads (`get`, `list`, `watch`) and `deletecollection` (admitted
//! item by item as DELETE) are refused before a local run. The configuration's failure policy
//! is `Ignore`, so a webhook that does not answer fails nothing.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use super::error::LocalError;
use crate::backend::api_errors;
use crate::clock::Rng;
use kubechaos_core::scenario::ApiErrors;

/// The name of the ValidatingWebhookConfiguration kubechaos creates.
pub(crate) const CONFIGURATION: &str = "kubechaos-api-errors";

/// The verbs admission sees, and so the only ones `api-errors` can match on the local backend.
pub(crate) const ADMITTED_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];

/// The rules in effect, and the draws of their ratios.
struct Rules {
    active: Vec<(usize, ApiErrors)>,
    rng: Rng,
}

/// A running webhook. Dropping it stops it.
pub(crate) struct Webhook {
    /// Its port on 127.0.0.1.
    port: u16,
    /// Its self-signed certificate (the configuration's `caBundle`).
    cert_pem: String,
    rules: Arc<Mutex<Rules>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Webhook {
    /// Serve on a free port of 127.0.0.1 (within a Tokio runtime), allowing everything.
    pub(crate) fn start() -> Result<Webhook, LocalError> {
        let (acceptor, cert_pem) = super::kubelet::self_signed_tls()
            .map_err(|e| LocalError::Launch(format!("the api-errors webhook: {e}")))?;
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(|l| l.local_addr().map(|a| (l, a.port())))
            .and_then(|(l, port)| tokio::net::TcpListener::from_std(l).map(|l| (l, port)));
        let (listener, port) = listener.map_err(|e| LocalError::Machine {
            what: "cannot listen on 127.0.0.1 for the api-errors webhook".to_owned(),
            source: Some(e),
        })?;
        let rules = Arc::new(Mutex::new(Rules {
            active: Vec::new(),
            rng: Rng::from_time("api-errors"),
        }));
        let shared = rules.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let rules = shared.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let rules = rules.clone();
                        async move { Ok::<_, Infallible>(review(&rules, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Ok(Webhook {
            port,
            cert_pem,
            rules,
            task,
        })
    }

    /// The rules in effect from now on.
    pub(crate) fn set(&self, active: &[(usize, ApiErrors)]) {
        self.rules.lock().expect("rules").active = active.to_vec();
    }

    /// The ValidatingWebhookConfiguration that makes the API server call it for every write.
    pub(crate) fn configuration(&self) -> Value {
        use base64::Engine;
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION},
            "webhooks": [{
                "name": "api-errors.kubechaos.io",
                "clientConfig": {
                    "url": format!("https://127.0.0.1:{}/review", self.port),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(&self.cert_pem),
                },
                "rules": [{
                    "operations": ["CREATE", "UPDATE", "DELETE"],
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "resources": ["*/*"],
                    "scope": "*",
                }],
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }],
        })
    }
}

/// The request an AdmissionReview asks about, in `api-errors`' terms: (verb, resource with
/// subresource, namespace, user).
fn attributes(request: &Value) -> Option<(String, String, String, String)> {
    let text = |p: &str| request.pointer(p).and_then(Value::as_str).unwrap_or("");
    let verb = match text("/operation") {
        "CREATE" => "create",
        "UPDATE" if text("/options/kind") == "PatchOptions" => "patch",
        "UPDATE" => "update",
        "DELETE" => "delete",
        _ => return None,
    };
    let mut resource = text("/resource/resource").to_owned();
    if !text("/subResource").is_empty() {
        resource = format!("{resource}/{}", text("/subResource"));
    }
    Some((
        verb.to_owned(),
        resource,
        text("/namespace").to_owned(),
        text("/userInfo/username").to_owned(),
    ))
}

/// The answer to one AdmissionReview: allowed, or denied by the rule that matches.
fn answer(rules: &Mutex<Rules>, review: &Value) -> Value {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let mut rules = rules.lock().expect("rules");
    let denied = attributes(request).and_then(|(verb, resource, namespace, user)| {
        let Rules { active, rng } = &mut *rules;
        let req = api_errors::Request {
            verb: &verb,
            resource: &resource,
            namespace: &namespace,
            user: &user,
        };
        api_errors::failing(active, req, || rng.next_f64()).cloned()
    });
    let response = match denied {
        None => json!({"uid": uid, "allowed": true}),
        Some(e) => {
            let mut status = api_errors::status(&e);
            // Only the Status fields admission carries over.
            if let Some(o) = status.as_object_mut() {
                o.remove("kind");
                o.remove("apiVersion");
            }
            json!({"uid": uid, "allowed": false, "status": status})
        }
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
}

async fn review(rules: &Mutex<Rules>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let (code, body) = match serde_json::from_slice::<Value>(&body) {
        Ok(review) => (StatusCode::OK, answer(rules, &review).to_string()),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            format!("not an AdmissionReview: {e}"),
        ),
    };
    Response::builder()
        .status(code)
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubechaos_core::scenario::Ratio;

    fn review(operation: &str, options: &str, resource: &str, sub: &str, user: &str) -> Value {
        json!({"request": {
            "uid": "u-1", "operation": operation, "options": {"kind": options},
            "resource": {"group": "coordination.k8s.io", "version": "v1", "resource": resource},
            "subResource": sub, "namespace": "kube-system",
            "userInfo": {"username": user},
        }})
    }

    fn rules(e: ApiErrors) -> Mutex<Rules> {
        Mutex::new(Rules {
            active: vec![(0, e)],
            rng: Rng::new(1, "t"),
        })
    }

    #[test]
    fn a_matching_write_is_denied_with_the_rules_status_and_the_rest_allowed() {
        let r = rules(ApiErrors {
            status: 429,
            ratio: Ratio::new(1.0),
            retry_after: Some(std::time::Duration::from_secs(5)),
            verbs: vec!["update".into()],
            resources: vec!["leases".into()],
            namespaces: Vec::new(),
            users: vec!["system:kube-scheduler".into()],
        });
        let denied = answer(
            &r,
            &review(
                "UPDATE",
                "UpdateOptions",
                "leases",
                "",
                "system:kube-scheduler",
            ),
        );
        assert_eq!(denied["response"]["uid"], "u-1");
        assert_eq!(denied["response"]["allowed"], false);
        assert_eq!(denied["response"]["status"]["code"], 429);
        assert_eq!(
            denied["response"]["status"]["details"]["retryAfterSeconds"],
            5
        );
        for allowed in [
            review(
                "UPDATE",
                "PatchOptions",
                "leases",
                "",
                "system:kube-scheduler",
            ),
            review(
                "CREATE",
                "CreateOptions",
                "leases",
                "",
                "system:kube-scheduler",
            ),
            review("UPDATE", "UpdateOptions", "leases", "", "kubechaos-admin"),
            review(
                "UPDATE",
                "UpdateOptions",
                "pods",
                "status",
                "system:kube-scheduler",
            ),
        ] {
            assert_eq!(
                answer(&r, &allowed)["response"]["allowed"],
                true,
                "{allowed}"
            );
        }
    }

    #[test]
    fn subresources_and_patches_are_named_as_the_api_names_them() {
        let (verb, resource, ns, user) =
            attributes(&review("CREATE", "CreateOptions", "pods", "binding", "u")["request"])
                .unwrap();
        assert_eq!(
            (verb.as_str(), resource.as_str(), ns.as_str(), user.as_str()),
            ("create", "pods/binding", "kube-system", "u")
        );
        let (verb, ..) =
            attributes(&review("UPDATE", "PatchOptions", "leases", "", "u")["request"]).unwrap();
        assert_eq!(verb, "patch");
        assert!(attributes(&review("CONNECT", "", "pods", "exec", "u")["request"]).is_none());
    }
}
