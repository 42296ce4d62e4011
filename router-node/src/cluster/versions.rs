//! Which version of each connection record this node's state stands for.
//!
//! Why: pub/sub is at-most-once, so a clear, a reinstatement or an eased cooldown published
//! while this node's subscriber was reconnecting (or its event buffer was full) never arrives.
//! Every write to a connection record in Redis bumps the record's version, clears included
//! (`store::connections`); a resync reads the versions and makes this node's state equal to
//! Redis's for every record whose version is newer than the one the node last adopted —
//! lowering as well as raising.
//!
//! Adopting must never undo what this node learnt itself and has not written yet (a 429 in
//! the writer's queue, or in the replay queue during an outage): Redis's record is older than
//! that change. So the table also counts each connection's local changes not yet settled by
//! the writer (`pending`), and remembers the newest version the writer's own writes produced
//! (`written`): a read older than that is stale already, and the next resync reads the newer
//! record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// The version whose state this node adopted (0 = none).
    adopted: u64,
    /// The newest version a write of this node produced.
    written: u64,
    /// Local changes handed to the writer and not settled yet.
    pending: u32,
}

#[derive(Debug, Default)]
struct Inner {
    /// Identity of the runtime the adopted versions were applied to: a config reload builds
    /// new actors, which must adopt again.
    runtime: usize,
    entries: HashMap<Arc<str>, Entry>,
    /// Connections [`ConnVersions::forget`] reset since the last resync took them: an
    /// incremental resync reads only what the change log names, so it reads these too.
    forgotten: Vec<Arc<str>>,
}

/// Per-connection record versions (see the module docs).
#[derive(Debug, Default)]
pub struct ConnVersions {
    inner: Mutex<Inner>,
}

impl ConnVersions {
    /// A local change to `conn` was handed to the writer.
    pub fn local_change(&self, conn: &Arc<str>) {
        self.with(|inner| {
            let e = inner.entries.entry(conn.clone()).or_default();
            e.pending = e.pending.saturating_add(1);
        });
    }

    /// The writer is done with a local change to `conn` (written, refused or dropped);
    /// `version` is the record's version after a write that reported one.
    pub fn settled(&self, conn: &Arc<str>, version: Option<u64>) {
        self.with(|inner| {
            if let Some(e) = inner.entries.get_mut(conn) {
                e.pending = e.pending.saturating_sub(1);
                if let Some(v) = version {
                    e.written = e.written.max(v);
                }
            }
        });
    }

    /// Starts a resync against runtime `runtime` (any stable identity of it): after a reload
    /// every connection adopts again.
    pub fn begin_resync(&self, runtime: usize) {
        self.with(|inner| {
            if inner.runtime != runtime {
                inner.runtime = runtime;
                for e in inner.entries.values_mut() {
                    e.adopted = 0;
                }
            }
        });
    }

    /// Whether a resync that read `version` of `conn` should make the local state equal to it.
    pub fn should_adopt(&self, conn: &str, version: u64) -> bool {
        self.with(|inner| {
            let e = inner.entries.get(conn).copied().unwrap_or_default();
            decide(e, version)
        })
        .unwrap_or(false)
    }

    /// The local state of `conn` now equals Redis's `version`.
    pub fn adopted(&self, conn: &Arc<str>, version: u64) {
        self.with(|inner| {
            let e = inner.entries.entry(conn.clone()).or_default();
            e.adopted = e.adopted.max(version);
        });
    }

    /// A local change to `conn` will never reach Redis: the local state may now differ from
    /// the record at the version this node adopted, so the next resync adopts it again.
    pub fn forget(&self, conn: &str) {
        self.with(|inner| {
            if let Some(key) = inner.entries.get_key_value(conn).map(|(k, _)| k.clone())
                && !inner.forgotten.contains(&key)
            {
                inner.forgotten.push(key);
            }
            if let Some(e) = inner.entries.get_mut(conn) {
                e.adopted = 0;
            }
        });
    }

    /// The connections forgotten since the last call (for the next resync to read again).
    pub fn take_forgotten(&self) -> Vec<Arc<str>> {
        self.with(|inner| std::mem::take(&mut inner.forgotten))
            .unwrap_or_default()
    }

    /// The version of `conn` this node adopted last (0 = none).
    pub fn adopted_version(&self, conn: &str) -> u64 {
        self.with(|inner| inner.entries.get(conn).map_or(0, |e| e.adopted))
            .unwrap_or(0)
    }

    /// Local changes to `conn` not settled by the writer yet.
    pub fn pending(&self, conn: &str) -> u32 {
        self.with(|inner| inner.entries.get(conn).map_or(0, |e| e.pending))
            .unwrap_or(0)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> Option<T> {
        self.inner.lock().ok().map(|mut inner| f(&mut inner))
    }
}

/// The adoption rule: Redis's record is newer than what this node adopted, not older than what
/// this node itself wrote, and no local change of the connection is still on its way.
fn decide(e: Entry, version: u64) -> bool {
    version > e.adopted && version >= e.written && e.pending == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Arc<str> {
        Arc::from("k")
    }

    #[test]
    fn a_newer_record_is_adopted_once() {
        let v = ConnVersions::default();
        assert!(!v.should_adopt("k", 0), "Redis knows nothing");
        assert!(v.should_adopt("k", 10));
        v.adopted(&conn(), 10);
        assert!(!v.should_adopt("k", 10));
        assert!(v.should_adopt("k", 11), "a clear bumps the version too");
    }

    #[test]
    fn a_pending_local_change_blocks_adoption_until_settled() {
        let v = ConnVersions::default();
        v.local_change(&conn());
        v.local_change(&conn());
        assert!(!v.should_adopt("k", 10));
        v.settled(&conn(), None);
        assert!(!v.should_adopt("k", 10));
        v.settled(&conn(), Some(12));
        assert_eq!(v.pending("k"), 0);
        assert!(
            !v.should_adopt("k", 10),
            "a read older than this node's own write is stale"
        );
        assert!(v.should_adopt("k", 12));
        // Settling more than was handed over never underflows.
        v.settled(&conn(), None);
        assert_eq!(v.pending("k"), 0);
    }

    #[test]
    fn a_change_that_never_reached_redis_makes_the_record_adopted_again() {
        let v = ConnVersions::default();
        v.adopted(&conn(), 10);
        assert!(!v.should_adopt("k", 10));
        v.forget("k");
        assert!(v.should_adopt("k", 10));
        assert_eq!(v.take_forgotten(), vec![conn()]);
        assert!(v.take_forgotten().is_empty(), "taken once");
    }

    #[test]
    fn a_new_runtime_adopts_again() {
        let v = ConnVersions::default();
        v.begin_resync(1);
        v.adopted(&conn(), 10);
        v.begin_resync(1);
        assert!(!v.should_adopt("k", 10));
        v.begin_resync(2);
        assert!(v.should_adopt("k", 10));
    }
}
