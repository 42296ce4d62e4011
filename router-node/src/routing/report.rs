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
            Self::NotAllowed => "not_allowed",
            Self::NoConnections => "no_connections",
            Self::Saturated { .. } => "concurrency_cap",
            Self::Failed => "failed",
        }
    }

    /// Time until this obstacle lapses, when it is a timer.
    pub fn remaining_ms(&self) -> Option<Millis> {
        match self {
            Self::CircuitOpen { retry_after_ms } | Self::ProviderCooldown { retry_after_ms } => {
                Some(*retry_after_ms)
            }
            Self::Blocked { connections } => connections
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

    /// The lock reason for the combo cooldown-wait decision, when this skip is a lock.
    pub fn lock_reason(&self) -> Option<LockReason> {
        match self {
            Self::CircuitOpen { .. } => Some(LockReason::parse("circuit_open")),
            Self::Blocked { connections } => {
                let reason = connections.iter().find_map(|c| match c.block {
                    ConnectionBlock::Cooling { reason, .. } => Some(LockReason::from(reason)),
                    ConnectionBlock::Terminal(_) => None,
                })?;
                Some(reason)
            }
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
    /// Where skips are counted (the node's metrics), if anywhere.
    pub skips: Option<Arc<SkipCounters>>,
}

impl Report {
    pub fn skip(&mut self, target: &str, provider: &str, skip: TargetSkip) {
        if let Some(counters) = &self.skips {
            counters.record(&skip);
        }
        self.records.push(TargetRecord {
            target: target.to_owned(),
            provider: provider.to_owned(),
            skip: Some(skip),
        });
    }

    /// Whether any attempt reached an upstream.
    pub fn dispatched(&self) -> bool {
        self.attempts > 0
    }

    /// Forget the previous pass (before a cooldown-aware retry), keeping the attempt count.
    pub fn new_pass(&mut self) {
        self.records.clear();
    }
}
