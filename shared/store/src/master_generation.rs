//! Which master the store has talked to: a generation bumped each time it is another one.
//!
//! Why: replication is asynchronous, so a promoted replica may lack the last writes of the
//! master it replaces, and every lease in Redis is only as good as the server that holds it.
//! A node that holds permits must re-assert them on the new master before anyone is granted
//! more there (see the permit tasks). The store bumps the generation when it resolves a master
//! address different from the last one, before any command runs on it, so a caller that
//! reads the generation after a call knows whether that call may have reached a new master.

use std::sync::Mutex;
use std::time::Instant;

/// The master generation as a caller reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MasterSeen {
    /// How many times the master changed since the store was built.
    pub generation: u64,
    /// When the store first resolved the current master, if it replaced another one.
    pub since: Option<Instant>,
}

#[derive(Debug, Default)]
struct State {
    last: Option<String>,
    seen: MasterSeen,
}

/// The last master address and how many times it changed.
#[derive(Debug, Default)]
pub struct MasterGeneration {
    state: Mutex<State>,
}

impl MasterGeneration {
    /// Records that commands now go to `addr`, at `now`; bumps the generation when a
    /// different master was resolved before (the first one is no switch: nothing was held
    /// anywhere yet).
    pub fn observe(&self, addr: &str, now: Instant) {
        let mut state = match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        match state.last.as_deref() {
            Some(prev) if prev == addr => {}
            Some(_) => {
                state.last = Some(addr.to_owned());
                state.seen = MasterSeen {
                    generation: state.seen.generation.saturating_add(1),
                    since: Some(now),
                };
            }
            None => state.last = Some(addr.to_owned()),
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
        g.observe("127.0.0.1:7000", t0);
        assert_eq!(g.current().generation, 0, "the first master is no switch");
        assert_eq!(g.current().since, None);
        g.observe("127.0.0.1:7000", t0 + Duration::from_secs(1));
        assert_eq!(
            g.current().generation,
            0,
            "the same master again is no switch"
        );
        let t2 = t0 + Duration::from_secs(2);
        g.observe("127.0.0.1:7001", t2);
        assert_eq!(g.current().generation, 1);
        assert_eq!(g.current().since, Some(t2));
        g.observe("127.0.0.1:7001", t2 + Duration::from_secs(1));
        assert_eq!(g.current().since, Some(t2), "kept while the master stays");
        g.observe("127.0.0.1:7000", t2 + Duration::from_secs(2));
        assert_eq!(
            g.current().generation,
            2,
            "switching back is another switch"
        );
    }
}
