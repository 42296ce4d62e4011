//! One rule for request-scoped errors (413, 422, a request-invalid 400): the same input fails
//! on every connection of the provider, so none of the others is tried; a combo moves on to
//! its next target (or stops) by the attempt rules. And the provider's detail reaches the
//! client whatever its shape: Mistral's 422 puts an object in `message`
//! (mistralai/client-python#91), which must not come back as a bare "HTTP 422".

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{Setup, prelude, setup};
use crate::support::http::*;

const K1: &str = "sk-request-scoped-k1-0001";
const K2: &str = "sk-request-scoped-k2-0002";
const KQ: &str = "sk-request-scoped-q-0003";

/// Mistral's 422 for a field its schema forbids (mistralai/client-python#91, as quoted).
fn mistral_422() -> Value {
    json!({
        "object": "error",
        "message": {"detail": [{
            "type": "extra_forbidden",
            "loc": ["body", "tools", 0, "function", "required"],
            "msg": "Extra inputs are not permitted",
            "input": ["content"]
        }]},
        "type": "invalid_request_error",
        "param": null,
        "code": null
    })
}

/// Provider `p` with two connections; with `combo`, a combo `c` of `p/m` then `q/m`.
async fn two_connections(combo: bool) -> Setup {
    let mut config = prelude()
        + &provider("p", "openai", "{URL}", &["m"], "", "")
        + &connection("p1", "p", "UP_1", "")
        + &connection("p2", "p", "UP_2", "");
    let mut keys = vec![("UP_1", K1), ("UP_2", K2)];
    if combo {
        config += &provider("q", "openai", "{URL}", &["m"], "", "");
        config += &connection("q1", "q", "UP_Q", "");
        config += "\n[[combos]]\nname = \"c\"\nstrategy = \"priority\"\n\
                   targets = [{ target = \"p/m\" }, { target = \"q/m\" }]\n";
        keys.push(("UP_Q", KQ));
    }
    setup(config, &keys).await
}

fn hits(s: &Setup, key: &str) -> u64 {
    s.mock.stats().by_key.get(key).copied().unwrap_or(0)
}

/// The fault on whichever of `p`'s connections is asked first (once).
fn fault(status: u16, body: Option<Value>) -> FaultSpec {
    FaultSpec {
        body,
        ..FaultSpec::status(status).for_model("m").times(1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_scoped_error_stops_the_providers_other_connections() {
    let s = two_connections(false).await;
    for (status, body) in [
        (422, Some(mistral_422())),
        (413, None),
        (
            400,
            Some(
                json!({"error": {"message": "something nobody has seen before", "type": "invalid_request_error"}}),
            ),
        ),
    ] {
        let before = hits(&s, K1) + hits(&s, K2);
        s.mock.script(fault(status, body)).unwrap();
        let r = s.post("/v1/chat/completions", &chat("p/m", false)).await;
        assert_eq!(r.status, status, "relayed as it is: {r:#?}");
        assert_eq!(
            hits(&s, K1) + hits(&s, K2),
            before + 1,
            "{status}: one upstream call, the other connection is not tried"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_combo_moves_on_past_a_request_scoped_error_without_the_targets_other_connections() {
    let s = two_connections(true).await;
    s.mock.script(fault(422, Some(mistral_422()))).unwrap();
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    assert_eq!(r.status, 200, "the next target serves: {r:#?}");
    assert_eq!(r.connection(), "q1", "{r:#?}");
    assert_eq!(
        hits(&s, K1) + hits(&s, K2),
        1,
        "p's other connection is not tried"
    );
    assert_eq!(hits(&s, KQ), 1);
    // A body-specific 400 (the same input fails on every target) stops the combo.
    s.mock
        .script(fault(
            400,
            Some(json!({"error": {"message": "malformed tool schema", "type": "invalid_request_error"}})),
        ))
        .unwrap();
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    assert_eq!(r.status, 400, "{r:#?}");
    assert_eq!(hits(&s, K1) + hits(&s, K2), 2);
    assert_eq!(hits(&s, KQ), 1, "the combo stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validation_error_detail_reaches_the_client_whatever_its_shape() {
    let s = two_connections(false).await;
    for (path, body) in [
        ("/v1/chat/completions", chat("p/m", false)),
        ("/v1/messages", messages("p/m", false)),
    ] {
        s.mock.script(fault(422, Some(mistral_422()))).unwrap();
        let r = s.post(path, &body).await;
        assert_eq!(r.status, 422, "{path}: {r:#?}");
        let error = &r.json()["error"];
        let message = error["message"].as_str().unwrap_or("");
        assert!(
            message.contains("Extra inputs are not permitted")
                && message.contains("extra_forbidden")
                && message.contains(r#"["body","tools",0,"function","required"]"#),
            "{path}: the provider's detail, not a bare status: {message:?}"
        );
        assert_eq!(error["type"], "invalid_request_error", "{path}: {error}");
        assert!(error["code"].is_string(), "{path}: a code: {error}");
    }
}
