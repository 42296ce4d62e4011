//! Small per-response buffers cut from one larger per-thread buffer.
//!
//! The plain path builds two buffers per response: the answer (a copy of a cached template
//! with a fresh id and time) and the request-id header value. Allocating each and freeing it
//! once hyper has written it was a visible part of the mock's work per request. Cut from a
//! shared buffer instead, each is a reference-count increment; the buffer is reused in place
//! once every piece cut from it has been dropped, and replaced when some are still held.

use std::cell::RefCell;

use bytes::{Bytes, BytesMut};

/// Size of a fresh buffer; kept under glibc's default mmap threshold (128 KiB).
const CHUNK: usize = 64 * 1024;

thread_local! {
    static ARENA: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// `len` bytes written by `fill`, as a `Bytes` cut from this thread's buffer. `fill` must
/// append exactly the bytes of the result (it may append fewer or more than `len`, which is
/// only the room reserved).
pub(crate) fn bytes(len: usize, fill: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut fill = Some(fill);
    let cut = ARENA.try_with(|arena| {
        let mut arena = arena.try_borrow_mut().ok()?;
        if arena.capacity() < len {
            arena.reserve(len.max(CHUNK));
        }
        (fill.take()?)(&mut arena);
        Some(arena.split().freeze())
    });
    match (cut, fill) {
        (Ok(Some(bytes)), _) => bytes,
        // The thread is exiting (or `fill` reentered): an allocation of its own.
        (_, Some(fill)) => {
            let mut own = BytesMut::with_capacity(len);
            fill(&mut own);
            own.freeze()
        }
        (_, None) => Bytes::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_independent_and_the_buffer_is_reused() {
        let a = bytes(3, |b| b.extend_from_slice(b"abc"));
        let b = bytes(2, |b| b.extend_from_slice(b"de"));
        assert_eq!((&a[..], &b[..]), (&b"abc"[..], &b"de"[..]));
        drop((a, b));
        // More than a whole buffer, over and over: each piece stays as written.
        let big = vec![7u8; CHUNK / 3];
        let kept: Vec<Bytes> = (0..10)
            .map(|_| bytes(big.len(), |b| b.extend_from_slice(&big)))
            .collect();
        assert!(kept.iter().all(|k| k[..] == big[..]));
        let huge = vec![1u8; CHUNK * 2];
        assert_eq!(
            bytes(huge.len(), |b| b.extend_from_slice(&huge)).len(),
            huge.len()
        );
    }
}
