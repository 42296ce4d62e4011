//! Direct upstream requests over this thread's pooled HTTP/1.1 connections, and over its
//! shared HTTP/2 connections where an HTTPS provider chose `h2` by ALPN.
//!
//! Why not hyper-util's pooled client: per request it locked a process-wide mutex twice,
//! hashed the pool key with SipHash twice, formatted the `Host` header, boxed its future and
//! spawned a task that waited for the connection to be idle again before returning it to the
//! pool. Each actix worker is one thread that runs its requests to the end, so a pool per
//! thread needs no lock, and the response body returns its connection itself: when it ends,
//! or when it is dropped after hyper has read all of it. hyper's own connection API
//! (`client::conn::http1`) does the protocol; hyper-rustls's connector does TCP and TLS, as
//! before.
//!
//! What the old client did and this keeps: keep-alive per scheme and authority, a 90 s idle
//! timeout, at most [`POOL_MAX_IDLE_PER_HOST`] idle connections per host (here per thread),
//! and a request hyper hands back unsent on a reused connection (the peer closed it while it
//! was idle) goes out again on another one. Added: a connection idle for a while gets one
//! turn of the runtime before reuse, so that a close the server sent meanwhile is read
//! before hyper writes a request into it.
//!
//! HTTP/2 (`http_version = "auto"`, HTTPS only): a thread keeps a few connections per host
//! and puts each request on one with room for another stream (`h2set`); requests that come
//! while the first connection is being made wait for it rather than make their own, and a
//! host that answered ALPN with HTTP/1.1 goes the HTTP/1.1 way. A stream the provider
//! resets fails its own request only.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use http::header::HOST;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::client::conn::http2;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tower_service::Service;

use super::Endpoint;
use super::body::TransportError;
use super::h2set::{Connecting, H2Set, Multiplexed, Pick, Stream};
use super::idle::{IdleSet, PoolKey, Reusable};
use super::io::UpstreamIo;

/// Idle pooled connections are closed after this long.
pub(super) const POOL_IDLE: Duration = Duration::from_secs(90);
/// At most this many idle connections are kept per host and thread.
pub(super) const POOL_MAX_IDLE_PER_HOST: usize = 1024;
/// A connection idle this long gets one turn of the runtime to notice a close before reuse;
/// busier ones are reused at once (under load, connections sit idle for microseconds).
const CHECK_AFTER_IDLE: Duration = Duration::from_millis(250);
/// How often a worker thread drops what expired while it had nothing to send.
const SWEEP_EVERY: Duration = Duration::from_secs(15);

/// Requests that a connection handed back unsent are sent again at most this often before
/// the request fails (a host whose new HTTP/2 connections close at once must not loop).
const MAX_UNSENT: u32 = 3;

type Sender = SendRequest<Full<Bytes>>;
type H2Sender = http2::SendRequest<Full<Bytes>>;

impl Multiplexed for H2Sender {
    fn is_closed(&self) -> bool {
        http2::SendRequest::is_closed(self)
    }
}

/// A new connection, by the protocol ALPN chose.
enum Made {
    Http1(Sender),
    H2(H2Sender),
}

impl Reusable for Sender {
    fn is_ready(&self) -> bool {
        SendRequest::is_ready(self)
    }
    fn is_closed(&self) -> bool {
        SendRequest::is_closed(self)
    }
}

thread_local! {
    static IDLE: RefCell<IdleSet<Sender>> =
        RefCell::new(IdleSet::new(POOL_IDLE, POOL_MAX_IDLE_PER_HOST));
    static H2: RefCell<H2Set<H2Sender>> = RefCell::new(H2Set::new(POOL_IDLE));
    /// A sweeper task runs for this thread's set.
    static SWEEPING: Cell<bool> = const { Cell::new(false) };
}

/// Client ids, so that clients with different connect timeouts never share connections.
static NEXT_CLIENT: AtomicU32 = AtomicU32::new(0);

/// Sends requests over pooled connections made by one connector.
#[derive(Clone, Debug)]
pub(super) struct Direct {
    id: u32,
    connector: HttpsConnector<HttpConnector>,
    /// The connector offers `h2` by ALPN (HTTPS hosts only).
    multiplex: bool,
}

impl Direct {
    pub fn new(connector: HttpsConnector<HttpConnector>, multiplex: bool) -> Self {
        Self {
            id: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
            connector,
            multiplex,
        }
    }

    /// Sends `req` to `to` and returns the response head.
    pub async fn send(
        &self,
        to: &Endpoint,
        req: Request<Bytes>,
    ) -> Result<Response<PooledBody>, TransportError> {
        let (parts, body) = req.into_parts();
        let key = PoolKey {
            client: self.id,
            https: to.https(),
            authority: to.authority().clone(),
        };
        let req = Request::from_parts(parts, Full::new(body));
        if self.multiplex && key.https {
            return self.send_multiplexed(to, key, req).await;
        }
        self.send_http1(to, key, http1_form(req, to)).await
    }

    /// Over this thread's HTTP/1.1 connections to `to`, or a new one.
    async fn send_http1(
        &self,
        to: &Endpoint,
        key: PoolKey,
        mut req: Request<Full<Bytes>>,
    ) -> Result<Response<PooledBody>, TransportError> {
        // Reused connections first. A request hyper hands back unsent (the connection closed
        // while idle) goes to the next one; each try takes one connection out of the set, so
        // the loop ends.
        while let Some((mut sender, idle)) = take_idle(&key) {
            if idle >= CHECK_AFTER_IDLE {
                // A close that arrived since this thread last read its sockets is not seen
                // yet, and hyper would write the request into it and fail it as incomplete
                // (servers close idle connections: uvicorn after 5 s, nginx after 75 s).
                // One turn of the runtime lets the connection's task read it first.
                tokio::task::yield_now().await;
                if !sender.is_ready() {
                    continue;
                }
            }
            match sender.try_send_request(req).await {
                Ok(resp) => return Ok(with_return(resp, sender, key)),
                Err(mut e) => match e.take_message() {
                    Some(unsent) => req = unsent,
                    None => return Err(TransportError::Send(e.into_error())),
                },
            }
        }
        // Boxed: connecting holds the TLS stream and hyper's handshake inline, several KiB
        // that would otherwise widen every request's future (and the copy into its box) for
        // a step that pooled requests skip.
        match Box::pin(self.connect(to.uri())).await? {
            Made::Http1(sender) => send_on_new(req, sender, key).await,
            Made::H2(sender) => {
                // The host now chose h2 (a client that offers it found it answering with
                // HTTP/1.1 earlier): from here on, its requests share connections.
                let _ = H2.try_with(|h2| h2.borrow_mut().add(&key, sender, Instant::now()));
                // Boxed: the two ways call each other, and this one is rare.
                Box::pin(self.send_multiplexed(to, key, h2_form(req, to))).await
            }
        }
    }

    /// Over this thread's HTTP/2 connections to `to` (made when none has room), or over
    /// HTTP/1.1 where the host chose it by ALPN.
    async fn send_multiplexed(
        &self,
        to: &Endpoint,
        key: PoolKey,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<PooledBody>, TransportError> {
        let mut req = h2_form(req, to);
        let mut unsent = 0;
        loop {
            let pick = H2.try_with(|h2| h2.borrow_mut().pick(&key, Instant::now()));
            let pick = pick.unwrap_or(Pick::Http1);
            match pick {
                Pick::Stream(mut sender, stream) => match sender.try_send_request(req).await {
                    Ok(resp) => return Ok(resp.map(|body| PooledBody::multiplexed(body, stream))),
                    Err(mut e) => match e.take_message() {
                        Some(back) if unsent < MAX_UNSENT => {
                            unsent += 1;
                            req = back;
                        }
                        _ => return Err(TransportError::Send(e.into_error())),
                    },
                },
                Pick::Wait(flag) => {
                    if let Some(kind) = flag.wait().await {
                        let failed = std::io::Error::new(kind, "connect to the provider failed");
                        return Err(TransportError::Connect(Box::new(failed)));
                    }
                }
                Pick::Connect(flag) => {
                    let mut ticket = ConnectTicket {
                        key: key.clone(),
                        flag,
                        failed: None,
                    };
                    let made = match Box::pin(self.connect(to.uri())).await {
                        Ok(made) => made,
                        Err(e) => {
                            ticket.failed = Some(error_kind(&e));
                            return Err(e);
                        }
                    };
                    let now = Instant::now();
                    match made {
                        Made::H2(sender) => {
                            let _ = H2.try_with(|h2| h2.borrow_mut().add(&key, sender, now));
                            start_sweeper();
                            drop(ticket);
                        }
                        Made::Http1(sender) => {
                            let _ = H2.try_with(|h2| h2.borrow_mut().speaks_http1(&key, now));
                            drop(ticket);
                            return send_on_new(http1_form(req, to), sender, key).await;
                        }
                    }
                }
                Pick::Http1 => return self.send_http1(to, key, http1_form(req, to)).await,
            }
        }
    }

    /// A new connection to `target`'s host, its task spawned on this runtime, in the
    /// protocol ALPN chose (HTTP/1.1 when the connector offered none).
    async fn connect(&self, target: &Uri) -> Result<Made, TransportError> {
        let mut connector = self.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(TransportError::Connect)?;
        let io = connector
            .call(target.clone())
            .await
            .map_err(TransportError::Connect)?;
        if io.connected().is_negotiated_h2() {
            let (sender, conn) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(UpstreamIo::from(io))
                .await
                .map_err(TransportError::Send)?;
            tokio::spawn(watched(conn));
            return Ok(Made::H2(sender));
        }
        let (sender, conn) = http1::handshake(UpstreamIo::from(io))
            .await
            .map_err(TransportError::Send)?;
        tokio::spawn(watched(conn));
        Ok(Made::Http1(sender))
    }
}

/// HTTP/1.1 requests name the path only, and the host goes into `Host`.
fn http1_form(req: Request<Full<Bytes>>, to: &Endpoint) -> Request<Full<Bytes>> {
    let (mut parts, body) = req.into_parts();
    if !parts.headers.contains_key(HOST) {
        parts.headers.insert(HOST, to.host().clone());
    }
    parts.uri = to.origin().clone();
    Request::from_parts(parts, body)
}

/// HTTP/2 requests carry the scheme and authority in the URI (`:scheme`, `:authority`).
fn h2_form(req: Request<Full<Bytes>>, to: &Endpoint) -> Request<Full<Bytes>> {
    let (mut parts, body) = req.into_parts();
    parts.headers.remove(HOST);
    parts.uri = to.uri().clone();
    Request::from_parts(parts, body)
}

/// The first request of a new HTTP/1.1 connection.
async fn send_on_new(
    req: Request<Full<Bytes>>,
    mut sender: Sender,
    key: PoolKey,
) -> Result<Response<PooledBody>, TransportError> {
    match sender.try_send_request(req).await {
        Ok(resp) => Ok(with_return(resp, sender, key)),
        Err(e) => Err(TransportError::Send(e.into_error())),
    }
}

/// A connect in progress for a host's HTTP/2 connections: however it ends (made, failed, or
/// its request dropped), the requests waiting for it are told.
struct ConnectTicket {
    key: PoolKey,
    flag: std::sync::Arc<Connecting>,
    /// Set when the connect failed: the waiters fail the same way.
    failed: Option<std::io::ErrorKind>,
}

impl Drop for ConnectTicket {
    fn drop(&mut self) {
        // `try_with`: a request dropped while the thread exits finds the set already gone.
        let _ = H2.try_with(|h2| h2.borrow_mut().connect_ended(&self.key, &self.flag));
        self.flag.finish(self.failed);
    }
}

/// The I/O kind that classifies like `e` (a timeout stays a timeout).
fn error_kind(e: &TransportError) -> std::io::ErrorKind {
    match e.classify().0 {
        switchyard_shared::classify::TransportFailure::Timeout => std::io::ErrorKind::TimedOut,
        _ => std::io::ErrorKind::ConnectionRefused,
    }
}

/// The connection's task: the connection itself, its end logged. A combinator, not an
/// `async` block: an `async` block keeps the moved-in connection and the awaited one in two
/// slots, which doubled the task of every upstream connection an idle stream holds.
pub(super) fn watched<F: Future<Output = hyper::Result<()>>>(conn: F) -> impl Future<Output = ()> {
    conn.map(|ended| {
        if let Err(e) = ended {
            tracing::debug!(error = %e, "upstream connection ended with an error");
        }
    })
}

/// How many idle connections this thread's set holds that would be handed out now.
#[cfg(test)]
pub(crate) fn idle_ready() -> usize {
    IDLE.with_borrow(|idle| idle.ready())
}

/// An idle connection for `key` from this thread's set, and how long it was idle.
fn take_idle(key: &PoolKey) -> Option<(Sender, Duration)> {
    IDLE.try_with(|idle| idle.borrow_mut().take(key, Instant::now()))
        .ok()
        .flatten()
}

fn with_return(resp: Response<Incoming>, sender: Sender, key: PoolKey) -> Response<PooledBody> {
    resp.map(|body| PooledBody {
        body,
        back: Back::Http1(sender, key),
    })
}

/// A response body that puts its connection back into this thread's pool once hyper has
/// read all of it (HTTP/1.1), or ends its stream's count on a shared connection (HTTP/2).
#[derive(Debug)]
pub struct PooledBody {
    body: Incoming,
    back: Back,
}

/// What a body gives back when it ends.
#[derive(Debug)]
enum Back {
    Nothing,
    Http1(Sender, PoolKey),
    /// The stream's count, held for its `Drop`.
    H2 {
        _open: Stream,
    },
}

impl PooledBody {
    fn multiplexed(body: Incoming, stream: Stream) -> Self {
        Self {
            body,
            back: Back::H2 { _open: stream },
        }
    }

    /// The next frame; at the end the connection goes back to the pool.
    pub fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.give_back();
        }
        polled
    }

    /// Returns the connection if it is idle: hyper read the whole answer and waits for the
    /// next request. A connection still reading an answer nobody wants is dropped, and hyper
    /// closes it.
    fn give_back(&mut self) {
        // An HTTP/2 stream's count ends with its `Stream`, dropped here.
        let Back::Http1(sender, key) = std::mem::replace(&mut self.back, Back::Nothing) else {
            return;
        };
        if !sender.is_ready() {
            return;
        }
        // `try_with`: a body dropped while the thread exits finds the set already gone.
        let kept = IDLE.try_with(|idle| idle.borrow_mut().put(key, sender, Instant::now()));
        if kept.is_ok() {
            start_sweeper();
        }
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// Starts this thread's sweeper unless it runs. Only on a current-thread runtime (each actix
/// worker has one), where the task runs on this thread and so sweeps this thread's set. On a
/// multi-threaded runtime (tests and tools) an expired connection is dropped when its host
/// is next asked for, and its socket closes when the peer closes it.
fn start_sweeper() {
    if SWEEPING.get() {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread {
        return;
    }
    SWEEPING.set(true);
    handle.spawn(async {
        // Clears the flag however the task ends, including with its runtime.
        let _running = SweeperFlag;
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            let now = Instant::now();
            let idle_empty = IDLE.with_borrow_mut(|idle| {
                idle.sweep(now);
                idle.is_empty()
            });
            let h2_empty = H2.with_borrow_mut(|h2| {
                h2.sweep(now);
                h2.is_empty()
            });
            let empty = idle_empty && h2_empty;
            if empty {
                return;
            }
        }
    });
}

struct SweeperFlag;

impl Drop for SweeperFlag {
    fn drop(&mut self) {
        SWEEPING.set(false);
    }
}
