//! Where the fields of the event being assembled live, and bounded buffers.
//!
//! During one `feed` call a field value may borrow the chunk ([`Slot::Chunk`]); before the
//! chunk goes away it is copied into the parser's own buffer ([`Slot::Owned`]). Buffers grow
//! through [`push_bounded`], whose capacity never exceeds the parser's limit.

/// Capacity a buffer may keep between events; larger buffers are shrunk after use.
const RETAINED_CAPACITY: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, Default)]
pub(super) enum Slot<'c> {
    #[default]
    Unset,
    /// Borrowed from the current chunk (for `data`: exactly one line).
    Chunk(&'c [u8]),
    /// Held in the parser's own buffer.
    Owned,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Overlay<'c> {
    pub(super) event: Slot<'c>,
    pub(super) data: Slot<'c>,
    pub(super) id: Slot<'c>,
}

/// Splits a non-empty line into field name and value; `None` as the name marks a comment.
pub(super) fn split_field(line: &[u8]) -> (Option<&[u8]>, &[u8]) {
    let (name, value) = match memchr::memchr(b':', line) {
        Some(colon) => (&line[..colon], &line[colon + 1..]),
        None => (line, &[][..]),
    };
    let value = value.strip_prefix(b" ").unwrap_or(value);
    if name.is_empty() {
        (None, value)
    } else {
        (Some(name), value)
    }
}

pub(super) fn keep<'c>(
    buf: &mut Vec<u8>,
    value: &'c [u8],
    borrowable: bool,
    max: usize,
) -> Slot<'c> {
    if borrowable {
        Slot::Chunk(value)
    } else {
        buf.clear();
        push_bounded(buf, value, max);
        Slot::Owned
    }
}

pub(super) fn resolve<'x>(slot: Slot<'x>, owned: &'x [u8]) -> Option<&'x [u8]> {
    match slot {
        Slot::Unset => None,
        Slot::Chunk(value) => Some(value),
        Slot::Owned => Some(owned),
    }
}

pub(super) fn materialize(slot: Slot<'_>, buf: &mut Vec<u8>, max: usize) -> bool {
    match slot {
        Slot::Unset => false,
        Slot::Owned => true,
        Slot::Chunk(value) => {
            buf.clear();
            push_bounded(buf, value, max);
            true
        }
    }
}

/// Appends with amortised growth whose capacity never exceeds `max` unless the content does
/// (the callers' budget check guarantees it does not).
pub(super) fn push_bounded(buf: &mut Vec<u8>, bytes: &[u8], max: usize) {
    let need = buf.len() + bytes.len();
    if need > buf.capacity() {
        let target = need
            .max(buf.capacity().saturating_mul(2))
            .min(max)
            .max(need);
        buf.reserve_exact(target - buf.len());
    }
    buf.extend_from_slice(bytes);
}

pub(super) fn shrink(buf: &mut Vec<u8>) {
    if buf.capacity() > RETAINED_CAPACITY {
        buf.shrink_to(RETAINED_CAPACITY);
    }
}
