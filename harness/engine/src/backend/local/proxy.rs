//! A harness-owned TCP proxy between one client (a component replica, a fake node) and the API
//! server, so that a partition can cut that one client off.
//!
//! A cut direction holds its bytes, as a partition does to TCP: the segments are lost on the
//! wire and TCP retransmits them, so nothing arrives while the link is cut, nothing is reset, and
//! once it heals the byte stream goes on, whole and in order (a proxy that dropped bytes would
//! tear HTTP/2 frames apart, and the receiver would reset the stream with PROTOCOL_ERROR, which
//! no network partition does). The proxy stops reading the cut direction, so the sender's
//! buffers fill as they would behind a lossy link; clients run into their own timeouts and
//! keepalives, and close or reconnect as they would. New connections are accepted and then held
//! too (a SYN would get no answer on a real network; holding the connection is the closest a
//! user-space proxy gets).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// The two directions a partition can cut.
#[derive(Debug, Default)]
pub(crate) struct Cut {
    /// Client to server.
    pub(crate) up: AtomicBool,
    /// Server to client.
    pub(crate) down: AtomicBool,
    /// Told when a direction heals.
    healed: Notify,
}

impl Cut {
    fn is_cut(&self, up: bool) -> bool {
        if up {
            self.up.load(Ordering::SeqCst)
        } else {
            self.down.load(Ordering::SeqCst)
        }
    }

    /// Until the direction is not cut.
    async fn open(&self, up: bool) {
        loop {
            // Made before the check, so that a heal between the two is not missed.
            let healed = self.healed.notified();
            if !self.is_cut(up) {
                return;
            }
            healed.await;
        }
    }
}

/// A running proxy. Dropping it stops accepting; open connections end with the run.
pub(crate) struct Proxy {
    /// Where clients connect.
    pub(crate) addr: SocketAddr,
    /// What is cut now.
    pub(crate) cut: Arc<Cut>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump<R, W>(mut from: R, mut to: W, cut: Arc<Cut>, up: bool)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        cut.open(up).await;
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // Cut while this was read: it arrives once the link heals, as a retransmission would.
        cut.open(up).await;
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    // The close too crosses only an open link.
    cut.open(up).await;
    let _ = to.shutdown().await;
}

impl Proxy {
    /// Listen on a free port of 127.0.0.1 and forward to `target` (within a Tokio runtime).
    pub(crate) fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let addr = listener.local_addr()?;
        let cut = Arc::new(Cut::default());
        let shared = cut.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let cut = shared.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(pump(cr, sw, cut.clone(), true), pump(sr, cw, cut, false));
                });
            }
        });
        Ok(Proxy { addr, cut, task })
    }

    /// Cut or heal each direction.
    #[cfg(test)]
    fn set(&self, up: bool, down: bool) {
        self.set_up(up);
        self.set_down(down);
    }

    /// Cut (true) or heal the client-to-server direction.
    pub(crate) fn set_up(&self, cut: bool) {
        self.cut.up.store(cut, Ordering::SeqCst);
        self.cut.healed.notify_waiters();
    }

    /// Cut (true) or heal the server-to-client direction.
    pub(crate) fn set_down(&self, cut: bool) {
        self.cut.down.store(cut, Ordering::SeqCst);
        self.cut.healed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn roundtrip(c: &mut TcpStream, msg: &[u8]) -> Option<Vec<u8>> {
        c.write_all(msg).await.ok()?;
        let mut buf = vec![0u8; msg.len()];
        tokio::time::timeout(Duration::from_millis(300), c.read_exact(&mut buf))
            .await
            .ok()?
            .ok()?;
        Some(buf)
    }

    /// What `c` reads within 300 ms, if anything.
    async fn read_some(c: &mut TcpStream, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        tokio::time::timeout(Duration::from_millis(300), c.read_exact(&mut buf))
            .await
            .ok()?
            .ok()?;
        Some(buf)
    }

    #[tokio::test]
    async fn forwards_holds_each_way_while_cut_and_delivers_everything_in_order_once_healed() {
        let proxy = Proxy::start(echo_server().await).unwrap();
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        assert_eq!(
            roundtrip(&mut c, b"hello").await.as_deref(),
            Some(&b"hello"[..])
        );

        proxy.set(true, false); // client -> server cut: no answer comes
        assert_eq!(roundtrip(&mut c, b"held1").await, None);
        proxy.set(false, true); // server -> client cut: the request passes, its answer is held
        assert_eq!(roundtrip(&mut c, b"held2").await, None);
        proxy.set(true, true);
        let mut fresh = TcpStream::connect(proxy.addr)
            .await
            .expect("a partitioned proxy still accepts, then holds");
        assert_eq!(roundtrip(&mut fresh, b"new").await, None);

        // Healed: what was sent meanwhile arrives, whole and in order, as TCP retransmits it;
        // then bytes flow on the same connections.
        proxy.set(false, false);
        assert_eq!(
            read_some(&mut c, 10).await.as_deref(),
            Some(&b"held1held2"[..])
        );
        assert_eq!(read_some(&mut fresh, 3).await.as_deref(), Some(&b"new"[..]));
        assert_eq!(
            roundtrip(&mut c, b"again").await.as_deref(),
            Some(&b"again"[..])
        );
    }
}
