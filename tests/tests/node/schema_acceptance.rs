//! Acceptance derived from the providers' own request schemas, not from captures.
//!
//! `tests/sdk/schema_requests.py` introspects the official SDKs' request types (pinned in
//! `tests/sdk/schema-requirements.txt`; they are generated from the providers' API
//! specifications) and writes one request body per variant: every message role, content
//! block, tool type, thinking and output configuration, tool choice and Responses input item.
//! Each body goes through a real node to an `openai`-format and an `anthropic`-format provider
//! (the mock upstream), addressed both by a combo name and by `provider/model`, as the README
//! tells users to. A variant passes when the node answers 2xx: it was forwarded unchanged (same
//! format), carried, emulated, or dropped and named in `x-switchyard-dropped-params` /
//! `x-switchyard-emulated-params`. A 4xx for a variant the client's API accepts fails.
//!
//! The test also renders the outcome per variant into the field matrix of
//! `docs/translation.md` (between the `schema-acceptance` markers), and fails when the doc
//! differs; `SWITCHYARD_BLESS=1` rewrites it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use switchyard_tests::python::{self, run};

use crate::support::http::*;

/// How long the generator may run.
const GENERATOR_LIMIT: Duration = Duration::from_secs(120);
/// Requests in flight at once.
const PARALLEL: usize = 8;
const BEGIN: &str = "<!-- schema-acceptance:begin";
const END: &str = "<!-- schema-acceptance:end -->";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk")
}

/// One generated request.
struct Variant {
    api: String,
    label: String,
    body: Value,
}

/// Runs the generator in its own virtualenv; returns the variants and its summary line.
fn generate() -> (Vec<Variant>, String) {
    let python = python::ensure_venv("schema-venv", &sdk_dir().join("schema-requirements.txt"))
        .unwrap_or_else(|e| panic!("schema virtualenv: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("variants.jsonl");
    let (ok, log) = run(
        Command::new(&python)
            .arg(sdk_dir().join("schema_requests.py"))
            .arg("--out")
            .arg(&out),
        GENERATOR_LIMIT,
        "schema_requests.py",
    );
    assert!(ok, "the generator failed:\n{log}");
    let text = std::fs::read_to_string(&out).unwrap();
    let variants = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Variant {
                api: v["api"].as_str().unwrap().to_owned(),
                label: v["label"].as_str().unwrap().to_owned(),
                body: v["body"].clone(),
            }
        })
        .collect();
    (variants, log)
}

fn route(api: &str) -> &'static str {
    match api {
        "anthropic" => "/v1/messages",
        "chat" => "/v1/chat/completions",
        _ => "/v1/responses",
    }
}

fn api_name(api: &str) -> &'static str {
    match api {
        "anthropic" => "Anthropic Messages",
        "chat" => "OpenAI Chat Completions",
        _ => "OpenAI Responses",
    }
}

/// Whether a client API is the provider format's own (then the body is forwarded as is).
fn same_format(api: &str, provider: &str) -> bool {
    matches!(
        (api, provider),
        ("anthropic", "anthropic") | ("chat", "openai")
    )
}

/// What happened to one variant on its way to one provider format.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Forwarded,
    Carried,
    /// The names in the dropped and emulated headers.
    Named {
        dropped: Vec<String>,
        emulated: Vec<String>,
    },
    Refused {
        status: u16,
        body: String,
    },
}

fn names(reply: &Reply, header: &str) -> Vec<String> {
    reply
        .header(header)
        .map(|h| {
            h.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn outcome(api: &str, provider: &str, reply: &Reply) -> Outcome {
    if !(200..300).contains(&reply.status) {
        let mut body = reply.body.clone();
        body.truncate(400);
        return Outcome::Refused {
            status: reply.status,
            body,
        };
    }
    let dropped = names(reply, "x-switchyard-dropped-params");
    let emulated = names(reply, "x-switchyard-emulated-params");
    if same_format(api, provider) {
        Outcome::Forwarded
    } else if dropped.is_empty() && emulated.is_empty() {
        Outcome::Carried
    } else {
        Outcome::Named { dropped, emulated }
    }
}

/// The generated section of `docs/translation.md`.
fn render(
    results: &[(String, String, String, Outcome)],
    counts: &BTreeMap<String, usize>,
) -> String {
    let mut md = String::new();
    md.push_str(
        " generated by tests/tests/node/schema_acceptance.rs; SWITCHYARD_BLESS=1 rewrites it -->\n\n",
    );
    md.push_str(
        "Variants generated from the request types of the official SDKs (anthropic 2.17.0, \
         openai 3.63.0; `tests/sdk/schema_requests.py`), each sent through a node to a provider \
         of each format. *Forwarded*: same format, the body unchanged. *Carried*: translated with \
         nothing dropped. *Named*: something had no counterpart and is named in \
         `x-switchyard-dropped-params` / `x-switchyard-emulated-params`. No variant is refused.\n\n",
    );
    md.push_str(
        "| Client API | Variants | To an `openai` provider | To an `anthropic` provider |\n",
    );
    md.push_str("|---|---|---|---|\n");
    for (api, n) in counts {
        let cell = |provider: &str| {
            let (mut fwd, mut carried, mut named, mut refused) = (0, 0, 0, 0);
            for (a, _, p, o) in results {
                if a == api && p == provider {
                    match o {
                        Outcome::Forwarded => fwd += 1,
                        Outcome::Carried => carried += 1,
                        Outcome::Named { .. } => named += 1,
                        Outcome::Refused { .. } => refused += 1,
                    }
                }
            }
            let mut parts = Vec::new();
            if fwd > 0 {
                parts.push(format!("{fwd} forwarded"));
            }
            if carried > 0 {
                parts.push(format!("{carried} carried"));
            }
            if named > 0 {
                parts.push(format!("{named} named"));
            }
            if refused > 0 {
                parts.push(format!("{refused} REFUSED"));
            }
            parts.join(", ")
        };
        md.push_str(&format!(
            "| {} | {n} | {} | {} |\n",
            api_name(api),
            cell("openai"),
            cell("anthropic")
        ));
    }
    // Each name, with how many variants produced it and the first of them.
    let mut by_name: BTreeMap<(String, String, String, &str), (usize, String)> = BTreeMap::new();
    for (api, label, provider, o) in results {
        if let Outcome::Named { dropped, emulated } = o {
            let tagged = dropped
                .iter()
                .map(|n| (n, "dropped"))
                .chain(emulated.iter().map(|n| (n, "emulated")));
            for (name, class) in tagged {
                let e = by_name
                    .entry((api.clone(), provider.clone(), name.clone(), class))
                    .or_insert((0, label.clone()));
                e.0 += 1;
            }
        }
    }
    md.push_str(
        "\n| Client API | Provider format | Named | Class | Variants | First variant |\n\
         |---|---|---|---|---|---|\n",
    );
    for ((api, provider, name, class), (n, first)) in &by_name {
        md.push_str(&format!(
            "| {} | `{provider}` | `{name}` | {class} | {n} | `{first}` |\n",
            api_name(api)
        ));
    }
    md.push('\n');
    md
}

/// Compares the generated section with the doc, or rewrites it under `SWITCHYARD_BLESS=1`.
fn check_doc(section: &str) {
    let path = repo().join("docs/translation.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc
        .find(BEGIN)
        .expect("docs/translation.md has the begin marker");
    let end = doc
        .find(END)
        .expect("docs/translation.md has the end marker");
    let current = &doc[start + BEGIN.len()..end];
    if current == section {
        return;
    }
    if std::env::var_os("SWITCHYARD_BLESS").is_some() {
        let updated = format!("{}{BEGIN}{section}{}", &doc[..start], &doc[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "docs/translation.md's schema-acceptance matrix differs from what the node does; \
         rerun with SWITCHYARD_BLESS=1 and review the diff.\n--- generated ---\n{section}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_schema_variant_is_carried_or_named_never_refused() {
    let (variants, summary) = tokio::task::spawn_blocking(generate)
        .await
        .expect("generator task");
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for v in &variants {
        *counts.entry(v.api.clone()).or_default() += 1;
    }
    // Every API, and the variants the issue names, are covered.
    for api in ["anthropic", "chat", "responses"] {
        assert!(
            counts.get(api).is_some_and(|n| *n > 50),
            "{counts:?}\n{summary}"
        );
    }
    for needle in [
        "messages[].role=system",
        "thinking.type=adaptive",
        "output_config",
        "tools[].type=web_search_20250305",
        "input[].type=function_call_output",
        "tool_choice.type=allowed_tools",
    ] {
        assert!(
            variants.iter().any(|v| v.label.starts_with(needle)),
            "no variant {needle}"
        );
    }

    let mock = mock(3).await;
    let url = mock.base_url();
    let config = open_auth_no_queue()
        + &provider("oai", "openai", &url, &["gpt-4o-mini"], "", "")
        + &provider("ant", "anthropic", &url, &["claude-sonnet-4-5"], "", "")
        + &connection("oai-k1", "oai", "SCHEMA_UP_OAI", "")
        + &connection("ant-k1", "ant", "SCHEMA_UP_ANT", "")
        + "\n[[combos]]\nname = \"coding\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"oai/gpt-4o-mini\" }]\n\
           \n[[combos]]\nname = \"coding-claude\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"ant/claude-sonnet-4-5\" }]\n";
    let node = start_node(
        config,
        env(&[
            ("SCHEMA_UP_OAI", "sk-schema-upstream-openai-000001"),
            ("SCHEMA_UP_ANT", "sk-ant-schema-upstream-00000002"),
        ]),
    )
    .await;
    let base = node.client_url();
    let client = http();
    // (provider format, model names that reach it: a combo and provider/model).
    let routes = [
        ("openai", ["coding", "oai/gpt-4o-mini"]),
        ("anthropic", ["coding-claude", "ant/claude-sonnet-4-5"]),
    ];
    let mut jobs = Vec::new();
    for v in &variants {
        for (provider, models) in &routes {
            for model in models {
                let mut body = v.body.clone();
                body["model"] = Value::from(*model);
                jobs.push((v, *provider, *model, body));
            }
        }
    }
    let replies: Vec<_> = futures_util::stream::iter(jobs)
        .map(|(v, provider, model, body)| {
            let client = client.clone();
            let url = format!("{base}{}", route(&v.api));
            async move {
                let reply = send(client.post(url).json(&body)).await;
                (v, provider, model, outcome(&v.api, provider, &reply))
            }
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;

    // Failures grouped by what went wrong (the error with its indices left out), each with
    // how many requests and the first variant that met it.
    let mut failures: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut fail = |kind: String, example: String| {
        failures.entry(kind).or_insert((0, example)).0 += 1;
    };
    let mut results = Vec::new();
    let mut per_model: BTreeMap<(String, String), Outcome> = BTreeMap::new();
    for (v, provider, model, o) in replies {
        if let Outcome::Refused { status, body } = &o {
            let kind: String = body.chars().filter(|c| !c.is_ascii_digit()).collect();
            fail(
                format!("{} -> {provider}: {status} {kind}", v.api),
                format!("{} ({model})", v.label),
            );
        }
        // Both model names of one provider must give the same outcome.
        let key = (format!("{}|{}", v.api, v.label), provider.to_owned());
        if let Some(prev) = per_model.get(&key) {
            if prev != &o {
                fail(
                    format!("{} -> {provider}: the two model names differ", v.api),
                    format!("{}: {model} gave {o:?}, the other {prev:?}", v.label),
                );
            }
            continue;
        }
        per_model.insert(key, o.clone());
        results.push((v.api.clone(), v.label.clone(), provider.to_owned(), o));
    }
    results.sort();
    for (api, n) in &counts {
        for (provider, _) in &routes {
            println!(
                "schema acceptance: {} -> {provider}: {n} variants, {} requests",
                api_name(api),
                n * 2
            );
        }
    }
    let failed: usize = failures.values().map(|(n, _)| n).sum();
    assert!(
        failures.is_empty(),
        "{failed} of {} requests were refused or inconsistent:\n{}",
        variants.len() * 4,
        failures
            .iter()
            .map(|(kind, (n, first))| format!("{n} x {kind}\n    first: {first}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    check_doc(&render(&results, &counts));
    assert_healthy(&node, "schema variants").await;
}
