//! The accept loop and per-connection tasks.
//!
//! We run hyper's HTTP/1.1 connection ourselves (rather than through a framework) because a
//! fault must be able to end the connection with a TCP RST: the connection task owns the
//! socket, and a per-connection [`ConnCtl`] lets a request or a body ask it to drop the
//! connection with `SO_LINGER` 0.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::body::ConnCtl;
use super::{control, respond};

/// Pause after a failed `accept` (for example when out of file descriptors) so the loop does
/// not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

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
    builder
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(shared.config.idle_timeout);
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
    let service = service_fn(move |req: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        let ctl = Arc::clone(&service_ctl);
        async move {
            let resp = if req.uri().path().starts_with("/__mock/") {
                control::handle(&shared, req).await
            } else {
                respond::handle(shared, ctl, req).await
            };
            Ok::<_, Infallible>(resp)
        }
    });
    let conn = builder.serve_connection(io, service);
    // Whichever ends first: the connection, a requested reset (dropping `conn` closes the
    // socket with linger 0), or shutdown.
    tokio::select! {
        _ = conn => {}
        () = ctl.notify.notified() => {}
        () = cancel.cancelled() => {}
    }
}
