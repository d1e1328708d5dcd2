//! The part of the kubelet's API that the API server proxies `pods/log` to (`kubectl logs`, and
//! the kube backend's log following when the local control plane is used as an existing
//! cluster): `GET /containerLogs/NAMESPACE/POD/CONTAINER` with `follow`, `timestamps`,
//! `sinceTime`, `tailLines` and `previous`, over HTTPS, for the program pods the fake nodes run.
//!
//! Every fake node reports `InternalIP` 127.0.0.1 and this server's port as its kubelet
//! endpoint. Its certificate is self-signed: kube-apiserver, as started here (no
//! `--kubelet-certificate-authority`), does not verify the kubelet's, as a default kubeadm
//! cluster does not. A container's log is its incarnation's file (`pods/NS_POD/logs/N.log`, each
//! line after its RFC 3339 time, as the kubelet keeps it); a followed log ends when a newer
//! incarnation starts or the pod is gone, as the kubelet's ends with its container.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::error::LocalError;

/// How often a followed log is looked at for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A running log endpoint. Dropping it stops it.
pub(crate) struct Kubelet {
    /// Its port on 127.0.0.1.
    pub(crate) port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Kubelet {
    /// Serve the logs of the program pods under `run/pods/`, on a free port of 127.0.0.1.
    pub(crate) fn start(run: &Path) -> Result<Kubelet, LocalError> {
        let machine = |what: &str| {
            let what = what.to_owned();
            move |e: std::io::Error| LocalError::Machine {
                what,
                source: Some(e),
            }
        };
        let (acceptor, _) = self_signed_tls()
            .map_err(|e| LocalError::Launch(format!("the kubelet's log endpoint: {e}")))?;
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(machine(
            "cannot listen on 127.0.0.1 for the kubelet's log endpoint",
        ))?;
        listener.set_nonblocking(true).map_err(machine(
            "cannot listen on 127.0.0.1 for the kubelet's log endpoint",
        ))?;
        let port = listener
            .local_addr()
            .map_err(machine(
                "cannot listen on 127.0.0.1 for the kubelet's log endpoint",
            ))?
            .port();
        let listener = tokio::net::TcpListener::from_std(listener).map_err(machine(
            "cannot listen on 127.0.0.1 for the kubelet's log endpoint",
        ))?;
        let pods = run.join("pods");
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let pods = pods.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let pods = pods.clone();
                        async move { Ok::<_, Infallible>(logs(&pods, req)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Ok(Kubelet { port, task })
    }
}

/// A TLS acceptor for 127.0.0.1 and `localhost` with a self-signed certificate, and that
/// certificate (PEM): what the servers kubechaos runs beside the local control plane (the
/// kubelet's log endpoint, the api-errors webhook) present to the API server.
pub(crate) fn self_signed_tls() -> Result<(tokio_rustls::TlsAcceptor, String), String> {
    let key = rcgen::KeyPair::generate().map_err(|e| format!("cannot make a key: {e}"))?;
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .and_then(|mut p| {
            p.subject_alt_names
                .push(rcgen::SanType::IpAddress([127, 0, 0, 1].into()));
            p.self_signed(&key)
        })
        .map_err(|e| format!("cannot make a certificate: {e}"))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS: {e}"))?
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .map_err(|e| format!("TLS: {e}"))?;
    Ok((
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        cert.pem(),
    ))
}

fn text(code: StatusCode, message: String) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("Content-Type", "text/plain")
        .body(http_body_util::Full::new(Bytes::from(message)).boxed())
        .expect("response")
}

/// What a `containerLogs` request asks for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Ask {
    namespace: String,
    pod: String,
    follow: bool,
    timestamps: bool,
    previous: bool,
    since: Option<String>,
    tail: Option<usize>,
}

fn parse(path: &str, query: &str) -> Option<Ask> {
    let rest = path.strip_prefix("/containerLogs/")?;
    let mut parts = rest.split('/');
    let (namespace, pod) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut ask = Ask {
        namespace,
        pod,
        ..Ask::default()
    };
    for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
        let v = v.replace("%3A", ":").replace("%3a", ":");
        match k {
            "follow" => ask.follow = v == "true",
            "timestamps" => ask.timestamps = v == "true",
            "previous" => ask.previous = v == "true",
            "sinceTime" => ask.since = Some(v),
            "tailLines" => ask.tail = v.parse().ok(),
            _ => {}
        }
    }
    Some(ask)
}

/// The incarnations whose logs a pod has, in order.
fn incarnations(dir: &Path) -> Vec<u32> {
    let mut found: Vec<u32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
        .collect();
    found.sort_unstable();
    found
}

/// A line as served: with or without its time; `None` if before `since`.
fn serve_line(line: &str, ask: &Ask) -> Option<String> {
    let (stamp, text) = line.split_once(' ').unwrap_or(("", line));
    if ask.since.as_deref().is_some_and(|s| stamp < s) {
        return None;
    }
    Some(if ask.timestamps {
        format!("{line}\n")
    } else {
        format!("{text}\n")
    })
}

fn logs(pods: &Path, req: Request<Incoming>) -> Response<Body> {
    let Some(ask) = parse(req.uri().path(), req.uri().query().unwrap_or("")) else {
        return text(
            StatusCode::NOT_FOUND,
            "only /containerLogs/NAMESPACE/POD/CONTAINER is served".into(),
        );
    };
    let dir = pods
        .join(format!("{}_{}", ask.namespace, ask.pod))
        .join("logs");
    let all = incarnations(&dir);
    let chosen = if ask.previous {
        all.len().checked_sub(2).map(|i| all[i])
    } else {
        all.last().copied()
    };
    let Some(inc) = chosen else {
        return text(
            StatusCode::NOT_FOUND,
            format!(
                "no {}log of pod {}/{}: its container has not run a command on this machine",
                if ask.previous { "previous " } else { "" },
                ask.namespace,
                ask.pod
            ),
        );
    };
    let file = dir.join(format!("{inc}.log"));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(stream(file, dir, inc, ask, tx));
    let body = StreamBody::new(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    }));
    Response::builder()
        .status(StatusCode::OK)
        .header("Content-Type", "text/plain")
        .body(body.boxed())
        .expect("response")
}

/// Send the lines of `file` (incarnation `inc` in `dir`), then, when following, the lines
/// that come, until a newer incarnation starts, the pod is gone, or the reader leaves.
async fn stream(
    file: PathBuf,
    dir: PathBuf,
    inc: u32,
    ask: Ask,
    tx: tokio::sync::mpsc::Sender<Bytes>,
) {
    let Ok(f) = tokio::fs::File::open(&file).await else {
        return;
    };
    let mut reader = BufReader::new(f);
    let mut first: Vec<String> = Vec::new();
    let mut line = String::new();
    // What is there now (only the last `tailLines` of it, if asked).
    while reader.read_line(&mut line).await.is_ok_and(|n| n > 0) {
        if line.ends_with('\n') {
            if let Some(l) = serve_line(line.trim_end_matches('\n'), &ask) {
                first.push(l);
            }
            line.clear();
        } else {
            break;
        }
    }
    let skip = ask.tail.map(|t| first.len().saturating_sub(t)).unwrap_or(0);
    for l in first.into_iter().skip(skip) {
        if tx.send(Bytes::from(l)).await.is_err() {
            return;
        }
    }
    if !ask.follow {
        return;
    }
    loop {
        match reader.read_line(&mut line).await {
            Ok(n) if n > 0 && line.ends_with('\n') => {
                if let Some(l) = serve_line(line.trim_end_matches('\n'), &ask) {
                    if tx.send(Bytes::from(l)).await.is_err() {
                        return;
                    }
                }
                line.clear();
            }
            _ => {
                if tx.is_closed()
                    || !dir.exists()
                    || incarnations(&dir).last().is_some_and(|l| *l > inc)
                {
                    return;
                }
                tokio::time::sleep(FOLLOW_POLL).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_as_the_api_server_sends_them() {
        let ask = parse(
            "/containerLogs/ops/op-1/op",
            "follow=true&timestamps=true&sinceTime=2026-11-30T20%3A10%3A00Z&tailLines=5",
        )
        .unwrap();
        assert_eq!(
            ask,
            Ask {
                namespace: "ops".into(),
                pod: "op-1".into(),
                follow: true,
                timestamps: true,
                previous: false,
                since: Some("2026-11-30T20:10:00Z".into()),
                tail: Some(5),
            }
        );
        assert!(parse("/pods", "").is_none());
        let line = "2026-11-30T20:10:01.000000001Z acquired";
        assert_eq!(
            serve_line(line, &ask).as_deref(),
            Some("2026-11-30T20:10:01.000000001Z acquired\n")
        );
        let plain = Ask {
            since: Some("2026-11-30T20:11:00Z".into()),
            ..Ask::default()
        };
        assert_eq!(serve_line(line, &plain), None);
        let all = Ask::default();
        assert_eq!(serve_line(line, &all).as_deref(), Some("acquired\n"));
    }
}
