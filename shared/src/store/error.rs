//! Why a store operation did not happen.

use thiserror::Error;

/// Why a store operation did not happen. Callers on the request path treat every variant the
/// same way (degrade to local state, or fail closed for leases); the variants exist for logs
/// and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// Redis is known to be down; the call was skipped without touching the network.
    #[error("redis is unavailable")]
    Unavailable,
    /// The command did not answer within the per-command timeout.
    #[error("redis command {command} timed out")]
    Timeout { command: &'static str },
    /// Redis answered with an error, or the connection failed.
    #[error("redis command {command} failed: {message}")]
    Redis {
        command: &'static str,
        message: String,
    },
    /// Redis answered, but not in the shape the script promises (a version mismatch or a bug).
    #[error("redis command {command} returned an unexpected reply: {message}")]
    Protocol {
        command: &'static str,
        message: String,
    },
    /// The configuration cannot be used (bad URL, unsupported scheme).
    #[error("invalid redis configuration: {0}")]
    Config(String),
}

impl StoreError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::Timeout { .. } => "timeout",
            Self::Redis { .. } => "error",
            Self::Protocol { .. } => "protocol",
            Self::Config(_) => "config",
        }
    }
}
