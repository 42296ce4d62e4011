//! What happened to each target of a request: the raw material of terminal error bodies.
//!
//! Every target that was skipped or failed leaves a record, so a response that never reached
//! an upstream says why, per target (`skippedTargets`, `diagnostics.excluded`), and a response
//! that did says which connection answered.

use std::sync::Arc;

use switchyard_shared::Millis;
use switchyard_shared::admission::{
    BlockedConnection, ConnectionBlock, ExclusionReason, LockReason,
};

use crate::metrics::SkipCounters;
use crate::metrics::labels::SkipLabel;

/// The last upstream failure seen, returned to the client when no target succeeded.
#[derive(Debug, Clone)]
pub struct UpstreamFailure {
    pub target: String,
    pub connection: String,
    /// The (restated) status; `None` for transport failures.
    pub status: Option<u16>,
    /// Sanitised, redacted message safe for the client.
    pub message: String,
    /// Retry-After to tell the client (restatement or upstream hint), ms.
    pub retry_after_ms: Option<Millis>,
    /// The failure was a stream readiness failure (504 / 502 with their codes).
    pub stream_code: Option<(u16, &'static str, &'static str)>,
    /// The upstream's own error code for the client (`context_length_exceeded`), when it has
    /// one; otherwise the status's default code is used.
    pub code: Option<String>,
    /// What this failure blocks on its connection (a cooldown, a lockout, a terminal state),
    /// `None` when it blocks nothing.
    pub block: Option<ConnectionBlock>,
}

/// Why a target could not be dispatched.
#[derive(Debug, Clone)]
pub enum TargetSkip {
    CircuitOpen {
        retry_after_ms: Millis,
    },
    /// The optional windowed provider cooldown holds the provider.
    ProviderCooldown {
        retry_after_ms: Millis,
    },
    /// Every eligible connection is cooling, locked or terminal.
    Blocked {
        connections: Vec<BlockedConnection>,
    },
    /// The quota preflight cut off every connection left: each reported a quota window
    /// nearly spent (listed as cooling for a spent quota until the window resets).
    QuotaCutoff {
        connections: Vec<BlockedConnection>,
    },
    /// The API key may not use any connection of this target.
    NotAllowed,
    /// The provider has no connections.
    NoConnections,
    /// A concurrency gate or the request queue refused every connection.
    Saturated {
        code: &'static str,
        status: u16,
        error_type: &'static str,
        retry_after_ms: Option<Millis>,
    },
    /// The request declares more tools than this provider accepts for the model (a limit
    /// learned from an earlier "too many tools" answer).
    ToolLimit {
        limit: u32,
    },
    /// Every connection left already failed in this request on another target (the
    /// reference's in-request exhaustion sets).
    RequestExhaustion,
    /// Attempts were made and failed.
    Failed,
}

impl SkipLabel for TargetSkip {
    fn reason(&self) -> &'static str {
        TargetSkip::reason(self)
    }

    fn rejection_code(&self) -> Option<&'static str> {
        match self {
            Self::Saturated { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl TargetSkip {
    /// The short reason for `skippedTargets` / headers.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::CircuitOpen { .. } => "circuit_open",
            Self::ProviderCooldown { .. } => "provider_cooldown",
            Self::Blocked { connections } => {
                let all_terminal = !connections.is_empty()
                    && connections
                        .iter()
                        .all(|c| matches!(c.block, ConnectionBlock::Terminal(_)));
                let model_only = !connections.is_empty()
                    && connections.iter().all(|c| {
                        matches!(
                            c.block,
                            ConnectionBlock::Cooling {
                                scope: switchyard_shared::admission::CoolingScope::Model,
                                ..
                            }
                        )
                    });
                if all_terminal {
                    "terminal"
                } else if model_only {
                    "model_lockout"
                } else {
                    "connection_cooldown"
                }
            }
            Self::QuotaCutoff { .. } => "quota_cutoff",
            Self::NotAllowed => "not_allowed",
            Self::NoConnections => "no_connections",
            Self::Saturated { .. } => "concurrency_cap",
            Self::RequestExhaustion => "request_exhaustion",
            Self::ToolLimit { .. } => "tool_limit",
            Self::Failed => "failed",
        }
    }

    /// Time until this obstacle lapses, when it is a timer.
    pub fn remaining_ms(&self) -> Option<Millis> {
        match self {
            Self::CircuitOpen { retry_after_ms } | Self::ProviderCooldown { retry_after_ms } => {
                Some(*retry_after_ms)
            }
            Self::Blocked { connections } | Self::QuotaCutoff { connections } => connections
                .iter()
                .filter_map(|c| match c.block {
                    ConnectionBlock::Cooling { remaining_ms, .. } => Some(remaining_ms),
                    ConnectionBlock::Terminal(_) => None,
                })
                .min(),
            Self::Saturated { retry_after_ms, .. } => *retry_after_ms,
            _ => None,
        }
    }

    /// The exclusion reason for a weighted pool's diagnostics.
    pub fn exclusion(&self) -> ExclusionReason {
        match self {
            Self::CircuitOpen { .. } => ExclusionReason::CircuitOpen,
            Self::ProviderCooldown { .. } => ExclusionReason::ProviderCooldown,
            Self::Blocked { .. } if self.reason() == "model_lockout" => {
                ExclusionReason::ModelLockout
            }
            _ => ExclusionReason::Unavailable,
        }
    }

    /// The lock reason for the combo cooldown-wait decision, when this skip is a lock: the
    /// reason of the connection that frees soonest, so it pairs with [`Self::remaining_ms`]
    /// (the first connection's reason with another's time made a combo answer 503 where it
    /// should have waited for a short rate limit).
    pub fn lock_reason(&self) -> Option<LockReason> {
        match self {
            Self::CircuitOpen { .. } => Some(LockReason::parse("circuit_open")),
            Self::Blocked { connections } | Self::QuotaCutoff { connections } => connections
                .iter()
                .filter_map(|c| match c.block {
                    ConnectionBlock::Cooling {
                        reason,
                        remaining_ms,
                        ..
                    } => Some((remaining_ms, reason)),
                    ConnectionBlock::Terminal(_) => None,
                })
                .min_by_key(|(remaining_ms, _)| *remaining_ms)
                .map(|(_, reason)| LockReason::from(reason)),
            _ => None,
        }
    }
}

/// One target's record.
#[derive(Debug, Clone)]
pub struct TargetRecord {
    /// `provider/model`.
    pub target: String,
    pub provider: String,
    pub skip: Option<TargetSkip>,
}

/// Everything the request saw.
#[derive(Debug, Default)]
pub struct Report {
    pub records: Vec<TargetRecord>,
    pub attempts: u32,
    pub last_failure: Option<UpstreamFailure>,
    /// The connections this pass's own failures blocked, and how.
    pub failure_blocks: Vec<BlockedConnection>,
    /// Where skips are counted (the node's metrics), if anywhere.
    pub skips: Option<Arc<SkipCounters>>,
}

impl Report {
    pub fn skip(&mut self, target: &str, provider: &str, skip: TargetSkip) {
        crate::telemetry::event_skip(target, provider, skip.reason());
        if let Some(counters) = &self.skips {
            counters.record(&skip);
        }
        self.records.push(TargetRecord {
            target: target.to_owned(),
            provider: provider.to_owned(),
            skip: Some(skip),
        });
    }

    /// Records an upstream failure: the last one is the answer, and what it blocked counts
    /// towards "every connection is blocked".
    pub fn record_failure(&mut self, failure: UpstreamFailure) {
        if let Some(block) = failure.block {
            self.failure_blocks.push(BlockedConnection {
                connection: failure.connection.clone(),
                block,
            });
        }
        self.last_failure = Some(failure);
    }

    /// Whether any attempt reached an upstream.
    pub fn dispatched(&self) -> bool {
        self.attempts > 0
    }

    /// Forget the previous pass (before a cooldown-aware retry), keeping the attempt count.
    pub fn new_pass(&mut self) {
        self.records.clear();
        self.failure_blocks.clear();
    }
}

#[cfg(test)]
mod tests {
    use switchyard_shared::admission::{BlockedConnection, CoolingScope};
    use switchyard_shared::outcome::FailureReason;

    use super::*;

    fn cooling(connection: &str, remaining_ms: Millis, reason: FailureReason) -> BlockedConnection {
        BlockedConnection {
            connection: connection.to_owned(),
            block: ConnectionBlock::Cooling {
                remaining_ms,
                scope: CoolingScope::Connection,
                reason,
            },
        }
    }

    #[test]
    fn lock_reason_pairs_with_the_soonest_connection() {
        // The first connection is out for a day on a quota; the second frees in 2 s from a
        // rate limit. The skip waits 2 s, so its reason must be the rate limit's.
        let skip = TargetSkip::Blocked {
            connections: vec![
                cooling("k1", 86_400_000, FailureReason::QuotaExhausted),
                cooling("k2", 2_000, FailureReason::RateLimitExceeded),
            ],
        };
        assert_eq!(skip.remaining_ms(), Some(2_000));
        assert_eq!(
            skip.lock_reason(),
            Some(LockReason::from(FailureReason::RateLimitExceeded))
        );
    }
}
