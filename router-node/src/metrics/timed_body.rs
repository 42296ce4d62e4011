//! A response body that carries its request's timer, so the gateway overhead and the request
//! duration end when actix has taken the whole body for writing, not when the handler
//! returns (the response head and body are encoded after that).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::body::{BodySize, BoxBody, MessageBody};
use bytes::Bytes;

use super::RequestTimer;

/// The body of a timed response; records the timer when actix drops it (after its last
/// chunk, or when the client went away first).
struct TimedBody {
    inner: BoxBody,
    timer: RequestTimer,
    upstream: Duration,
}

impl MessageBody for TimedBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.inner.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        // `BoxBody` is `Unpin`, and so is every field here.
        Pin::new(&mut self.get_mut().inner).poll_next(cx)
    }
}

impl Drop for TimedBody {
    fn drop(&mut self) {
        self.timer.commit(self.upstream);
    }
}

impl RequestTimer {
    /// Finishes the request with `resp`'s status once actix has taken `resp`'s body, after
    /// waiting `upstream` on upstreams in total.
    pub fn finish_with(mut self, resp: HttpResponse, upstream: Duration) -> HttpResponse {
        self.status = resp.status().as_u16();
        resp.map_body(|_, inner| TimedBody {
            inner,
            timer: self,
            upstream,
        })
        .map_into_boxed_body()
    }
}
