//! Where the sessions of `context-relay` combos were served last (their "home"), so the node
//! can tell when a session moves to another connection or target (see `routing::relay`).
//!
//! Node-local and soft like the affinity pins: a reload or a full map starts over, and a
//! session without a home is simply not relayed on its next request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Sessions tracked at most; beyond that the map starts over (homes re-form on their own).
const MAX_SESSIONS: usize = 100_000;

/// Where a session was served last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    /// `provider/model`.
    pub target: String,
    pub connection: Arc<str>,
}

/// The homes by a hash of (combo, session).
#[derive(Debug, Default)]
pub struct RelayHomes {
    map: Mutex<HashMap<u64, Home>>,
}

impl RelayHomes {
    pub fn get(&self, key: u64) -> Option<Home> {
        self.map.lock().ok()?.get(&key).cloned()
    }

    pub fn set(&self, key: u64, home: Home) {
        if let Ok(mut map) = self.map.lock() {
            if map.len() >= MAX_SESSIONS && !map.contains_key(&key) {
                map.clear();
            }
            map.insert(key, home);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homes_are_kept_per_key_and_move() {
        let homes = RelayHomes::default();
        assert_eq!(homes.get(1), None);
        let a = Home {
            target: "a/m".into(),
            connection: "ca".into(),
        };
        homes.set(1, a.clone());
        assert_eq!(homes.get(1), Some(a));
        assert_eq!(homes.get(2), None);
        let b = Home {
            target: "b/m".into(),
            connection: "cb".into(),
        };
        homes.set(1, b.clone());
        assert_eq!(homes.get(1), Some(b));
    }
}
