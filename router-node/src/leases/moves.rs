//! Moving a lease off a connection that became ineligible (docs/leases.md, "the lease moves").
//!
//! Why: a lease pins an agent's session to one credential, but that credential can start
//! answering 429s, cool down, be locked out for the model or turn terminal. Dropping the lease
//! there would cost the agent its session: its next request would be refused and it would have
//! to acquire again under a new generation. Instead routing moves the lease, with the same
//! generation, to another free eligible connection of the key, and the request goes on there.
//!
//! The move is one store step (one Lua script in redis mode) that checks the holder and the
//! generation on the old connection and that the new one is free, so a move can neither revive
//! a stale holder nor take a connection another lease holds. The decisions (is the leased
//! connection ineligible, which connections may take the lease) are the pure functions
//! [`policy::move_reason`] and [`policy::move_targets`].

use switchyard_store::LeaseMove;

use super::backend::Backend;
use super::policy::{self, MoveReason};
use super::{LeaseClaim, errors};
use crate::api::errors::GatewayError;
use crate::runtime::RoutingTable;

/// Moves `claim`'s lease off its connection, which is ineligible for `reason`, to the first
/// of `eligible` (the key's eligible connections in routing order) that no lease holds.
/// `Ok(true)`: the lease, and the claim with it, is on another connection now. `Ok(false)`:
/// no connection was free, nothing changed. A stale lease or an unreachable store ends the
/// request (409 / 503), as at the fence.
pub async fn move_to_free(
    rt: &RoutingTable,
    claim: &LeaseClaim,
    reason: MoveReason,
    eligible: &[String],
) -> Result<bool, GatewayError> {
    let current = claim.connection();
    let backend = Backend::of(rt);
    let live = backend.live(eligible).await.map_err(|_| {
        rt.metrics.lease_op("move", "unavailable");
        errors::service_unavailable()
    })?;
    for target in policy::move_targets(&current, eligible, &live) {
        let moved = backend
            .move_lease(
                &current,
                &target,
                &claim.owner_token,
                claim.generation,
                &claim.api_key_id,
            )
            .await;
        match moved {
            Ok(LeaseMove::Moved(_)) => {
                claim.moved_to(&target);
                rt.metrics.lease_op("move", "moved");
                rt.metrics.lease_moved(reason.label());
                tracing::info!(
                    from = %current,
                    to = %target,
                    generation = claim.generation,
                    reason = reason.label(),
                    "lease moved off an ineligible connection"
                );
                return Ok(true);
            }
            // Taken since the read: try the next one.
            Ok(LeaseMove::TargetHeld { .. }) => rt.metrics.lease_op("move", "target_held"),
            Ok(LeaseMove::Stale) => {
                rt.metrics.lease_op("move", "stale");
                return Err(errors::fence_stale());
            }
            Err(_) => {
                rt.metrics.lease_op("move", "unavailable");
                return Err(errors::service_unavailable());
            }
        }
    }
    rt.metrics.lease_op("move", "no_target");
    Ok(false)
}
