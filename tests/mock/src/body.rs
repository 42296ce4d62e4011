//! The response body: either a complete buffer, or a script of data, pauses, a stall and a
//! connection reset that is played out as hyper polls it.
//!
//! Playing the script inside the body (rather than in a spawned task feeding a channel)
//! costs no task or channel per stream, and a client that goes away simply drops the body,
//! which ends the script and its in-flight guard at once.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::Sleep;

use super::stats::InFlightGuard;

/// One step of a scripted body.
#[derive(Debug)]
pub(crate) enum Step {
    /// Send these bytes as one body chunk.
    Data(Bytes),
    /// Pause (a zero duration is skipped).
    Sleep(Duration),
    /// Reset the TCP connection; nothing after this is sent.
    Reset,
}

/// Builds a step list, merging adjacent data so an undelayed stream costs one write.
#[derive(Debug, Default)]
pub(crate) struct Script {
    steps: VecDeque<Step>,
    pending: Option<BytesMut>,
}

impl Script {
    pub(crate) fn data(&mut self, bytes: &[u8]) {
        match &mut self.pending {
            Some(buf) => buf.extend_from_slice(bytes),
            None => self.pending = Some(BytesMut::from(bytes)),
        }
    }

    pub(crate) fn sleep(&mut self, d: Duration) {
        if !d.is_zero() {
            self.flush();
            self.steps.push_back(Step::Sleep(d));
        }
    }

    pub(crate) fn reset(&mut self) {
        self.flush();
        self.steps.push_back(Step::Reset);
    }

    fn flush(&mut self) {
        if let Some(buf) = self.pending.take() {
            self.steps.push_back(Step::Data(buf.freeze()));
        }
    }

    pub(crate) fn finish(mut self) -> VecDeque<Step> {
        self.flush();
        self.steps
    }
}

/// Per-connection control shared by the connection task, the service and the bodies it
/// returns. Setting `reset` and notifying makes the connection task drop the connection with
/// `SO_LINGER` 0, which sends a TCP RST instead of a FIN.
#[derive(Debug, Default)]
pub(crate) struct ConnCtl {
    reset: AtomicBool,
    pub(crate) notify: Notify,
    /// Requests the connection has begun and finished serving, for the idle check.
    started: AtomicU64,
    finished: AtomicU64,
}

impl ConnCtl {
    pub(crate) fn request_started(&self) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn request_finished(&self) {
        self.finished.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn requests_started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// Whether a request is being served (its response not yet sent).
    pub(crate) fn busy(&self) -> bool {
        self.finished.load(Ordering::Relaxed) != self.started.load(Ordering::Relaxed)
    }

    pub(crate) fn request_reset(&self) {
        self.reset.store(true, Ordering::Release);
        self.notify.notify_one();
    }

    pub(crate) fn reset_requested(&self) -> bool {
        self.reset.load(Ordering::Acquire)
    }
}

/// The body type of every mock response.
pub(crate) enum MockBody {
    /// A complete buffer with its length announced (`Content-Length`).
    Full(Option<Bytes>),
    /// A complete buffer sent as one chunk of a chunked body, the request in flight until it
    /// is sent: the plain stream, which needs no script, no step queue and no allocation.
    Stream(Option<Bytes>, Option<InFlightGuard>),
    Scripted(Box<Scripted>),
}

pub(crate) struct Scripted {
    steps: VecDeque<Step>,
    sleep: Option<Pin<Box<Sleep>>>,
    ctl: Arc<ConnCtl>,
    resetting: bool,
    /// Released when the script ends or the body is dropped.
    guard: Option<InFlightGuard>,
}

impl MockBody {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        if bytes.is_empty() {
            MockBody::Full(None)
        } else {
            MockBody::Full(Some(bytes))
        }
    }

    pub(crate) fn stream(bytes: Bytes, guard: InFlightGuard) -> Self {
        MockBody::Stream(Some(bytes), Some(guard))
    }

    pub(crate) fn scripted(
        steps: VecDeque<Step>,
        ctl: Arc<ConnCtl>,
        guard: Option<InFlightGuard>,
    ) -> Self {
        MockBody::Scripted(Box::new(Scripted {
            steps,
            sleep: None,
            ctl,
            resetting: false,
            guard,
        }))
    }
}

impl Scripted {
    fn poll_step(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            if self.resetting {
                // The connection task drops the connection; nothing more is sent.
                return Poll::Pending;
            }
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            match self.steps.pop_front() {
                None => {
                    self.guard = None;
                    return Poll::Ready(None);
                }
                Some(Step::Data(bytes)) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Some(Step::Sleep(d)) => self.sleep = Some(Box::pin(tokio::time::sleep(d))),
                Some(Step::Reset) => {
                    self.resetting = true;
                    self.steps.clear();
                    self.ctl.request_reset();
                }
            }
        }
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            MockBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            MockBody::Stream(bytes, guard) => match bytes.take() {
                Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
                None => {
                    *guard = None;
                    Poll::Ready(None)
                }
            },
            MockBody::Scripted(s) => s.poll_step(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, MockBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            MockBody::Full(None) => SizeHint::with_exact(0),
            MockBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            MockBody::Stream(..) | MockBody::Scripted(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_merges_adjacent_data_and_skips_zero_sleeps() {
        let mut s = Script::default();
        s.data(b"a");
        s.data(b"b");
        s.sleep(Duration::ZERO);
        s.data(b"c");
        s.sleep(Duration::from_millis(5));
        s.data(b"d");
        s.reset();
        let steps: Vec<Step> = s.finish().into_iter().collect();
        assert_eq!(steps.len(), 4);
        assert!(matches!(&steps[0], Step::Data(b) if &b[..] == b"abc"));
        assert!(matches!(&steps[1], Step::Sleep(_)));
        assert!(matches!(&steps[2], Step::Data(b) if &b[..] == b"d"));
        assert!(matches!(&steps[3], Step::Reset));
    }
}
