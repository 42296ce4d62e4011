//! This replica's hold on the leader lease, as far as it knows: the generation it holds and
//! until when it may act on it. Pure state with the clock passed in; the loops that acquire,
//! renew and give up the lease are in `leader`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use switchyard_shared::Millis;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    pub(crate) generation: u64,
    pub(crate) valid_until: Instant,
}

/// This replica's view of its own leadership.
#[derive(Debug, Default)]
pub struct Leadership {
    held: Mutex<Option<Held>>,
}

impl Leadership {
    /// The generation while the lease is locally valid.
    pub fn current(&self) -> Option<u64> {
        self.current_at(Instant::now())
    }

    pub(crate) fn current_at(&self, now: Instant) -> Option<u64> {
        let held = self.held.lock().ok()?;
        held.filter(|h| now < h.valid_until).map(|h| h.generation)
    }

    pub(crate) fn held(&self) -> Option<Held> {
        self.held.lock().ok().and_then(|h| *h)
    }

    pub(crate) fn set(&self, generation: u64, valid_until: Instant) {
        if let Ok(mut h) = self.held.lock() {
            *h = Some(Held {
                generation,
                valid_until,
            });
        }
    }

    pub(crate) fn clear(&self) -> Option<u64> {
        self.held
            .lock()
            .ok()
            .and_then(|mut h| h.take())
            .map(|h| h.generation)
    }
}

/// The local validity of a lease granted for `ttl_ms` by a request sent at `sent`: a tenth of
/// the TTL is kept back for clock-rate differences and scheduling delay.
pub fn valid_until(sent: Instant, ttl_ms: Millis) -> Instant {
    sent + Duration::from_millis(ttl_ms - ttl_ms / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_ends_before_the_ttl_and_expires_locally() {
        let l = Leadership::default();
        let t0 = Instant::now();
        assert_eq!(l.current_at(t0), None);
        l.set(7, valid_until(t0, 1000));
        assert_eq!(l.current_at(t0 + Duration::from_millis(899)), Some(7));
        assert_eq!(l.current_at(t0 + Duration::from_millis(900)), None);
        assert_eq!(l.clear(), Some(7));
        assert_eq!(l.current_at(t0), None);
    }
}
