//! Which server the store's permit calls ran on: a generation bumped each time it is another.
//!
//! Why: replication is asynchronous, so a promoted replica may lack the last writes of the
//! master it replaces, and a restarted server may have lost them all; every lease in Redis is
//! only as good as the server that holds it. A node that holds permits must re-assert them on
//! the new server before anyone is granted more there (see the permit tasks). The permit
//! script returns the `run_id` of the server that ran it, which a restart and every failover
//! (Sentinel, Redis Cluster) change; the store records it before the call returns, so a caller
//! that reads the generation after its call knows whether that call ran on a new server.

use std::sync::Mutex;
use std::time::Instant;

/// The master generation as a caller reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MasterSeen {
    /// How many times the master changed since the store was built.
    pub generation: u64,
    /// When the store first saw the current server, if it replaced another one.
    pub since: Option<Instant>,
}

#[derive(Debug, Default)]
struct State {
    last: Option<String>,
    seen: MasterSeen,
}

/// The last server seen and how many times it changed.
#[derive(Debug, Default)]
pub struct MasterGeneration {
    state: Mutex<State>,
}

impl MasterGeneration {
    /// Records that a call ran on the server `id` (its run id), at `now`; bumps the generation
    /// when a different server was seen before (the first one is no switch: this node held
    /// nothing yet).
    pub fn observe(&self, id: &str, now: Instant) {
        let mut state = match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        match state.last.as_deref() {
            Some(prev) if prev == id => {}
            Some(_) => {
                state.last = Some(id.to_owned());
                state.seen = MasterSeen {
                    generation: state.seen.generation.saturating_add(1),
                    since: Some(now),
                };
            }
            None => state.last = Some(id.to_owned()),
        }
    }

    pub fn current(&self) -> MasterSeen {
        match self.state.lock() {
            Ok(s) => s.seen,
            Err(poisoned) => poisoned.into_inner().seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::MasterGeneration;

    #[test]
    fn only_a_different_master_after_the_first_is_a_switch() {
        let g = MasterGeneration::default();
        let t0 = Instant::now();
        g.observe("run-a", t0);
        assert_eq!(g.current().generation, 0, "the first master is no switch");
        assert_eq!(g.current().since, None);
        g.observe("run-a", t0 + Duration::from_secs(1));
        assert_eq!(
            g.current().generation,
            0,
            "the same server again is no switch"
        );
        let t2 = t0 + Duration::from_secs(2);
        g.observe("run-b", t2);
        assert_eq!(g.current().generation, 1);
        assert_eq!(g.current().since, Some(t2));
        g.observe("run-b", t2 + Duration::from_secs(1));
        assert_eq!(g.current().since, Some(t2), "kept while the master stays");
        g.observe("run-a", t2 + Duration::from_secs(2));
        assert_eq!(
            g.current().generation,
            2,
            "switching back is another switch"
        );
    }
}
