//! The upstream response body and transport errors, whichever client carried the request.
//!
//! Why a module: the attempt and the committed stream read bodies chunk by chunk and
//! classify failures the same way for the direct hyper client and the proxied reqwest one.
//! The body is a plain enum, polled in place: no boxing per response or per chunk.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Body;
use switchyard_shared::classify::TransportFailure;

use super::pooled::PooledBody;

/// What [`RespBody::drain_aside`] reads at most: an upstream that keeps sending after its
/// content is complete is not worth its connection.
pub const DRAIN_MAX_BYTES: usize = 64 * 1024;

/// A response body from the upstream.
#[derive(Debug)]
pub enum RespBody {
    /// From the direct (hyper) client, over a pooled connection.
    Direct(PooledBody),
    /// From the reqwest client used behind a proxy.
    Proxied(reqwest::Body),
}

impl RespBody {
    /// The next data chunk; `None` at the end. Trailers are skipped.
    pub fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, TransportError>>> {
        loop {
            let frame = match self {
                Self::Direct(body) => match body.poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => frame,
                    Poll::Ready(Some(Err(e))) => {
                        return Poll::Ready(Some(Err(TransportError::Body(e))));
                    }
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                },
                Self::Proxied(body) => match Pin::new(body).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => frame,
                    Poll::Ready(Some(Err(e))) => {
                        return Poll::Ready(Some(Err(TransportError::Proxied(e))));
                    }
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                },
            };
            if let Ok(data) = frame.into_data() {
                return Poll::Ready(Some(Ok(data)));
            }
        }
    }

    /// The next data chunk; `None` at the end.
    pub async fn next_chunk(&mut self) -> Option<Result<Bytes, TransportError>> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// Reads what is left of a body whose content is complete (the stream's terminal event
    /// arrived) on a task of its own, so that its connection goes back to the pool once the
    /// end arrives, while the response it came with has already ended. What is read is
    /// dropped; after `limit` without the end, or past [`DRAIN_MAX_BYTES`], so is the body
    /// and with it the connection.
    pub fn drain_aside(mut self, limit: Duration) {
        // Either client: reqwest, too, keeps a connection only when its body was read to
        // the end.
        let mut left = DRAIN_MAX_BYTES;
        let drain = poll_fn(move |cx| {
            loop {
                match self.poll_chunk(cx) {
                    Poll::Ready(Some(Ok(chunk))) if chunk.len() <= left => left -= chunk.len(),
                    Poll::Ready(_) => return Poll::Ready(()),
                    Poll::Pending => return Poll::Pending,
                }
            }
        });
        // Spawned on the current thread's runtime (each server worker runs its own), where
        // the connection's pool lives.
        tokio::spawn(async move {
            let _ = tokio::time::timeout(limit, drain).await;
        });
    }
}

/// A failure on the wire, before or after the response head.
#[derive(Debug)]
pub enum TransportError {
    /// The direct client could not connect (TCP or TLS, within the connect timeout).
    Connect(Box<dyn std::error::Error + Send + Sync>),
    /// The direct client could not send the request or read the head.
    Send(hyper::Error),
    /// The direct client's body read failed.
    Body(hyper::Error),
    /// Anything from the proxied client.
    Proxied(reqwest::Error),
}

impl TransportError {
    /// The failure in classification terms, with a short message (never the URL).
    pub fn classify(&self) -> (TransportFailure, &'static str) {
        match self {
            Self::Connect(e) if timed_out(e.as_ref()) => {
                (TransportFailure::Timeout, "connect timeout")
            }
            Self::Connect(_) => (TransportFailure::ConnectRefused, "connect refused"),
            Self::Send(_) => (TransportFailure::ConnectionReset, "connection reset"),
            Self::Body(e) if e.is_timeout() => (TransportFailure::Timeout, "upstream timeout"),
            Self::Body(_) => (
                TransportFailure::ConnectionReset,
                "upstream body read failed",
            ),
            Self::Proxied(e) => classify_reqwest(e),
        }
    }
}

/// Whether an I/O timeout is somewhere in `e`'s chain (the connector's connect timeout).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(err) = cause {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cause = err.source();
    }
    false
}

fn classify_reqwest(e: &reqwest::Error) -> (TransportFailure, &'static str) {
    if e.is_timeout() {
        let what = if e.is_connect() {
            "connect timeout"
        } else {
            "upstream timeout"
        };
        (TransportFailure::Timeout, what)
    } else if e.is_connect() {
        (TransportFailure::ConnectRefused, "connect refused")
    } else if e.is_builder() {
        (TransportFailure::ConnectRefused, "invalid upstream request")
    } else if e.is_body() || e.is_decode() {
        (
            TransportFailure::ConnectionReset,
            "upstream body read failed",
        )
    } else {
        (TransportFailure::ConnectionReset, "connection reset")
    }
}
