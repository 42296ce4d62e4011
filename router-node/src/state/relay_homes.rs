//! Where the sessions of `context-relay` combos were served last (their "home"), so the node
//! can tell when a session moves to another connection or target (see `routing::relay`).
//!
//! Node-local and soft like the affinity pins: a reload starts over, and a session without a
//! home is simply not relayed on its next request. Bounded like the affinity pins too: a full
//! map first forgets homes idle for [`HOME_IDLE_MS`], then refuses new sessions, so one client
//! inventing session ids cannot push every other session's home out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchyard_shared::Millis;

/// Sessions tracked at most.
const MAX_SESSIONS: usize = 100_000;

/// A home not used for this long may be forgotten when the map is full.
const HOME_IDLE_MS: Millis = 3_600_000;

/// Where a session was served last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    /// `provider/model`.
    pub target: String,
    pub connection: Arc<str>,
}

/// The homes by a hash of (combo, session), each with when it was last set.
#[derive(Debug, Default)]
pub struct RelayHomes {
    map: Mutex<HashMap<u64, (Home, Millis)>>,
}

impl RelayHomes {
    pub fn get(&self, key: u64) -> Option<Home> {
        self.map
            .lock()
            .ok()?
            .get(&key)
            .map(|(home, _)| home.clone())
    }

    /// Records `key`'s home at `now`. A full map forgets idle homes first; if it is still full,
    /// a new session gets no home (the ones already there are kept).
    pub fn set(&self, key: u64, home: Home, now: Millis) {
        if let Ok(mut map) = self.map.lock() {
            if map.len() >= MAX_SESSIONS && !map.contains_key(&key) {
                map.retain(|_, (_, at)| now.saturating_sub(*at) < HOME_IDLE_MS);
                if map.len() >= MAX_SESSIONS {
                    return;
                }
            }
            map.insert(key, (home, now));
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
        homes.set(1, a.clone(), 0);
        assert_eq!(homes.get(1), Some(a));
        assert_eq!(homes.get(2), None);
        let b = Home {
            target: "b/m".into(),
            connection: "cb".into(),
        };
        homes.set(1, b.clone(), 0);
        assert_eq!(homes.get(1), Some(b));
    }

    #[test]
    fn a_flood_of_new_sessions_keeps_the_homes_already_there() {
        let homes = RelayHomes::default();
        let home = |c: &str| Home {
            target: "a/m".into(),
            connection: c.into(),
        };
        homes.set(0, home("kept"), 0);
        for key in 1..MAX_SESSIONS as u64 {
            homes.set(key, home("flood"), 1_000);
        }
        // Full, nothing idle long enough: the newcomer is refused, no one is pushed out.
        homes.set(u64::MAX, home("late"), 2_000);
        assert_eq!(homes.get(u64::MAX), None);
        assert_eq!(homes.get(0), Some(home("kept")));
        // An hour later the idle homes make room.
        homes.set(u64::MAX, home("late"), 1_000 + HOME_IDLE_MS);
        assert_eq!(homes.get(u64::MAX), Some(home("late")));
    }
}
