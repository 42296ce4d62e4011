//! Direct upstream requests over this thread's pooled HTTP/1.1 connections.
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
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

use super::Endpoint;
use super::body::TransportError;
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

type Sender = SendRequest<Full<Bytes>>;

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
}

impl Direct {
    pub fn new(connector: HttpsConnector<HttpConnector>) -> Self {
        Self {
            id: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
            connector,
        }
    }

    /// Sends `req` to `to` and returns the response head.
    pub async fn send(
        &self,
        to: &Endpoint,
        req: Request<Bytes>,
    ) -> Result<Response<PooledBody>, TransportError> {
        let (mut parts, body) = req.into_parts();
        let key = PoolKey {
            client: self.id,
            https: to.https(),
            authority: to.authority().clone(),
        };
        if !parts.headers.contains_key(HOST) {
            parts.headers.insert(HOST, to.host().clone());
        }
        // HTTP/1.1 requests name the path only; the host went into `Host`.
        parts.uri = to.origin().clone();
        let mut req = Request::from_parts(parts, Full::new(body));

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
        let mut sender = Box::pin(self.connect(to.uri())).await?;
        match sender.try_send_request(req).await {
            Ok(resp) => Ok(with_return(resp, sender, key)),
            Err(e) => Err(TransportError::Send(e.into_error())),
        }
    }

    /// A new connection to `target`'s host, its task spawned on this runtime.
    async fn connect(&self, target: &Uri) -> Result<Sender, TransportError> {
        let mut connector = self.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(TransportError::Connect)?;
        let io = connector
            .call(target.clone())
            .await
            .map_err(TransportError::Connect)?;
        let (sender, conn) = http1::handshake(UpstreamIo::from(io))
            .await
            .map_err(TransportError::Send)?;
        tokio::spawn(watched(conn));
        Ok(sender)
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
        back: Some((sender, key)),
    })
}

/// A response body that puts its connection back into this thread's pool once hyper has
/// read all of it.
#[derive(Debug)]
pub struct PooledBody {
    body: Incoming,
    back: Option<(Sender, PoolKey)>,
}

impl PooledBody {
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
        let Some((sender, key)) = self.back.take() else {
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
            let empty = IDLE.with_borrow_mut(|idle| {
                idle.sweep(Instant::now());
                idle.is_empty()
            });
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
