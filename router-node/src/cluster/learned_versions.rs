//! Which version of each learned record (a connection's usage wall, a provider model's tool
//! limit) this node's state stands for.
//!
//! Why: the learned records are announced by events, and a node whose subscriber was gone
//! misses them. Their writes bump a version and append to the change log
//! (`store::learned`); a resync reads the records whose version is newer than the one this node
//! adopted and makes its state equal to them (`cluster_sync::learned_resync`), lowering too (an
//! ended lane, a dropped limit). Adopting must not undo what this node learnt itself and has
//! not written yet (the write is a spawned task): while one of its writes to a record is under
//! way (`pending`) the record is not adopted, and the next resync reads it again
//! ([`LearnedVersions::take_recheck`]).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use switchyard_store::LearnedKey;

#[derive(Debug, Default, Clone, Copy)]
struct Entry {
    /// The version whose state this node adopted (0 = none).
    adopted: u64,
    /// This node's writes to the record still under way.
    pending: u32,
}

#[derive(Debug, Default)]
struct Inner {
    /// The runtime the adopted versions were applied to: a reload starts a fresh state.
    runtime: usize,
    entries: HashMap<LearnedKey, Entry>,
    /// Records a resync could not adopt yet (a write of this node was under way).
    recheck: Vec<LearnedKey>,
}

/// Per-record versions of the learned state (see the module docs).
#[derive(Debug, Default)]
pub struct LearnedVersions {
    inner: Mutex<Inner>,
}

impl LearnedVersions {
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A write of this node to `key` starts.
    pub fn write_started(&self, key: &LearnedKey) {
        self.with(|i| {
            let e = i.entries.entry(key.clone()).or_default();
            e.pending = e.pending.saturating_add(1);
        });
    }

    /// A write of this node to `key` is done (written or failed).
    pub fn write_done(&self, key: &LearnedKey) {
        self.with(|i| {
            if let Some(e) = i.entries.get_mut(key) {
                e.pending = e.pending.saturating_sub(1);
            }
        });
    }

    /// Starts a full resync against runtime `runtime`: after a reload every record is adopted
    /// again (the new runtime's state starts empty).
    pub fn begin_full(&self, runtime: usize) {
        self.with(|i| {
            if i.runtime != runtime {
                i.runtime = runtime;
                for e in i.entries.values_mut() {
                    e.adopted = 0;
                }
            }
        });
    }

    /// The version this node adopted for `key` (0 = none).
    pub fn adopted_version(&self, key: &LearnedKey) -> u64 {
        self.with(|i| i.entries.get(key).map_or(0, |e| e.adopted))
    }

    /// Whether a record read at `version` is to be adopted: newer than the adopted one (0, no
    /// record, never is) and no write of this node under way. A record held back for a write
    /// is read again at the next resync.
    pub fn should_adopt(&self, key: &LearnedKey, version: u64) -> bool {
        self.with(|i| {
            let e = i.entries.get(key).copied().unwrap_or_default();
            if version <= e.adopted {
                return false;
            }
            if e.pending > 0 {
                if !i.recheck.contains(key) {
                    i.recheck.push(key.clone());
                }
                return false;
            }
            true
        })
    }

    /// The record `key` at `version` was adopted.
    pub fn adopted(&self, key: &LearnedKey, version: u64) {
        self.with(|i| {
            let e = i.entries.entry(key.clone()).or_default();
            e.adopted = e.adopted.max(version);
        });
    }

    /// The records held back by the last resyncs, to read again.
    pub fn take_recheck(&self) -> Vec<LearnedKey> {
        self.with(|i| std::mem::take(&mut i.recheck))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall(c: &str) -> LearnedKey {
        LearnedKey::Wall(c.to_owned())
    }

    #[test]
    fn only_newer_versions_are_adopted_and_never_during_a_local_write() {
        let v = LearnedVersions::default();
        let k = wall("ca");
        assert!(!v.should_adopt(&k, 0), "no record is never adopted");
        assert!(v.should_adopt(&k, 5));
        v.adopted(&k, 5);
        assert!(!v.should_adopt(&k, 5));
        assert!(!v.should_adopt(&k, 4));
        v.write_started(&k);
        assert!(!v.should_adopt(&k, 6), "held back while this node writes");
        assert_eq!(v.take_recheck(), vec![k.clone()]);
        assert!(v.take_recheck().is_empty());
        v.write_done(&k);
        assert!(v.should_adopt(&k, 6));
        assert_eq!(v.adopted_version(&k), 5);
    }

    #[test]
    fn a_new_runtime_adopts_every_record_again() {
        let v = LearnedVersions::default();
        let k = wall("ca");
        v.begin_full(1);
        v.adopted(&k, 9);
        v.begin_full(1);
        assert_eq!(v.adopted_version(&k), 9);
        v.begin_full(2);
        assert_eq!(v.adopted_version(&k), 0);
        assert!(v.should_adopt(&k, 9));
    }
}
