//! Session affinity: a soft pin from a session key to a connection, with a TTL.
//!
//! The pin is consulted only after eligibility filtering, so a cooling connection is never
//! forced; on fallback the pin moves. Keys come from client headers or the body and are never
//! forwarded upstream or logged (only this in-memory map sees them).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use switchyard_shared::Millis;

/// Session pins of one node (cluster-shared pins come with cluster mode).
#[derive(Debug)]
pub struct Affinity {
    /// Changed live by `PATCH /api/resilience`; a pin keeps the expiry it was given.
    ttl_ms: AtomicU64,
    pins: Mutex<HashMap<(usize, String), (usize, Millis)>>,
}

/// Entries kept at most; beyond that expired pins are pruned, then the insert is skipped.
const MAX_PINS: usize = 100_000;

impl Affinity {
    /// `ttl_ms == 0` turns affinity off.
    pub fn new(ttl_ms: Millis) -> Self {
        Self {
            ttl_ms: AtomicU64::new(ttl_ms),
            pins: Mutex::new(HashMap::new()),
        }
    }

    pub fn enabled(&self) -> bool {
        self.ttl() > 0
    }

    fn ttl(&self) -> Millis {
        self.ttl_ms.load(Ordering::Relaxed)
    }

    /// Sets the TTL of new pins (`0` turns affinity off).
    pub fn set_ttl(&self, ttl_ms: Millis) {
        self.ttl_ms.store(ttl_ms, Ordering::Relaxed);
    }

    /// The pinned connection of `session` on `provider`, if unexpired.
    pub fn get(&self, provider: usize, session: &str, now: Millis) -> Option<usize> {
        if !self.enabled() {
            return None;
        }
        let pins = self.pins.lock().ok()?;
        pins.get(&(provider, session.to_owned()))
            .filter(|(_, until)| *until > now)
            .map(|(conn, _)| *conn)
    }

    /// Pins (or re-pins) `session` to `conn`, refreshing the TTL.
    pub fn pin(&self, provider: usize, session: &str, conn: usize, now: Millis) {
        if !self.enabled() {
            return;
        }
        if let Ok(mut pins) = self.pins.lock() {
            if pins.len() >= MAX_PINS {
                pins.retain(|_, (_, until)| *until > now);
                if pins.len() >= MAX_PINS {
                    return;
                }
            }
            pins.insert((provider, session.to_owned()), (conn, now + self.ttl()));
        }
    }

    /// Drops the pin of `session` (on fallback away from its connection).
    pub fn evict(&self, provider: usize, session: &str) {
        if let Ok(mut pins) = self.pins.lock() {
            pins.remove(&(provider, session.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_expire_and_move() {
        let a = Affinity::new(100);
        assert_eq!(a.get(0, "s", 0), None);
        a.pin(0, "s", 3, 0);
        assert_eq!(a.get(0, "s", 50), Some(3));
        assert_eq!(a.get(1, "s", 50), None);
        assert_eq!(a.get(0, "s", 100), None);
        a.pin(0, "s", 4, 100);
        assert_eq!(a.get(0, "s", 150), Some(4));
        a.evict(0, "s");
        assert_eq!(a.get(0, "s", 150), None);
        let off = Affinity::new(0);
        off.pin(0, "s", 1, 0);
        assert_eq!(off.get(0, "s", 0), None);
    }
}
