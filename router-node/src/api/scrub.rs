//! Removing a connection's own credential from upstream bytes relayed to a client.
//!
//! Some providers echo the request's API key in error text ("Incorrect API key provided: …").
//! Failures before the commit point are re-worded by routing, but after the commit an
//! upstream's in-band error event is relayed as it came, so its text would reach the client.
//! Pattern-based redaction catches well-known key formats only; here the exact credential of
//! the connection that served the request is replaced by [`REDACTED`] wherever it appears.
//!
//! A stream is scrubbed chunk by chunk. A chunk that ends with the first bytes of the
//! credential keeps those bytes back until the next chunk shows whether the credential
//! follows. SSE events end with a blank line, which no credential starts with, so a normal
//! stream is never delayed.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use memchr::memmem::Finder;
use switchyard_shared::classify::REDACTED;

/// Credentials shorter than this are not scrubbed: they would match ordinary text.
const MIN_SECRET_LEN: usize = 8;

/// Incremental scrubber of one secret over a sequence of chunks.
///
/// The search is memchr's vectorised substring finder, built once per connection and shared
/// by its streams (a reference count, no copy of the finder per stream): a chunk
/// without the secret costs one pass of it and a look at its last bytes, and is released
/// without a copy.
#[derive(Debug)]
pub struct Scrubber {
    finder: Arc<Finder<'static>>,
    carry: Vec<u8>,
}

/// A connection's credential prepared for scrubbing: its finder is built once, with the
/// connection, rather than for every answer (building one is a few hundred nanoseconds, a
/// visible share of a small JSON request).
#[derive(Debug, Clone)]
pub struct ScrubSecret {
    finder: Arc<Finder<'static>>,
}

impl ScrubSecret {
    /// `None` when there is nothing worth scrubbing (no credential, or a very short one).
    pub fn new(secret: Option<&str>) -> Option<Self> {
        let secret = usable(secret)?;
        Some(Self {
            finder: Arc::new(Finder::new(secret.as_bytes()).into_owned()),
        })
    }
}

impl Scrubber {
    /// `None` when there is nothing worth scrubbing.
    pub fn new(secret: Option<&ScrubSecret>) -> Option<Self> {
        Some(Self {
            finder: secret?.finder.clone(),
            carry: Vec::new(),
        })
    }

    fn secret(&self) -> &[u8] {
        self.finder.needle()
    }

    /// The scrubbed bytes of `chunk` that can be released now.
    pub fn push(&mut self, chunk: Bytes) -> Bytes {
        if self.carry.is_empty()
            && self.finder.find(&chunk).is_none()
            && partial_suffix(&chunk, self.secret()) == 0
        {
            return chunk; // the common case: no copy
        }
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(&chunk);
        let mut out = BytesMut::with_capacity(buf.len());
        let rest = replace_into(&mut out, &buf, &self.finder);
        let keep = partial_suffix(rest, self.secret());
        let release = rest.len() - keep;
        out.extend_from_slice(rest.get(..release).unwrap_or_default());
        self.carry = rest.get(release..).unwrap_or_default().to_vec();
        out.freeze()
    }

    /// Bytes held back at the end of the stream (a prefix of the secret, never all of it).
    pub fn finish(&mut self) -> Bytes {
        Bytes::from(std::mem::take(&mut self.carry))
    }

    /// `text` with every occurrence of the secret replaced.
    pub fn scrub_str(&self, text: &str) -> String {
        match std::str::from_utf8(self.secret()) {
            Ok(s) if text.contains(s) => text.replace(s, REDACTED),
            _ => text.to_owned(),
        }
    }
}

/// The trimmed secret, when it is long enough to scrub.
fn usable(secret: Option<&str>) -> Option<&str> {
    let secret = secret?.trim();
    (secret.len() >= MIN_SECRET_LEN).then_some(secret)
}

/// Appends `hay` to `out` with every whole occurrence of the finder's needle replaced, up to
/// the tail after the last one, which is returned instead of appended.
fn replace_into<'h>(out: &mut BytesMut, hay: &'h [u8], finder: &Finder<'_>) -> &'h [u8] {
    let len = finder.needle().len();
    let mut at = 0;
    while let Some(p) = hay.get(at..).and_then(|rest| finder.find(rest)) {
        out.extend_from_slice(hay.get(at..at + p).unwrap_or_default());
        out.extend_from_slice(REDACTED.as_bytes());
        at += p + len;
    }
    hay.get(at..).unwrap_or_default()
}

/// `text` without `secret` (when it is long enough to scrub).
pub fn scrub_text(text: &str, secret: Option<&str>) -> String {
    match usable(secret) {
        Some(s) if text.contains(s) => text.replace(s, REDACTED),
        _ => text.to_owned(),
    }
}

/// `body` without `secret`, copying only when it occurs. A whole body has no next chunk, so
/// nothing is held back and no finder is kept: one search, and a reference-counted clone
/// when the secret is absent.
pub fn scrub_bytes(body: &Bytes, secret: Option<&ScrubSecret>) -> Bytes {
    let Some(secret) = secret else {
        return body.clone();
    };
    if secret.finder.find(body).is_none() {
        return body.clone();
    }
    let mut out = BytesMut::with_capacity(body.len());
    let rest = replace_into(&mut out, body, &secret.finder);
    out.extend_from_slice(rest);
    out.freeze()
}

/// Wraps a body stream so that `secret` never leaves it. Errors end the stream (bytes held
/// back at that point are a partial secret and are dropped).
///
/// One allocation holds the inner stream and the scrubber together: the wrapper lives as
/// long as the client's stream, which can be idle for minutes, so it is kept small.
pub fn scrub_stream<S, E>(
    inner: S,
    secret: Option<&ScrubSecret>,
) -> std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, E>>>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin + 'static,
    E: 'static,
{
    match Scrubber::new(secret) {
        None => Box::pin(inner),
        Some(scrubber) => Box::pin(ScrubStream {
            inner,
            scrubber,
            done: false,
        }),
    }
}

/// The stream of [`scrub_stream`].
struct ScrubStream<S> {
    inner: S,
    scrubber: Scrubber,
    /// An error or the end was passed on: nothing more comes.
    done: bool,
}

impl<S, E> Stream for ScrubStream<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        loop {
            match std::task::ready!(this.inner.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => {
                    let out = this.scrubber.push(chunk);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(out)));
                    }
                }
                Some(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                None => {
                    this.done = true;
                    let rest = this.scrubber.finish();
                    return Poll::Ready((!rest.is_empty()).then_some(Ok(rest)));
                }
            }
        }
    }
}

/// Length of the longest suffix of `hay` that is a proper prefix of `needle`.
fn partial_suffix(hay: &[u8], needle: &[u8]) -> usize {
    let Some(&last) = hay.last() else { return 0 };
    let max = needle.len().saturating_sub(1).min(hay.len());
    (1..=max)
        .rev()
        .find(|&k| needle.get(k - 1) == Some(&last) && hay.ends_with(&needle[..k]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(key: &str) -> Option<ScrubSecret> {
        ScrubSecret::new(Some(key))
    }

    const KEY: &str = "4f7c2e9a1b3d5f60.Q8rT2vX9zY4wK1mN";

    fn run(chunks: &[&str]) -> (String, Vec<String>) {
        let mut s = Scrubber::new(secret(KEY).as_ref()).unwrap();
        let mut released = Vec::new();
        for c in chunks {
            released.push(String::from_utf8(s.push(Bytes::from(c.to_string())).to_vec()).unwrap());
        }
        released.push(String::from_utf8(s.finish().to_vec()).unwrap());
        (released.concat(), released)
    }

    #[test]
    fn whole_and_split_secrets_are_replaced() {
        let (all, _) = run(&[&format!("data: {{\"m\":\"key {KEY} bad\"}}\n\n")]);
        assert_eq!(all, "data: {\"m\":\"key [REDACTED] bad\"}\n\n");
        let (all, parts) = run(&[
            "data: key 4f7c2e9a",
            "1b3d5f60.Q8rT2vX9zY4wK1mN and ",
            "more\n\n",
        ]);
        assert_eq!(all, "data: key [REDACTED] and more\n\n");
        assert_eq!(parts[0], "data: key ", "the partial secret is held back");
        let (all, _) = run(&[KEY, KEY]);
        assert_eq!(all, "[REDACTED][REDACTED]");
    }

    fn chunks(items: Vec<Result<&'static str, &'static str>>) -> Vec<Result<Bytes, &'static str>> {
        items
            .into_iter()
            .map(|r| r.map(|s| Bytes::from_static(s.as_bytes())))
            .collect()
    }

    #[tokio::test]
    async fn the_stream_scrubs_across_chunks_and_releases_the_held_tail_at_its_end() {
        let inner = futures_util::stream::iter(chunks(vec![
            Ok("data: key 4f7c2e9a"),
            Ok("1b3d5f60.Q8rT2vX9zY4wK1mN ok\n\n"),
            Ok("tail 4f7c"),
        ]));
        let out: Vec<_> = scrub_stream(inner, secret(KEY).as_ref()).collect().await;
        let text: Vec<_> = out
            .into_iter()
            .map(|r| String::from_utf8(r.unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(text, ["data: key ", "[REDACTED] ok\n\n", "tail ", "4f7c"]);
    }

    #[tokio::test]
    async fn an_error_ends_the_stream_and_drops_the_held_partial_secret() {
        let inner = futures_util::stream::iter(chunks(vec![
            Ok("x 4f7c2e"),
            Err("reset"),
            Ok("never polled"),
        ]));
        let out: Vec<_> = scrub_stream(inner, secret(KEY).as_ref()).collect().await;
        assert_eq!(out, [Ok(Bytes::from_static(b"x ")), Err("reset")]);
    }

    #[test]
    fn ordinary_chunks_pass_through_without_delay() {
        let (all, parts) = run(&["data: {\"a\":1}\n\n", "data: [DONE]\n\n"]);
        assert_eq!(parts, ["data: {\"a\":1}\n\n", "data: [DONE]\n\n", ""]);
        assert_eq!(all, "data: {\"a\":1}\n\ndata: [DONE]\n\n");
        // A prefix that turns out not to be the secret is released with the next chunk.
        let (all, _) = run(&["x 4f7c", "zzz"]);
        assert_eq!(all, "x 4f7czzz");
        let (all, _) = run(&["tail 4f7c2e"]);
        assert_eq!(all, "tail 4f7c2e", "held-back bytes are flushed at the end");
    }

    #[test]
    fn short_or_missing_secrets_are_not_scrubbed() {
        assert!(Scrubber::new(None).is_none());
        assert!(ScrubSecret::new(None).is_none());
        assert!(ScrubSecret::new(Some("abc")).is_none());
        assert_eq!(scrub_text("abc def", Some("abc")), "abc def");
        assert_eq!(
            scrub_text(&format!("bad key {KEY}"), Some(KEY)),
            "bad key [REDACTED]"
        );
        let b = Bytes::from(format!("{{\"e\":\"{KEY}\"}}"));
        assert_eq!(
            scrub_bytes(&b, secret(KEY).as_ref()),
            Bytes::from("{\"e\":\"[REDACTED]\"}")
        );
    }

    /// Every way of cutting a body into two or three chunks releases, in total, the body
    /// with each whole secret replaced: the secret split across chunks is still caught, and a
    /// prefix that is not followed by the rest is released unchanged.
    #[test]
    fn every_split_gives_the_whole_body_scrubbed() {
        let body = format!(
            "{KEY}x 4f7c2e9 y {KEY}{KEY} z 4f7c2e9a1b3d5f60.Q8rT2vX9zY4wK1m q{KEY}4f7c2e9a1b"
        );
        let expected = body.replace(KEY, REDACTED);
        let n = body.len();
        for i in 0..=n {
            for j in i..=n {
                let (all, parts) = run(&[&body[..i], &body[i..j], &body[j..]]);
                assert_eq!(all, expected, "cut at {i} and {j}");
                for part in &parts {
                    assert!(!part.contains(KEY), "cut at {i} and {j}: {part}");
                }
            }
        }
    }

    #[test]
    fn chunks_and_bodies_without_the_secret_are_not_copied() {
        let mut s = Scrubber::new(secret(KEY).as_ref()).unwrap();
        let chunk =
            Bytes::from_static(b"data: {\"choices\":[{\"delta\":{\"content\":\"sk-\"}}]}\n\n");
        assert_eq!(s.push(chunk.clone()).as_ptr(), chunk.as_ptr());
        let body = Bytes::from_static(b"{\"id\":\"4f7c2e9a1b3d5f60\"}");
        assert_eq!(
            scrub_bytes(&body, secret(KEY).as_ref()).as_ptr(),
            body.as_ptr()
        );
        let body = Bytes::from(format!("{KEY} and {KEY}"));
        assert_eq!(
            scrub_bytes(&body, secret(KEY).as_ref()),
            "[REDACTED] and [REDACTED]"
        );
        assert_eq!(
            scrub_bytes(&body, secret(&format!("  {KEY} ")).as_ref()),
            "[REDACTED] and [REDACTED]"
        );
        assert_eq!(scrub_bytes(&body, None), body);
    }
}
