//! The idle upstream connections of one thread, by upstream.
//!
//! Why a module: which connection a request may reuse, and when an idle one is too old, is
//! policy with time passed in; the thread-local holder and the sockets are in `pooled`.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::time::{Duration, Instant};

use http::uri::Authority;
use rustc_hash::FxHasher;

/// Which connections may carry a request: one client's settings (its connect timeout and TLS
/// configuration), one scheme, one authority. Authorities come from the configuration, not
/// from clients, so a fast non-keyed hash is safe here.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct PoolKey {
    pub client: u32,
    pub https: bool,
    pub authority: Authority,
}

/// What the set needs to know of a connection.
pub(super) trait Reusable {
    /// It is idle and takes a new request now.
    fn is_ready(&self) -> bool;
    /// It is gone for good (the peer closed it, or its task ended).
    fn is_closed(&self) -> bool;
}

/// Idle connections by key, most recently returned last.
#[derive(Debug)]
pub(super) struct IdleSet<C> {
    by_key: HashMap<PoolKey, Vec<(C, Instant)>, BuildHasherDefault<FxHasher>>,
    idle_for: Duration,
    max_per_key: usize,
}

impl<C: Reusable> IdleSet<C> {
    /// Connections idle for `idle_for` or longer are dropped; at most `max_per_key` are kept.
    pub fn new(idle_for: Duration, max_per_key: usize) -> Self {
        Self {
            by_key: HashMap::default(),
            idle_for,
            max_per_key,
        }
    }

    /// The most recently returned connection for `key` that is ready and not too old, and
    /// how long it has been idle; the ones skipped on the way are dropped (closed, expired,
    /// or still busy, which a returned connection should not be).
    pub fn take(&mut self, key: &PoolKey, now: Instant) -> Option<(C, Duration)> {
        let list = self.by_key.get_mut(key)?;
        while let Some((conn, since)) = list.pop() {
            let idle = now.saturating_duration_since(since);
            if conn.is_ready() && idle < self.idle_for {
                return Some((conn, idle));
            }
        }
        None
    }

    /// Keeps `conn` for reuse unless it is closed or the key already has enough.
    pub fn put(&mut self, key: PoolKey, conn: C, now: Instant) {
        if conn.is_closed() {
            return;
        }
        let list = self.by_key.entry(key).or_default();
        if list.len() < self.max_per_key {
            list.push((conn, now));
        }
    }

    /// Drops what is closed or too old, and keys left without connections.
    pub fn sweep(&mut self, now: Instant) {
        let idle_for = self.idle_for;
        self.by_key.retain(|_, list| {
            list.retain(|(conn, since)| {
                !conn.is_closed() && now.saturating_duration_since(*since) < idle_for
            });
            !list.is_empty()
        });
    }

    /// No connection is kept.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// How many kept connections are ready now, over all keys.
    #[cfg(test)]
    pub fn ready(&self) -> usize {
        self.by_key
            .values()
            .flatten()
            .filter(|(conn, _)| conn.is_ready())
            .count()
    }

    /// How many connections are kept, over all keys.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_key.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[derive(Clone, Debug)]
    struct Fake {
        id: u32,
        ready: Rc<Cell<bool>>,
        closed: Rc<Cell<bool>>,
    }

    impl Fake {
        fn new(id: u32) -> Self {
            Self {
                id,
                ready: Rc::new(Cell::new(true)),
                closed: Rc::new(Cell::new(false)),
            }
        }
    }

    impl Reusable for Fake {
        fn is_ready(&self) -> bool {
            self.ready.get()
        }
        fn is_closed(&self) -> bool {
            self.closed.get()
        }
    }

    fn key(authority: &str) -> PoolKey {
        PoolKey {
            client: 1,
            https: false,
            authority: authority.parse().unwrap(),
        }
    }

    #[test]
    fn the_most_recently_returned_ready_connection_of_the_same_key_is_reused() {
        let now = Instant::now();
        let mut set = IdleSet::new(Duration::from_secs(90), 8);
        set.put(key("a:1"), Fake::new(1), now);
        set.put(key("a:1"), Fake::new(2), now);
        set.put(key("b:1"), Fake::new(3), now);
        assert_eq!(set.take(&key("a:1"), now).map(|c| c.0.id), Some(2));
        assert_eq!(set.take(&key("a:1"), now).map(|c| c.0.id), Some(1));
        assert!(set.take(&key("a:1"), now).is_none());
        // Same host, other client settings or scheme: not shared.
        let other_client = PoolKey {
            client: 2,
            ..key("b:1")
        };
        let other_scheme = PoolKey {
            https: true,
            ..key("b:1")
        };
        assert!(set.take(&other_client, now).is_none());
        assert!(set.take(&other_scheme, now).is_none());
        assert_eq!(set.take(&key("b:1"), now).map(|c| c.0.id), Some(3));
    }

    #[test]
    fn closed_busy_and_expired_connections_are_skipped_and_dropped() {
        let now = Instant::now();
        let idle_for = Duration::from_secs(90);
        let mut set = IdleSet::new(idle_for, 8);
        let old = Fake::new(1);
        let busy = Fake::new(2);
        let closed = Fake::new(3);
        set.put(key("a:1"), old, now);
        set.put(key("a:1"), busy.clone(), now + idle_for);
        set.put(key("a:1"), closed.clone(), now + idle_for);
        busy.ready.set(false);
        closed.closed.set(true);
        closed.ready.set(false);
        assert!(set.take(&key("a:1"), now + idle_for).is_none());
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn closed_connections_are_not_kept_and_each_key_keeps_at_most_its_maximum() {
        let now = Instant::now();
        let mut set = IdleSet::new(Duration::from_secs(90), 2);
        let closed = Fake::new(1);
        closed.closed.set(true);
        set.put(key("a:1"), closed, now);
        assert_eq!(set.len(), 0);
        for id in 2..6 {
            set.put(key("a:1"), Fake::new(id), now);
        }
        assert_eq!(set.len(), 2);
        assert_eq!(set.take(&key("a:1"), now).map(|c| c.0.id), Some(3));
    }

    #[test]
    fn a_sweep_drops_expired_and_closed_connections_and_empty_keys() {
        let now = Instant::now();
        let idle_for = Duration::from_secs(90);
        let mut set = IdleSet::new(idle_for, 8);
        set.put(key("a:1"), Fake::new(1), now);
        let later = Fake::new(2);
        set.put(key("b:1"), later.clone(), now + Duration::from_secs(60));
        let dies = Fake::new(3);
        set.put(key("b:1"), dies.clone(), now + Duration::from_secs(60));
        set.sweep(now + Duration::from_secs(89));
        assert_eq!(set.len(), 3);
        dies.closed.set(true);
        set.sweep(now + idle_for);
        assert_eq!(set.len(), 1, "a:1 expired, the closed one is gone");
        // Taken with how long it sat idle.
        assert_eq!(
            set.take(&key("b:1"), now + idle_for)
                .map(|(c, idle)| (c.id, idle)),
            Some((2, Duration::from_secs(30)))
        );
        set.sweep(now + idle_for);
        assert!(set.is_empty());
    }
}
