//! The simulated kube-apiserver: the Kubernetes REST subset the components use, over HTTP/1 on
//! turmoil TCP. Leases, pods (with `binding` and `status`), nodes (with `status`), deployments
//! and replicasets: get, list (label and field selectors; at an exact past resourceVersion, as
//! etcd keeps it), watch (from a resourceVersion; 410 Gone when it is too old), create, update (409 on a stale resourceVersion), delete. Errors are
//! `Status` objects, as upstream sends them. Each write keeps its writer's `managedFields` entry
//! with the time it was taken, to the second, as kube-apiserver's field manager does: a renewal
//! held up on its way is taken after its `renewTime`, and the observer places it then.
//!
//! A watch answers as soon as it has changes to report (and after [`WATCH_MAX`] without): the
//! simulated network carries every exchange whole within its client's 5s timeout. The watcher
//! resumes from the last resourceVersion it saw, as it does when a real API server ends a watch.
//!
//! When etcd is down, without a quorum or electing a leader, or no connection of the API
//! server's etcd client is up, every request waits for it: it is served if etcd is back within
//! [`ETCD_TIMEOUT`] (as a request that TCP or etcd's client held goes through once the way is
//! open), and fails with 500 `etcdserver: request timed out` otherwise, as kube-apiserver
//! answers when its etcd client times out. Otherwise each request goes to one of the members the
//! client is connected to (clientv3 balances round robin over all the API server's requests;
//! drawn, seeded, here), and waits there while a cut holds that connection's bytes
//! ([`super::ETCD_KEEPALIVE`]: the client does not know yet).
//!
//! Links ([`Degraded`]): the API server is one end of every link that carries traffic, so it
//! carries out [`crate::backend::link`]'s model for them all. A cut link between a client's host
//! and the API server holds the request until the link heals before it is served, and the
//! response before it is sent, as TCP retransmits what a partition loses (the client may have
//! given up by then: its timeout); a cut with `mode: reset` ends the connection instead, when
//! the request or its response would cross it. A delayed or lossy link holds each by what the
//! model draws for it; one between the API server and etcd holds each request's round trip to
//! storage. A request runs to its end once it has arrived, even if its client gave up meanwhile
//! (a real API server serves a request whose client has gone). An
//! `api-errors` rule in effect answers a matching request with its status instead of serving
//! it (the user is the one the client authenticates as, [`USER_HEADER`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use super::net::{API_HOST, API_PORT, USER_HEADER};
use super::store::{labels, Resource, Store, StoreError, Writer, RESOURCES};
use crate::backend::api_errors;
use crate::backend::driver::ETCD;
use crate::backend::link::LinkState;
use crate::clock::Clock;
use crate::clock::Rng;
use kubechaos_core::scenario::ApiErrors;

/// How long a starting kube-apiserver waits for a connection to etcd before it exits ("error
/// creating storage factory: etcd grpc connection not ready: context deadline exceeded"): seen
/// on a real kind node (v1.37.2) started while cut off from its etcd, 20 s after its start.
pub(crate) const STORAGE_START: Duration = Duration::from_secs(20);

/// The user a request's client authenticates as ([`USER_HEADER`]; empty when it says none).
fn user_of(parts: &http::request::Parts) -> String {
    parts
        .headers
        .get(USER_HEADER)
        .and_then(|u| u.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// What a kube-apiserver that could not reach etcd at its start says as it exits.
pub(crate) const STORAGE_START_FAILED: &str = "exited: status 1: error creating storage factory: etcd grpc connection not ready: context deadline exceeded";

/// State the API server shares with the rest of the simulated world.
pub struct ApiServer {
    /// What etcd holds.
    pub(crate) store: Arc<Mutex<Store>>,
    /// Whether etcd is running and reachable from the API server (set by the simulation driver).
    pub(crate) etcd_ok: Arc<std::sync::atomic::AtomicBool>,
    /// Timestamps for creationTimestamp.
    pub(crate) clock: Arc<dyn Clock>,
    /// Woken after every write, for watches (shared by the API servers of one etcd cluster).
    pub(crate) changed: Arc<tokio::sync::Notify>,
    /// The cuts, delays, losses and API errors in effect (set by the simulation driver).
    pub(crate) degraded: Arc<Mutex<Degraded>>,
    /// Woken when a link changes (set by the simulation driver).
    pub(crate) links_changed: Arc<tokio::sync::Notify>,
    /// Its host (and process) name: `api-server`, or `api-server-N` of several.
    name: String,
    /// The etcd members its etcd client is connected to now (set by the simulation driver,
    /// [`super::SimWorld`]'s `update_etcd`): each request goes to one of them.
    etcd_members: Arc<Mutex<Vec<String>>>,
    /// Whether one of its etcd client's connections answers (set by the simulation driver): a
    /// starting API server waits for it ([`ApiServer::storage_ready`]).
    etcd_ready: Arc<std::sync::atomic::AtomicBool>,
    /// The store's revision when it last started: its watch cache holds changes from then on
    /// ([`ApiServer::started`]).
    cache_from: std::sync::atomic::AtomicU64,
}

/// The degradation faults in effect on the simulated API server and its links.
pub struct Degraded {
    /// Link directions that are cut or slowed, by (from, to) host.
    pub(crate) links: std::collections::BTreeMap<(String, String), LinkState>,
    /// `api-errors` steps in effect.
    pub(crate) errors: Vec<(usize, ApiErrors)>,
    /// Every draw (delays, losses, error ratios), seeded: a run stays a function of its seed.
    rng: Rng,
    /// Draws of the etcd member a request goes to, among several (seeded too).
    members_rng: Rng,
}

impl Degraded {
    /// Nothing degraded, with draws from `seed`.
    pub fn new(seed: u64) -> Degraded {
        Degraded {
            links: Default::default(),
            errors: Vec::new(),
            rng: Rng::new(seed, "degraded"),
            members_rng: Rng::new(seed, "etcd-members"),
        }
    }

    /// What a message from `from` to `to` meets now: a cut (and whether it resets), or how
    /// much later it arrives (zero on a healthy link).
    fn crossing(&mut self, from: &str, to: &str) -> Crossing {
        let Some(state) = self.links.get(&(from.to_owned(), to.to_owned())) else {
            return Crossing::After(Duration::ZERO);
        };
        if state.cut {
            return if state.reset {
                Crossing::Reset
            } else {
                Crossing::Held
            };
        }
        let rng = &mut self.rng;
        Crossing::After(state.extra(|| rng.next_f64()))
    }
}

/// What a message meets on its link.
enum Crossing {
    /// It arrives after this long.
    After(Duration),
    /// The link is cut: it waits until it heals.
    Held,
    /// The link is cut and resets: the connection ends.
    Reset,
}

/// The connection was reset by a cut with `mode: reset`.
#[derive(Debug)]
pub(crate) struct ConnectionReset;

impl std::fmt::Display for ConnectionReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset by a partition with mode: reset")
    }
}

impl std::error::Error for ConnectionReset {}

/// The longest a watch waits without changes before it answers empty.
pub(crate) const WATCH_MAX: Duration = Duration::from_secs(4);

/// How long a request waits for an unreachable etcd before failing.
pub(crate) const ETCD_TIMEOUT: Duration = Duration::from_secs(3);

impl ApiServer {
    /// An API server over a store.
    pub fn new(
        store: Arc<Mutex<Store>>,
        etcd_ok: Arc<std::sync::atomic::AtomicBool>,
        clock: Arc<dyn Clock>,
        degraded: Arc<Mutex<Degraded>>,
        links_changed: Arc<tokio::sync::Notify>,
    ) -> ApiServer {
        ApiServer {
            store,
            etcd_ok,
            clock,
            changed: Arc::default(),
            degraded,
            links_changed,
            name: API_HOST.to_owned(),
            etcd_members: Arc::new(Mutex::new(vec![ETCD.to_owned()])),
            etcd_ready: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            cache_from: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The same, as API server `name` of several, connected to the etcd members
    /// `etcd_members` says, its watches woken by every write through any of them (`changed`).
    pub(crate) fn named(
        mut self,
        name: &str,
        etcd_members: Arc<Mutex<Vec<String>>>,
        etcd_ready: Arc<std::sync::atomic::AtomicBool>,
        changed: Arc<tokio::sync::Notify>,
    ) -> ApiServer {
        self.name = name.to_owned();
        self.etcd_members = etcd_members;
        self.etcd_ready = etcd_ready;
        self.changed = changed;
        self
    }

    /// As kube-apiserver starts: it serves nothing until its etcd client has a connection that
    /// answers, and exits with status 1 if none does within [`STORAGE_START`]. Returns whether
    /// one did.
    pub(crate) async fn storage_ready(&self) -> bool {
        let ready = || self.etcd_ready.load(std::sync::atomic::Ordering::SeqCst);
        tokio::time::timeout(STORAGE_START, self.until(ready))
            .await
            .is_ok()
    }

    /// As kube-apiserver's watch cache does when it starts: it lists etcd at etcd's revision then
    /// and keeps the changes from there, so a watch from an older resourceVersion is too old (410
    /// Gone) and its client lists again. Whether a client's watch that broke when the API server
    /// stopped resumes depends on that: it does when the last write before the start was one it
    /// saw (its resourceVersion is the revision), else it lists again (as on the local control
    /// plane: both were seen in `api-restart`).
    fn started(&self) {
        let revision = self.store.lock().expect("store lock").revision();
        self.cache_from
            .store(revision, std::sync::atomic::Ordering::SeqCst);
    }

    /// Until `done` says so, looking again whenever the driver says something changed (it
    /// wakes waiters on `links_changed` after every change of a link or of etcd's state).
    async fn until(&self, done: impl Fn() -> bool) {
        loop {
            let changed = self.links_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done() {
                return;
            }
            changed.await;
        }
    }

    /// Until this API server reaches an etcd quorum with a leader again.
    async fn etcd_back(&self) {
        self.until(|| self.etcd_ok.load(std::sync::atomic::Ordering::SeqCst))
            .await
    }

    /// Until its etcd client is no longer connected to `member`.
    async fn given_up(&self, member: &str) {
        self.until(|| {
            !self
                .etcd_members
                .lock()
                .expect("etcd members")
                .iter()
                .any(|m| m == member)
        })
        .await
    }

    /// Carry a message from `from` to `to` across its link: held while it is cut, then for
    /// what a delay or loss draws (a cut made meanwhile holds it again); an error where a cut
    /// resets the connection.
    async fn cross(&self, from: &str, to: &str) -> Result<(), ConnectionReset> {
        loop {
            let changed = self.links_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let crossing = self.degraded.lock().expect("degraded").crossing(from, to);
            match crossing {
                Crossing::Reset => return Err(ConnectionReset),
                Crossing::Held => changed.await,
                Crossing::After(extra) => {
                    if !extra.is_zero() {
                        tokio::time::sleep(extra).await;
                    }
                    // Cut while it was on its way: held (or reset) too.
                    match self
                        .degraded
                        .lock()
                        .expect("degraded")
                        .links
                        .get(&(from.to_owned(), to.to_owned()))
                    {
                        Some(s) if s.cut => continue,
                        _ => return Ok(()),
                    }
                }
            }
        }
    }

    /// Serve until the host is crashed.
    pub async fn serve(self: Arc<Self>) -> turmoil::Result {
        self.started();
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", API_PORT)).await?;
        loop {
            let (stream, peer) = listener.accept().await?;
            let host = turmoil::reverse_lookup(peer.ip()).unwrap_or_default();
            let this = self.clone();
            tokio::task::spawn_local(async move {
                let service = hyper::service::service_fn(move |req| {
                    let this = this.clone();
                    let host = host.clone();
                    async move {
                        // Served to the end even if the client goes: its own task.
                        let served =
                            tokio::task::spawn_local(async move { this.handle(&host, req).await });
                        // A reset ends the connection without an answer.
                        served.await.unwrap_or_else(|_| {
                            Ok(status(
                                StatusCode::INTERNAL_SERVER_ERROR,
                                "InternalError",
                                "the request's task ended",
                            ))
                        })
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    /// A request from a client on `host`: across its link, served, and back.
    async fn handle(
        &self,
        host: &str,
        req: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, ConnectionReset> {
        self.cross(host, &self.name).await?;
        let response = self.serve_request(req).await;
        self.cross(&self.name, host).await?;
        Ok(response)
    }

    /// The `api-errors` rule that answers this request, if one does.
    fn injected(
        &self,
        parts: &http::request::Parts,
        path: &str,
        query: &str,
    ) -> Option<Response<Full<Bytes>>> {
        let mut degraded = self.degraded.lock().expect("degraded");
        if degraded.errors.is_empty() {
            return None;
        }
        let (r, ns, name, sub) = parse_path(path)?;
        let watch = matches!(query_param(query, "watch").as_deref(), Some("true" | "1"));
        let verb = match (&parts.method, name.is_some()) {
            (&Method::GET, _) if watch => "watch",
            (&Method::GET, true) => "get",
            (&Method::GET, false) => "list",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, true) => "delete",
            (&Method::DELETE, false) => "deletecollection",
            _ => return None,
        };
        let resource = match &sub {
            Some(sub) => format!("{}/{sub}", r.plural),
            None => r.plural.to_owned(),
        };
        let user = user_of(parts);
        let req = api_errors::Request {
            verb,
            resource: &resource,
            namespace: ns.as_deref().unwrap_or(""),
            user: &user,
        };
        let Degraded { errors, rng, .. } = &mut *degraded;
        let e = api_errors::failing(errors, req, || rng.next_f64())?;
        let code = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = json_response(code, &api_errors::status(e));
        if let Some(r) = e.retry_after {
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from(r.as_secs()),
            );
        }
        Some(response)
    }

    async fn serve_request(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "could not read the body",
                )
            }
        };
        let query = parts.uri.query().unwrap_or("").to_owned();
        let path = parts.uri.path().trim_matches('/').to_owned();
        if let Some(refused) = self.injected(&parts, &path, &query) {
            return refused;
        }
        if !self.etcd_ok.load(std::sync::atomic::Ordering::SeqCst)
            && tokio::time::timeout(ETCD_TIMEOUT, self.etcd_back())
                .await
                .is_err()
        {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "etcdserver: request timed out",
            );
        }
        // The round trip to etcd, over one of the connections: held while a cut stops its bytes,
        // failed when the keepalive gives the connection up meanwhile. The real balancer takes
        // the connections in turn over all of the API server's requests, its own background ones
        // among them, so the one a client's request lands on is as good as drawn: drawn here
        // (seeded), which also keeps a client whose requests keep a fixed rhythm from always
        // landing on the same one in the simulation's lockstep.
        let member = {
            let members = self.etcd_members.lock().expect("etcd members").clone();
            let i = if members.len() > 1 {
                let draw = self
                    .degraded
                    .lock()
                    .expect("degraded")
                    .members_rng
                    .next_f64();
                ((draw * members.len() as f64) as usize).min(members.len() - 1)
            } else {
                0
            };
            members.get(i).cloned()
        };
        let answered = match member {
            Some(member) => {
                let round_trip = async {
                    self.cross(&self.name, &member).await?;
                    self.cross(&member, &self.name).await
                };
                tokio::select! {
                    r = round_trip => r.is_ok(),
                    () = self.given_up(&member) => false,
                }
            }
            None => false,
        };
        if !answered {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "etcdserver: request timed out",
            );
        }
        if parts.method == Method::GET
            && matches!(query_param(&query, "watch").as_deref(), Some("true" | "1"))
        {
            return self.watch(&path, &query).await;
        }
        let user = user_of(&parts);
        let response = self.route(&parts.method, &path, &query, &body, &user);
        if parts.method != Method::GET && response.status().is_success() {
            self.changed.notify_waiters();
        }
        response
    }

    /// A watch on a collection, from `resourceVersion`; without one (or with "0"), from now,
    /// starting with the current objects as ADDED events.
    async fn watch(&self, path: &str, query: &str) -> Response<Full<Bytes>> {
        let Some((r, ns, None, None)) = parse_path(path) else {
            return status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                &format!("watch is supported on collections only, not on {path}"),
            );
        };
        let label_sel = query_param(query, "labelSelector")
            .and_then(|s| kubechaos_core::selector::parse(&s).ok())
            .unwrap_or_default();
        let field_sel = query_param(query, "fieldSelector").unwrap_or_default();
        let wait = query_param(query, "timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map_or(WATCH_MAX, |t| Duration::from_secs(t).min(WATCH_MAX));
        let deadline = tokio::time::Instant::now() + wait;
        let from = query_param(query, "resourceVersion")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0);
        let cache_from = self.cache_from.load(std::sync::atomic::Ordering::SeqCst);
        if let Some(v) = from.filter(|v| *v < cache_from) {
            return too_old(v, cache_from);
        }
        // No resourceVersion, or "0": as upstream, the watch starts at the current state and
        // begins with a synthetic ADDED event for every object that exists then.
        let mut initial = Vec::new();
        let mut after = match from {
            Some(v) => v,
            None => {
                let store = self.store.lock().expect("store lock");
                for o in store.list(r, ns.as_deref()) {
                    if label_sel.matches(&labels(o)) && field_matches(o, &field_sel) {
                        initial.push(json!({"type": "ADDED", "object": o}));
                    }
                }
                store.revision()
            }
        };
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let mut lines = std::mem::take(&mut initial);
            match self
                .store
                .lock()
                .expect("store lock")
                .changes_since(r, ns.as_deref(), after)
            {
                Err(compacted) => return too_old(after, compacted),
                Ok(changes) => {
                    for c in changes {
                        after = c.revision;
                        if label_sel.matches(&labels(&c.object))
                            && field_matches(&c.object, &field_sel)
                        {
                            lines.push(json!({"type": c.kind, "object": c.object}));
                        }
                    }
                }
            }
            if !lines.is_empty() {
                return watch_response(lines);
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => return watch_response(Vec::new()),
            }
        }
    }

    fn route(
        &self,
        method: &Method,
        path: &str,
        query: &str,
        body: &[u8],
        user: &str,
    ) -> Response<Full<Bytes>> {
        let Some((r, ns, name, sub)) = parse_path(path) else {
            return status(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("the server could not find the requested resource ({path})"),
            );
        };
        let parse_body =
            || serde_json::from_slice::<Value>(body).map_err(|e| format!("invalid JSON body: {e}"));
        let mut store = self.store.lock().expect("store lock");
        let ns_str = ns.as_deref().unwrap_or("");
        let result: Result<(StatusCode, Value), StoreError> =
            match (method, name.as_deref(), sub.as_deref()) {
                (&Method::GET, None, None) => match list(&store, r, ns.as_deref(), query) {
                    Ok(l) => Ok((StatusCode::OK, l)),
                    Err(too_old) => return status(StatusCode::GONE, "Expired", &too_old),
                },
                (&Method::GET, Some(n), None | Some("status")) => store
                    .get(r, ns_str, n)
                    .cloned()
                    .map(|o| (StatusCode::OK, o))
                    .ok_or_else(|| StoreError::NotFound(format!("{} \"{n}\" not found", r.plural))),
                (&Method::POST, None, None) => match parse_body() {
                    Ok(obj) => store
                        .create(r, ns_str, obj, &Writer::new(user, self.clock.wall()))
                        .map(|o| (StatusCode::CREATED, o)),
                    Err(e) => Err(StoreError::BadRequest(e)),
                },
                (&Method::POST, Some(n), Some("binding")) if r.plural == "pods" => {
                    match parse_body() {
                        Ok(b) => match b.pointer("/target/name").and_then(Value::as_str) {
                            Some(node) => store
                                .bind(ns_str, n, node)
                                .map(|o| (StatusCode::CREATED, o)),
                            None => {
                                Err(StoreError::BadRequest("binding has no target.name".into()))
                            }
                        },
                        Err(e) => Err(StoreError::BadRequest(e)),
                    }
                }
                (&Method::PUT, Some(n), None | Some("status")) => match parse_body() {
                    Ok(obj) => store
                        .update(
                            r,
                            ns_str,
                            n,
                            obj,
                            sub.is_some(),
                            &Writer::new(user, self.clock.wall()),
                        )
                        .map(|o| (StatusCode::OK, o)),
                    Err(e) => Err(StoreError::BadRequest(e)),
                },
                (&Method::DELETE, Some(n), None) => {
                    // DeleteOptions come as the body (kube-rs) or in the query.
                    let grace = serde_json::from_slice::<Value>(body)
                        .ok()
                        .and_then(|b| b.get("gracePeriodSeconds").and_then(Value::as_i64))
                        .or_else(|| {
                            query
                                .split('&')
                                .find_map(|kv| kv.strip_prefix("gracePeriodSeconds=")?.parse().ok())
                        });
                    let now = self.clock.wall().to_string();
                    store
                        .delete(r, ns_str, n, grace, &now)
                        .map(|o| (StatusCode::OK, o))
                }
                _ => {
                    return status(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "MethodNotAllowed",
                        &format!("{method} is not supported on {path} by the simulated API server"),
                    );
                }
            };
        match result {
            Ok((code, obj)) => json_response(code, &obj),
            Err(StoreError::NotFound(m)) => status(StatusCode::NOT_FOUND, "NotFound", &m),
            Err(StoreError::Conflict(m)) => status(StatusCode::CONFLICT, "Conflict", &m),
            Err(StoreError::AlreadyExists(m)) => status(StatusCode::CONFLICT, "AlreadyExists", &m),
            Err(StoreError::BadRequest(m)) => status(StatusCode::BAD_REQUEST, "BadRequest", &m),
        }
    }
}

/// What a request path names: resource, namespace, name, subresource.
type PathParts = (
    &'static Resource,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Parse a request path.
fn parse_path(path: &str) -> Option<PathParts> {
    for r in RESOURCES {
        let Some(rest) = path
            .strip_prefix(r.prefix)
            .and_then(|p| p.strip_prefix('/'))
        else {
            continue;
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let (ns, rest) = match parts.as_slice() {
            ["namespaces", ns, rest @ ..] if r.namespaced => (Some(ns.to_string()), rest),
            rest => (None, rest),
        };
        match rest {
            [plural] if *plural == r.plural => return Some((r, ns, None, None)),
            [plural, name] if *plural == r.plural => {
                return Some((r, ns, Some(name.to_string()), None))
            }
            [plural, name, sub] if *plural == r.plural => {
                return Some((r, ns, Some(name.to_string()), Some(sub.to_string())))
            }
            _ => {}
        }
    }
    None
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A watch's answer: its events, one JSON object a line (none: it ended with nothing to say).
fn watch_response(lines: Vec<Value>) -> Response<Full<Bytes>> {
    let mut body = Vec::new();
    for l in lines {
        body.extend(serde_json::to_vec(&l).expect("json"));
        body.push(b'\n');
    }
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

/// A watch from `after`, older than the oldest change kept (`oldest`): as upstream, a watch
/// whose only event is a 410 `Expired` Status.
fn too_old(after: u64, oldest: u64) -> Response<Full<Bytes>> {
    watch_response(vec![json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "reason": "Expired", "code": 410,
        "message": format!("too old resource version: {after} ({oldest})"),
    }})])
}

/// A list, of the objects as they are, or (`resourceVersion=N&resourceVersionMatch=Exact`) as
/// they were at revision N, as kube-apiserver reads etcd's past; for a revision compacted away,
/// the message of upstream's 410 `Expired`.
fn list(store: &Store, r: &Resource, ns: Option<&str>, query: &str) -> Result<Value, String> {
    let label_sel = query_param(query, "labelSelector")
        .and_then(|s| kubechaos_core::selector::parse(&s).ok())
        .unwrap_or_default();
    let field_sel = query_param(query, "fieldSelector").unwrap_or_default();
    let exact = (query_param(query, "resourceVersionMatch").as_deref() == Some("Exact"))
        .then(|| query_param(query, "resourceVersion")?.parse::<u64>().ok())
        .flatten();
    let (objects, revision) = match exact {
        Some(at) => match store.list_at(r, ns, at) {
            Ok(objects) => (objects, at),
            Err(oldest) => return Err(format!("too old resource version: {at} ({oldest})")),
        },
        None => (
            store.list(r, ns).into_iter().cloned().collect(),
            store.revision(),
        ),
    };
    let items: Vec<Value> = objects
        .into_iter()
        .filter(|o| label_sel.matches(&labels(o)))
        .filter(|o| field_matches(o, &field_sel))
        .collect();
    Ok(json!({
        "apiVersion": r.api_version,
        "kind": format!("{}List", r.kind),
        "metadata": {"resourceVersion": revision.to_string()},
        "items": items,
    }))
}

/// Field selectors the components use: `spec.nodeName=X` (empty X: unbound), `metadata.name=X`,
/// and `!=` forms.
fn field_matches(obj: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|req| {
        let (field, want, negate) = match req.split_once("!=") {
            Some((f, v)) => (f, v, true),
            None => match req.split_once('=') {
                Some((f, v)) => (f, v.trim_start_matches('='), false),
                None => return true,
            },
        };
        let pointer = format!("/{}", field.replace('.', "/"));
        let have = obj.pointer(&pointer).and_then(Value::as_str).unwrap_or("");
        (have == want) != negate
    })
}

fn json_response(code: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            serde_json::to_vec(body).expect("json"),
        )))
        .expect("response")
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    json_response(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client without a read timeout meets across a cut of `cut` (virtual time): its
    /// request is answered after the heal (hold) or fails at once (reset). Returns when it was
    /// answered and whether it succeeded.
    fn across_a_cut(cut: Duration, reset: bool) -> (Duration, bool) {
        use std::sync::atomic::AtomicBool;
        let mut sim = turmoil::Builder::new()
            .tick_duration(Duration::from_millis(20))
            .simulation_duration(Duration::from_secs(600))
            .build();
        let degraded = Arc::new(Mutex::new(Degraded::new(1)));
        let changed = Arc::new(tokio::sync::Notify::new());
        let api = Arc::new(ApiServer::new(
            Arc::default(),
            Arc::new(AtomicBool::new(true)),
            Arc::new(crate::clock::SimClock {
                epoch: crate::backend::sim::epoch(),
            }),
            degraded.clone(),
            changed.clone(),
        ));
        sim.host(API_HOST, move || api.clone().serve());
        let state = LinkState {
            cut: true,
            reset,
            ..Default::default()
        };
        for (from, to) in [("client", API_HOST), (API_HOST, "client")] {
            degraded
                .lock()
                .unwrap()
                .links
                .insert((from.into(), to.into()), state.clone());
        }
        let answered: Arc<Mutex<Option<(Duration, bool)>>> = Arc::default();
        let out = answered.clone();
        sim.client("client", async move {
            // No read timeout: a day.
            let client = super::super::net::SimTransport::client_as(
                Duration::from_secs(86_400),
                "client",
                "u",
                false,
            );
            let api = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::all(client);
            let r = api.list(&Default::default()).await;
            if let Err(e) = &r {
                eprintln!("the request failed: {e}");
            }
            *out.lock().unwrap() = Some((turmoil::elapsed(), r.is_ok()));
            Ok(())
        });
        let mut healed = false;
        while answered.lock().unwrap().is_none() {
            if !healed && sim.elapsed() >= cut {
                degraded.lock().unwrap().links.clear();
                changed.notify_waiters();
                healed = true;
            }
            sim.step().unwrap();
        }
        let got = answered.lock().unwrap().take().unwrap();
        got
    }

    /// A cut holds what crosses it, as TCP retransmits what a partition loses: a client without
    /// a read timeout gets its answer once a 3-minute cut heals. A reset cut fails it at once.
    #[test]
    fn a_client_without_a_read_timeout_recovers_after_a_three_minute_cut() {
        let (at, ok) = across_a_cut(Duration::from_secs(180), false);
        assert!(ok, "answered after the heal");
        assert!(
            at >= Duration::from_secs(180) && at < Duration::from_secs(182),
            "answered at {at:?}"
        );
        let (at, ok) = across_a_cut(Duration::from_secs(180), true);
        assert!(!ok, "a reset fails the request");
        assert!(at < Duration::from_secs(1), "at once, not at {at:?}");
    }

    #[test]
    fn paths_parse() {
        let (r, ns, name, sub) =
            parse_path("api/v1/namespaces/kube-system/pods/p/binding").unwrap();
        assert_eq!(
            (r.plural, ns.as_deref(), name.as_deref(), sub.as_deref()),
            ("pods", Some("kube-system"), Some("p"), Some("binding"))
        );
        let (r, ns, name, _) = parse_path("apis/coordination.k8s.io/v1/leases").unwrap();
        assert_eq!((r.plural, ns, name), ("leases", None, None));
        let (r, _, name, sub) = parse_path("api/v1/nodes/node-0/status").unwrap();
        assert_eq!(
            (r.plural, name.as_deref(), sub.as_deref()),
            ("nodes", Some("node-0"), Some("status"))
        );
        assert!(parse_path("api/v1/secrets").is_none());
    }

    #[test]
    fn field_selectors() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {}});
        assert!(field_matches(&pod, "spec.nodeName="));
        assert!(!field_matches(&pod, "spec.nodeName!="));
        assert!(field_matches(&pod, "metadata.name=p"));
        assert_eq!(percent_decode("spec.nodeName%3D"), "spec.nodeName=");
    }
}
