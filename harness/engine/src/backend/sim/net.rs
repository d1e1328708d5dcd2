//! The simulated network between components and the API server: a tower service that carries
//! a kube-rs `Client`'s requests over turmoil's TCP.
//!
//! One connection per request, bounded by a timeout that covers connecting, sending and reading
//! the whole body: turmoil partitions drop packets silently (as a real network does), so a
//! client without a timeout would hang forever.

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

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A tower service for `kube::Client::new` over turmoil TCP.
#[derive(Clone, Debug)]
pub struct SimTransport {
    timeout: Duration,
}

impl SimTransport {
    /// A transport whose requests time out after `timeout`.
    pub(crate) fn new(timeout: Duration) -> Self {
        SimTransport { timeout }
    }

    /// A kube-rs client that talks to the simulated API server.
    pub fn client(timeout: Duration) -> kube::Client {
        kube::Client::new(SimTransport::new(timeout), "default")
    }
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
        Box::pin(async move {
            let exchange = async move {
                let stream = turmoil::net::TcpStream::connect((API_HOST, API_PORT)).await?;
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                let resp = sender.send_request(req).await?;
                let (parts, body) = resp.into_parts();
                let bytes = body.collect().await?.to_bytes();
                Ok::<_, BoxError>(Response::from_parts(parts, Full::new(bytes)))
            };
            match tokio::time::timeout(timeout, exchange).await {
                Ok(result) => result,
                Err(_) => Err(format!("request to {API_HOST} timed out after {timeout:?}").into()),
            }
        })
    }
}
