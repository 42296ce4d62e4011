//! A fast reader for the request fields the mock looks at (`model`, `stream`,
//! `stream_options.include_usage`), for the common request body.
//!
//! serde's derived deserializer was a tenth of the mock's work per request. This reader
//! accepts only a conservative subset of JSON (ASCII strings without `\u` escapes, no
//! repeated fields of interest, bounded nesting, the fields of interest of the expected
//! types) and checks the whole body against JSON's grammar; anything else returns `None`
//! and the caller falls back to serde, so every error message, and every body serde reads
//! differently, still comes from serde.

/// The fields of interest, read from a body in the accepted subset.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fields<'a> {
    pub(crate) model: Option<&'a str>,
    pub(crate) stream: Option<bool>,
    /// `None` when `stream_options` is absent or null.
    pub(crate) stream_options: Option<StreamOptions>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamOptions {
    pub(crate) include_usage: Option<bool>,
}

/// Nesting accepted before handing the body to serde (whose own limit is 128).
const MAX_DEPTH: u32 = 64;

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// Reads `body`, or `None` when it is outside the accepted subset (including any body serde
/// would refuse).
pub(crate) fn fields(body: &[u8]) -> Option<Fields<'_>> {
    let mut r = Reader { bytes: body, at: 0 };
    let mut out = Fields::default();
    let (mut model, mut stream, mut options) = (false, false, false);
    r.ws();
    r.eat(b'{')?;
    r.ws();
    if !r.peek_is(b'}') {
        loop {
            let key = r.string()?;
            r.ws();
            r.eat(b':')?;
            r.ws();
            match key {
                b"model" => {
                    if std::mem::replace(&mut model, true) {
                        return None;
                    }
                    out.model = if r.literal(b"null") {
                        None
                    } else {
                        let s = r.string()?;
                        // An escaped model is unescaped by serde.
                        if s.contains(&b'\\') {
                            return None;
                        }
                        Some(std::str::from_utf8(s).ok()?)
                    };
                }
                b"stream" => {
                    if std::mem::replace(&mut stream, true) {
                        return None;
                    }
                    out.stream = r.opt_bool()?;
                }
                b"stream_options" => {
                    if std::mem::replace(&mut options, true) {
                        return None;
                    }
                    out.stream_options = if r.literal(b"null") {
                        None
                    } else {
                        Some(r.stream_options()?)
                    };
                }
                _ => r.value(0)?,
            }
            r.ws();
            if r.eat(b',').is_some() {
                r.ws();
                continue;
            }
            break;
        }
    }
    r.eat(b'}')?;
    r.ws();
    (r.at == r.bytes.len()).then_some(out)
}

/// How many leading bytes are printable ASCII other than `"` and `\\`: the plain part of a
/// string, eight bytes at a time (this loop is most of the reading).
fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Flags bytes below `n` (n <= 128); the lowest flag is always a true one.
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGH;
    let equal = |v: u64, b: u8| below(v ^ (ONES * u64::from(b)), 1);
    let mut at = 0;
    while let Some(word) = bytes
        .get(at..at + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
    {
        let v = u64::from_le_bytes(word);
        let stop = below(v, 0x20) | (v & HIGH) | equal(v, b'"') | equal(v, b'\\') | equal(v, 0x7f);
        if stop != 0 {
            return at + (stop.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + bytes
        .get(at..)
        .unwrap_or_default()
        .iter()
        .take_while(|&&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        .count()
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn peek_is(&self, b: u8) -> bool {
        self.peek() == Some(b)
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        if self.peek_is(b) {
            self.at += 1;
            Some(())
        } else {
            None
        }
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Consumes `word` if it comes next.
    fn literal(&mut self, word: &[u8]) -> bool {
        let next = self.bytes.get(self.at..self.at + word.len());
        if next == Some(word) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    fn opt_bool(&mut self) -> Option<Option<bool>> {
        if self.literal(b"true") {
            Some(Some(true))
        } else if self.literal(b"false") {
            Some(Some(false))
        } else if self.literal(b"null") {
            Some(None)
        } else {
            None
        }
    }

    /// A string's raw bytes between the quotes: printable ASCII and the simple escapes only.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        loop {
            self.at += plain_run(self.bytes.get(self.at..)?);
            match self.peek()? {
                b'"' => {
                    let s = self.bytes.get(start..self.at)?;
                    self.at += 1;
                    return Some(s);
                }
                b'\\' => {
                    self.at += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    fn number(&mut self) -> Option<()> {
        self.eat(b'-');
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.first_digit()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.first_digit()?;
        }
        // "01" and "1a": serde refuses what runs on into a digit or letter; so do we.
        match self.peek() {
            Some(b) if b.is_ascii_alphanumeric() || b == b'.' => None,
            _ => Some(()),
        }
    }

    fn first_digit(&mut self) -> Option<()> {
        if !self.peek()?.is_ascii_digit() {
            return None;
        }
        self.digits();
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    /// Any JSON value, checked and skipped.
    fn value(&mut self, depth: u32) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => {
                self.at += 1;
                self.ws();
                if self.eat(b'}').is_some() {
                    return Some(());
                }
                loop {
                    self.string()?;
                    self.ws();
                    self.eat(b':')?;
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    if self.eat(b',').is_none() {
                        return self.eat(b'}');
                    }
                    self.ws();
                }
            }
            b'[' => {
                self.at += 1;
                self.ws();
                if self.eat(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.value(depth + 1)?;
                    self.ws();
                    if self.eat(b',').is_none() {
                        return self.eat(b']');
                    }
                    self.ws();
                }
            }
            b't' => self.literal(b"true").then_some(()),
            b'f' => self.literal(b"false").then_some(()),
            b'n' => self.literal(b"null").then_some(()),
            _ => self.number(),
        }
    }

    /// `{"include_usage": bool|null, …}`, other members skipped.
    fn stream_options(&mut self) -> Option<StreamOptions> {
        let mut out = StreamOptions::default();
        let mut seen = false;
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(out);
        }
        loop {
            let key = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            if key == b"include_usage" {
                if std::mem::replace(&mut seen, true) {
                    return None;
                }
                out.include_usage = self.opt_bool()?;
            } else {
                self.value(1)?;
            }
            self.ws();
            if self.eat(b',').is_none() {
                self.eat(b'}')?;
                return Some(out);
            }
            self.ws();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use serde::Deserialize;

    use super::*;

    /// The serde reading the fast one must agree with.
    #[derive(Debug, Deserialize)]
    struct Serde<'a> {
        #[serde(default, borrow)]
        model: Option<Cow<'a, str>>,
        #[serde(default)]
        stream: Option<bool>,
        #[serde(default)]
        stream_options: Option<SerdeOptions>,
    }

    #[derive(Debug, Deserialize)]
    struct SerdeOptions {
        #[serde(default)]
        include_usage: Option<bool>,
    }

    const READ: &[&str] = &[
        r#"{"model":"m","messages":[{"role":"user","content":"Say hello."}],"stream":true}"#,
        r#" { "model" : "gpt-4o" , "stream" : false , "n" : -1.5e+3 } "#,
        r#"{"stream_options":{"include_usage":true,"x":[1,{}]},"stream":true}"#,
        r#"{"model":null,"stream":null,"stream_options":null}"#,
        r#"{}"#,
        r#"{"messages":[],"tools":[{"a":[[[]]],"b":"q\"uo\\te\n"}],"t":0.0,"z":-0}"#,
        r#"{"stream_options":{},"model":"m/with/slash"}"#,
        "{\"model\":\"m\",\r\n\t\"stream\":true}\n",
    ];

    const FALL_BACK: &[&str] = &[
        "",
        "[]",
        r#"["m",true]"#,
        r#"{"model":"m","model":"n"}"#,
        r#"{"stream":true,"stream":false}"#,
        r#"{"model":"caf\u00e9"}"#,
        r#"{"model":"a\"b"}"#,
        "{\"model\":\"é\"}",
        r#"{"model":5}"#,
        r#"{"stream":"yes"}"#,
        r#"{"stream":1}"#,
        r#"{"stream_options":{"include_usage":1}}"#,
        r#"{"stream_options":{"include_usage":true,"include_usage":true}}"#,
        r#"{"stream_options":[true]}"#,
        r#"{"a":01}"#,
        r#"{"a":1.}"#,
        r#"{"a":-}"#,
        r#"{"a":1,}"#,
        r#"{"a":[1,]}"#,
        r#"{"a":tru}"#,
        r#"{"a":"\x"}"#,
        "{\"a\":\"\u{1}\"}",
        r#"{"a":1} x"#,
        r#"{"a":1}}"#,
        r#"{"a" 1}"#,
        r#"{"model":"m""#,
    ];

    #[test]
    fn reads_what_serde_reads() {
        for body in READ {
            let fast = fields(body.as_bytes());
            let slow: Result<Serde<'_>, _> = serde_json::from_str(body);
            let (Some(fast), Ok(slow)) = (fast, slow) else {
                panic!("both should read {body}");
            };
            assert_eq!(fast.model, slow.model.as_deref(), "{body}");
            assert_eq!(fast.stream, slow.stream, "{body}");
            assert_eq!(
                fast.stream_options.map(|o| o.include_usage),
                slow.stream_options.map(|o| o.include_usage),
                "{body}"
            );
        }
    }

    #[test]
    fn leaves_the_rest_to_serde() {
        for body in FALL_BACK {
            assert_eq!(fields(body.as_bytes()), None, "{body}");
        }
        for len in 0..20 {
            let text = "x".repeat(len);
            for stop in ["\"", "\\", "\u{1}", "\u{7f}", "é"] {
                let s = format!("{text}{stop}yy");
                assert_eq!(plain_run(s.as_bytes()), len, "{s:?}");
            }
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(80), "]".repeat(80));
        assert_eq!(fields(deep.as_bytes()), None);
        assert!(serde_json::from_str::<Serde<'_>>(&deep).is_ok());
    }
}
