//! Why a store operation did not happen.

use thiserror::Error;

use super::fault::RedisFault;

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
    /// Redis answered with an error, or the connection failed; `fault` says which.
    #[error("redis command {command} failed ({fault}): {message}")]
    Redis {
        command: &'static str,
        fault: RedisFault,
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

    /// What failed, in Redis's words where it answered: the reply code (`OOM`, `READONLY`,
    /// …), `TIMEOUT`, `UNAVAILABLE` (the health gate skipped the call), `PROTOCOL` or
    /// `CONFIG`. Operator answers name it.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unavailable => "UNAVAILABLE",
            Self::Timeout { .. } => "TIMEOUT",
            Self::Redis { fault, .. } => fault.code(),
            Self::Protocol { .. } => "PROTOCOL",
            Self::Config(_) => "CONFIG",
        }
    }

    /// Whether the same call may succeed soon without anyone acting (see
    /// [`RedisFault::transient`]); a skipped call and a timeout are.
    pub fn transient(&self) -> bool {
        match self {
            Self::Unavailable | Self::Timeout { .. } => true,
            Self::Redis { fault, .. } => fault.transient(),
            Self::Protocol { .. } | Self::Config(_) => false,
        }
    }

    /// Whether Redis Cluster pointed the call elsewhere (see [`RedisFault::redirected`]).
    pub fn redirected(&self) -> bool {
        matches!(self, Self::Redis { fault, .. } if fault.redirected())
    }

    /// Whether the call proves the link down (counted by the store's health gate). A server
    /// that refuses writes (`OOM`, `READONLY`) still answers reads: it is not down.
    pub fn link_failed(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            Self::Redis { fault, .. } => !fault.server_serving() && !fault.redirected(),
            Self::Unavailable | Self::Protocol { .. } | Self::Config(_) => false,
        }
    }

    /// Whether the server the call went to may no longer be the master (Sentinel mode asks
    /// again): a timeout, a reset, `READONLY` from a demoted master; not `OOM`.
    pub fn master_may_have_moved(&self) -> bool {
        match self {
            Self::Timeout { .. } => true,
            Self::Redis { fault, .. } => fault.master_may_have_moved(),
            Self::Unavailable | Self::Protocol { .. } | Self::Config(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redis(fault: RedisFault) -> StoreError {
        StoreError::Redis {
            command: "t",
            fault,
            message: String::new(),
        }
    }

    #[test]
    fn every_error_names_what_failed_and_whether_it_passes() {
        let oom = redis(RedisFault::OutOfMemory);
        assert_eq!(oom.reason(), "OOM");
        assert!(!oom.transient() && !oom.link_failed());
        assert!(oom.to_string().contains("(OOM)"), "{oom}");
        let readonly = redis(RedisFault::ReadOnly);
        assert_eq!(readonly.reason(), "READONLY");
        assert!(readonly.transient() && !readonly.link_failed());
        assert!(readonly.master_may_have_moved() && !oom.master_may_have_moved());
        let timeout = StoreError::Timeout { command: "t" };
        assert_eq!(timeout.reason(), "TIMEOUT");
        assert!(timeout.transient() && timeout.link_failed());
        assert_eq!(StoreError::Unavailable.reason(), "UNAVAILABLE");
        assert!(StoreError::Unavailable.transient());
        let protocol = StoreError::Protocol {
            command: "t",
            message: String::new(),
        };
        assert!(!protocol.transient() && !protocol.link_failed());
    }
}
