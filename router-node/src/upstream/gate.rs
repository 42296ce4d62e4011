//! The readiness gate: the commit point of a streamed attempt.
//!
//! Chunks are held back until the first content frame (docs/router-node.md, "The request path"). With stream
//! recovery on ([`super::hold`]) the gate keeps holding after that frame until the hold
//! releases; an end inside the hold that is not clean fails the attempt with
//! [`AttemptFailure::truncated_in_hold`] set, and the held bytes are dropped unseen.

use bytes::Bytes;
use http::Response;
use switchyard_shared::Millis;
use switchyard_shared::classify::TransportFailure;
use switchyard_shared::sse::{
    ReadinessState, SseParser, StreamAbort, StreamInspector, StreamWatch,
};

use super::attempt::{
    AttemptFailure, MAX_PREFIX_BYTES, aborted, deadline_message, from_transport, in_band,
    tap_chunk, transport,
};
use super::body;
use super::headers;
use super::hold::{self, HeldStop, HeldVerdict, HoldPolicy};
use super::request::AttemptRequest;
use super::sse_format;
use super::stream::{CommittedStream, LiveStream};
use crate::clock::Clock;
use crate::transport::RespBody;

/// Holds the stream back until its first content frame (and, with a hold, until the hold
/// releases), an error, a watchdog or EOF.
pub(super) async fn readiness_gate(
    resp: Response<RespBody>,
    req: &AttemptRequest,
    started: Millis,
    hold: Option<HoldPolicy>,
) -> Result<CommittedStream, AttemptFailure> {
    let clock: Clock = req.clock;
    let mut inspector = StreamInspector::new(sse_format(req.client_format));
    let status = resp.status().as_u16();
    let kept = headers::for_classification(resp.headers());
    let client_headers = headers::for_client(resp.headers());
    let quota_headers = headers::for_quota(resp.headers());
    let headers_at = clock.now();
    let mut upstream = resp.into_body();
    let mut parser = SseParser::new();
    let mut watch = StreamWatch::new(&req.watch, headers_at);
    let mut prefix: Vec<Bytes> = Vec::new();
    let mut prefix_len = 0usize;
    let mut error_data = None;
    // Content seen while a hold is on: every end from here on is judged by the hold.
    let holding =
        |watch: &StreamWatch| hold.is_some() && watch.readiness() == ReadinessState::Ready;
    let truncated = |stop: HeldStop, f: AttemptFailure| AttemptFailure {
        truncated_in_hold: true,
        message: format!("{} (inside the stream recovery hold, {stop:?})", f.message),
        ..f
    };
    let mut ended = false;
    loop {
        let now = clock.now();
        let hold_until = hold
            .filter(|_| holding(&watch))
            .map(|h| h.until(headers_at));
        let wake = body::min_opt(
            body::min_opt(watch.next_deadline(now), req.deadline_ms),
            hold_until,
        );
        let next = match wake {
            Some(at) => {
                match tokio::time::timeout_at(clock.instant_at(at).into(), upstream.next_chunk())
                    .await
                {
                    Ok(next) => next,
                    Err(_) => {
                        let now = clock.now();
                        if let Some(h) = hold.filter(|_| holding(&watch))
                            && (h.releases(headers_at, now, prefix_len, watch.summary())
                                || req.deadline_ms.is_some_and(|d| now >= d))
                        {
                            // The window passed (or the attempt's own deadline came first,
                            // and a stream with content is worth more than a retry).
                            break;
                        }
                        if req.deadline_ms.is_some_and(|d| now >= d) {
                            return Err(AttemptFailure {
                                headers: kept,
                                ..transport(TransportFailure::Timeout, deadline_message())
                            });
                        }
                        if let Some(abort) = watch.poll(now) {
                            let f = aborted(abort, kept);
                            if holding(&watch) {
                                return Err(truncated(HeldStop::Watchdog, f));
                            }
                            return Err(f);
                        }
                        continue;
                    }
                }
            }
            None => upstream.next_chunk().await,
        };
        let chunk = match next {
            Some(Ok(chunk)) => chunk,
            Some(Err(e)) => {
                let f = AttemptFailure {
                    headers: kept,
                    ..from_transport(&e)
                };
                if holding(&watch) {
                    return Err(truncated(HeldStop::ReadError, f));
                }
                return Err(f);
            }
            None => {
                parser.finish();
                if holding(&watch) {
                    match hold::judge(HeldStop::Eof, watch.summary()) {
                        HeldVerdict::CleanEnd => {
                            ended = true;
                            break;
                        }
                        HeldVerdict::Truncated => {
                            let f = aborted(StreamAbort::EarlyEof, kept);
                            return Err(truncated(HeldStop::Eof, f));
                        }
                    }
                }
                let abort = watch.on_eof().unwrap_or(StreamAbort::EarlyEof);
                return Err(aborted(abort, kept));
            }
        };
        if chunk.is_empty() {
            continue;
        }
        let now = clock.now();
        let abort = tap_chunk(
            &mut parser,
            &mut watch,
            &mut inspector,
            &chunk,
            now,
            Some(&mut error_data),
        );
        prefix_len += chunk.len();
        prefix.push(chunk);
        match watch.readiness() {
            ReadinessState::UpstreamError => {
                let message = match &watch.summary().error {
                    Some(e) => format!("stream error event before content ({})", e.error_type),
                    None => "stream error event before content".to_owned(),
                };
                return Err(in_band(kept, error_data.unwrap_or_default(), &message));
            }
            ReadinessState::Waiting => {
                if let Some(abort) = abort {
                    return Err(aborted(abort, kept));
                }
                if prefix_len <= MAX_PREFIX_BYTES {
                    continue;
                }
            }
            ReadinessState::Ready => {
                if let Some(h) = hold {
                    if let Some(e) = &watch.summary().error {
                        let message = format!("stream error event ({})", e.error_type);
                        let f = in_band(kept, error_data.unwrap_or_default(), &message);
                        return Err(truncated(HeldStop::ErrorEvent, f));
                    }
                    if let Some(abort) = abort {
                        return Err(truncated(HeldStop::Watchdog, aborted(abort, kept)));
                    }
                    if !h.releases(headers_at, now, prefix_len, watch.summary()) {
                        continue;
                    }
                }
            }
        }
        break;
    }
    let now = clock.now();
    let live = LiveStream {
        inspector,
        clock,
        started,
        upstream,
        parser,
        watch,
        ended,
    };
    Ok(CommittedStream::new(
        status,
        client_headers,
        now.saturating_sub(started),
        prefix,
        live,
    )
    .with_quota_headers(quota_headers))
}
