//! A harness-owned TCP proxy between one client (a component replica, a fake node) and the API
//! server, so that a link fault can act on that one client's traffic. With several API servers
//! it is also the client's load balancer ([`Proxy::balance`]), with a link to each.
//!
//! Each direction carries out [`crate::backend::link`]'s model of TCP:
//! - a cut direction holds its bytes, as a partition does to TCP: the segments are lost on the
//!   wire and TCP retransmits them, so nothing arrives while the link is cut, nothing is reset,
//!   and once it heals the byte stream goes on, whole and in order (a proxy that dropped bytes
//!   would tear HTTP/2 frames apart, and the receiver would reset the stream with
//!   PROTOCOL_ERROR, which no network partition does). The proxy stops reading the cut
//!   direction, so the sender's buffers fill as they would behind a lossy link; clients run into
//!   their own timeouts and keepalives, and close or reconnect as they would. New connections
//!   are accepted and then held too (a SYN would get no answer on a real network; holding the
//!   connection is the closest a user-space proxy gets);
//! - a delayed or lossy direction hands each chunk it reads on after what the model draws for
//!   it (its delay, and TCP's retransmission timeouts for its losses), never before the chunk
//!   read before it: the stream stays whole and in order, as `tc netem` leaves a TCP stream;
//! - a cut with `mode: reset` resets every connection (RST to both ends: `SO_LINGER` 0, then
//!   close) when it starts, and every connection made while it lasts, as a rebooted peer does.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backend::link::LinkState;
use crate::clock::Rng;

/// The conditions of both directions of a proxy's link.
#[derive(Debug)]
pub(crate) struct Link {
    /// Client to server, server to client.
    state: Mutex<[LinkState; 2]>,
    /// Draws of delays and losses.
    rng: Mutex<Rng>,
    /// Told when a direction changes.
    changed: Notify,
    /// Bumped when a reset cut starts: every open connection is reset.
    resets: tokio::sync::watch::Sender<u64>,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            state: Mutex::default(),
            rng: Mutex::new(Rng::from_time("proxy")),
            changed: Notify::new(),
            resets: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Link {
    fn dir(up: bool) -> usize {
        usize::from(!up)
    }

    fn is_cut(&self, up: bool) -> bool {
        self.state.lock().expect("link")[Self::dir(up)].cut
    }

    /// Whether either direction is cut with `mode: reset`.
    fn resetting(&self) -> bool {
        self.state.lock().expect("link").iter().any(|s| s.reset)
    }

    /// How much later than now a chunk read now is handed on.
    fn extra(&self, up: bool) -> std::time::Duration {
        let state = self.state.lock().expect("link")[Self::dir(up)].clone();
        if !state.slowed() {
            return std::time::Duration::ZERO;
        }
        let mut rng = self.rng.lock().expect("rng");
        state.extra(|| rng.next_f64())
    }

    /// Reset every open connection under this link.
    pub(crate) fn reset_all(&self) {
        self.resets.send_modify(|n| *n += 1);
    }

    /// Until the direction is not cut.
    async fn open(&self, up: bool) {
        loop {
            // Made before the check, so that a heal between the two is not missed.
            let changed = self.changed.notified();
            if !self.is_cut(up) {
                return;
            }
            changed.await;
        }
    }
}

/// A running proxy. Dropping it stops accepting; open connections end with the run.
pub(crate) struct Proxy {
    /// Where clients connect.
    pub(crate) addr: SocketAddr,
    /// The conditions of its link to each of its targets.
    pub(crate) links: Vec<Arc<Link>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Which targets a balancing proxy may send a new connection to: every one, or only those a
/// health check marks ready.
pub(crate) type Health = Option<Arc<Vec<std::sync::atomic::AtomicBool>>>;
/// End a connection with a reset (RST), as a peer that lost its state does: `SO_LINGER` 0, so
/// that closing it aborts it.
pub(crate) fn abort(socket: &TcpStream) {
    let _ = socket2::SockRef::from(socket).set_linger(Some(std::time::Duration::ZERO));
}

/// One direction: read while not cut, hand each chunk on when it is due and the direction is
/// not cut, in order.
async fn pump<R, W>(mut from: R, mut to: W, link: Arc<Link>, up: bool)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Vec<u8>, Instant)>();
    let reading = {
        let link = link.clone();
        async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut last = Instant::now();
            loop {
                link.open(up).await;
                let n = match from.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                last = last.max(Instant::now() + link.extra(up));
                if tx.send((buf[..n].to_vec(), last)).is_err() {
                    break;
                }
            }
        }
    };
    let writing = async move {
        while let Some((bytes, due)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            // Cut while this was on its way: it arrives once the link heals, as a
            // retransmission would.
            link.open(up).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        // The close too crosses only an open link.
        link.open(up).await;
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}

/// Carry one connection both ways under `link` until either end closes it, or a reset cut
/// resets it.
async fn carry(client: TcpStream, server: TcpStream, link: Arc<Link>) {
    let mut resets = link.resets.subscribe();
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let reset = {
        let mut pumps = Box::pin(async {
            tokio::join!(
                pump(&mut cr, &mut sw, link.clone(), true),
                pump(&mut sr, &mut cw, link.clone(), false)
            )
        });
        tokio::select! {
            _ = &mut pumps => false,
            _ = resets.changed() => true,
        }
    };
    if reset {
        abort(cw.as_ref());
        abort(sw.as_ref());
        // No FIN first (a write half shuts down when dropped): closing with the read halves
        // sends the reset alone.
        cw.forget();
        sw.forget();
    }
}

impl Proxy {
    /// Listen on a free port of 127.0.0.1 and forward to `target` (within a Tokio runtime).
    pub(crate) fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        Self::balance(vec![target], 0, None)
    }

    /// Listen on a free port of 127.0.0.1 and forward each new connection to one of `targets`,
    /// as a TCP load balancer in front of several API servers does: to target `first` if it
    /// accepts the connection (and `health`, if given, marks it ready), else to the next one in
    /// order that does; the connection then stays there. None ready: the first that accepts. A
    /// connection that no target accepts is closed. Each target has its own [`Link`].
    pub(crate) fn balance(
        targets: Vec<SocketAddr>,
        first: usize,
        health: Health,
    ) -> std::io::Result<Proxy> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let addr = listener.local_addr()?;
        let links: Vec<Arc<Link>> = targets.iter().map(|_| Arc::default()).collect();
        let shared = links.clone();
        let task = tokio::spawn(async move {
            let targets = Arc::new(targets);
            while let Ok((client, _)) = listener.accept().await {
                let links = shared.clone();
                let targets = targets.clone();
                let health = health.clone();
                tokio::spawn(async move {
                    let n = targets.len();
                    let ready = |i: usize| {
                        health
                            .as_ref()
                            .is_none_or(|h| h[i].load(std::sync::atomic::Ordering::SeqCst))
                    };
                    let order = (0..n).map(|k| (first + k) % n);
                    let preferred = order.clone().filter(|i| ready(*i));
                    let fallback = order.filter(|i| !ready(*i));
                    let mut chosen = None;
                    for i in preferred.chain(fallback) {
                        if let Ok(server) = TcpStream::connect(targets[i]).await {
                            chosen = Some((i, server));
                            break;
                        }
                    }
                    let Some((i, server)) = chosen else {
                        return;
                    };
                    let link = links[i].clone();
                    if link.resetting() {
                        abort(&client);
                        abort(&server);
                        return;
                    }
                    carry(client, server, link).await;
                });
            }
        });
        Ok(Proxy { addr, links, task })
    }

    /// Set the condition of one direction of the link to every target: `up` is client to
    /// server.
    pub(crate) fn set(&self, up: bool, state: &LinkState) {
        for i in 0..self.links.len() {
            self.set_to(i, up, state);
        }
    }

    /// Set the condition of one direction of the link to target `i`: `up` is client to server.
    /// A reset cut resets every open connection at once.
    pub(crate) fn set_to(&self, i: usize, up: bool, state: &LinkState) {
        let Some(link) = self.links.get(i) else {
            return;
        };
        let was = link.resetting();
        link.state.lock().expect("link")[Link::dir(up)] = state.clone();
        if state.reset && !was {
            link.reset_all();
        }
        link.changed.notify_waiters();
    }

    /// Cut (true) or heal one direction.
    pub(crate) fn set_cut(&self, up: bool, cut: bool) {
        self.set(
            up,
            &LinkState {
                cut,
                ..Default::default()
            },
        );
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

    impl Proxy {
        /// Cut or heal each direction.
        fn cut(&self, up: bool, down: bool) {
            self.set_cut(true, up);
            self.set_cut(false, down);
        }
    }

    #[tokio::test]
    async fn forwards_holds_each_way_while_cut_and_delivers_everything_in_order_once_healed() {
        let proxy = Proxy::start(echo_server().await).unwrap();
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        assert_eq!(
            roundtrip(&mut c, b"hello").await.as_deref(),
            Some(&b"hello"[..])
        );

        proxy.cut(true, false); // client -> server cut: no answer comes
        assert_eq!(roundtrip(&mut c, b"held1").await, None);
        proxy.cut(false, true); // server -> client cut: the request passes, its answer is held
        assert_eq!(roundtrip(&mut c, b"held2").await, None);
        proxy.cut(true, true);
        let mut fresh = TcpStream::connect(proxy.addr)
            .await
            .expect("a partitioned proxy still accepts, then holds");
        assert_eq!(roundtrip(&mut fresh, b"new").await, None);

        // Healed: what was sent meanwhile arrives, whole and in order, as TCP retransmits it;
        // then bytes flow on the same connections.
        proxy.cut(false, false);
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

    /// A delayed direction hands every chunk on after its latency, in order; the other
    /// direction is not slowed; a lossy one delivers everything, late.
    #[tokio::test]
    async fn a_delayed_or_lossy_direction_delivers_everything_late_and_in_order() {
        let proxy = Proxy::start(echo_server().await).unwrap();
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        assert!(roundtrip(&mut c, b"warm").await.is_some());
        let slow = LinkState {
            latency: Duration::from_millis(400),
            ..Default::default()
        };
        proxy.set(true, &slow);
        let sent = std::time::Instant::now();
        for chunk in [&b"one"[..], b"two", b"six"] {
            c.write_all(chunk).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut buf = [0u8; 9];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"onetwosix");
        let took = sent.elapsed();
        assert!(took >= Duration::from_millis(400), "arrived after {took:?}");
        assert!(
            took < Duration::from_millis(1200),
            "the chunks were delayed one after another, not together: {took:?}"
        );

        // Back to healthy: at once.
        proxy.set(true, &LinkState::default());
        assert!(roundtrip(&mut c, b"fast").await.is_some());

        // Every message lost at least once is still delivered, after a retransmission timeout.
        // The draws are seeded: at a loss of 0.5 a message lost 9 times running waits
        // 0.2 s × (2⁹ − 1) = 102 s (1 in 512 of them), and a draw seeded by the time failed the
        // 60 s bound below by chance (the fast tier of a clean clone, 2026-12-05).
        for link in &proxy.links {
            *link.rng.lock().unwrap() = Rng::new(36, "proxy");
        }
        let lossy = LinkState {
            loss: 0.5,
            ..Default::default()
        };
        proxy.set(false, &lossy);
        let mut all = Vec::new();
        for i in 0..20u8 {
            c.write_all(&[b'a' + i]).await.unwrap();
            let mut one = [0u8; 1];
            tokio::time::timeout(Duration::from_secs(60), c.read_exact(&mut one))
                .await
                .expect("a lost message is retransmitted")
                .unwrap();
            all.push(one[0]);
        }
        assert_eq!(all, (0..20u8).map(|i| b'a' + i).collect::<Vec<_>>());
    }

    /// A server that answers each connection with its `tag`, then echoes.
    async fn tagged_server(tag: u8) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let l = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = l.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    if s.write_all(&[tag]).await.is_err() {
                        return;
                    }
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (addr, task)
    }

    /// Which server a new connection through `proxy` lands on (its tag).
    async fn lands(proxy: &Proxy) -> Option<u8> {
        let mut c = TcpStream::connect(proxy.addr).await.ok()?;
        read_some(&mut c, 1).await.map(|t| t[0])
    }

    /// A balancing proxy sends a new connection to its first target, to the next when that one
    /// does not take connections (or its health check says it is not ready), and back once it
    /// does; each target has its own link, so a cut to one leaves the others alone.
    #[tokio::test]
    async fn a_balancing_proxy_lands_on_its_first_target_and_moves_when_it_is_gone() {
        let (a, server_a) = tagged_server(b'a').await;
        let (b, _server_b) = tagged_server(b'b').await;
        let (c, _server_c) = tagged_server(b'c').await;
        let proxy = Proxy::balance(vec![a, b, c], 1, None).unwrap();
        assert_eq!(lands(&proxy).await, Some(b'b'));
        // The link to b cut: a connection still lands there (it is up), and is held.
        proxy.set_to(
            1,
            true,
            &LinkState {
                cut: true,
                ..Default::default()
            },
        );
        proxy.set_to(
            1,
            false,
            &LinkState {
                cut: true,
                ..Default::default()
            },
        );
        assert_eq!(lands(&proxy).await, None);
        proxy.set_to(1, true, &LinkState::default());
        proxy.set_to(1, false, &LinkState::default());

        // Wrapping around: first target c, then a.
        let from_c = Proxy::balance(vec![a, b, c], 2, None).unwrap();
        assert_eq!(lands(&from_c).await, Some(b'c'));
        let from_a = Proxy::balance(vec![a, b, c], 0, None).unwrap();
        assert_eq!(lands(&from_a).await, Some(b'a'));
        server_a.abort();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(lands(&from_a).await, Some(b'b'), "a is gone: the next one");

        // A health check that marks b not ready: the next ready one, c; none ready: the first
        // that takes the connection.
        let checked = |ready: [bool; 2]| {
            let health = Arc::new(ready.into_iter().map(Into::into).collect());
            Proxy::balance(vec![b, c], 0, Some(health)).unwrap()
        };
        assert_eq!(lands(&checked([false, true])).await, Some(b'c'));
        assert_eq!(lands(&checked([false, false])).await, Some(b'b'));
    }

    /// A reset cut resets the open connections and every new one while it lasts; healed, the
    /// proxy carries new connections again.
    #[tokio::test]
    async fn a_reset_cut_resets_open_and_new_connections() {
        let proxy = Proxy::start(echo_server().await).unwrap();
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        assert!(roundtrip(&mut c, b"hello").await.is_some());
        let reset = LinkState {
            cut: true,
            reset: true,
            ..Default::default()
        };
        proxy.set(true, &reset);
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf)).await;
        let e = read
            .expect("the reset arrives at once")
            .expect_err("a reset, not an end");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
        let mut fresh = TcpStream::connect(proxy.addr).await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(5), fresh.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Err(_)) | Ok(Ok(0))),
            "a new connection is reset too: {read:?}"
        );
        proxy.set(true, &LinkState::default());
        let mut again = TcpStream::connect(proxy.addr).await.unwrap();
        assert!(roundtrip(&mut again, b"back").await.is_some());
    }
}

/// The proxies on the real control plane.
#[cfg(test)]
mod real {
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, WatchEvent, WatchParams};

    use super::Proxy;
    use crate::backend::link::LinkState;
    use crate::backend::local::cluster::{LocalCluster, Spec};
    use kubechaos_core::scenario::Component;

    /// A client without a read timeout (kube-rs's default) watching Leases through a proxy
    /// rides out a 3-minute cut of both directions: the proxy holds the bytes, as a network
    /// partition holds them for TCP to retransmit, so the same watch goes on after the heal and
    /// delivers what happened meanwhile; nothing reset it.
    #[test]
    #[ignore = "real tier: a local control plane (root, the pinned upstream binaries); ci/test runs it"]
    fn a_client_without_a_read_timeout_rides_out_a_three_minute_cut() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let spec = Spec {
                purpose: "proxy test".into(),
                nodes: 0,
                components: [(Component::KubeScheduler, 1)].into_iter().collect(),
                ..Default::default()
            };
            let cluster = LocalCluster::up(
                &spec,
                false,
                std::sync::Arc::new(crate::backend::local::pods::Quiet),
                &mut |_| {},
            )
            .await
            .expect("the local control plane starts");
            let mut kc = kube::config::Kubeconfig::read_from(&cluster.admin_kubeconfig).unwrap();
            let server = kc.clusters[0]
                .cluster
                .as_ref()
                .unwrap()
                .server
                .clone()
                .unwrap();
            let api_addr: std::net::SocketAddr =
                server.trim_start_matches("https://").parse().unwrap();
            let proxy = Proxy::start(api_addr).unwrap();
            kc.clusters[0].cluster.as_mut().unwrap().server =
                Some(format!("https://{}", proxy.addr));
            let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .unwrap();
            config.read_timeout = None;
            let client = kube::Client::try_from(config).unwrap();
            let leases: Api<Lease> = Api::namespaced(client, "kube-system");
            let rv = leases
                .list(&Default::default())
                .await
                .unwrap()
                .metadata
                .resource_version
                .unwrap();
            let params = WatchParams::default().timeout(290);
            let mut events = Box::pin(leases.watch(&params, &rv).await.unwrap());
            // The watch is live: the scheduler renews every 2 seconds.
            let first = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
            assert!(
                matches!(first, Ok(Some(Ok(WatchEvent::Modified(_))))),
                "{first:?}"
            );

            let cut = LinkState {
                cut: true,
                ..Default::default()
            };
            proxy.set(true, &cut);
            proxy.set(false, &cut);
            let during = tokio::time::timeout(Duration::from_secs(180), events.next()).await;
            assert!(during.is_err(), "nothing crosses the cut: {during:?}");
            proxy.set(true, &LinkState::default());
            proxy.set(false, &LinkState::default());
            // The same watch goes on: what the server sent during the cut arrives, then more.
            for _ in 0..3 {
                let after = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
                assert!(
                    matches!(after, Ok(Some(Ok(WatchEvent::Modified(_))))),
                    "the watch goes on after the heal: {after:?}"
                );
            }
            drop(events);
            drop(proxy);
            cluster.down().await;
        });
    }
}
