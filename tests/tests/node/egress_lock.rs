//! The egress-bucketed sibling lock (docs/policy.md, `cooldown`), end to end: three providers of the
//! opencode family, one connection each; `oc-a` and `go-b` leave through the same declared
//! egress bucket, `cli-c` through another. A rate 429 on `oc-a` also cools `go-b` (never
//! longer than `oc-a`'s own cooldown) and not `cli-c`; with `[egress_lock] enabled = false`
//! nothing extra cools; a 401 never spreads. One connection per provider, so the failing
//! request cannot fall back onto a sibling before the lock lands.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{Setup, prelude, setup};
use crate::support::http::*;
use crate::support::{STATE_DEADLINE, eventually};

const KEY_A: &str = "sk-egress-opencode-a-0001";
const KEY_B: &str = "sk-egress-opencode-b-0002";
const KEY_C: &str = "sk-egress-opencode-c-0003";

async fn family(egress_lock: &str) -> Setup {
    family_with(egress_lock, "").await
}

async fn family_with(egress_lock: &str, combos: &str) -> Setup {
    let config = prelude()
        + egress_lock
        + &provider("opencode", "openai", "{URL}", &["m"], "", "")
        + &provider("opencode-go", "openai", "{URL}", &["m"], "", "")
        + &provider("opencode-cli", "openai", "{URL}", &["m"], "", "")
        + &connection(
            "oc-a",
            "opencode",
            "UP_A",
            "egress = \"http://proxy-1:3128\"",
        )
        + &connection(
            "go-b",
            "opencode-go",
            "UP_B",
            "egress = \"http://proxy-1:3128\"",
        )
        + &connection(
            "cli-c",
            "opencode-cli",
            "UP_C",
            "egress = \"http://proxy-2:3128\"",
        )
        + combos;
    setup(config, &[("UP_A", KEY_A), ("UP_B", KEY_B), ("UP_C", KEY_C)]).await
}

fn rate_429() -> FaultSpec {
    FaultSpec {
        body: Some(
            json!({"error": {"message": "Rate limit exceeded", "type": "rate_limit_error"}}),
        ),
        ..FaultSpec::status(429)
            .for_key(KEY_A)
            .header("retry-after", "120")
            .times(1)
    }
}

fn remaining(row: &Value) -> u64 {
    row["cooldownRemainingMs"].as_u64().unwrap_or(0)
}

fn hits(s: &Setup, key: &str) -> u64 {
    s.mock.stats().by_key.get(key).copied().unwrap_or(0)
}

async fn sibling_metric(s: &Setup) -> Option<u64> {
    let r = send(s.http.get(format!("{}/metrics", s.node.admin_url()))).await;
    r.everything()
        .lines()
        .find(|l| l.starts_with("switchyard_egress_sibling_locks_total{provider=\"opencode\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse().ok())
}

/// Sends the failing request on `oc-a` and waits for its own cooldown.
async fn fail_on_a(s: &Setup) -> u64 {
    let r = s
        .post("/v1/chat/completions", &chat("opencode/m", false))
        .await;
    assert_eq!(r.status, 429, "{r:#?}");
    eventually(STATE_DEADLINE, || async {
        Some(remaining(&s.row("oc-a").await)).filter(|ms| *ms > 0)
    })
    .await
    .expect("oc-a cools on its own 429")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_429_cools_the_same_egress_sibling_only() {
    let s = family("").await;
    s.mock.script(rate_429()).unwrap();
    fail_on_a(&s).await;

    let b = eventually(STATE_DEADLINE, || async {
        Some(s.row("go-b").await).filter(|row| remaining(row) > 0)
    })
    .await
    .expect("go-b, on the same egress, is cooled with oc-a");
    // Never longer than the origin's cooldown (read after the sibling's, so it is no shorter
    // than it was), and never terminal.
    let a = s.row("oc-a").await;
    assert!(remaining(&b) <= remaining(&a) + 50, "b {b} vs a {a}");
    assert_eq!(b["testStatus"], "unavailable", "{b}");
    assert!(b["terminal"].is_null(), "{b}");
    // The other egress is untouched and still serves.
    assert_eq!(remaining(&s.row("cli-c").await), 0);
    let c = s
        .post("/v1/chat/completions", &chat("opencode-cli/m", false))
        .await;
    assert_eq!(c.status, 200, "{c:#?}");

    // The cooled sibling is not dispatched.
    let before = hits(&s, KEY_B);
    let r = s
        .post("/v1/chat/completions", &chat("opencode-go/m", false))
        .await;
    assert_eq!(r.status, 429, "{r:#?}");
    assert_eq!(
        hits(&s, KEY_B),
        before,
        "go-b reached the upstream while locked"
    );
    assert_eq!(sibling_metric(&s).await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_switch_off_nothing_extra_cools() {
    let s = family("\n[egress_lock]\nenabled = false\n").await;
    s.mock.script(rate_429()).unwrap();
    fail_on_a(&s).await;
    let r = s
        .post("/v1/chat/completions", &chat("opencode-go/m", false))
        .await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(remaining(&s.row("go-b").await), 0);
    assert_eq!(remaining(&s.row("cli-c").await), 0);
    assert_eq!(sibling_metric(&s).await.unwrap_or(0), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_never_spreads() {
    let s = family("").await;
    s.mock
        .script(FaultSpec {
            body: Some(json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})),
            ..FaultSpec::status(401).for_key(KEY_A).times(1)
        })
        .unwrap();
    // The 401 cools oc-a itself (so the direct request is answered as all-cooling) ...
    let r = s
        .post("/v1/chat/completions", &chat("opencode/m", false))
        .await;
    assert_eq!(r.status, 429, "{r:#?}");
    assert_eq!(
        r.json()["error"]["connections"][0]["reason"],
        "auth_error",
        "{r:#?}"
    );
    eventually(STATE_DEADLINE, || async {
        s.row("oc-a").await["lastStatus"]
            .as_u64()
            .filter(|c| *c == 401)
    })
    .await
    .expect("oc-a records its 401");
    // ... and nothing else: a credential's failure says nothing about the egress.
    let r = s
        .post("/v1/chat/completions", &chat("opencode-go/m", false))
        .await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(remaining(&s.row("go-b").await), 0);
    assert_eq!(sibling_metric(&s).await.unwrap_or(0), 0);
}

/// The request whose own 429 locks the egress sibling never tries that sibling: the lock is
/// in force for its next choice, not only once the sibling's actor has applied it. A combo
/// over the three providers fails on `oc-a`, must skip `go-b` (same egress) and be served by
/// `cli-c`; 20 times in a row, with every state cleared (and every message applied) between
/// trials, so a late lock from one trial cannot hide the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failing_request_never_tries_the_sibling_it_just_locked() {
    let combo = "\n[[combos]]\nname = \"oc\"\nstrategy = \"priority\"\n\
                 targets = [{ target = \"opencode/m\" }, { target = \"opencode-go/m\" }, \
                 { target = \"opencode-cli/m\" }]\n";
    let s = family_with("", combo).await;
    for trial in 1..=20u64 {
        s.mock.script(rate_429()).unwrap();
        let r = s.post("/v1/chat/completions", &chat("oc", false)).await;
        assert_eq!(r.status, 200, "trial {trial}: {r:#?}");
        assert_eq!(r.connection(), "cli-c", "trial {trial}: {r:#?}");
        assert_eq!(hits(&s, KEY_A), trial, "trial {trial}: oc-a took the 429");
        assert_eq!(
            hits(&s, KEY_B),
            0,
            "trial {trial}: go-b was tried although its egress sibling had just locked it"
        );
        // Every observation applied, then everything cleared for the next trial.
        quiesce(&s.node, crate::error_semantics::MGMT_KEY).await;
        let cleared = send(
            s.http
                .post(format!("{}/api/resilience/cooldowns", s.node.admin_url()))
                .bearer_auth(crate::error_semantics::MGMT_KEY)
                .json(&json!({"all": true})),
        )
        .await;
        assert_eq!(cleared.status, 200, "{cleared:#?}");
    }
}
