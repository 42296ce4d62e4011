//! The inference side of leases: the claim at ingress and the fence before every dispatch.
//!
//! A leased request names its owner token and generation in headers. At ingress the claim is
//! matched to the owner's live lease (one store round trip), which pins the request to that
//! lease's connection. Right before every upstream attempt the fence checks again that the
//! generation, the API key and the connection are still the live lease's: a holder that
//! stalled past its TTL and lost the lease is refused (409 `LEASE_FENCE_STALE`) and never
//! reaches the provider. With the store unreachable, leased requests get 503.

use actix_web::http::header::HeaderMap;
use switchyard_shared::config::SCOPE_LEASE_EXCLUSIVE;
use switchyard_store::FenceCheck;

use super::backend::Backend;
use super::policy::{find_owned, parse_generation, valid_owner_token};
use super::{GENERATION_HEADER, LeaseClaim, OWNER_HEADER, errors};
use crate::api::auth::ClientKey;
use crate::api::errors::GatewayError;
use crate::runtime::RoutingTable;

/// Whether a key holds exclusive session leases.
pub fn is_lease_key(key: &ClientKey) -> bool {
    key.scopes.iter().any(|s| s == SCOPE_LEASE_EXCLUSIVE)
}

/// The lease claim of an inference request, `Ok(None)` for an ordinary request.
pub async fn claim(
    rt: &RoutingTable,
    headers: &HeaderMap,
    key: Option<&ClientKey>,
) -> Result<Option<LeaseClaim>, GatewayError> {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or(""));
    let (owner, generation) = match (text(OWNER_HEADER), text(GENERATION_HEADER)) {
        (None, None) => {
            return match key {
                Some(k) if is_lease_key(k) => Err(errors::lease_required()),
                _ => Ok(None),
            };
        }
        (Some(o), Some(g)) => (o, g),
        _ => return Err(errors::context_required()),
    };
    if !valid_owner_token(owner) {
        return Err(errors::context_invalid(
            "`X-Switchyard-Lease-Owner` must match ^vlo_[A-Za-z0-9_-]{43}$",
        ));
    }
    let Some(generation) = parse_generation(generation) else {
        return Err(errors::context_invalid(
            "`X-Switchyard-Lease-Generation` must be a positive integer",
        ));
    };
    let Some(key) = key else {
        return Err(errors::authentication_required());
    };
    if !is_lease_key(key) {
        return Err(errors::scope_required());
    }
    let live = match Backend::of(rt).live(&key.allowed_connections).await {
        Ok(live) => live,
        Err(_) => {
            rt.metrics.lease_op("claim", "unavailable");
            return Err(errors::service_unavailable());
        }
    };
    let Some(own) = find_owned(&live, owner) else {
        rt.metrics.lease_op("claim", "stale");
        return Err(errors::fence_stale());
    };
    if own.api_key_id != key.id {
        rt.metrics.lease_op("claim", "mismatch");
        return Err(errors::connection_mismatch());
    }
    if own.generation != generation {
        rt.metrics.lease_op("claim", "stale");
        return Err(errors::fence_stale());
    }
    rt.metrics.lease_op("claim", "ok");
    Ok(Some(LeaseClaim::new(
        owner.to_owned(),
        generation,
        own.name.clone(),
        key.id.clone(),
    )))
}

/// The dispatch fence: the claim still holds the live lease of `connection`.
pub async fn check(
    rt: &RoutingTable,
    claim: &LeaseClaim,
    connection: &str,
) -> Result<(), GatewayError> {
    if connection != claim.connection() {
        rt.metrics.lease_op("fence", "mismatch");
        return Err(errors::connection_mismatch());
    }
    let result = Backend::of(rt)
        .fence(
            connection,
            &claim.owner_token,
            claim.generation,
            &claim.api_key_id,
        )
        .await;
    match result {
        Ok(FenceCheck::Valid) => {
            rt.metrics.lease_op("fence", "ok");
            Ok(())
        }
        Ok(FenceCheck::Stale) => {
            rt.metrics.lease_op("fence", "stale");
            Err(errors::fence_stale())
        }
        Err(_) => {
            rt.metrics.lease_op("fence", "unavailable");
            Err(errors::service_unavailable())
        }
    }
}
