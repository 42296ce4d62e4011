//! Golden tests for format translation: every fixture under `tests/fixtures/translate/` is an
//! input and its expected output, compared as parsed JSON (and, for streams, as parsed SSE
//! frames, so whitespace and key order never matter).
//!
//! Layout: `<kind>/<from>-to-<to>/<case>.<suffix>`, where `kind` is `request`, `response`,
//! `stream` or `error`, and formats are `chat`, `responses` or `anthropic`:
//! - `<case>.in.json` / `<case>.in.sse`: the input;
//! - `<case>.out.json` / `<case>.out.sse`: the expected translation, or
//!   `<case>.err.json`: the expected error (`{"status", "param"}`);
//! - `<case>.request.json` (optional, responses and streams): the client's request, which
//!   shapes the answer (model, `include_usage`, the Responses echo).
//!
//! `TRANSLATE_BLESS=1 cargo test --test translate_golden` rewrites the expected outputs from
//! the current code; review the diff before committing it.

// This whole crate is test code; clippy's in-test allowances only cover `#[test]` functions.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use switchyard_shared::sse::{Format, SseItem, SseParser};
use switchyard_shared::translate::{
    StreamTranslator, TranslateContext, TranslateOptions, translate_error_body, translate_request,
    translate_response,
};

/// The `created` time every fixture's context uses.
const CREATED: u64 = 1_700_000_000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/translate")
}

fn format(name: &str) -> Format {
    match name {
        "chat" => Format::OpenAiChat,
        "responses" => Format::OpenAiResponses,
        "anthropic" => Format::Anthropic,
        other => panic!("unknown format `{other}` in a fixture directory name"),
    }
}

struct Case {
    from: Format,
    to: Format,
    /// The fixture path without its suffix, e.g. `…/request/chat-to-anthropic/tools`.
    stem: PathBuf,
}

impl Case {
    fn path(&self, suffix: &str) -> PathBuf {
        let mut p = self.stem.clone().into_os_string();
        p.push(suffix);
        PathBuf::from(p)
    }

    fn name(&self) -> String {
        self.stem
            .strip_prefix(root())
            .unwrap_or(&self.stem)
            .display()
            .to_string()
    }

    fn json(&self, suffix: &str) -> Option<Value> {
        let text = fs::read_to_string(self.path(suffix)).ok()?;
        Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}{suffix}: {e}", self.name())))
    }

    fn context(&self) -> TranslateContext {
        let request = self
            .json(".request.json")
            .unwrap_or_else(|| json!({"model": "client-model"}));
        TranslateContext::new(self.to, &request, CREATED)
    }
}

/// Every case of `kind`, with the directions present.
fn cases(kind: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let dir = root().join(kind);
    for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.unwrap();
        let dirname = entry.file_name().to_string_lossy().to_string();
        let (from, to) = dirname
            .split_once("-to-")
            .unwrap_or_else(|| panic!("{dirname}: expected <from>-to-<to>"));
        let mut stems = BTreeSet::new();
        for file in fs::read_dir(entry.path()).unwrap() {
            let name = file.unwrap().file_name().to_string_lossy().to_string();
            if let Some(stem) = name
                .strip_suffix(".in.json")
                .or(name.strip_suffix(".in.sse"))
            {
                stems.insert(stem.to_owned());
            }
        }
        for stem in stems {
            out.push(Case {
                from: format(from),
                to: format(to),
                stem: entry.path().join(stem),
            });
        }
    }
    out
}

fn bless() -> bool {
    std::env::var_os("TRANSLATE_BLESS").is_some()
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

/// Compares or (when blessing) records a JSON result; returns a failure description.
fn check_json(case: &Case, got: Result<Value, Value>, failures: &mut Vec<String>) {
    let (suffix, got) = match got {
        Ok(v) => (".out.json", v),
        Err(e) => (".err.json", e),
    };
    if bless() {
        let _ = fs::remove_file(case.path(".out.json"));
        let _ = fs::remove_file(case.path(".err.json"));
        fs::write(case.path(suffix), pretty(&got)).unwrap();
        return;
    }
    match case.json(suffix) {
        Some(expected) if expected == got => {}
        Some(expected) => failures.push(format!(
            "{}{suffix} differs\n--- expected\n{}--- got\n{}",
            case.name(),
            pretty(&expected),
            pretty(&got)
        )),
        None => failures.push(format!(
            "{}: no {suffix} (got {})",
            case.name(),
            pretty(&got)
        )),
    }
}

fn report(kind: &str, count: usize, failures: Vec<String>) {
    assert!(count > 0, "no {kind} fixtures");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn request_fixtures() {
    let (cases, mut failures) = (cases("request"), Vec::new());
    for case in &cases {
        let input = case.json(".in.json").unwrap();
        let got = translate_request(case.from, case.to, &input, &TranslateOptions::default())
            .map_err(
                |e| json!({"status": e.status(), "param": e.param(), "message": e.to_string()}),
            );
        check_json(case, got, &mut failures);
    }
    report("request", cases.len(), failures);
}

#[test]
fn response_fixtures() {
    let (cases, mut failures) = (cases("response"), Vec::new());
    for case in &cases {
        let input = case.json(".in.json").unwrap();
        let got = translate_response(case.from, case.to, &input, &case.context())
            .map_err(|e| json!({"status": e.status(), "message": e.to_string()}));
        check_json(case, got, &mut failures);
    }
    report("response", cases.len(), failures);
}

#[test]
fn error_fixtures() {
    let (cases, mut failures) = (cases("error"), Vec::new());
    for case in &cases {
        // `{"status": <u16>, "body": <JSON value, or a string for a non-JSON body>}`.
        let input = case.json(".in.json").unwrap();
        let status = u16::try_from(input["status"].as_u64().unwrap()).unwrap();
        let body = match &input["body"] {
            Value::String(raw) => raw.clone().into_bytes(),
            other => serde_json::to_vec(other).unwrap(),
        };
        let got = translate_error_body(case.to, status, &body);
        check_json(case, Ok(got), &mut failures);
    }
    report("error", cases.len(), failures);
}

/// A stream's frames: event name (if any) and data (parsed when JSON).
fn frames(bytes: &[u8]) -> Vec<Value> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    parser.feed(bytes, &mut |item| match item {
        SseItem::Event(e) => {
            let data = e.data_str().unwrap_or_default();
            let data = serde_json::from_str::<Value>(data).unwrap_or_else(|_| json!(data));
            let name = e.event.map(|n| String::from_utf8_lossy(n).to_string());
            out.push(json!({"event": name, "data": data}));
        }
        SseItem::Comment(c) => out.push(json!({"comment": String::from_utf8_lossy(c)})),
        SseItem::Error(e) => out.push(json!({"error": e.to_string()})),
    });
    assert!(!parser.finish(), "the stream ends with a complete frame");
    out
}

/// Feeds `input` through a translator, in chunks of `chunk` bytes.
fn translate_stream(case: &Case, input: &[u8], chunk: usize) -> Vec<u8> {
    let mut translator = StreamTranslator::new(case.from, case.to, case.context()).unwrap();
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk) {
        parser.feed(piece, &mut |item| out.extend(translator.on_item(&item)));
    }
    parser.finish();
    out.extend(translator.finish());
    out
}

#[test]
fn stream_fixtures() {
    let (cases, mut failures) = (cases("stream"), Vec::new());
    for case in &cases {
        let input = fs::read(case.path(".in.sse")).unwrap();
        let got = translate_stream(case, &input, input.len().max(1));
        // Chunk boundaries never change the translation.
        assert_eq!(
            got,
            translate_stream(case, &input, 7),
            "{}: split",
            case.name()
        );
        if bless() {
            fs::write(case.path(".out.sse"), &got).unwrap();
            continue;
        }
        let expected = fs::read(case.path(".out.sse")).unwrap_or_default();
        let (expected, got) = (frames(&expected), frames(&got));
        if expected != got {
            failures.push(format!(
                "{}.out.sse differs\n--- expected\n{}--- got\n{}",
                case.name(),
                pretty(&Value::Array(expected)),
                pretty(&Value::Array(got))
            ));
        }
    }
    report("stream", cases.len(), failures);
}

/// The directions the gateway needs, each with request, response and stream fixtures.
#[test]
fn every_direction_is_covered() {
    let have = |kind: &str, dir: &str| {
        let path = root().join(kind).join(dir);
        fs::read_dir(&path).map(|d| d.count() > 0).unwrap_or(false)
    };
    let mut missing = Vec::new();
    let request_dirs = [
        "chat-to-anthropic",
        "anthropic-to-chat",
        "responses-to-chat",
        "responses-to-anthropic",
    ];
    let answer_dirs = [
        "anthropic-to-chat",
        "chat-to-anthropic",
        "chat-to-responses",
        "anthropic-to-responses",
    ];
    for dir in request_dirs {
        if !have("request", dir) {
            missing.push(format!("request/{dir}"));
        }
    }
    for kind in ["response", "stream"] {
        for dir in answer_dirs {
            if !have(kind, dir) {
                missing.push(format!("{kind}/{dir}"));
            }
        }
    }
    assert!(missing.is_empty(), "no fixtures for {missing:?}");
}
