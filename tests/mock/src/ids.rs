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

/// Appends `len` characters drawn from `alphabet` (at most 64 symbols). Each character
/// takes six random bits scaled onto the alphabet by a multiply and shift: ids are built on
/// every response, and a division per character showed up in profiles.
fn push_chars(out: &mut String, alphabet: &[u8], len: usize) {
    let mut state = seed().wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed));
    let mut bits = 0u64;
    let mut left = 0u32;
    for _ in 0..len {
        if left == 0 {
            state = splitmix64(state);
            bits = state;
            left = 10;
        }
        let idx = (((bits & 63) * alphabet.len() as u64) >> 6) as usize;
        bits >>= 6;
        left -= 1;
        if let Some(&c) = alphabet.get(idx) {
            out.push(char::from(c));
        }
    }
}

fn make(prefix: &str, alphabet: &[u8], len: usize) -> String {
    let mut out = String::with_capacity(prefix.len() + len);
    out.push_str(prefix);
    push_chars(&mut out, alphabet, len);
    out
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

/// OpenAI's `x-request-id` header value.
pub fn openai_request() -> String {
    make("req_", HEX, 32)
}

/// Responses API ids: `resp_`, `msg_`, `rs_` or `fc_` plus 48 hex digits.
pub fn responses(prefix: &str) -> String {
    make(prefix, HEX, 48)
}

/// A stable system fingerprint for the whole process.
pub const SYSTEM_FINGERPRINT: &str = "fp_f3e1a9c07b";

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
        let r = responses("resp_");
        assert_eq!(r.len(), 5 + 48);
        assert!(r[5..].bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
