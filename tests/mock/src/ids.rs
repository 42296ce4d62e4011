//! Realistic-looking, unique identifiers (`chatcmpl-…`, `msg_01…`, `resp_…`) and timestamps.
//!
//! A process-wide counter run through SplitMix64 is unique per process, costs no lock and
//! needs no random-number crate; the seed comes from the clock so two mock processes do not
//! repeat each other's ids.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const HEX: &[u8; 16] = b"0123456789abcdef";

static COUNTER: AtomicU64 = AtomicU64::new(0);
static SEED: OnceLock<u64> = OnceLock::new();

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn seed() -> u64 {
    *SEED.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        splitmix64(nanos ^ u64::from(std::process::id()).rotate_left(32))
    })
}

/// Fills `out` with characters drawn from `alphabet` (at most 64 symbols). Each character
/// takes six random bits scaled onto the alphabet by a multiply and shift: ids are built on
/// every response, and a division per character showed up in profiles. The alphabet's size
/// is a constant, so the scaled index is known to be in range.
fn fill_chars<const A: usize>(out: &mut [u8], alphabet: &[u8; A]) {
    let mut state = seed().wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed));
    // Ten characters per 64-bit draw.
    for chunk in out.chunks_mut(10) {
        state = splitmix64(state);
        let mut bits = state;
        for slot in chunk {
            let idx = (((bits & 63) * A as u64) >> 6) as usize;
            *slot = alphabet.get(idx).copied().unwrap_or(b'0');
            bits >>= 6;
        }
    }
}

/// `prefix` then random characters up to `N` bytes, on the stack: the plain path writes
/// its ids straight into the response, and a `String` per id was an allocation each.
fn make_array<const N: usize, const A: usize>(prefix: &[u8], alphabet: &[u8; A]) -> [u8; N] {
    let mut out = [0u8; N];
    let split = prefix.len().min(N);
    let (head, tail) = out.split_at_mut(split);
    head.copy_from_slice(&prefix[..split]);
    fill_chars(tail, alphabet);
    out
}

fn make<const A: usize>(prefix: &str, alphabet: &[u8; A], len: usize) -> String {
    let mut out = vec![0u8; prefix.len() + len];
    let (head, tail) = out.split_at_mut(prefix.len());
    head.copy_from_slice(prefix.as_bytes());
    fill_chars(tail, alphabet);
    // Every byte is ASCII from the prefix or the alphabet.
    String::from_utf8(out).unwrap_or_default()
}

/// Length of a Chat Completions id.
pub const CHAT_COMPLETION_LEN: usize = 9 + 29;
/// Length of OpenAI's `x-request-id` value.
pub const OPENAI_REQUEST_LEN: usize = 4 + 32;
/// Length of Anthropic's `request-id` value.
pub const ANTHROPIC_REQUEST_LEN: usize = 8 + 20;

/// [`chat_completion`] as bytes on the stack.
pub fn chat_completion_bytes() -> [u8; CHAT_COMPLETION_LEN] {
    make_array(b"chatcmpl-", BASE62)
}

/// OpenAI's `x-request-id` header value: `req_` plus 32 hex digits.
pub fn openai_request_bytes() -> [u8; OPENAI_REQUEST_LEN] {
    make_array(b"req_", HEX)
}

/// [`anthropic_request`] as bytes on the stack.
pub fn anthropic_request_bytes() -> [u8; ANTHROPIC_REQUEST_LEN] {
    make_array(b"req_011C", BASE62)
}

/// `chatcmpl-` plus 29 alphanumerics, like OpenAI's Chat Completions ids.
pub fn chat_completion() -> String {
    make("chatcmpl-", BASE62, 29)
}

/// `call_` plus 24 alphanumerics, like OpenAI tool call ids.
pub fn openai_call() -> String {
    make("call_", BASE62, 24)
}

/// `msg_01` plus 22 alphanumerics, like Anthropic message ids.
pub fn anthropic_message() -> String {
    make("msg_01", BASE62, 22)
}

/// `toolu_01` plus 22 alphanumerics, like Anthropic tool use ids.
pub fn anthropic_tool_use() -> String {
    make("toolu_01", BASE62, 22)
}

/// An opaque thinking-block signature.
pub fn anthropic_signature() -> String {
    make("Eq", BASE62, 94)
}

/// Anthropic's `request-id` header value.
pub fn anthropic_request() -> String {
    make("req_011C", BASE62, 20)
}

/// Responses API ids: `resp_`, `msg_`, `rs_` or `fc_` plus 48 hex digits.
pub fn responses(prefix: &str) -> String {
    make(prefix, HEX, 48)
}

/// A stable system fingerprint for the whole process.
pub const SYSTEM_FINGERPRINT: &str = "fp_f3e1a9c07b";

/// Most decimal digits of a `u64`.
pub const MAX_DIGITS: usize = 20;

/// `n` in decimal, right-aligned in a stack buffer; the digits are `buf[start..]`.
pub fn decimal(mut n: u64) -> ([u8; MAX_DIGITS], usize) {
    let mut buf = [0u8; MAX_DIGITS];
    let mut start = MAX_DIGITS;
    loop {
        start -= 1;
        if let Some(slot) = buf.get_mut(start) {
            *slot = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || start == 0 {
            return (buf, start);
        }
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_right_shape_and_differ() {
        let a = chat_completion();
        let b = chat_completion();
        assert_ne!(a, b);
        assert_eq!(a.len(), "chatcmpl-".len() + 29);
        assert!(
            a["chatcmpl-".len()..]
                .bytes()
                .all(|c| c.is_ascii_alphanumeric())
        );
        let (c, o, q) = (
            chat_completion_bytes(),
            openai_request_bytes(),
            anthropic_request_bytes(),
        );
        assert!(c.starts_with(b"chatcmpl-") && c[9..].iter().all(u8::is_ascii_alphanumeric));
        assert!(o.starts_with(b"req_") && o[4..].iter().all(u8::is_ascii_hexdigit));
        assert!(q.starts_with(b"req_011C") && q[8..].iter().all(u8::is_ascii_alphanumeric));
        assert_eq!(chat_completion().len(), CHAT_COMPLETION_LEN);
        assert_eq!(anthropic_request().len(), ANTHROPIC_REQUEST_LEN);
        assert_ne!(chat_completion_bytes(), c);
        let r = responses("resp_");
        assert_eq!(r.len(), 5 + 48);
        assert!(r[5..].bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn decimal_matches_to_string() {
        for n in [0, 7, 10, 1_764_000_000, u64::MAX] {
            let (buf, start) = decimal(n);
            assert_eq!(&buf[start..], n.to_string().as_bytes());
        }
    }
}
