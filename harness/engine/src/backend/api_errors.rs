//! What `api-errors` does to one request, the same on every world that carries it out (the
//! simulated API server; on the local backend, the admission webhook the real API server
//! calls): which step's rule answers it, and the `Status` it answers with, as kube-apiserver
//! writes its errors.

use kubechaos_core::scenario::ApiErrors;

/// One request, as the API server's authorization sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a> {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub(crate) verb: &'a str,
    /// Plural resource, with `/subresource` (`pods/binding`).
    pub(crate) resource: &'a str,
    /// Empty for cluster-scoped requests.
    pub(crate) namespace: &'a str,
    /// The authenticated user.
    pub(crate) user: &'a str,
}

/// The rule that fails `req`, if one does: the first matching step in effect whose ratio the
/// draw (`uniform`, in [0, 1), one per matching rule) falls under.
pub(crate) fn failing<'r>(
    active: &'r [(usize, ApiErrors)],
    req: Request<'_>,
    mut uniform: impl FnMut() -> f64,
) -> Option<&'r ApiErrors> {
    active
        .iter()
        .map(|(_, e)| e)
        .filter(|e| e.matches(req.verb, req.resource, req.namespace, req.user))
        .find(|e| e.ratio.is_whole() || uniform() < e.ratio.get())
}

/// The `reason` kube-apiserver writes in a `Status` with this code (`metav1.StatusReason`).
pub(crate) fn reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// The message of an injected error, saying who made it.
pub(crate) fn message(e: &ApiErrors) -> String {
    format!(
        "kubechaos api-errors: answered {} instead of serving the request",
        e.status
    )
}

/// The `Status` object of an injected error, with `retryAfterSeconds` when it has a
/// `Retry-After` (as kube-apiserver's `Status` carries it beside the header).
pub(crate) fn status(e: &ApiErrors) -> serde_json::Value {
    let mut s = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message(e),
        "reason": reason(e.status),
        "code": e.status,
    });
    if let Some(r) = e.retry_after {
        s["details"] = serde_json::json!({"retryAfterSeconds": r.as_secs()});
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubechaos_core::scenario::Ratio;

    fn rule(ratio: f64, verbs: &[&str], users: &[&str]) -> ApiErrors {
        ApiErrors {
            status: 500,
            ratio: Ratio::new(ratio),
            retry_after: None,
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            resources: vec!["leases".into()],
            namespaces: Vec::new(),
            users: users.iter().map(|s| s.to_string()).collect(),
        }
    }

    const UPDATE: Request<'static> = Request {
        verb: "update",
        resource: "leases",
        namespace: "kube-system",
        user: "system:kube-scheduler",
    };

    #[test]
    fn a_request_fails_when_a_rule_matches_it_and_the_draw_falls_under_its_ratio() {
        let active = [(0, rule(0.5, &["update"], &[]))];
        assert!(failing(&active, UPDATE, || 0.2).is_some());
        assert!(failing(&active, UPDATE, || 0.7).is_none());
        let get = Request {
            verb: "get",
            ..UPDATE
        };
        assert!(failing(&active, get, || 0.0).is_none(), "other verbs pass");
        let pods = Request {
            resource: "pods",
            ..UPDATE
        };
        assert!(
            failing(&active, pods, || 0.0).is_none(),
            "other resources pass"
        );
        let whole = [(3, rule(1.0, &[], &["system:kube-scheduler"]))];
        assert!(failing(&whole, get, || panic!("no draw for a whole ratio")).is_some());
        let other = Request {
            user: "kubechaos-admin",
            ..get
        };
        assert!(failing(&whole, other, || 0.0).is_none(), "other users pass");
    }

    #[test]
    fn the_status_is_kube_apiservers_with_its_retry_after() {
        let mut e = rule(1.0, &["update"], &[]);
        e.status = 429;
        e.retry_after = Some(std::time::Duration::from_secs(5));
        let s = status(&e);
        assert_eq!(s["code"], 429);
        assert_eq!(s["reason"], "TooManyRequests");
        assert_eq!(s["details"]["retryAfterSeconds"], 5);
    }
}
