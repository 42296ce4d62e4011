//! What a config reload changed, counted by id for the reload's log line.

use std::collections::HashMap;

use crate::runtime::Runtime;

/// What a reload changed, by id.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Diff {
    pub(super) providers_added: usize,
    pub(super) providers_removed: usize,
    pub(super) providers_changed: usize,
    pub(super) connections_added: usize,
    pub(super) connections_removed: usize,
    pub(super) connections_changed: usize,
}

impl Diff {
    pub(super) fn of(old: &Runtime, next: &Runtime) -> Self {
        let (pa, pr, pc) = diff_by_id(
            old.config.providers.iter().map(|p| (p.id.as_str(), p)),
            next.config.providers.iter().map(|p| (p.id.as_str(), p)),
        );
        let (ca, cr, cc) = diff_by_id(
            old.config.connections.iter().map(|c| (c.id.as_str(), c)),
            next.config.connections.iter().map(|c| (c.id.as_str(), c)),
        );
        Self {
            providers_added: pa,
            providers_removed: pr,
            providers_changed: pc,
            connections_added: ca,
            connections_removed: cr,
            connections_changed: cc,
        }
    }
}

/// (added, removed, changed) between two id-keyed lists.
fn diff_by_id<'a, T: PartialEq + 'a>(
    old: impl Iterator<Item = (&'a str, &'a T)>,
    next: impl Iterator<Item = (&'a str, &'a T)>,
) -> (usize, usize, usize) {
    let old: HashMap<&str, &T> = old.collect();
    let next: HashMap<&str, &T> = next.collect();
    let added = next.keys().filter(|k| !old.contains_key(*k)).count();
    let removed = old.keys().filter(|k| !next.contains_key(*k)).count();
    let changed = next
        .iter()
        .filter(|(k, v)| old.get(*k).is_some_and(|o| o != *v))
        .count();
    (added, removed, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_counts_added_removed_and_changed_ids() {
        let old = [("a", 1), ("b", 2), ("c", 3)];
        let next = [("b", 2), ("c", 4), ("d", 5)];
        let (added, removed, changed) = diff_by_id(
            old.iter().map(|(k, v)| (*k, v)),
            next.iter().map(|(k, v)| (*k, v)),
        );
        assert_eq!((added, removed, changed), (1, 1, 1));
    }
}
