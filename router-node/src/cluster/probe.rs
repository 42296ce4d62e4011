//! The cluster-wide half-open probe.
//!
//! Why: when a provider's open window ends, every node would otherwise send its own probe, so
//! a provider that just came back gets one probe per node. In redis mode a node that its local
//! breaker would let probe must also win the provider's probe lease in Redis (fenced by a
//! generation from a counter that is never reset); exactly one node wins per window. The
//! others remember the denial for at most [`MAX_DENIAL_MS`], so they ask Redis again soon.
//! Without Redis the node falls back to its local probe (degraded, one per node).
//!
//! A lease whose probe never reaches upstream (the gate is full, no connection is eligible,
//! the client went away) is handed back at once when its local probe guard drops
//! (`StatePublisher::release_probe`), instead of blocking the provider cluster-wide for the
//! lease's TTL. And the fence is checked again at dispatch ([`fence_holds`]): a probe whose
//! lease expired while it waited (another node may hold the next one) is not sent.

use std::sync::Arc;

use switchyard_shared::Millis;
use switchyard_store::ProbeGrant;

use super::Cluster;
use crate::actors::ProviderHandle;
use crate::actors::{Admitted, ProbeGuard};

/// Shortest wait before asking Redis again after a denial.
const MIN_DENIAL_MS: Millis = 100;
/// Longest a denial is remembered: a lease may be handed back long before its TTL.
pub const MAX_DENIAL_MS: Millis = 1_000;

/// Turns the local breaker's admission into the cluster's: a local `Probe` stands only if this
/// node also holds the cluster probe lease; a denied local probe is dropped, which hands its
/// lease back. `now` is node time; `ttl_ms` bounds the lease when the probe's outcome never
/// comes back.
pub async fn admit(
    cluster: &Cluster,
    provider: &ProviderHandle,
    local: Admitted,
    ttl_ms: Millis,
    now: Millis,
) -> Admitted {
    let Admitted::Probe(probe) = &local else {
        return local;
    };
    let Some(generation) = probe.generation() else {
        return local;
    };
    let id: &Arc<str> = &provider.id;
    if let Some(until) = cluster.probe_denied_until(id)
        && until > now
    {
        return Admitted::Rejected {
            retry_after_ms: until - now,
        };
    }
    match cluster
        .store
        .breaker_probe_acquire(id, &cluster.owner_token(), ttl_ms)
        .await
    {
        Ok(ProbeGrant::Granted {
            generation: cluster_gen,
            ..
        }) => {
            cluster.set_probe_denied(id, None);
            cluster.bind_probe(id, generation.0, cluster_gen);
            tracing::info!(provider = %id, cluster_gen, "cluster probe granted");
            local
        }
        // The shared breaker is closed: this node's OPEN was its own; its probe may go.
        Ok(ProbeGrant::Denied { retry_after_ms: 0 }) => local,
        Ok(ProbeGrant::Denied { retry_after_ms }) => {
            let wait = retry_after_ms.clamp(MIN_DENIAL_MS, MAX_DENIAL_MS);
            cluster.set_probe_denied(id, Some(now.saturating_add(wait)));
            Admitted::Rejected {
                retry_after_ms: wait,
            }
        }
        Err(e) => {
            tracing::debug!(provider = %id, error = %e, "cluster probe unavailable; probing locally");
            local
        }
    }
}

/// The fence at dispatch: whether `probe` may still go upstream. A probe bound to a cluster
/// lease goes only while Redis says that lease is still the live one; a local probe (no
/// binding) goes, and so does a bound one when Redis cannot tell (as at admission, the node
/// then probes on its own).
pub async fn fence_holds(cluster: &Cluster, provider: &Arc<str>, probe: &ProbeGuard) -> bool {
    let Some(cluster_gen) = probe
        .generation()
        .and_then(|g| cluster.probe_binding(provider, g.0))
    else {
        return true;
    };
    match cluster
        .store
        .breaker_probe_holds(provider, cluster_gen)
        .await
    {
        Ok(holds) => {
            if !holds {
                tracing::info!(provider = %provider, cluster_gen, "cluster probe lease lapsed before dispatch; not sent");
            }
            holds
        }
        Err(e) => {
            tracing::debug!(provider = %provider, error = %e, "cluster probe fence unavailable; probing locally");
            true
        }
    }
}

/// How long a cluster probe lease lives when its outcome never comes back: long enough for
/// the probe's response headers, at least a few seconds.
pub fn lease_ttl_ms(provider: &ProviderHandle) -> Millis {
    let t = &provider.config.timeouts;
    let attempt = if t.attempt_deadline_ms > 0 {
        t.attempt_deadline_ms
    } else {
        t.connect_ms.saturating_add(t.headers_ms)
    };
    attempt.clamp(MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS)
}

const MIN_LEASE_TTL_MS: Millis = 2_000;
const MAX_LEASE_TTL_MS: Millis = 120_000;
