//! `POST /api/v1/session-leases`: acquire, renew and release an exclusive session lease.
//!
//! Checks run cheapest first: content type (415), API key (401), scope and key configuration
//! (403), body (400), owner header (400); only then is the store consulted. Acquire picks the
//! first free eligible connection of the key that serves the model; renew and release act on
//! the owner's live lease. Success bodies carry the state, the generation and the times —
//! never the connection, a credential or the owner token.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};
use switchyard_shared::Millis;
use switchyard_shared::config::Resolved;
use switchyard_store::LeaseAcquire;

use crate::api::auth::{ClientKey, presented_key};
use crate::api::errors::{ClientFormat, GatewayError};
use crate::leases::backend::Backend;
use crate::leases::fence::is_lease_key;
use crate::leases::policy::{
    AcquirePlan, Candidate, find_owned, plan_acquire, rfc3339, valid_owner_token,
};
use crate::leases::{OWNER_HEADER, errors};
use crate::reload::Rt;
use crate::runtime::Runtime;

/// Longest accepted model name.
const MAX_MODEL_LEN: usize = 512;
/// Largest generation a JSON client carries exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// One parsed lease request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    Acquire {
        model: String,
    },
    Renew {
        generation: u64,
    },
    Release {
        generation: u64,
        reason: &'static str,
    },
}

impl Action {
    fn name(&self) -> &'static str {
        match self {
            Action::Acquire { .. } => "acquire",
            Action::Renew { .. } => "renew",
            Action::Release { .. } => "release",
        }
    }
}

pub async fn session_leases(rt: Rt, req: HttpRequest, body: web::Bytes) -> HttpResponse {
    let rt = rt.get_ref().clone();
    let (action, result) = match handle(&rt, &req, &body).await {
        Ok((action, ok)) => (action, Ok(ok)),
        Err((action, e)) => (action, Err(e)),
    };
    let (status, code) = match &result {
        Ok(_) => (200, "ok".to_owned()),
        Err(e) => (e.status.as_u16(), e.code.clone()),
    };
    rt.table.metrics.lease_op(action, metric_result(&code));
    if let Some(mut line) = crate::access_log::Line::start("lease") {
        let key = presented_key(req.headers())
            .and_then(|k| rt.keys.find(k.as_bytes()).map(|k| k.id.clone()));
        line.str("route", "session-leases")
            .str("action", action)
            .str("api_key", key.as_deref().unwrap_or("-"))
            .u64("status", u64::from(status))
            .str("code", &code);
        line.finish();
    }
    match result {
        Ok(body) => HttpResponse::Ok().json(body),
        Err(e) => e.to_response(ClientFormat::OpenAiChat),
    }
}

/// The metric label of an outcome (a closed set).
fn metric_result(code: &str) -> &'static str {
    match code {
        "ok" => "ok",
        "LEASE_CAPACITY_UNAVAILABLE" => "held",
        "LEASE_FENCE_STALE" => "stale",
        "LEASE_SERVICE_UNAVAILABLE" => "unavailable",
        _ => "rejected",
    }
}

type Outcome = Result<(&'static str, Value), (&'static str, GatewayError)>;

async fn handle(rt: &Runtime, req: &HttpRequest, body: &[u8]) -> Outcome {
    let fail = |e: GatewayError| Err(("invalid", e));
    let ct = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("application/json")
    {
        return fail(errors::content_type_required());
    }
    let Some(presented) = presented_key(req.headers()) else {
        return fail(errors::authentication_required());
    };
    let Some(key) = rt.keys.find(presented.as_bytes()).cloned() else {
        return fail(errors::api_key_invalid());
    };
    if !is_lease_key(&key) {
        return fail(errors::scope_required());
    }
    if key.allowed_connections.is_empty() {
        return fail(errors::key_configuration_invalid());
    }
    let action = match parse_action(body) {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let name = action.name();
    let owner = match req.headers().get(OWNER_HEADER) {
        None => return Err((name, errors::context_required())),
        Some(v) => v.to_str().unwrap_or(""),
    };
    if !valid_owner_token(owner) {
        return Err((
            name,
            errors::context_invalid(
                "`X-Switchyard-Lease-Owner` must match ^vlo_[A-Za-z0-9_-]{43}$",
            ),
        ));
    }
    let ttl_ms = rt.table.settings.load().session_leases.ttl_ms;
    let result = match &action {
        Action::Acquire { model } => acquire(rt, &key, owner, model, ttl_ms).await,
        Action::Renew { generation } => renew(rt, &key, owner, *generation, ttl_ms).await,
        Action::Release { generation, reason } => {
            release(rt, &key, owner, *generation, reason).await
        }
    };
    result.map(|v| (name, v)).map_err(|e| (name, e))
}

fn parse_action(body: &[u8]) -> Result<Action, GatewayError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| errors::action_invalid("The body must be a JSON object with an `action`"))?;
    let generation = || {
        value
            .get("generation")
            .and_then(Value::as_u64)
            .filter(|g| (1..=MAX_SAFE_INTEGER).contains(g))
            .ok_or_else(|| errors::context_invalid("`generation` must be a positive integer"))
    };
    match value.get("action").and_then(Value::as_str) {
        Some("acquire") => match value.get("model").and_then(Value::as_str) {
            Some(m) if !m.is_empty() && m.len() <= MAX_MODEL_LEN => Ok(Action::Acquire {
                model: m.to_owned(),
            }),
            _ => Err(errors::model_invalid(
                "`model` must be a string of 1 to 512 characters",
            )),
        },
        Some("renew") => Ok(Action::Renew {
            generation: generation()?,
        }),
        Some("release") => {
            let reason = match value.get("reason").and_then(Value::as_str) {
                None | Some("OWNER_EXIT") => "OWNER_EXIT",
                Some("CLIENT_CANCELLED") => "CLIENT_CANCELLED",
                Some(_) => {
                    return Err(errors::context_invalid(
                        "`reason` must be OWNER_EXIT or CLIENT_CANCELLED",
                    ));
                }
            };
            Ok(Action::Release {
                generation: generation()?,
                reason,
            })
        }
        _ => Err(errors::action_invalid(
            "`action` must be acquire, renew or release",
        )),
    }
}

async fn acquire(
    rt: &Runtime,
    key: &ClientKey,
    owner: &str,
    model: &str,
    ttl_ms: Millis,
) -> Result<Value, GatewayError> {
    let candidates = candidates(rt, key, model)?;
    let backend = Backend::of(&rt.table);
    let live = backend
        .live(rt.table.leases.managed())
        .await
        .map_err(|_| errors::service_unavailable())?;
    match plan_acquire(&candidates, &live, owner, &key.id) {
        AcquirePlan::Reuse { connection } => {
            match backend
                .acquire(&connection, owner, &key.id, ttl_ms)
                .await
                .map_err(|_| errors::service_unavailable())?
            {
                LeaseAcquire::Acquired(g) => Ok(active(rt, "REUSED", g.generation, g.ttl_ms)),
                // It expired and someone else took it between the read and the write.
                LeaseAcquire::Held { .. } => Err(errors::fence_stale()),
            }
        }
        AcquirePlan::OwnerUnderOtherKey => Err(errors::connection_mismatch()),
        AcquirePlan::NoCandidates => Err(errors::no_eligible_connection()),
        AcquirePlan::NoneEligible => Err(errors::eligibility_unavailable(None)),
        AcquirePlan::Try {
            free,
            eligible,
            foreign_min_ms,
        } => {
            let mut earliest = foreign_min_ms;
            for connection in &free {
                match backend
                    .acquire(connection, owner, &key.id, ttl_ms)
                    .await
                    .map_err(|_| errors::service_unavailable())?
                {
                    LeaseAcquire::Acquired(g) => {
                        return Ok(active(rt, "ACQUIRED", g.generation, g.ttl_ms));
                    }
                    // Lost a race for it: remember when it frees up and try the next one.
                    LeaseAcquire::Held { retry_after_ms } => {
                        earliest = Some(earliest.map_or(retry_after_ms, |m| m.min(retry_after_ms)));
                    }
                }
            }
            Err(errors::capacity_unavailable(
                earliest.unwrap_or(1000),
                eligible,
                0,
            ))
        }
    }
}

async fn renew(
    rt: &Runtime,
    key: &ClientKey,
    owner: &str,
    generation: u64,
    ttl_ms: Millis,
) -> Result<Value, GatewayError> {
    let backend = Backend::of(&rt.table);
    let live = backend
        .live(&key.allowed_connections)
        .await
        .map_err(|_| errors::service_unavailable())?;
    let Some(own) = find_owned(&live, owner) else {
        return Err(errors::fence_stale());
    };
    if own.api_key_id != key.id {
        return Err(errors::connection_mismatch());
    }
    if own.generation != generation {
        return Err(errors::fence_stale());
    }
    let renewed = backend
        .renew(&own.name, owner, generation, ttl_ms)
        .await
        .map_err(|_| errors::service_unavailable())?;
    if renewed {
        Ok(active(rt, "RENEWED", generation, ttl_ms))
    } else {
        Err(errors::fence_stale())
    }
}

async fn release(
    rt: &Runtime,
    key: &ClientKey,
    owner: &str,
    generation: u64,
    reason: &str,
) -> Result<Value, GatewayError> {
    let backend = Backend::of(&rt.table);
    let live = backend
        .live(&key.allowed_connections)
        .await
        .map_err(|_| errors::service_unavailable())?;
    let released = json!({
        "state": "RELEASED",
        "generation": generation,
        "reason": reason,
        "endedAt": rfc3339(rt.table.clock.epoch_ms()),
    });
    // Release is idempotent: nothing live for this owner means it is already over.
    let Some(own) = find_owned(&live, owner) else {
        return Ok(released);
    };
    if own.api_key_id != key.id {
        return Err(errors::connection_mismatch());
    }
    if own.generation != generation {
        return Err(errors::fence_stale());
    }
    backend
        .release(&own.name, owner, generation)
        .await
        .map_err(|_| errors::service_unavailable())?;
    Ok(released)
}

fn active(rt: &Runtime, outcome: &str, generation: u64, ttl_ms: Millis) -> Value {
    let now = rt.table.clock.epoch_ms();
    json!({
        "state": "ACTIVE",
        "outcome": outcome,
        "generation": generation,
        "renewedAt": rfc3339(now),
        "expiresAt": rfc3339(now.saturating_add(ttl_ms)),
        "ttlMs": ttl_ms,
    })
}

/// The key's connections that serve `model`, in routing order, with their eligibility now.
fn candidates(rt: &Runtime, key: &ClientKey, model: &str) -> Result<Vec<Candidate>, GatewayError> {
    let targets = match rt.table.index.resolve(model) {
        Ok(Resolved::Direct(t)) => vec![t],
        Ok(Resolved::Combo(c)) => c.targets.clone(),
        Err(e) => return Err(errors::model_invalid(&e.to_string())),
    };
    let now = rt.table.clock.now();
    let mut out: Vec<Candidate> = Vec::new();
    for target in &targets {
        let Some(provider) = rt.table.provider(&target.provider) else {
            continue;
        };
        let mut conns: Vec<_> = provider
            .connections
            .iter()
            .filter_map(|&i| rt.table.connections.get(i))
            .filter(|c| target.connection.as_deref().is_none_or(|p| p == &*c.id))
            .filter(|c| key.allows_connection(&c.id))
            .collect();
        conns.sort_by_key(|c| c.config.priority);
        for conn in conns {
            if out.iter().any(|c| c.connection == *conn.id) {
                continue;
            }
            let snap = conn.load();
            let blocked = snap.terminal().is_some()
                || snap.cooldown_remaining(now) > 0
                || snap
                    .model_lock(&provider.model_ref(&conn.id, &target.model), now)
                    .is_some();
            out.push(Candidate {
                connection: conn.id.to_string(),
                eligible: !blocked,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_parse_into_actions() {
        assert_eq!(
            parse_action(br#"{"action":"acquire","model":"glm/glm-4.6"}"#).unwrap(),
            Action::Acquire {
                model: "glm/glm-4.6".into()
            }
        );
        assert_eq!(
            parse_action(br#"{"action":"renew","generation":3}"#).unwrap(),
            Action::Renew { generation: 3 }
        );
        assert_eq!(
            parse_action(br#"{"action":"release","generation":3,"reason":"CLIENT_CANCELLED"}"#)
                .unwrap(),
            Action::Release {
                generation: 3,
                reason: "CLIENT_CANCELLED"
            }
        );
        let code = |b: &[u8]| parse_action(b).unwrap_err().code;
        assert_eq!(code(br#"{"action":"steal"}"#), "LEASE_ACTION_INVALID");
        assert_eq!(code(b"not json"), "LEASE_ACTION_INVALID");
        assert_eq!(code(br#"{"action":"acquire"}"#), "LEASE_MODEL_INVALID");
        assert_eq!(
            code(br#"{"action":"renew","generation":0}"#),
            "LEASE_CONTEXT_INVALID"
        );
        assert_eq!(
            code(br#"{"action":"release","generation":1,"reason":"x"}"#),
            "LEASE_CONTEXT_INVALID"
        );
    }
}
