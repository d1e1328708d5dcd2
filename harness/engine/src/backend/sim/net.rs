//! The simulated network between components and the API server: a tower service that carries
//! a kube-rs `Client`'s requests over turmoil's TCP.
//!
//! One connection per request, bounded by a timeout that covers connecting, sending and reading
//! the whole body: turmoil partitions drop packets silently (as a real network does), so a
//! client without a timeout would hang forever.
//!
//! Each client says who it is in [`USER_HEADER`] (the user its credentials authenticate as on a
//! real cluster; `api-errors` matches it). A client that models client-go's REST client also
//! does what client-go does with an answer of 429 or 5xx that carries `Retry-After`: it waits
//! that many seconds and sends the request again, up to 10 times, within its timeout
//! (`rest.checkWait`, `maxRetries` 10 in client-go's `rest/with_retry.go`), and a GET whose
//! connection was reset or closed before the answer is sent again after a second, as client-go
//! makes an artificial `Retry-After: 1` of it (`rest/request.go`'s `isErrRetryableFunc`,
//! `IsConnectionReset`/`IsProbableEOF`); kube-rs, which kubechaos's own programs use, does not
//! retry.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

/// The API server's port in the simulation.
pub(crate) const API_PORT: u16 = 6443;
/// The API server's host name in the simulation.
pub(crate) const API_HOST: &str = "api-server";

/// The API servers of the simulation behind their one address, as a TCP load balancer spreads
/// connections: a client lands on the API server [`crate::backend::landing`] names and stays
/// there while it is up, as a client's long-lived connection does, even when that API server
/// has lost etcd; a client whose API server is down moves to the next one that is up, as the
/// balancer sends a new connection (the local backend's proxies do the same).
/// kubechaos's observer is not part of the system under test: it reads through any API server
/// that is up and reaches etcd (as through a balancer that checks `/readyz`). One API server:
/// every client reaches it.
#[derive(Debug)]
pub struct Balancer {
    /// Host names, in order.
    names: Vec<String>,
    /// Which are up (set by the simulation driver).
    up: Vec<std::sync::atomic::AtomicBool>,
    /// Which reach an etcd quorum (the API servers' own flags).
    ready: Vec<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Balancer {
    /// API servers `names`, all up, each reaching etcd while its flag in `ready` says so.
    pub fn new(
        names: Vec<String>,
        ready: Vec<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> Balancer {
        let up = names.iter().map(|_| true.into()).collect();
        Balancer { names, up, ready }
    }

    /// Mark one up or down.
    pub(crate) fn set_up(&self, name: &str, up: bool) {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            self.up[i].store(up, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The API server a client named `client` lands on now.
    fn pick(&self, client: &str) -> &str {
        use std::sync::atomic::Ordering::SeqCst;
        let n = self.names.len();
        let observer = client == OBSERVER;
        let first = crate::backend::landing(client, n);
        (0..n)
            .map(|k| (first + k) % n)
            .find(|i| self.up[*i].load(SeqCst) && (!observer || self.ready[*i].load(SeqCst)))
            .map_or(self.names[first].as_str(), |i| self.names[i].as_str())
    }
}

thread_local! {
    /// The balancer of the simulation running on this thread (each runs on one thread).
    static BALANCER: std::cell::RefCell<Option<std::sync::Arc<Balancer>>> = const { std::cell::RefCell::new(None) };
}

/// Put `b` in front of this thread's simulation's API servers.
pub(crate) fn set_balancer(b: std::sync::Arc<Balancer>) {
    BALANCER.with(|cell| *cell.borrow_mut() = Some(b));
}

/// The API server host `client` reaches now.
fn api_host(client: &str) -> String {
    BALANCER.with(|cell| {
        cell.borrow()
            .as_ref()
            .map_or(API_HOST.to_owned(), |b| b.pick(client).to_owned())
    })
}

/// The header in which a simulated client names the user it authenticates as.
pub(crate) const USER_HEADER: &str = "x-kubechaos-user";

/// The client name of kubechaos's own clients (the observer, the bootstrap).
const OBSERVER: &str = "kubechaos";

/// The user kubechaos's own clients authenticate as (the local backend's admin certificate).
pub(crate) const ADMIN_USER: &str = "kubechaos-admin";

/// client-go's `maxRetries` of a REST request answered with `Retry-After`.
const CLIENT_GO_RETRIES: u32 = 10;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A tower service for `kube::Client::new` over turmoil TCP.
#[derive(Clone, Debug)]
pub struct SimTransport {
    timeout: Duration,
    /// The client's process (or host) name, which picks its API server.
    name: String,
    user: String,
    /// Retry on `Retry-After`, as client-go does.
    client_go: bool,
}

impl SimTransport {
    /// A transport of client `name` whose requests time out after `timeout`, authenticated as
    /// `user`.
    pub(crate) fn new(timeout: Duration, name: &str, user: &str, client_go: bool) -> Self {
        SimTransport {
            timeout,
            name: name.to_owned(),
            user: user.to_owned(),
            client_go,
        }
    }

    /// A kube-rs client of kubechaos's own (the observer, the bootstrap) that talks to the
    /// simulated API server.
    pub fn client(timeout: Duration) -> kube::Client {
        Self::client_as(timeout, OBSERVER, ADMIN_USER, false)
    }

    /// A client `name` authenticated as `user`; `client_go`: it retries as client-go does.
    pub(crate) fn client_as(
        timeout: Duration,
        name: &str,
        user: &str,
        client_go: bool,
    ) -> kube::Client {
        kube::Client::new(SimTransport::new(timeout, name, user, client_go), "default")
    }
}

/// One exchange on a fresh connection to API server `host`.
async fn exchange(
    host: &str,
    req: Request<Full<Bytes>>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let stream = turmoil::net::TcpStream::connect((host, API_PORT)).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = sender.send_request(req).await?;
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await?.to_bytes();
    Ok(Response::from_parts(parts, Full::new(bytes)))
}

/// Whether an exchange failed as client-go retries a GET: the connection reset, or closed
/// before the answer (Go's `IsConnectionReset`, `IsProbableEOF`).
fn connection_lost(e: &BoxError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
    while let Some(err) = source {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_closed() {
                return true;
            }
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::UnexpectedEof
            ) {
                return true;
            }
        }
        source = err.source();
    }
    false
}

/// client-go's `checkWait`: the seconds to wait before a retry, for a 429 or 5xx with a
/// `Retry-After` of whole seconds.
fn retry_after(resp: &Response<Full<Bytes>>) -> Option<u64> {
    let code = resp.status().as_u16();
    if code != 429 && code < 500 {
        return None;
    }
    resp.headers()
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

impl tower::Service<Request<kube::client::Body>> for SimTransport {
    type Response = Response<Full<Bytes>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let timeout = self.timeout;
        let user = self.user.clone();
        let name = self.name.clone();
        let client_go = self.client_go;
        Box::pin(async move {
            let run = async move {
                let (mut parts, body) = req.into_parts();
                let body = body.collect().await?.to_bytes();
                parts
                    .headers
                    .insert(USER_HEADER, http::HeaderValue::from_str(&user)?);
                let get = parts.method == http::Method::GET;
                let mut retries = 0;
                loop {
                    let req = Request::from_parts(parts.clone(), Full::new(body.clone()));
                    let resp = match exchange(&api_host(&name), req).await {
                        Ok(resp) => resp,
                        Err(e)
                            if client_go
                                && get
                                && retries < CLIENT_GO_RETRIES
                                && connection_lost(&e) =>
                        {
                            retries += 1;
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    match retry_after(&resp) {
                        Some(secs) if client_go && retries < CLIENT_GO_RETRIES => {
                            retries += 1;
                            tokio::time::sleep(Duration::from_secs(secs)).await;
                        }
                        _ => return Ok::<_, BoxError>(resp),
                    }
                }
            };
            match tokio::time::timeout(timeout, run).await {
                Ok(result) => result,
                Err(_) => Err(format!("request to {API_HOST} timed out after {timeout:?}").into()),
            }
        })
    }
}
