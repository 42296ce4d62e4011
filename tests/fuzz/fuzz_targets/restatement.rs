//! Restatement matcher: checked against a naive statement of the rule. A rule restates a
//! status when the status is one of its `from_statuses`, the lower-cased `message + body`
//! contains one of its text markers (or it has none: status alone), and no exclude marker.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_shared::restatement::{RestatementRule, restate};

fn markers(line: &str) -> Vec<&str> {
    if line.is_empty() {
        Vec::new()
    } else {
        line.split('|').collect()
    }
}

fuzz_target!(|data: &[u8]| {
    // Layout: status (2 bytes), rule status (2 bytes), upstream Retry-After (1 byte), then
    // text lines: markers (`|`-separated), exclude markers, message, body.
    if data.len() < 5 {
        return;
    }
    let status = u16::from_le_bytes([data[0], data[1]]) % 600;
    let from = u16::from_le_bytes([data[2], data[3]]) % 600;
    let upstream_retry = u64::from(data[4]) * 100;
    let text = String::from_utf8_lossy(&data[5..]);
    let mut lines = text.splitn(4, '\n');
    let text_markers = markers(lines.next().unwrap_or_default());
    let exclude = markers(lines.next().unwrap_or_default());
    let message = lines.next().unwrap_or_default();
    let body = lines.next().unwrap_or_default();

    let rule = RestatementRule::new(
        "fuzz",
        vec![from],
        429,
        text_markers.iter().copied(),
        exclude.iter().copied(),
        Some(60_000),
    );
    let rules = [rule];
    let got = restate(status, message, body, &rules, Some(upstream_retry));

    let lowered = format!("{message} {body}").to_lowercase();
    let texts: Vec<String> = rules[0].text_markers().to_vec();
    let expected = status == from
        && (texts.is_empty() || texts.iter().any(|m| lowered.contains(m.as_str())))
        && !rules[0]
            .exclude_markers()
            .iter()
            .any(|m| lowered.contains(m.as_str()));
    assert_eq!(
        got.is_some(),
        expected,
        "markers {text_markers:?} / {exclude:?}"
    );
    if let Some(r) = got {
        assert_eq!(r.status, 429);
        assert_eq!(r.from_status, status);
        let want = if upstream_retry > 0 {
            upstream_retry
        } else {
            60_000
        };
        assert_eq!(r.retry_after_ms, Some(want));
    }
});
