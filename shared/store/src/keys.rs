//! Every Redis key and channel Switchyard uses, in one place.
//!
//! Keys are `{prefix}{kind}:{{{tag}}}…`: the part in braces is the Redis Cluster hash tag, so
//! all keys one script touches (a lease and its fence counter, a connection's lockout index and
//! its lockouts) live in one slot. Config ids are `[a-z0-9._-]+`, so an id can never contain a
//! brace and break the tag. The prefix (`[cluster] key_prefix`) lets several deployments share
//! one Redis.
//!
//! On Redis Cluster ([`KeySpace::hash_tagged`]) the prefix itself becomes the hash tag
//! (`switchyard:` → `{switchyard}:`). Redis hashes only the first `{…}` of a key, so every key
//! of one install lands on one slot: scripts that span entities (the janitor's pass, which
//! touches the node set, node keys and permit tables together), pipelines, the set indexes the
//! resync reads instead of `SCAN`, and any key built from the prefix later (a change log) are
//! all single-slot by construction. The trade-off: one install's state lives on one shard, so
//! it scales with that shard (its replica gives failover), not with the cluster's size.

/// Builds key names under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpace {
    prefix: String,
}

impl KeySpace {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The key space of an install on Redis Cluster: `prefix` (without its trailing `:`s)
    /// becomes the hash tag every key starts with, so the whole install shares one slot. An
    /// empty name falls back to `switchyard`; a prefix that already carries braces is kept.
    pub fn hash_tagged(prefix: &str) -> Self {
        if prefix.contains('{') {
            return Self::new(prefix);
        }
        let name = prefix.trim_end_matches(':');
        let separator = &prefix[name.len()..];
        let name = if name.is_empty() { "switchyard" } else { name };
        Self::new(format!("{{{name}}}{separator}"))
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Pub/sub channel carrying [`switchyard_shared::wire::Envelope`]s (bincode).
    pub fn events_channel(&self) -> String {
        format!("{}events", self.prefix)
    }

    /// Stream of connection record versions (`c` = connection id, `v` = version), appended by
    /// every script that bumps a record's version and bounded with `MAXLEN ~`; nodes read it
    /// from their last offset instead of re-reading every record (`store::changelog`).
    pub fn changelog(&self) -> String {
        format!("{}changelog", self.prefix)
    }

    /// Hash with a connection's cooldown, backoff level and terminal status.
    pub fn connection(&self, conn: &str) -> String {
        format!("{}conn:{{{conn}}}", self.prefix)
    }

    /// Set of `provider\u{1f}model` members that have a lockout key on this connection, so a
    /// resync can find them without `SCAN`.
    pub fn lockout_index(&self, conn: &str) -> String {
        format!("{}lockouts:{{{conn}}}", self.prefix)
    }

    /// One model lockout (hash, `PX` expiry).
    pub fn lockout(&self, provider: &str, conn: &str, model: &str) -> String {
        format!("{}lockout:{{{conn}}}:{provider}:{model}", self.prefix)
    }

    /// Hash with a provider's cluster-wide breaker state.
    pub fn breaker(&self, provider: &str) -> String {
        format!("{}breaker:{{{provider}}}", self.prefix)
    }

    /// Sorted set of a provider's recent breaker failures (the counting window).
    pub fn breaker_failures(&self, provider: &str) -> String {
        format!("{}breaker-failures:{{{provider}}}", self.prefix)
    }

    /// Hash holding the provider's half-open probe lease (`owner`, `gen`), with `PX`.
    pub fn breaker_probe(&self, provider: &str) -> String {
        format!("{}breaker-probe:{{{provider}}}", self.prefix)
    }

    /// Counter issuing probe generations; never reset, never expires.
    pub fn breaker_probe_fence(&self, provider: &str) -> String {
        format!("{}breaker-probe-gen:{{{provider}}}", self.prefix)
    }

    /// Hash holding an exclusive session lease on a connection, with `PX`.
    pub fn lease(&self, conn: &str) -> String {
        format!("{}lease:{{{conn}}}", self.prefix)
    }

    /// Counter issuing lease generations on a connection; never reset, never expires.
    pub fn lease_fence(&self, conn: &str) -> String {
        format!("{}lease-gen:{{{conn}}}", self.prefix)
    }

    /// Sorted set `node → expiry` of the nodes holding permits of a connection.
    pub fn permit_expiry(&self, conn: &str) -> String {
        format!("{}permits-exp:{{{conn}}}", self.prefix)
    }

    /// Hash `node → granted permits` of a connection.
    pub fn permit_grants(&self, conn: &str) -> String {
        format!("{}permits:{{{conn}}}", self.prefix)
    }

    /// Token bucket of a rate limit (`scope` is `key` or `conn`).
    pub fn rate_bucket(&self, scope: &str, id: &str) -> String {
        format!("{}rate:{{{scope}:{id}}}", self.prefix)
    }

    /// Hash with the runtime settings document (JSON) and its version.
    pub fn settings(&self) -> String {
        format!("{}settings", self.prefix)
    }

    /// A node's heartbeat (JSON, `PX`).
    pub fn node(&self, node_id: &str) -> String {
        format!("{}node:{{{node_id}}}", self.prefix)
    }

    /// Set of node ids that have sent a heartbeat (pruned when their key is gone).
    pub fn nodes(&self) -> String {
        format!("{}nodes", self.prefix)
    }

    /// Sorted set `node id → heartbeat expiry` (Redis clock): the membership a node reads in
    /// one call, whatever the cluster's size (`store::membership`).
    pub fn nodes_seen(&self) -> String {
        format!("{}nodes-seen", self.prefix)
    }

    /// The coordinator's leader lease and its fence counter.
    pub fn leader_lease(&self) -> String {
        format!("{}leader:{{coordinator}}", self.prefix)
    }

    pub fn leader_fence(&self) -> String {
        format!("{}leader-gen:{{coordinator}}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash tag of a key, as Redis Cluster computes it.
    fn tag(key: &str) -> &str {
        let open = key.find('{').unwrap_or(0);
        let close = key[open..].find('}').map(|c| c + open).unwrap_or(key.len());
        &key[open + 1..close]
    }

    #[test]
    fn keys_a_script_touches_share_a_hash_tag() {
        let k = KeySpace::new("sy:");
        assert_eq!(tag(&k.lease("c1")), tag(&k.lease_fence("c1")));
        assert_eq!(tag(&k.connection("c1")), tag(&k.lockout_index("c1")));
        assert_eq!(tag(&k.lockout("p", "c1", "m")), tag(&k.lockout_index("c1")));
        assert_eq!(tag(&k.permit_expiry("c1")), tag(&k.permit_grants("c1")));
        assert_eq!(tag(&k.breaker("p")), tag(&k.breaker_probe_fence("p")));
        assert_eq!(tag(&k.breaker("p")), tag(&k.breaker_failures("p")));
        assert_eq!(tag(&k.leader_lease()), tag(&k.leader_fence()));
    }

    /// The slot-deciding part of a key: the first non-empty `{…}`, else the whole key.
    fn cluster_hash_part(key: &str) -> &str {
        match key.find('{') {
            Some(open) => match key[open + 1..].find('}') {
                Some(len) if len > 0 => &key[open + 1..open + 1 + len],
                _ => key,
            },
            None => key,
        }
    }

    #[test]
    fn on_redis_cluster_every_key_of_an_install_shares_one_slot() {
        let k = KeySpace::hash_tagged("sy:");
        assert_eq!(k.prefix(), "{sy}:");
        let keys = [
            k.connection("c1"),
            k.connection("c2"),
            k.lockout_index("c1"),
            k.lockout("p", "c2", "m"),
            k.breaker("p"),
            k.breaker_failures("q"),
            k.breaker_probe("p"),
            k.breaker_probe_fence("p"),
            k.lease("c1"),
            k.lease_fence("c2"),
            k.permit_expiry("c1"),
            k.permit_grants("c2"),
            k.rate_bucket("key", "k1"),
            k.settings(),
            k.node("n1"),
            k.nodes(),
            k.leader_lease(),
            k.leader_fence(),
            format!("{}janitor:{{coordinator}}", k.prefix()),
        ];
        for key in &keys {
            assert_eq!(cluster_hash_part(key), "sy", "{key}");
        }
        // The events channel carries the tag too, so an ACL pattern on the prefix covers it.
        assert!(k.events_channel().starts_with("{sy}:"));
    }

    #[test]
    fn a_hash_tagged_prefix_keeps_its_separator_and_never_has_an_empty_tag() {
        assert_eq!(KeySpace::hash_tagged("blue-").prefix(), "{blue-}");
        assert_eq!(KeySpace::hash_tagged("").prefix(), "{switchyard}");
        assert_eq!(KeySpace::hash_tagged("::").prefix(), "{switchyard}::");
        assert_eq!(KeySpace::hash_tagged("{x}:").prefix(), "{x}:");
        // The single-server key space is unchanged: its keys keep their per-entity tags.
        let single = KeySpace::new("sy:");
        assert_eq!(cluster_hash_part(&single.connection("c1")), "c1");
        assert_eq!(cluster_hash_part(&single.settings()), "sy:settings");
    }

    #[test]
    fn prefix_is_applied_everywhere() {
        let k = KeySpace::new("blue:");
        for key in [
            k.events_channel(),
            k.connection("c"),
            k.changelog(),
            k.breaker("p"),
            k.lease("c"),
            k.settings(),
            k.nodes(),
            k.node("n"),
        ] {
            assert!(key.starts_with("blue:"), "{key}");
        }
    }
}
