//! The upstream error corpus (`tests/fixtures/upstream-errors/`) and the state-effect table
//! (`docs/error-effects.md`) must not drift apart, and every corpus entry must be a well-formed
//! replay of a real response. This binary checks both:
//! - each entry against the schema in the corpus README (required fields, known values, `id`
//!   equal to its path, JSON bodies that parse, SSE bytes that parse into JSON events) and
//!   against the invariants the table promises (a request-scoped error changes no state, a
//!   terminal state is never a cooldown, only 408/500/502/503/504 count on the breaker);
//! - the generated section of the table against the entries, row for row, in both directions.
//!
//! `SWITCHYARD_REGENERATE_ERROR_TABLE=1` rewrites the generated section from the entries
//! instead of comparing (the entries are still validated).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

const BEGIN: &str = "<!-- corpus-table:begin -->";
const END: &str = "<!-- corpus-table:end -->";
const SPEC_BEGIN: &str = "<!-- spec-table:begin -->";
const SPEC_END: &str = "<!-- spec-table:end -->";
const REGENERATE_ENV: &str = "SWITCHYARD_REGENERATE_ERROR_TABLE";

const PROVIDERS: [&str; 18] = [
    "openai",
    "azure-openai",
    "anthropic",
    "anthropic-oauth",
    "gemini",
    "openrouter",
    "groq",
    "deepseek",
    "mistral",
    "together",
    "fireworks",
    "glm",
    "minimax",
    "codex-chatgpt",
    "vllm",
    "ollama",
    "llamacpp",
    "lmstudio",
];
const CLASSES: [&str; 10] = [
    "request",
    "not_found_model",
    "rate_limit",
    "concurrency_limited",
    "quota",
    "credits",
    "overloaded",
    "server_error",
    "auth",
    "banned",
];
const HINT_RULES: [&str; 5] = [
    "retry-after",
    "x-ratelimit-reset",
    "reset-header",
    "body",
    "provider-rule",
];
const WINDOWS: [&str; 4] = ["daily", "weekly", "session", "subscription"];
const TERMINALS: [&str; 3] = ["banned", "expired", "credits_exhausted"];
const BREAKER_STATUSES: [u64; 5] = [408, 500, 502, 503, 504];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/upstream-errors")
}

fn table_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/error-effects.md")
}

/// One corpus file: its path relative to the corpus folder (without `.json`) and its JSON.
struct Entry {
    rel: String,
    json: Value,
}

fn load_corpus() -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut dirs: Vec<_> = fs::read_dir(corpus_dir())
        .expect("corpus folder")
        .map(|d| d.expect("dir entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let provider = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<_> = fs::read_dir(&dir)
            .expect("provider folder")
            .map(|f| f.expect("file entry").path())
            .collect();
        files.sort();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".json").unwrap_or_else(|| {
                panic!("{provider}/{name}: only .json entries belong in a provider folder")
            });
            let text = fs::read_to_string(&file).expect("read entry");
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{provider}/{name}: not JSON: {e}"));
            entries.push(Entry {
                rel: format!("{provider}/{stem}"),
                json,
            });
        }
    }
    entries
}

// ------------------------------------------------------------------------------------------
// Validation

fn str_field<'a>(v: &'a Value, key: &str, errs: &mut Vec<String>) -> Option<&'a str> {
    match v.get(key).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Some(s),
        _ => {
            errs.push(format!("`{key}` must be a non-empty string"));
            None
        }
    }
}

fn one_of(value: Option<&str>, allowed: &[&str], key: &str, errs: &mut Vec<String>) {
    if let Some(v) = value.filter(|v| !allowed.contains(v)) {
        errs.push(format!("`{key}` = {v:?} is not one of {allowed:?}"));
    }
}

fn status_in_range(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
        .filter(|s| (100..=599).contains(s))
}

fn is_json_content_type(ct: &str) -> bool {
    let ct = ct.to_ascii_lowercase();
    let mime = ct.split(';').next().unwrap_or("").trim();
    mime == "application/json" || mime.ends_with("+json")
}

/// The JSON payloads of an SSE byte string, or why it does not parse: events are separated by
/// a blank line, `data:` lines of one event are joined, `:` lines are comments.
fn parse_sse(bytes: &str) -> Result<Vec<Value>, String> {
    if !bytes.ends_with("\n\n") {
        return Err("SSE bytes must end with a blank line".into());
    }
    let mut events = Vec::new();
    for block in bytes.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut data = Vec::new();
        for line in block.lines() {
            if line.starts_with(':') || line.starts_with("event:") || line.starts_with("id:") {
                continue;
            }
            match line.strip_prefix("data:") {
                Some(d) => data.push(d.strip_prefix(' ').unwrap_or(d)),
                None => return Err(format!("unexpected SSE line {line:?}")),
            }
        }
        if data.is_empty() {
            return Err(format!("SSE event without data: {block:?}"));
        }
        let joined = data.join("\n");
        events.push(
            serde_json::from_str(&joined)
                .map_err(|e| format!("SSE data is not JSON ({e}): {joined:?}"))?,
        );
    }
    if events.is_empty() {
        return Err("no SSE events".into());
    }
    Ok(events)
}

fn validate_response(resp: &Value, errs: &mut Vec<String>) {
    if status_in_range(resp.get("status")).is_none() {
        errs.push("`response.status` must be an integer in 100..=599".into());
    }
    let Some(headers) = resp.get("headers").and_then(Value::as_object) else {
        errs.push("`response.headers` must be an object".into());
        return;
    };
    for (name, value) in headers {
        if name.chars().any(|c| c.is_ascii_uppercase()) {
            errs.push(format!("header name {name:?} must be lower-case"));
        }
        if !value.is_string() {
            errs.push(format!("header {name:?} must have a string value"));
        }
    }
    let content_type = headers.get("content-type").and_then(Value::as_str);
    match (resp.get("body"), resp.get("sse")) {
        (Some(_), Some(_)) => errs.push("`body` and `sse` are exclusive".into()),
        (None, None) => errs.push("one of `body` or `sse` is required".into()),
        (Some(body), None) => {
            if content_type.is_some_and(is_json_content_type)
                && !(body.is_object() || body.is_array())
            {
                errs.push("a JSON content-type needs a JSON object or array body".into());
            }
            if !(body.is_object() || body.is_array() || body.is_string()) {
                errs.push("`body` must be a JSON object, array or raw text".into());
            }
        }
        (None, Some(sse)) => {
            if content_type != Some("text/event-stream") {
                errs.push("an `sse` entry needs content-type text/event-stream".into());
            }
            match sse.as_str() {
                Some(bytes) => {
                    if let Err(e) = parse_sse(bytes) {
                        errs.push(e);
                    }
                }
                None => errs.push("`sse` must be a string".into()),
            }
        }
    }
}

fn validate_duration(v: &Value, what: &str, forms: &str, errs: &mut Vec<String>) {
    let ms_ok = v.get("ms").and_then(Value::as_u64).is_some_and(|ms| ms > 0);
    match (v.get("rule"), v.get("window"), v.get("scope")) {
        (Some(rule), None, _) => {
            one_of(rule.as_str(), &HINT_RULES, &format!("{what}.rule"), errs);
            if !ms_ok {
                errs.push(format!("`{what}` with a rule needs a positive `ms`"));
            }
        }
        (None, Some(window), _) => {
            one_of(window.as_str(), &WINDOWS, &format!("{what}.window"), errs);
            let daily = window.as_str() == Some("daily");
            if daily == v.get("ms").is_some() || (!daily && !ms_ok) {
                errs.push(format!(
                    "`{what}`: a daily window has no `ms`, every other window a positive one"
                ));
            }
        }
        (None, None, Some(_)) if ms_ok => {}
        _ => errs.push(format!("`{what}` must be {forms}")),
    }
}

fn validate_client(v: Option<&Value>, which: &str, errs: &mut Vec<String>) {
    let Some(c) = v.filter(|c| c.is_object()) else {
        errs.push(format!("`expect.client.{which}` must be an object"));
        return;
    };
    if status_in_range(c.get("status")).is_none() {
        errs.push(format!(
            "`expect.client.{which}.status` must be in 100..=599"
        ));
    }
    let mut sub = Vec::new();
    str_field(c, "type", &mut sub);
    str_field(c, "code", &mut sub);
    errs.extend(
        sub.into_iter()
            .map(|e| format!("expect.client.{which}: {e}")),
    );
}

fn validate_expect(exp: &Value, status: Option<u64>, errs: &mut Vec<String>) {
    let class = str_field(exp, "class", errs);
    one_of(class, &CLASSES, "expect.class", errs);
    let cooldown = exp.get("cooldown").unwrap_or(&Value::Null);
    match cooldown.as_str() {
        Some("none" | "backoff") => {}
        Some(other) => errs.push(format!("`expect.cooldown` = {other:?} is not none/backoff")),
        None if cooldown.is_object() && cooldown.get("scope").is_none() => validate_duration(
            cooldown,
            "expect.cooldown",
            "none, backoff, {ms, rule} or {window[, ms]}",
            errs,
        ),
        None => errs.push("`expect.cooldown` has an unknown form".into()),
    }
    let lockout = exp.get("lockout").unwrap_or(&Value::Null);
    match lockout.as_str() {
        Some("none") => {}
        _ if lockout.is_object() => {
            one_of(
                lockout.get("scope").and_then(Value::as_str),
                &["model", "family"],
                "expect.lockout.scope",
                errs,
            );
            if lockout.get("window").is_some() {
                validate_duration(lockout, "expect.lockout", "{scope, window}", errs);
            } else if lockout.get("ms").and_then(Value::as_u64).unwrap_or(0) == 0 {
                errs.push("`expect.lockout` needs a positive `ms` or a daily window".into());
            }
        }
        _ => errs.push("`expect.lockout` must be none or {scope, ms | window}".into()),
    }
    let breaker = exp.get("breaker").and_then(Value::as_bool);
    if breaker.is_none() {
        errs.push("`expect.breaker` must be a boolean".into());
    }
    let terminal = match exp.get("terminal") {
        Some(Value::Null) => None,
        Some(Value::String(t)) => {
            one_of(Some(t), &TERMINALS, "expect.terminal", errs);
            Some(t.as_str())
        }
        _ => {
            errs.push("`expect.terminal` must be null or a terminal state".into());
            None
        }
    };
    if !exp.get("combo_moves_on").is_some_and(Value::is_boolean) {
        errs.push("`expect.combo_moves_on` must be a boolean".into());
    }
    let client = exp.get("client");
    validate_client(client.and_then(|c| c.get("openai")), "openai", errs);
    validate_client(client.and_then(|c| c.get("anthropic")), "anthropic", errs);

    // The invariants the table promises.
    let changes_state = cooldown.as_str() != Some("none")
        || lockout.as_str() != Some("none")
        || breaker != Some(false);
    if class == Some("request") && (changes_state || terminal.is_some()) {
        errs.push("a request-scoped error must change no shared state".into());
    }
    if terminal.is_some() && (cooldown.as_str() != Some("none") || lockout.as_str() != Some("none"))
    {
        errs.push("a terminal state is not a cooldown or a lockout".into());
    }
    if breaker == Some(true) && !status.is_some_and(|s| BREAKER_STATUSES.contains(&s)) {
        errs.push("only 408/500/502/503/504 may count on the breaker".into());
    }
}

/// Every schema violation of one entry, each prefixed with the entry's path.
fn validate(entry: &Entry) -> Vec<String> {
    let mut errs = Vec::new();
    let v = &entry.json;
    let (dir, _) = entry.rel.split_once('/').unwrap_or(("", ""));
    if v.get("id").and_then(Value::as_str) != Some(entry.rel.as_str()) {
        errs.push(format!("`id` must equal the path {:?}", entry.rel));
    }
    let provider = str_field(v, "provider", &mut errs);
    one_of(provider, &PROVIDERS, "provider", &mut errs);
    if provider.is_some_and(|p| p != dir) {
        errs.push(format!("`provider` must equal the folder {dir:?}"));
    }
    one_of(
        str_field(v, "provider_format", &mut errs),
        &["openai", "anthropic"],
        "provider_format",
        &mut errs,
    );
    one_of(
        str_field(v, "auth_type", &mut errs),
        &["apikey", "oauth", "local"],
        "auth_type",
        &mut errs,
    );
    str_field(v, "note", &mut errs);
    match v.get("source").and_then(Value::as_array) {
        Some(urls) if !urls.is_empty() => {
            for url in urls {
                let ok = url.as_str().is_some_and(|u| {
                    u.starts_with("https://") && u.len() > "https://".len() && !u.contains(' ')
                });
                if !ok {
                    errs.push(format!("source {url} is not an https:// URL"));
                }
            }
        }
        _ => errs.push("`source` must be a non-empty list of URLs".into()),
    }
    let status = v
        .get("response")
        .and_then(|r| status_in_range(r.get("status")));
    match v.get("response") {
        Some(resp) if resp.is_object() => validate_response(resp, &mut errs),
        _ => errs.push("`response` must be an object".into()),
    }
    match v.get("expect") {
        Some(exp) if exp.is_object() => validate_expect(exp, status, &mut errs),
        _ => errs.push("`expect` must be an object".into()),
    }
    errs.into_iter()
        .map(|e| format!("{}: {e}", entry.rel))
        .collect()
}

// ------------------------------------------------------------------------------------------
// Rendering

/// `26604` → `26 s 604 ms`, `18000000` → `5 h`.
fn human_ms(ms: u64) -> String {
    let parts = [
        (ms / 3_600_000, "h"),
        (ms / 60_000 % 60, "min"),
        (ms / 1000 % 60, "s"),
        (ms % 1000, "ms"),
    ];
    let text: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n} {unit}"))
        .collect();
    if text.is_empty() {
        "0 ms".into()
    } else {
        text.join(" ")
    }
}

fn render_cooldown(v: &Value, auth: &str) -> String {
    match v.as_str() {
        Some("backoff") => {
            let base = if auth == "oauth" { "5 s" } else { "3 s" };
            format!("backoff ({base} · 2^level)")
        }
        Some(other) => other.to_string(),
        None => render_duration(v),
    }
}

fn render_duration(v: &Value) -> String {
    let ms = v.get("ms").and_then(Value::as_u64);
    match (
        v.get("rule").and_then(Value::as_str),
        v.get("window").and_then(Value::as_str),
    ) {
        (Some(rule), _) => format!("{} ({rule})", human_ms(ms.unwrap_or(0))),
        (_, Some("daily")) => "until midnight UTC (daily window)".into(),
        (_, Some(window)) => format!("{} ({window} window)", human_ms(ms.unwrap_or(0))),
        _ => human_ms(ms.unwrap_or(0)),
    }
}

fn render_lockout(v: &Value) -> String {
    match v.as_str() {
        Some(s) => s.to_string(),
        None => {
            let scope = v.get("scope").and_then(Value::as_str).unwrap_or("?");
            format!("{scope}, {}", render_duration(v))
        }
    }
}

fn render_client(v: &Value) -> String {
    format!(
        "{} {} `{}`",
        v.get("status").and_then(Value::as_u64).unwrap_or(0),
        v.get("type").and_then(Value::as_str).unwrap_or("?"),
        v.get("code").and_then(Value::as_str).unwrap_or("?"),
    )
}

fn row(entry: &Entry) -> String {
    let v = &entry.json;
    let e = &v["expect"];
    let resp = &v["response"];
    let auth = v["auth_type"].as_str().unwrap_or("");
    let upstream = if resp.get("sse").is_some() {
        format!("{} + SSE error", resp["status"])
    } else {
        resp["status"].to_string()
    };
    let terminal = e["terminal"].as_str().unwrap_or("no");
    let cells = [
        format!(
            "[{}](../tests/fixtures/upstream-errors/{}.json)",
            entry.rel, entry.rel
        ),
        upstream,
        format!("{} ({auth})", e["class"].as_str().unwrap_or("?")),
        render_cooldown(&e["cooldown"], auth),
        render_lockout(&e["lockout"]),
        if e["breaker"] == Value::Bool(true) {
            "counts"
        } else {
            "no"
        }
        .into(),
        terminal.into(),
        if e["combo_moves_on"] == Value::Bool(true) {
            "yes"
        } else {
            "no (stops)"
        }
        .into(),
        render_client(&e["client"]["openai"]),
        render_client(&e["client"]["anthropic"]),
    ];
    format!("| {} |", cells.join(" | "))
}

fn generated_section(entries: &[Entry]) -> String {
    let mut out = String::from(
        "| entry | upstream | class (auth) | connection cooldown | model lockout | breaker | terminal | combo moves on | client: OpenAI format | client: Anthropic format |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for entry in entries {
        out.push_str(&row(entry));
        out.push('\n');
    }
    out
}

/// The text between two markers of the table file, or `None` when a marker is missing.
fn between<'a>(doc: &'a str, begin: &str, end: &str) -> Option<&'a str> {
    let start = doc.find(begin)? + begin.len();
    let stop = start + doc[start..].find(end)?;
    Some(&doc[start..stop])
}

/// Data rows keyed by their first cell (the entry link or the spec row number).
fn rows_by_key(section: &str) -> BTreeMap<String, String> {
    section
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .skip(1) // the header row
        .map(|l| {
            let key = l.trim_matches('|').split('|').next().unwrap_or("").trim();
            (key.to_string(), l.to_string())
        })
        .collect()
}

/// What differs between the documented and the generated rows, in both directions.
fn drift(documented: &str, generated: &str) -> Vec<String> {
    let doc = rows_by_key(documented);
    let made = rows_by_key(generated);
    let mut out = Vec::new();
    for (key, line) in &made {
        match doc.get(key) {
            None => out.push(format!("missing from the table: {line}")),
            Some(d) if d != line => out.push(format!("changed:\n  table: {d}\n  entry: {line}")),
            Some(_) => {}
        }
    }
    for (key, line) in &doc {
        if !made.contains_key(key) {
            out.push(format!("in the table but no such entry: {line}"));
        }
    }
    let doc_order: Vec<_> = documented
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|'))
        .collect();
    let gen_order: Vec<_> = generated
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|'))
        .collect();
    if out.is_empty() && doc_order != gen_order {
        out.push("the rows are out of order or the header changed".into());
    }
    out
}

// ------------------------------------------------------------------------------------------
// Tests

#[test]
fn every_corpus_entry_matches_the_schema() {
    let entries = load_corpus();
    assert!(
        entries.len() >= 60,
        "the corpus needs at least 60 entries, has {}",
        entries.len()
    );
    let errors: Vec<String> = entries.iter().flat_map(validate).collect();
    assert!(
        errors.is_empty(),
        "invalid corpus entries:\n{}",
        errors.join("\n")
    );
    for provider in PROVIDERS {
        assert!(
            entries
                .iter()
                .any(|e| e.rel.starts_with(&format!("{provider}/"))),
            "no corpus entry for provider {provider}"
        );
    }
}

#[test]
fn table_and_corpus_do_not_drift() {
    let entries = load_corpus();
    let generated = format!("\n{}", generated_section(&entries));
    let path = table_path();
    let doc = fs::read_to_string(&path).expect("docs/error-effects.md");
    let Some(documented) = between(&doc, BEGIN, END) else {
        panic!("{} lacks the {BEGIN} / {END} markers", path.display());
    };
    if std::env::var(REGENERATE_ENV).is_ok_and(|v| v == "1") {
        let start = doc.find(BEGIN).unwrap() + BEGIN.len();
        let stop = start + doc[start..].find(END).unwrap();
        let rewritten = format!("{}{generated}{}", &doc[..start], &doc[stop..]);
        // Write beside and rename: the other tests of this binary read the file concurrently.
        let tmp = path.with_extension("md.regenerating");
        fs::write(&tmp, rewritten).expect("write the regenerated table");
        fs::rename(&tmp, &path).expect("replace the table");
        return;
    }
    let problems = drift(documented, &generated);
    assert!(
        problems.is_empty(),
        "docs/error-effects.md and the corpus disagree; run `{REGENERATE_ENV}=1 cargo nextest run \
         -p switchyard-tests --test error_effects_table` after checking the entries:\n{}",
        problems.join("\n")
    );
}

#[test]
fn table_covers_every_spec_classification_row() {
    let doc = fs::read_to_string(table_path()).expect("docs/error-effects.md");
    let section = between(&doc, SPEC_BEGIN, SPEC_END).expect("spec-table markers");
    let keys = rows_by_key(section);
    for n in 1..=18 {
        assert!(
            keys.contains_key(&n.to_string()),
            "spec classification row {n} is missing"
        );
    }
    for row in keys.values() {
        assert_eq!(
            row.matches('|').count(),
            10,
            "a spec row needs 9 cells: {row}"
        );
    }
}

#[test]
fn the_validator_rejects_broken_entries() {
    let good = load_corpus()
        .into_iter()
        .find(|e| e.rel == "openai/context-length-exceeded")
        .expect("a known entry");
    assert!(validate(&good).is_empty());
    let broken = |edit: &dyn Fn(&mut Value), rel: &str| {
        let mut json = good.json.clone();
        edit(&mut json);
        validate(&Entry {
            rel: rel.into(),
            json,
        })
    };
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: [(&str, Edit, &str); 7] = [
        ("id", Box::new(|_| {}), "openai/renamed"),
        (
            "status",
            Box::new(|j| j["response"]["status"] = 99.into()),
            "openai/context-length-exceeded",
        ),
        (
            "source",
            Box::new(|j| j["source"] = serde_json::json!([])),
            "openai/context-length-exceeded",
        ),
        (
            "JSON content-type",
            Box::new(|j| j["response"]["body"] = "text".into()),
            "openai/context-length-exceeded",
        ),
        (
            "SSE",
            Box::new(|j| {
                let r = &mut j["response"];
                r.as_object_mut().unwrap().remove("body");
                r["headers"]["content-type"] = "text/event-stream".into();
                r["sse"] = "event: error\ndata: {not json}\n\n".into();
            }),
            "openai/context-length-exceeded",
        ),
        (
            "request-scoped",
            Box::new(|j| j["expect"]["cooldown"] = "backoff".into()),
            "openai/context-length-exceeded",
        ),
        (
            "breaker",
            Box::new(|j| j["expect"]["breaker"] = true.into()),
            "openai/context-length-exceeded",
        ),
    ];
    for (what, edit, rel) in cases {
        assert!(
            !broken(edit.as_ref(), rel).is_empty(),
            "a broken {what} was accepted"
        );
    }
}

#[test]
fn drift_is_reported_in_both_directions() {
    let header = "| entry | x |\n|---|---|\n";
    let generated = format!("{header}| a | 1 |\n| b | 2 |\n");
    assert!(drift(&generated, &generated).is_empty());
    let missing = drift(&format!("{header}| a | 1 |\n"), &generated);
    assert!(
        missing
            .iter()
            .any(|p| p.starts_with("missing from the table"))
    );
    let extra = drift(
        &format!("{header}| a | 1 |\n| b | 2 |\n| c | 3 |\n"),
        &generated,
    );
    assert!(
        extra
            .iter()
            .any(|p| p.starts_with("in the table but no such entry"))
    );
    let changed = drift(&format!("{header}| a | 1 |\n| b | 9 |\n"), &generated);
    assert!(changed.iter().any(|p| p.starts_with("changed")));
    assert_eq!(human_ms(26_604), "26 s 604 ms");
    assert_eq!(human_ms(18_000_000), "5 h");
}
