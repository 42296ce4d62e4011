//! What a failed Redis call means: the reply Redis gave, or the way the link failed.
//!
//! Why: managed Redis fails in more ways than "down". At `maxmemory` with `noeviction` it
//! answers `-OOM` to writes while `PING` and reads still work; a demoted master answers
//! `-READONLY`; a restarting one `-LOADING`; a long script `-BUSY`; a cluster mid-failover
//! `-CLUSTERDOWN` or `-TRYAGAIN`. A caller that reports an operator action as done must know
//! that its write failed and why, and the health gate must not take a server that answers
//! reads for a dead one. [`RedisFault::of_code`] is the pure classification (one unit test per
//! reply below); [`RedisFault::of`] applies it to a client error.

use redis::RedisError;

/// Why one Redis call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedisFault {
    /// `OOM`: `maxmemory` reached with `noeviction`. Writes that grow memory are refused;
    /// reads, deletes and `PING` still work.
    OutOfMemory,
    /// `MISCONF`: the server cannot persist and refuses writes until someone fixes it.
    Misconfigured,
    /// `READONLY`: the server is a replica (a demoted master after a failover, or a
    /// replica named by mistake).
    ReadOnly,
    /// `LOADING`: the server is loading its dataset after a restart.
    Loading,
    /// `BUSY`: a script runs past `lua-time-limit`; the server answers nothing else.
    Busy,
    /// `NOSCRIPT`: the script cache was flushed (`SCRIPT FLUSH`, a restart). The client
    /// loads the script and retries once by itself; seen here only if that failed too.
    NoScript,
    /// `MASTERDOWN`: a replica lost its master (`replica-serve-stale-data no`).
    MasterDown,
    /// `CLUSTERDOWN`: the Redis Cluster does not cover every slot (a failover under way).
    ClusterDown,
    /// `TRYAGAIN`: a multi-key command during a slot migration.
    TryAgain,
    /// `MOVED`: the slot lives on another node (the cluster client follows it).
    Moved,
    /// `ASK`: the slot is migrating (the cluster client follows it).
    Ask,
    /// `CROSSSLOT`: keys of one command in different slots (a bug: keys are hash-tagged).
    CrossSlot,
    /// `NOPERM`, `NOAUTH`, `WRONGPASS`: the ACL user may not do this.
    Denied,
    /// The call did not answer within the command timeout.
    Timeout,
    /// The connection was reset, refused or closed.
    Reset,
    /// Any other error reply (`ERR`, a script error).
    Other,
}

impl RedisFault {
    /// The classification of an error reply's code (its first word: `OOM`, `READONLY`, …).
    pub fn of_code(code: &str) -> Self {
        match code {
            "OOM" => Self::OutOfMemory,
            "MISCONF" => Self::Misconfigured,
            "READONLY" => Self::ReadOnly,
            "LOADING" => Self::Loading,
            "BUSY" => Self::Busy,
            "NOSCRIPT" => Self::NoScript,
            "MASTERDOWN" => Self::MasterDown,
            "CLUSTERDOWN" => Self::ClusterDown,
            "TRYAGAIN" => Self::TryAgain,
            "MOVED" => Self::Moved,
            "ASK" => Self::Ask,
            "CROSSSLOT" => Self::CrossSlot,
            "NOPERM" | "NOAUTH" | "WRONGPASS" => Self::Denied,
            _ => Self::Other,
        }
    }

    /// The classification of a client error: the reply's code when Redis answered, else how
    /// the link failed.
    pub fn of(e: &RedisError) -> Self {
        if e.is_timeout() {
            return Self::Timeout;
        }
        if let Some(code) = e.code() {
            // A script error quotes the reply of the command that failed inside the script
            // ("ERR Error running script … OOM command not allowed …" on older servers).
            let fault = Self::of_code(code);
            if fault == Self::Other {
                return e.detail().map_or(Self::Other, Self::of_script_detail);
            }
            return fault;
        }
        if e.is_connection_dropped() || e.is_connection_refusal() || e.is_io_error() {
            return Self::Reset;
        }
        Self::Other
    }

    /// A script error's detail may carry the inner reply's code as its first word.
    fn of_script_detail(detail: &str) -> Self {
        detail
            .split_whitespace()
            .next()
            .map_or(Self::Other, Self::of_code)
    }

    /// The reply code (or `TIMEOUT` / `RESET` / `ERR`), for answers and logs.
    pub fn code(self) -> &'static str {
        match self {
            Self::OutOfMemory => "OOM",
            Self::Misconfigured => "MISCONF",
            Self::ReadOnly => "READONLY",
            Self::Loading => "LOADING",
            Self::Busy => "BUSY",
            Self::NoScript => "NOSCRIPT",
            Self::MasterDown => "MASTERDOWN",
            Self::ClusterDown => "CLUSTERDOWN",
            Self::TryAgain => "TRYAGAIN",
            Self::Moved => "MOVED",
            Self::Ask => "ASK",
            Self::CrossSlot => "CROSSSLOT",
            Self::Denied => "NOPERM",
            Self::Timeout => "TIMEOUT",
            Self::Reset => "RESET",
            Self::Other => "ERR",
        }
    }

    /// Whether the fault passes by itself (a failover, a restart, a script that ends, a
    /// migration, a dropped link), so the same call may succeed soon. The others last until
    /// someone acts: memory freed, persistence fixed, an ACL changed, a bug fixed.
    pub fn transient(self) -> bool {
        match self {
            Self::ReadOnly
            | Self::Loading
            | Self::Busy
            | Self::NoScript
            | Self::MasterDown
            | Self::ClusterDown
            | Self::TryAgain
            | Self::Moved
            | Self::Ask
            | Self::Timeout
            | Self::Reset => true,
            Self::OutOfMemory
            | Self::Misconfigured
            | Self::CrossSlot
            | Self::Denied
            | Self::Other => false,
        }
    }

    /// Whether the server still serves reads while it gives this fault (it refuses writes
    /// only): then it is not down, and the store's health gate must keep letting calls (the
    /// resync's reads, the operator's next try) through.
    pub fn server_serving(self) -> bool {
        matches!(
            self,
            Self::OutOfMemory | Self::Misconfigured | Self::ReadOnly
        )
    }

    /// Whether the cluster is serving and only pointed elsewhere: a slot moved or is moving
    /// (`MOVED`, `ASK`) or a multi-key command met a half-moved slot (`TRYAGAIN`). The link is
    /// not down; the same keys read one by one, each redirected, succeed.
    pub fn redirected(self) -> bool {
        matches!(self, Self::Moved | Self::Ask | Self::TryAgain)
    }

    /// Whether the node should look for the master again (Sentinel mode): the server it
    /// talks to may no longer be the master (`READONLY`), or may be gone.
    pub fn master_may_have_moved(self) -> bool {
        !matches!(self, Self::OutOfMemory | Self::Misconfigured)
    }
}

impl std::fmt::Display for RedisFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    /// The client error for a raw RESP error reply, parsed as the client parses it.
    fn reply(resp: &str) -> RedisError {
        match redis::parse_redis_value(resp.as_bytes()) {
            Ok(Value::ServerError(e)) => e.into(),
            other => panic!("not an error reply: {other:?}"),
        }
    }

    fn case(resp: &str, fault: RedisFault, transient: bool) {
        let got = RedisFault::of(&reply(resp));
        assert_eq!(got, fault, "{resp:?}");
        assert_eq!(got.transient(), transient, "{resp:?}");
    }

    #[test]
    fn oom_is_not_transient_and_the_server_still_serves() {
        case(
            "-OOM command not allowed when used memory > 'maxmemory'.\r\n",
            RedisFault::OutOfMemory,
            false,
        );
        assert!(RedisFault::OutOfMemory.server_serving());
        assert!(!RedisFault::OutOfMemory.master_may_have_moved());
    }

    #[test]
    fn readonly_is_a_demoted_master() {
        case(
            "-READONLY You can't write against a read only replica.\r\n",
            RedisFault::ReadOnly,
            true,
        );
        assert!(RedisFault::ReadOnly.master_may_have_moved());
        assert!(RedisFault::ReadOnly.server_serving());
    }

    #[test]
    fn loading_is_transient() {
        case(
            "-LOADING Redis is loading the dataset in memory\r\n",
            RedisFault::Loading,
            true,
        );
    }

    #[test]
    fn busy_is_transient() {
        case(
            "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n",
            RedisFault::Busy,
            true,
        );
    }

    #[test]
    fn noscript_is_transient() {
        case(
            "-NOSCRIPT No matching script. Please use EVAL.\r\n",
            RedisFault::NoScript,
            true,
        );
    }

    #[test]
    fn masterdown_is_transient() {
        case(
            "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
            RedisFault::MasterDown,
            true,
        );
    }

    #[test]
    fn clusterdown_is_transient() {
        case(
            "-CLUSTERDOWN The cluster is down\r\n",
            RedisFault::ClusterDown,
            true,
        );
    }

    #[test]
    fn tryagain_is_transient() {
        case(
            "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
            RedisFault::TryAgain,
            true,
        );
    }

    #[test]
    fn moved_and_ask_are_transient() {
        case("-MOVED 3999 127.0.0.1:6381\r\n", RedisFault::Moved, true);
        case("-ASK 3999 127.0.0.1:6381\r\n", RedisFault::Ask, true);
    }

    #[test]
    fn misconf_crossslot_and_acl_refusals_last() {
        case(
            "-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.\r\n",
            RedisFault::Misconfigured,
            false,
        );
        case(
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
            RedisFault::CrossSlot,
            false,
        );
        case(
            "-NOPERM User switchyard has no permissions to access the 'x' key\r\n",
            RedisFault::Denied,
            false,
        );
        case(
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
            RedisFault::Denied,
            false,
        );
    }

    #[test]
    fn a_script_error_is_named_by_the_reply_inside_it() {
        case(
            "-ERR Error running script (call to f_1): @user_script:1: OOM command not allowed\r\n",
            RedisFault::Other,
            false,
        );
        // An inner reply quoted first in the detail is recognised.
        assert_eq!(
            RedisFault::of_script_detail("OOM command not allowed when used memory"),
            RedisFault::OutOfMemory
        );
        case("-ERR unknown command 'X'\r\n", RedisFault::Other, false);
    }

    #[test]
    fn timeouts_and_resets_are_transient() {
        let timeout: RedisError =
            std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out").into();
        let reset: RedisError =
            std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer").into();
        let refused: RedisError =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into();
        assert_eq!(RedisFault::of(&timeout), RedisFault::Timeout);
        assert_eq!(RedisFault::of(&reset), RedisFault::Reset);
        assert_eq!(RedisFault::of(&refused), RedisFault::Reset);
        for f in [RedisFault::Timeout, RedisFault::Reset] {
            assert!(f.transient() && f.master_may_have_moved(), "{f}");
        }
    }

    #[test]
    fn every_fault_has_its_reply_code_back() {
        for code in [
            "OOM",
            "MISCONF",
            "READONLY",
            "LOADING",
            "BUSY",
            "NOSCRIPT",
            "MASTERDOWN",
            "CLUSTERDOWN",
            "TRYAGAIN",
            "MOVED",
            "ASK",
            "CROSSSLOT",
            "NOPERM",
        ] {
            assert_eq!(RedisFault::of_code(code).code(), code);
        }
        assert_eq!(RedisFault::of_code("WEIRD"), RedisFault::Other);
    }
}
