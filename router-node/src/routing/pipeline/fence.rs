//! Step 2, fence: a leased request reaches the provider only while it holds the live lease.
//!
//! The fence is checked before the request waits for permits, so a stale holder is refused
//! without taking a queue slot, and again at dispatch time when getting the permits took time:
//! a lease can expire or move while its holder waits in a queue.

use switchyard_shared::Millis;

use crate::actors::ConnHandle;
use crate::api::errors::GatewayError;
use crate::leases;
use crate::routing::dispatch::RouteRequest;
use crate::runtime::RoutingTable;

/// When the lease was last found valid; `None` for a request without a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced(Option<Millis>);

impl Fenced {
    /// A lease found valid at `at`.
    #[cfg(test)]
    pub fn at(at: Millis) -> Self {
        Self(Some(at))
    }
}

/// The fence before permits. Ordinary requests pass without a store round trip.
pub async fn before_permits(
    rt: &RoutingTable,
    req: &RouteRequest,
    conn: &ConnHandle,
) -> Result<Fenced, GatewayError> {
    let Some(lease) = &req.lease else {
        return Ok(Fenced(None));
    };
    leases::fence::check(rt, lease, &conn.id).await?;
    Ok(Fenced(Some(rt.clock.now())))
}

/// The fence at dispatch time: checked again unless no time has passed since `fenced`.
pub async fn at_dispatch(
    rt: &RoutingTable,
    req: &RouteRequest,
    conn: &ConnHandle,
    fenced: Fenced,
) -> Result<(), GatewayError> {
    match (&req.lease, fenced) {
        (Some(lease), Fenced(Some(at))) if needs_recheck(at, rt.clock.now()) => {
            leases::fence::check(rt, lease, &conn.id).await
        }
        // Checked this very millisecond, or no lease to fence.
        _ => Ok(()),
    }
}

/// Whether a fence checked at `checked_at` must be checked again at `now`.
fn needs_recheck(checked_at: Millis, now: Millis) -> bool {
    now > checked_at
}

#[cfg(test)]
mod tests {
    use super::needs_recheck;

    #[test]
    fn a_fence_is_rechecked_once_time_has_passed() {
        assert!(!needs_recheck(100, 100));
        assert!(needs_recheck(100, 101));
        assert!(needs_recheck(100, 5_000));
    }
}
