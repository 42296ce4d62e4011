//! The accept loop and per-connection tasks.
//!
//! We run hyper's HTTP/1.1 connection ourselves (rather than through a framework) because a
//! fault must be able to end the connection with a TCP RST: the connection task owns the
//! socket, and a per-connection [`ConnCtl`] lets a request or a body ask it to drop the
//! connection with `SO_LINGER` 0.
//!
//! The connection task also ends idle keep-alive connections and stops on shutdown. It does
//! both with flags checked when it wakes anyway, rather than with hyper's header read
//! timeout (a timer armed and cancelled per request) and a `select!` that polled three
//! futures per wake-up: together those were a tenth of the mock's work per request.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::body::{ConnCtl, MockBody};
use super::{control, respond};

/// Pause after a failed `accept` (for example when out of file descriptors) so the loop does
/// not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// Idle checks per idle timeout: a connection is closed after between 1 and 1 + 1/N idle
/// timeouts without a request.
const IDLE_CHECKS: u32 = 4;
const MIN_IDLE_CHECK: Duration = Duration::from_millis(1);
const MAX_IDLE_CHECK: Duration = Duration::from_secs(86_400);

/// A TCP stream that, when dropped after a reset was requested, closes with `SO_LINGER` 0 so
/// the kernel sends RST instead of FIN.
struct ResettableStream {
    stream: TcpStream,
    ctl: Arc<ConnCtl>,
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.ctl.reset_requested() {
            // Failure only means the peer already went away; there is nothing left to reset.
            let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Accepts connections until `cancel` fires.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, cancel: CancellationToken) {
    let mut builder = http1::Builder::new();
    // No timer: idle connections are closed by the connection task (see `connection`).
    builder.keep_alive(true).header_read_timeout(None);
    let builder = Arc::new(builder);
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                // Small SSE frames and JSON replies must not wait for Nagle.
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(
                    stream,
                    Arc::clone(&shared),
                    Arc::clone(&builder),
                    cancel.clone(),
                ));
            }
            Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
        }
    }
}

/// A response body that marks its request finished on the connection when dropped, so the
/// idle check knows a connection that is still answering from one waiting for a request.
struct ConnBody {
    body: MockBody,
    _busy: Busy,
}

impl Body for ConnBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// One request being served on a connection, from the call of the service until its
/// response body is dropped (sent, or abandoned with the connection).
struct Busy(Arc<ConnCtl>);

impl Busy {
    fn new(ctl: Arc<ConnCtl>) -> Self {
        ctl.request_started();
        Self(ctl)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

async fn connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    builder: Arc<http1::Builder>,
    cancel: CancellationToken,
) {
    let ctl = Arc::new(ConnCtl::default());
    let io = TokioIo::new(ResettableStream {
        stream,
        ctl: Arc::clone(&ctl),
    });
    let service_ctl = Arc::clone(&ctl);
    // Bounded so that a zero timeout cannot spin and a huge one cannot overflow the clock.
    let idle_check =
        (shared.config.idle_timeout / IDLE_CHECKS).clamp(MIN_IDLE_CHECK, MAX_IDLE_CHECK);
    let service = service_fn(move |req: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        let busy = Busy::new(Arc::clone(&service_ctl));
        async move {
            let resp: Response<MockBody> = if req.uri().path().starts_with("/__mock/") {
                control::handle(&shared, req).await
            } else {
                respond::handle(shared, Arc::clone(&busy.0), req).await
            };
            Ok::<_, Infallible>(resp.map(|body| ConnBody { body, _busy: busy }))
        }
    });
    let mut conn = pin!(builder.serve_connection(io, service));
    // Whichever ends first: the connection, a requested reset (dropping `conn` closes the
    // socket with linger 0), shutdown, or idleness. The three signals are futures polled
    // once, to register this task's waker with them, and read as flags on later wake-ups.
    let mut notified = pin!(ctl.notify.notified());
    let mut cancelled = pin!(cancel.cancelled());
    let mut idle = pin!(tokio::time::sleep(idle_check));
    let mut registered: Option<Waker> = None;
    let mut idle_checks = 0u32;
    let mut seen = ctl.requests_started();
    std::future::poll_fn(|cx| {
        if conn.as_mut().poll(cx).is_ready() || ctl.reset_requested() || cancel.is_cancelled() {
            return Poll::Ready(());
        }
        let fresh = !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        if fresh {
            registered = Some(cx.waker().clone());
            if notified.as_mut().poll(cx).is_ready() || cancelled.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        if fresh || idle.is_elapsed() {
            while idle.as_mut().poll(cx).is_ready() {
                let started = ctl.requests_started();
                if started == seen && !ctl.busy() {
                    idle_checks += 1;
                    if idle_checks >= IDLE_CHECKS {
                        return Poll::Ready(());
                    }
                } else {
                    idle_checks = 0;
                    seen = started;
                }
                idle.as_mut()
                    .reset(tokio::time::Instant::now() + idle_check);
            }
        }
        Poll::Pending
    })
    .await;
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::{MockConfig, MockUpstream};

    /// Reads until EOF or until `want` shows up, for at most 10 s; whether it saw EOF.
    async fn read_until(stream: &mut TcpStream, want: &str) -> (String, bool) {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let read = async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return true,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                if String::from_utf8_lossy(&got).contains(want) {
                    return false;
                }
            }
        };
        let eof = tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .unwrap_or(false);
        (String::from_utf8_lossy(&got).into_owned(), eof)
    }

    #[tokio::test]
    async fn idle_connections_close_and_busy_ones_stay() {
        let config = MockConfig {
            idle_timeout: Duration::from_millis(80),
            ..MockConfig::default()
        };
        let mock = MockUpstream::start(config).await.expect("mock starts");
        let body = r#"{"model":"m","messages":[]}"#;
        let slow = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             x-mock-fault: {{\"latency_before_headers_ms\":600}}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut busy = TcpStream::connect(mock.addr()).await.expect("connects");
        let mut idle = TcpStream::connect(mock.addr()).await.expect("connects");
        assert!(busy.write_all(slow.as_bytes()).await.is_ok());
        // A connection that never sends a request is closed: EOF, no response.
        assert_eq!(
            read_until(&mut idle, "HTTP/1.1").await,
            (String::new(), true)
        );
        // One whose request takes longer than the idle timeout is answered.
        let (answer, _) = read_until(&mut busy, "chat.completion").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // And once answered and left alone, it is closed too.
        let (rest, eof) = read_until(&mut busy, "never sent").await;
        assert!(eof && !rest.contains("HTTP/1.1"), "{rest}");
        mock.shutdown().await;
    }
}
