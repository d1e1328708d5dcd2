//! A harness-owned TCP proxy between one client (a component replica, a fake node) and the API
//! server, so that a partition can cut that one client off.
//!
//! A cut direction blackholes, as a real partition does: connections stay open and bytes are
//! read and dropped silently, nothing is reset, so clients run into their own timeouts. New
//! connections are accepted and then black-holed too (a SYN would get no answer on a real
//! network; holding the connection is the closest a user-space proxy gets). Healing lets bytes
//! flow again on existing and new connections; what was dropped stays lost, as on a network.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The two directions a partition can cut.
#[derive(Debug, Default)]
pub struct Cut {
    /// Client to server.
    pub up: AtomicBool,
    /// Server to client.
    pub down: AtomicBool,
}

/// A running proxy. Dropping it stops accepting; open connections end with the run.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// What is cut now.
    pub cut: Arc<Cut>,
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
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let dropped = if up {
            cut.up.load(Ordering::SeqCst)
        } else {
            cut.down.load(Ordering::SeqCst)
        };
        if dropped {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    // Pass a close on only when the direction is open; a cut link carries no FIN either.
    let dropped = if up {
        cut.up.load(Ordering::SeqCst)
    } else {
        cut.down.load(Ordering::SeqCst)
    };
    if !dropped {
        let _ = to.shutdown().await;
    } else {
        std::future::pending::<()>().await;
    }
}

impl Proxy {
    /// Listen on a free port of 127.0.0.1 and forward to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
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
    pub fn set(&self, up: bool, down: bool) {
        self.set_up(up);
        self.set_down(down);
    }

    /// Cut (true) or heal the client-to-server direction.
    pub fn set_up(&self, cut: bool) {
        self.cut.up.store(cut, Ordering::SeqCst);
    }

    /// Cut (true) or heal the server-to-client direction.
    pub fn set_down(&self, cut: bool) {
        self.cut.down.store(cut, Ordering::SeqCst);
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

    #[tokio::test]
    async fn forwards_blackholes_each_way_and_heals() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        assert_eq!(
            roundtrip(&mut c, b"hello").await.as_deref(),
            Some(&b"hello"[..])
        );

        proxy.set(true, false); // client -> server cut: the request vanishes
        assert_eq!(roundtrip(&mut c, b"lost1").await, None);
        proxy.set(false, true); // server -> client cut: the answer vanishes
        assert_eq!(roundtrip(&mut c, b"lost2").await, None);
        proxy.set(true, true);
        let mut fresh = TcpStream::connect(proxy.addr)
            .await
            .expect("a partitioned proxy still accepts, then holds");
        assert_eq!(roundtrip(&mut fresh, b"held").await, None);

        proxy.set(false, false); // healed: bytes flow again on the same connection
        assert_eq!(
            roundtrip(&mut c, b"again").await.as_deref(),
            Some(&b"again"[..])
        );
    }
}
