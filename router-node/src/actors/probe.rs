//! The half-open probe as an owned lease.
//!
//! Why: a HALF_OPEN breaker hands out a small budget of probe leases (usually one). A lease
//! that is neither settled by an outcome nor handed back blocks every probe of that provider
//! until it expires (the breaker's reset timeout, 30 s and more). When the lease was an
//! `Option<ProbeGeneration>` released by hand, every early exit of the request path had to
//! remember it, and some did not. A [`ProbeGuard`] hands the lease back when it is dropped —
//! on an error, on a cancelled request, on any path nobody thought of — unless an outcome
//! [settles](ProbeGuard::settle) it first.

use std::sync::Arc;
use std::time::Duration;

use switchyard_shared::Millis;
use switchyard_shared::breaker::{Admission, ProbeGeneration};

use super::{ActorStats, AdmitProbe, ReleaseProbe, deliver_to_breaker};
use crate::actors::ProviderHandle;
use crate::clock::Clock;

/// How long a request waits for the breaker actor's admission before treating it as a refusal.
const ADMIT_TIMEOUT: Duration = Duration::from_secs(2);
/// The retry-after reported when the breaker actor does not answer in time.
const ADMIT_TIMEOUT_RETRY_AFTER_MS: Millis = 1000;

/// The breaker's answer to a request that wants to go to a provider.
#[derive(Debug)]
pub enum Admitted {
    /// The breaker is closed (or there is no breaker actor): go.
    Allowed,
    /// Go as the half-open probe, holding its lease.
    Probe(ProbeGuard),
    /// Not now.
    Rejected { retry_after_ms: Millis },
}

/// A half-open probe lease, handed back to the breaker on drop unless settled.
pub struct ProbeGuard {
    /// `None` once settled or released.
    generation: Option<ProbeGeneration>,
    provider: Arc<ProviderHandle>,
    stats: Arc<ActorStats>,
    clock: Clock,
}

impl ProbeGuard {
    /// Wraps a lease the breaker granted.
    pub fn new(
        generation: ProbeGeneration,
        provider: Arc<ProviderHandle>,
        stats: Arc<ActorStats>,
        clock: Clock,
    ) -> Self {
        Self {
            generation: Some(generation),
            provider,
            stats,
            clock,
        }
    }

    /// The lease's generation (the fence of its outcome).
    pub fn generation(&self) -> Option<ProbeGeneration> {
        self.generation
    }

    /// Takes the lease out for an outcome report, which settles it in the breaker; the guard
    /// then hands nothing back.
    pub fn settle(mut self) -> Option<ProbeGeneration> {
        self.generation.take()
    }
}

impl std::fmt::Debug for ProbeGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeGuard")
            .field("provider", &&*self.provider.id)
            .field("generation", &self.generation)
            .finish()
    }
}

impl Drop for ProbeGuard {
    fn drop(&mut self) {
        if let Some(generation) = self.generation.take() {
            // Never waits: if the breaker's mailbox is full the lease simply expires.
            deliver_to_breaker(
                &self.provider,
                &self.stats,
                ReleaseProbe {
                    generation,
                    at: self.clock.now(),
                },
            );
        }
    }
}

/// Asks the provider's breaker actor to admit a request while it is (or is due to become)
/// HALF_OPEN. Without a breaker actor (not started yet) it fails open rather than refuse
/// traffic; an actor that does not answer in time counts as a refusal.
pub async fn admit_probe(
    provider: &Arc<ProviderHandle>,
    stats: &Arc<ActorStats>,
    clock: Clock,
    now: Millis,
) -> Admitted {
    let Some(addr) = provider.actor.get() else {
        return Admitted::Allowed;
    };
    match tokio::time::timeout(ADMIT_TIMEOUT, addr.send(AdmitProbe { at: now })).await {
        Ok(Ok(Admission::Allowed)) => Admitted::Allowed,
        Ok(Ok(Admission::Probe { generation })) => Admitted::Probe(ProbeGuard::new(
            generation,
            provider.clone(),
            stats.clone(),
            clock,
        )),
        Ok(Ok(Admission::Rejected { retry_after_ms })) => Admitted::Rejected { retry_after_ms },
        _ => Admitted::Rejected {
            retry_after_ms: ADMIT_TIMEOUT_RETRY_AFTER_MS,
        },
    }
}
