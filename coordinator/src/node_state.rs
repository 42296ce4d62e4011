//! A node's liveness by the age of its heartbeat, and the `[cluster]` numbers that rule it.
//! Pure, with the reader's clock passed in: the health document, its rows and the history
//! sampler all judge nodes the same way.

use switchyard_shared::Millis;

/// The numbers the rules need, from `[cluster]`.
#[derive(Debug, Clone)]
pub struct Params {
    pub heartbeat_interval_ms: Millis,
    pub node_ttl_ms: Millis,
    pub redis_timeout_ms: Millis,
    /// Redacted.
    pub redis_url: String,
}

/// A node's state by heartbeat age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Heartbeat within two intervals.
    Up,
    /// Missed beats, but younger than `node_ttl_ms`.
    Stale,
    /// Older than `node_ttl_ms`, or its key is gone.
    Down,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Stale => "stale",
            Self::Down => "down",
        }
    }

    /// Pure: the state of a heartbeat `age_ms` old (`None`: no heartbeat at all).
    pub fn of(age_ms: Option<Millis>, p: &Params) -> Self {
        match age_ms {
            None => Self::Down,
            Some(age) if age >= p.node_ttl_ms => Self::Down,
            Some(age) if age > p.heartbeat_interval_ms.saturating_mul(2) => Self::Stale,
            Some(_) => Self::Up,
        }
    }
}
