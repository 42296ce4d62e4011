//! How a committed stream's end reads as a failure, for the state its connection keeps.
//!
//! Why: after the commit point the client has its bytes and nothing is replayed, but the
//! connection still learns what went wrong. An in-band error event (Anthropic's
//! `rate_limit_error` or `overloaded_error` mid-answer, an OpenAI-format `error` object in the
//! stream) is read by its type, as the same event before the commit is (RESILIENCE.md,
//! clarifications: "in-band errors are classified by their type, not as 502"): a rate limit
//! cools the connection as a 429 does, an overload as a 529. Before this it read as a
//! connection reset. Order: a watchdog's own abort first (Switchyard ended the stream), then
//! the upstream's in-band error, then a read error.

use switchyard_shared::classify::{self, TransportFailure};
use switchyard_shared::sse::UpstreamStreamError;

use super::attempt::{AttemptFailure, IN_BAND_ERROR_STATUS};
use super::stream::StreamEnd;
use crate::api::scrub::scrub_text;

/// The failure a committed stream's end reports to its connection, `None` when it ended
/// cleanly or the client left (a disconnect is not the connection's fault). `secret` is the
/// connection's key, removed from any text the upstream echoed.
pub fn failure_after_commit(end: &StreamEnd, secret: Option<&str>) -> Option<AttemptFailure> {
    if end.client_disconnected {
        return None;
    }
    if let Some(abort) = &end.abort {
        return Some(AttemptFailure {
            transport: Some(end.transport.unwrap_or_else(|| transport_of(abort.code()))),
            message: abort.message().to_owned(),
            stream_abort: Some(*abort),
            elapsed_ms: end.duration_ms,
            ..AttemptFailure::default()
        });
    }
    if let Some(event) = &end.stream_error {
        return Some(in_band(event, end.duration_ms, secret));
    }
    end.upstream_error.as_ref().map(|err| AttemptFailure {
        transport: Some(end.transport.unwrap_or(TransportFailure::ConnectionReset)),
        message: scrub_text(err, secret),
        elapsed_ms: end.duration_ms,
        ..AttemptFailure::default()
    })
}

/// An in-band error event as the error body it stands for, with the status its code or type
/// means (502 when it names none).
fn in_band(event: &UpstreamStreamError, elapsed_ms: u64, secret: Option<&str>) -> AttemptFailure {
    let body = serde_json::json!({"error": {
        "type": event.error_type,
        "message": event.message,
        "code": event.code,
    }})
    .to_string();
    let status = classify::in_band_status_of(&body).unwrap_or(IN_BAND_ERROR_STATUS);
    AttemptFailure {
        status: Some(status),
        body: scrub_text(&body, secret),
        message: scrub_text(&event.message, secret),
        elapsed_ms,
        in_band_error: true,
        ..AttemptFailure::default()
    }
}

/// The transport kind of a watchdog abort code.
fn transport_of(code: &str) -> TransportFailure {
    match code {
        "stream_idle_timeout" => TransportFailure::IdleTimeout,
        "STREAM_READINESS_TIMEOUT" => TransportFailure::ReadinessTimeout,
        "STREAM_EARLY_EOF" => TransportFailure::EarlyEof,
        _ => TransportFailure::Stall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(error_type: &str, code: Option<&str>) -> StreamEnd {
        StreamEnd {
            stream_error: Some(UpstreamStreamError {
                error_type: error_type.to_owned(),
                message: "slow down sk-secret-123".to_owned(),
                code: code.map(str::to_owned),
            }),
            // What the stream's end also says for an in-band event.
            upstream_error: Some(format!("stream error event ({error_type})")),
            ..StreamEnd::default()
        }
    }

    #[test]
    fn in_band_events_after_commit_read_as_their_type() {
        for (error_type, code, status) in [
            ("rate_limit_error", None, 429),
            ("overloaded_error", None, 529),
            ("api_error", None, 500),
            ("error", Some("rate_limit_exceeded"), 429),
            ("stream_error", None, IN_BAND_ERROR_STATUS),
        ] {
            let f = failure_after_commit(&event(error_type, code), Some("sk-secret-123"))
                .expect("a failure");
            assert_eq!(f.status, Some(status), "{error_type}");
            assert!(f.in_band_error && f.transport.is_none(), "{error_type}");
            assert!(!f.message.contains("sk-secret-123"), "{}", f.message);
            assert!(!f.body.contains("sk-secret-123"), "{}", f.body);
        }
    }

    #[test]
    fn read_errors_and_disconnects() {
        let read = StreamEnd {
            upstream_error: Some("connection reset".to_owned()),
            ..StreamEnd::default()
        };
        let f = failure_after_commit(&read, None).expect("a failure");
        assert_eq!(f.status, None);
        assert_eq!(f.transport, Some(TransportFailure::ConnectionReset));
        let left = StreamEnd {
            client_disconnected: true,
            ..event("rate_limit_error", None)
        };
        assert!(failure_after_commit(&left, None).is_none());
        assert!(failure_after_commit(&StreamEnd::default(), None).is_none());
    }
}
