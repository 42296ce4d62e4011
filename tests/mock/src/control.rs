//! The HTTP control API under `/__mock/`, so a mock running as a separate process can be
//! scripted and inspected by black-box tests exactly as the in-process handle can.
//!
//! | request | effect |
//! |---|---|
//! | `POST /__mock/script` | queue one [`FaultSpec`] (a JSON object) or several (an array) |
//! | `GET /__mock/script` | list queued faults with their remaining uses |
//! | `DELETE /__mock/script` | drop all queued faults |
//! | `GET /__mock/stats` | the [`super::StatsSnapshot`] as JSON |
//! | `POST /__mock/reset` | drop queued faults and zero the counters |
//! | `GET /__mock/health` | `{"status":"ok"}` |
//! | `POST /__mock/usage-wall` | script the Claude OAuth usage wall (a [`super::WallScript`]) |
//! | `GET /__mock/usage-wall` | what the wall saw ([`super::WallSeen`]) |
//! | `DELETE /__mock/usage-wall` | lift the wall |

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::Shared;
use super::body::MockBody;
use super::fault::FaultSpec;
use super::wire;

/// Largest control request body.
const MAX_CONTROL_BODY: usize = 1024 * 1024;

fn reply(status: StatusCode, value: &Value) -> Response<MockBody> {
    let mut resp = Response::new(MockBody::full(wire::serialize(value)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn bad_request(message: String) -> Response<MockBody> {
    reply(
        StatusCode::BAD_REQUEST,
        &json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_fault"}}),
    )
}

/// Parses a fault script: one object or an array of them.
pub fn parse_script(bytes: &[u8]) -> Result<Vec<FaultSpec>, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
    let specs = match value {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| serde_json::from_value(v).map_err(|e| format!("fault {i}: {e}")))
            .collect::<Result<Vec<FaultSpec>, String>>()?,
        other => vec![serde_json::from_value(other).map_err(|e| e.to_string())?],
    };
    for (i, spec) in specs.iter().enumerate() {
        spec.validate().map_err(|e| format!("fault {i}: {e}"))?;
    }
    Ok(specs)
}

pub(crate) async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<MockBody> {
    let path = req.uri().path().trim_end_matches('/');
    match (req.method().clone(), path) {
        (Method::POST, "/__mock/script") => {
            let bytes = match Limited::new(req.into_body(), MAX_CONTROL_BODY)
                .collect()
                .await
            {
                Ok(c) => c.to_bytes(),
                Err(e) => return bad_request(format!("unreadable body: {e}")),
            };
            let specs = match parse_script(&bytes) {
                Ok(s) => s,
                Err(e) => return bad_request(e),
            };
            let queued = specs.len();
            match shared.faults.push_all(specs) {
                Ok(pending) => reply(
                    StatusCode::OK,
                    &json!({"queued": queued, "pending": pending}),
                ),
                Err(e) => bad_request(e),
            }
        }
        (Method::GET, "/__mock/script") => {
            let pending = shared.faults.pending();
            match serde_json::to_value(&pending) {
                Ok(list) => reply(StatusCode::OK, &json!({ "pending": list })),
                Err(e) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &json!({"error": {"message": e.to_string()}}),
                ),
            }
        }
        (Method::DELETE, "/__mock/script") => {
            shared.faults.clear();
            reply(StatusCode::OK, &json!({"pending": 0}))
        }
        (Method::GET, "/__mock/stats") => {
            let snapshot = shared.stats.snapshot(shared.faults.len());
            match serde_json::to_value(&snapshot) {
                Ok(v) => reply(StatusCode::OK, &v),
                Err(e) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &json!({"error": {"message": e.to_string()}}),
                ),
            }
        }
        (Method::POST, "/__mock/reset") => {
            shared.faults.clear();
            shared.stats.reset();
            shared.usage_wall.reset();
            reply(StatusCode::OK, &json!({"reset": true}))
        }
        (Method::POST, "/__mock/usage-wall") => {
            let bytes = match Limited::new(req.into_body(), MAX_CONTROL_BODY)
                .collect()
                .await
            {
                Ok(c) => c.to_bytes(),
                Err(e) => return bad_request(format!("unreadable body: {e}")),
            };
            match serde_json::from_slice::<super::WallScript>(&bytes) {
                Ok(script) => {
                    shared.usage_wall.arm(script);
                    reply(StatusCode::OK, &json!({"armed": true}))
                }
                Err(e) => bad_request(format!("invalid usage wall: {e}")),
            }
        }
        (Method::GET, "/__mock/usage-wall") => match serde_json::to_value(shared.usage_wall.seen())
        {
            Ok(v) => reply(StatusCode::OK, &v),
            Err(e) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({"error": {"message": e.to_string()}}),
            ),
        },
        (Method::DELETE, "/__mock/usage-wall") => {
            shared.usage_wall.disarm();
            reply(StatusCode::OK, &json!({"armed": false}))
        }
        (Method::GET, "/__mock/health") => reply(StatusCode::OK, &json!({"status": "ok"})),
        (method, path) => reply(
            StatusCode::NOT_FOUND,
            &json!({"error": {"message": format!("no control endpoint {method} {path}"), "type": "invalid_request_error", "code": "not_found"}}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_accepts_object_or_array_and_names_the_bad_one() {
        assert_eq!(parse_script(br#"{"status":429}"#).unwrap().len(), 1);
        assert_eq!(
            parse_script(br#"[{"status":429},{"reset_before_body":true}]"#)
                .unwrap()
                .len(),
            2
        );
        let err = parse_script(br#"[{"status":429},{"match":{"route":"nope"}}]"#).unwrap_err();
        assert!(err.starts_with("fault 1"), "{err}");
        assert!(parse_script(b"nope").is_err());
    }
}
