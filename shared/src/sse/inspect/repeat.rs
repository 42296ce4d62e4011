//! The chat chunk before, remembered, so that a chunk equal to it but for its text is
//! classified by comparing bytes instead of walking it again.
//!
//! Within one stream a provider sends the same chunk over and over with only the text
//! changed: the same id, `created`, model, fingerprint and field order. The pre-scan walks
//! each chunk whole (about 3,000 instructions for an ordinary one); comparing a chunk with
//! the one before costs a few hundred. It is exact: the previous chunk was walked and
//! answered, it held exactly one content string, and the new chunk has the same bytes before
//! and after that string, with a string in between that has no quote, backslash, control or
//! non-ASCII byte. The walk over the new chunk would meet the same tokens and decide the
//! same, with only the text's length changed. Anything else walks the chunk as before.

use super::EventInfo;
use super::prescan::{chat_spanned, string_end, text_info};

/// The last chunk the pre-scan answered that has one content string.
#[derive(Debug, Default, Clone)]
pub struct ChatRepeat {
    data: Vec<u8>,
    /// The content string's inner bytes in `data`.
    text: (usize, usize),
}

impl ChatRepeat {
    /// The classification of a chat chunk's (trimmed) data, or `None` when the full parse
    /// must decide: what [`super::prescan::chat`] answers, taken from the chunk before when
    /// only the text differs.
    pub(super) fn chat(&mut self, data: &[u8]) -> Option<EventInfo> {
        if let Some(info) = self.same_but_text(data) {
            return Some(info);
        }
        let (info, span) = chat_spanned(data)?;
        match span {
            Some(text) => {
                self.data.clear();
                self.data.extend_from_slice(data);
                self.text = text;
            }
            None => self.data.clear(),
        }
        Some(info)
    }

    fn same_but_text(&self, data: &[u8]) -> Option<EventInfo> {
        if self.data.is_empty() {
            return None;
        }
        let (start, end) = self.text;
        let head = self.data.get(..start)?;
        let tail = self.data.get(end..)?;
        if data.get(..start)? != head {
            return None;
        }
        let rest = data.get(start..)?;
        let (len, odd) = string_end(rest)?;
        // The stop byte must be the closing quote, which the tail starts with.
        if odd || rest.get(len..)? != tail {
            return None;
        }
        Some(text_info(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::EventKind;

    fn chunk(id: &str, text: &str) -> Vec<u8> {
        format!(
            r#"{{"id":"{id}","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn only_a_chunk_equal_but_for_its_text_is_answered_from_the_one_before() {
        let mut memo = ChatRepeat::default();
        assert!(
            memo.same_but_text(&chunk("a", "Hi")).is_none(),
            "nothing yet"
        );
        let first = memo.chat(&chunk("a", "Hi")).unwrap();
        assert_eq!(
            (first.kind, first.useful_text_bytes),
            (EventKind::Content, 2)
        );
        let again = memo.same_but_text(&chunk("a", "Hello there")).unwrap();
        assert_eq!(
            (again.kind, again.useful_text_bytes),
            (EventKind::Content, 11)
        );
        let empty = memo.same_but_text(&chunk("a", "")).unwrap();
        assert_eq!(empty.kind, EventKind::Other);
        // Another id, an escape, a non-ASCII or control byte, a cut tail: walked again.
        for other in [
            chunk("b", "Hi"),
            chunk("a", "x\\ny"),
            chunk("a", "é"),
            chunk("a", "\u{1}"),
            chunk("a", "Hi")[..40].to_vec(),
        ] {
            assert!(
                memo.same_but_text(&other).is_none(),
                "{}",
                String::from_utf8_lossy(&other)
            );
        }
        // Two content strings: nothing to answer from.
        let two = br#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#;
        assert_eq!(memo.chat(two).unwrap().useful_text_bytes, 2);
        assert!(memo.same_but_text(two).is_none());
    }
}
