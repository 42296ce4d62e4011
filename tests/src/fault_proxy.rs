//! A TCP proxy that tests put between a node and Redis (or any TCP service) to inject faults:
//! latency, a blackhole that swallows everything, refused connections and cut connections; and
//! it can be retargeted, so a failover can put another server behind the same address.
//!
//! Why not just kill or pause Redis: a killed server refuses at once and a paused one still
//! holds the TCP connection open on the same host, but a real network partition keeps the
//! connection "up" while nothing gets through, and latency spikes affect only some links. The
//! proxy runs on its own thread with its own tokio runtime, so sync and async tests can both
//! use it, and every mode change applies to the connections already open.
//!
//! ```no_run
//! # use switchyard_tests::fault_proxy::{FaultProxy, Mode};
//! # fn demo(redis: std::net::SocketAddr) -> std::io::Result<()> {
//! let proxy = FaultProxy::start(redis)?;
//! let url = format!("redis://{}/0", proxy.addr());
//! proxy.set_mode(Mode::Blackhole); // every call through `url` now times out
//! proxy.set_mode(Mode::Pass);
//! proxy.cut(); // clients see their connections reset
//! # Ok(()) }
//! ```

use std::io;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How long the proxy waits for the target to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything as it comes.
    Pass,
    /// Hold each chunk this long before forwarding it, in both directions.
    Delay(Duration),
    /// Accept connections, read and drop everything, never answer. When the mode changes
    /// again, connections that lost bytes are reset: a byte stream with a hole in it would
    /// make a pipelined client (redis-rs multiplexes) match later replies to earlier
    /// requests, which no real network does (TCP either delivers late or the connection dies).
    Blackhole,
    /// Close new connections at once (with a reset); open ones keep passing traffic.
    Refuse,
}

/// Counters since the proxy started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Connections accepted (including refused ones).
    pub accepted: u64,
    /// Connections closed at once because of [`Mode::Refuse`].
    pub refused: u64,
    /// Connections reset by [`FaultProxy::cut`] or after losing bytes to a blackhole.
    pub reset: u64,
    /// Bytes forwarded client → target.
    pub bytes_to_target: u64,
    /// Bytes forwarded target → client.
    pub bytes_to_client: u64,
    /// Bytes swallowed by [`Mode::Blackhole`], both directions.
    pub bytes_dropped: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    refused: AtomicU64,
    reset: AtomicU64,
    to_target: AtomicU64,
    to_client: AtomicU64,
    dropped: AtomicU64,
}

struct Shared {
    /// Where new connections go; [`FaultProxy::retarget`] moves it.
    target: watch::Sender<SocketAddr>,
    mode: watch::Sender<Mode>,
    /// Bumped by every cut; connections watch it.
    cuts: watch::Sender<u64>,
    counters: Counters,
}

/// A running proxy. Dropping it stops it and closes every connection.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Listens on a free `127.0.0.1` port and forwards to `target`, in [`Mode::Pass`].
    pub fn start(target: SocketAddr) -> io::Result<Self> {
        let listener = StdTcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            target: watch::Sender::new(target),
            mode: watch::Sender::new(Mode::Pass),
            cuts: watch::Sender::new(0),
            counters: Counters::default(),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (shutdown, stop) = tokio::sync::oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    if let Ok(listener) = TcpListener::from_std(listener) {
                        accept_loop(listener, thread_shared, stop).await;
                    }
                });
                // Dropping the runtime here cancels every connection task, closing its sockets.
            })?;
        Ok(Self {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn mode(&self) -> Mode {
        *self.shared.mode.borrow()
    }

    /// Switches the mode; open connections follow it from their next chunk.
    pub fn set_mode(&self, mode: Mode) {
        self.shared.mode.send_replace(mode);
    }

    /// Sends new connections to `target` from now on (a failover: the promoted replica takes
    /// the old master's place behind the same address). Open connections keep their old
    /// target until they end or are [`FaultProxy::cut`].
    pub fn retarget(&self, target: SocketAddr) {
        self.shared.target.send_replace(target);
    }

    /// Where new connections go now.
    pub fn target(&self) -> SocketAddr {
        *self.shared.target.borrow()
    }

    /// Resets every open connection (clients see `ECONNRESET`). New connections still work.
    pub fn cut(&self) {
        self.shared.cuts.send_modify(|n| *n += 1);
    }

    pub fn stats(&self) -> ProxyStats {
        let c = &self.shared.counters;
        ProxyStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            reset: c.reset.load(Ordering::Relaxed),
            bytes_to_target: c.to_target.load(Ordering::Relaxed),
            bytes_to_client: c.to_client.load(Ordering::Relaxed),
            bytes_dropped: c.dropped.load(Ordering::Relaxed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else {
            // Out of file descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        shared.counters.accepted.fetch_add(1, Ordering::Relaxed);
        if *shared.mode.borrow() == Mode::Refuse {
            shared.counters.refused.fetch_add(1, Ordering::Relaxed);
            reset(&client);
            continue;
        }
        tokio::spawn(serve(client, Arc::clone(&shared)));
    }
}

/// Closes with RST instead of FIN, so the peer sees a reset rather than an orderly close.
fn reset(stream: &TcpStream) {
    let _ = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO));
}

async fn serve(mut client: TcpStream, shared: Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let mut cuts = shared.cuts.subscribe();
    cuts.mark_unchanged();
    let target = *shared.target.borrow();
    let mut server = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)).await {
        Ok(Ok(server)) => server,
        _ => {
            reset(&client);
            return;
        }
    };
    let _ = server.set_nodelay(true);
    let tainted = AtomicBool::new(false);
    let must_reset = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let counters = &shared.counters;
        let up = pump(
            client_read,
            server_write,
            &shared.mode,
            &counters.to_target,
            counters,
            &tainted,
        );
        let down = pump(
            server_read,
            client_write,
            &shared.mode,
            &counters.to_client,
            counters,
            &tainted,
        );
        tokio::pin!(up, down);
        let mut modes = shared.mode.subscribe();
        loop {
            tokio::select! {
                _ = &mut up => break false,
                _ = &mut down => break false,
                changed = cuts.changed() => break changed.is_ok(),
                changed = modes.changed() => {
                    if changed.is_err() {
                        break true;
                    }
                    let blackhole = *modes.borrow_and_update() == Mode::Blackhole;
                    if !blackhole && tainted.load(Ordering::Relaxed) {
                        break true;
                    }
                }
            }
        }
    };
    if must_reset {
        shared.counters.reset.fetch_add(1, Ordering::Relaxed);
        reset(&client);
        reset(&server);
    }
}

/// Copies one direction chunk by chunk, consulting the mode for every chunk.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mode: &watch::Sender<Mode>,
    forwarded: &AtomicU64,
    counters: &Counters,
    tainted: &AtomicBool,
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        let current = *mode.borrow();
        match current {
            Mode::Blackhole => {
                tainted.store(true, Ordering::Relaxed);
                counters.dropped.fetch_add(n as u64, Ordering::Relaxed);
                continue;
            }
            Mode::Delay(delay) => tokio::time::sleep(delay).await,
            Mode::Pass | Mode::Refuse => {}
        }
        to.write_all(&buf[..n]).await?;
        forwarded.fetch_add(n as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::*;

    /// A server that answers every connection with `tag` and closes it.
    fn tagged_server(tag: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for mut s in listener.incoming().take(8).flatten() {
                let _ = s.write_all(tag);
            }
        });
        addr
    }

    fn read_through(proxy: &FaultProxy) -> Vec<u8> {
        let mut s = TcpStream::connect(proxy.addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    }

    #[test]
    fn a_retarget_sends_new_connections_to_the_new_server() {
        let (old, new) = (tagged_server(b"old"), tagged_server(b"new"));
        let proxy = FaultProxy::start(old).expect("proxy");
        assert_eq!(read_through(&proxy), b"old");
        proxy.retarget(new);
        assert_eq!(proxy.target(), new);
        assert_eq!(read_through(&proxy), b"new");
    }
}
