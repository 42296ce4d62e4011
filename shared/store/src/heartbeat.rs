//! The heartbeat document every node writes under `KeySpace::node(id)`.
//!
//! Why here: nodes write it and the coordinator reads it, so both sides share one type. It is
//! JSON (operators read it with `redis-cli GET`), camelCase like the admin API, and tolerant on
//! read: unknown fields are ignored and missing ones default, so nodes of two releases can
//! share a cluster during a rolling deploy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use switchyard_shared::Millis;

/// One node's self-report, refreshed every `heartbeat_interval_ms` with a TTL of a few
/// intervals; a missing key means the node is gone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeHeartbeat {
    pub node_id: String,
    pub version: String,
    /// Client listener address as configured (`[server] listen`).
    pub client_address: String,
    /// Admin listener address as configured (`[server] admin_listen`).
    pub admin_address: String,
    /// Sender's wall clock when written, epoch ms (age = reader's now − this; informational).
    pub sent_at_ms: Millis,
    pub started_at_ms: Millis,
    pub uptime_ms: Millis,
    pub inflight: i64,
    pub draining: bool,
    /// `up`, `degraded` or `down`, as the node sees its Redis link.
    pub redis_state: String,
    /// Provider id → breaker state as this node sees it (`closed`, `open`, …).
    pub breakers: BTreeMap<String, String>,
    /// Connection counts by state (`active`, `cooldown`, `terminal`).
    pub connections: BTreeMap<String, u64>,
    /// Cluster-wide permits this node holds, by connection.
    pub permits: BTreeMap<String, u32>,
    /// Runtime settings version this node has applied.
    pub settings_version: u64,
}

impl NodeHeartbeat {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// Parses a heartbeat; `None` for a document that is not a JSON object of this shape.
    pub fn from_json(doc: &str) -> Option<Self> {
        serde_json::from_str(doc).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_unknown_and_missing_fields() {
        let mut hb = NodeHeartbeat {
            node_id: "n1".into(),
            inflight: 3,
            ..NodeHeartbeat::default()
        };
        hb.breakers.insert("openai".into(), "open".into());
        let back = NodeHeartbeat::from_json(&hb.to_json());
        assert_eq!(back.as_ref(), Some(&hb));
        let newer = r#"{"nodeId":"n2","someFutureField":[1,2]}"#;
        let parsed = NodeHeartbeat::from_json(newer);
        assert_eq!(parsed.map(|h| h.node_id), Some("n2".to_owned()));
        assert!(NodeHeartbeat::from_json("42").is_none());
        assert!(NodeHeartbeat::from_json("not json").is_none());
    }
}
