use super::{infos, parse};
use crate::sse::{EventKind, Format, StreamAbort, format_error_event, keep_alive_frame};

const ALL: [Format; 3] = [
    Format::OpenAiChat,
    Format::OpenAiResponses,
    Format::Anthropic,
];

#[test]
fn error_frames_have_the_documented_shapes() {
    let chat = format_error_event(
        Format::OpenAiChat,
        "stream_timeout",
        "STREAM_READINESS_TIMEOUT",
        "slow",
    );
    assert_eq!(
        String::from_utf8_lossy(&chat),
        "data: {\"error\":{\"type\":\"stream_timeout\",\"code\":\"STREAM_READINESS_TIMEOUT\",\"message\":\"slow\"}}\n\n"
    );
    let anthropic = format_error_event(
        Format::Anthropic,
        "overloaded_error",
        "upstream_overloaded",
        "busy",
    );
    assert_eq!(
        String::from_utf8_lossy(&anthropic),
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"code\":\"upstream_overloaded\",\"message\":\"busy\"}}\n\n"
    );
    let responses = format_error_event(Format::OpenAiResponses, "server_error", "x", "m");
    assert_eq!(
        String::from_utf8_lossy(&responses),
        "event: error\ndata: {\"type\":\"error\",\"code\":\"x\",\"message\":\"m\",\"param\":null,\"error\":{\"type\":\"server_error\",\"code\":\"x\",\"message\":\"m\"}}\n\n"
    );
}

#[test]
fn error_frames_round_trip_through_the_tap_with_escaping() {
    let message = "line one\nline \"two\" \\ \u{1F600} </script>\r\u{0}";
    for format in ALL {
        let frame = format_error_event(format, "server_error", "bad_gateway", message);
        assert_eq!(parse(&frame).len(), 1, "{format:?}: one event");
        let got = infos(format, &frame);
        assert_eq!(got[0].kind, EventKind::Error, "{format:?}");
        let err = got[0]
            .error
            .clone()
            .unwrap_or_else(|| panic!("{format:?}: no error"));
        assert_eq!(
            (err.error_type.as_str(), err.code.as_deref()),
            ("server_error", Some("bad_gateway"))
        );
        assert_eq!(err.message, message, "{format:?}");
    }
}

#[test]
fn abort_error_events_carry_type_and_code() {
    let abort = StreamAbort::Stall { after_ms: 5 };
    for format in ALL {
        let got = infos(format, &abort.error_event(format));
        let err = got[0]
            .error
            .clone()
            .unwrap_or_else(|| panic!("{format:?}: no error"));
        assert_eq!(
            (err.error_type.as_str(), err.code.as_deref()),
            ("timeout_error", Some("stream_stall_timeout"))
        );
    }
}

#[test]
fn keep_alives_are_never_content() {
    assert_eq!(keep_alive_frame(Format::OpenAiChat), b": keep-alive\n\n");
    assert_eq!(
        keep_alive_frame(Format::OpenAiResponses),
        b": keep-alive\n\n"
    );
    assert_eq!(
        keep_alive_frame(Format::Anthropic),
        b"event: ping\ndata: {\"type\":\"ping\"}\n\n"
    );
    for format in ALL {
        let got = infos(format, keep_alive_frame(format));
        assert_eq!(got.len(), 1);
        assert!(
            matches!(got[0].kind, EventKind::Heartbeat | EventKind::Ping),
            "{format:?}"
        );
        assert!(!got[0].kind.opens_readiness());
    }
}
