//! Node membership: heartbeat keys with a TTL.
//!
//! Why: the coordinator and every node need to know which nodes are alive (for the cluster
//! health view and for sharing caps as `ceil(cap / live_nodes)` when Redis permits are out of
//! reach). Each node writes [`KeySpace::node`](super::KeySpace::node) (its JSON summary, `PX`
//! ttl) and adds its id to [`KeySpace::nodes`](super::KeySpace::nodes); a node whose key has
//! expired is dead. Reading does not prune: a dead id stays in the set so the coordinator shows
//! it `down` and its janitor frees its permits (after `node_ttl_ms`); nodes prune only ids dead
//! for much longer ([`RedisStore::prune_nodes`]), so the set does not grow without a
//! coordinator.
//!
//! A node's heartbeat round ([`RedisStore::membership_round`]) is one script call
//! (`heartbeat_v2`): it writes the key and the set as before and also the node's heartbeat
//! expiry in a sorted set ([`KeySpace::nodes_seen`](super::KeySpace::nodes_seen)), from which it
//! counts the live nodes and lists the dead ones. Why: reading every peer's key cost one `GET`
//! per peer per node every heartbeat interval, nodes² commands (at 50 nodes about 1,300/s of
//! the idle load). While a node of an older release runs (it writes only its key and the set),
//! the script says so and the round reads the keys as before ([`RedisStore::read_membership`],
//! pipelined `GET`s: node keys carry their own hash tag), so a mixed cluster counts every node.

use std::sync::LazyLock;

use redis::{Script, Value};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies::{int, into_array, non_negative, opt_string, protocol};
use switchyard_shared::Millis;

static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/heartbeat_v2.lua")));

/// What one heartbeat round saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Membership {
    /// Nodes whose heartbeat has not expired, this one included.
    pub live: u32,
    /// Ids still in the node set whose heartbeat has expired, sorted.
    pub dead: Vec<String>,
    /// The round read every member's key: a node of an older release is in the set.
    pub read_keys: bool,
}

impl RedisStore {
    /// Writes this node's heartbeat, live for `ttl_ms`.
    pub async fn heartbeat(
        &self,
        node_id: &str,
        doc_json: &str,
        ttl_ms: Millis,
    ) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(self.keys().node(node_id))
            .arg(doc_json)
            .arg("PX")
            .arg(ttl_ms.max(1))
            .ignore()
            .cmd("SADD")
            .arg(self.keys().nodes())
            .arg(node_id)
            .ignore();
        self.run("heartbeat", |mut con| async move {
            pipe.query_async::<()>(&mut con).await
        })
        .await
    }

    /// Writes this node's heartbeat (live for `ttl_ms`) and reads the membership, in one call
    /// (`heartbeat_v2`); when the node set holds ids the last-seen index does not track (nodes
    /// of an older release), the membership is read from every member's key instead.
    pub async fn membership_round(
        &self,
        node_id: &str,
        doc_json: &str,
        ttl_ms: Millis,
    ) -> Result<Membership, StoreError> {
        const CMD: &str = "heartbeat_round";
        let keys = [
            self.keys().node(node_id),
            self.keys().nodes(),
            self.keys().nodes_seen(),
        ];
        let (id, doc) = (node_id.to_owned(), doc_json.to_owned());
        let reply: Value = self
            .run(CMD, |mut con| async move {
                HEARTBEAT
                    .key(&keys[0])
                    .key(&keys[1])
                    .key(&keys[2])
                    .arg(id)
                    .arg(doc)
                    .arg(ttl_ms.max(1))
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let mut items = into_array(CMD, reply)?.into_iter();
        let (Some(live), Some(untracked)) = (items.next(), items.next()) else {
            return Err(protocol(CMD, "expected live and untracked counts"));
        };
        let live = non_negative(CMD, int(CMD, &live)?)?;
        if int(CMD, &untracked)? > 0 {
            let (live, dead) = self.read_membership().await?;
            return Ok(Membership {
                live: u32::try_from(live.len()).unwrap_or(u32::MAX),
                dead,
                read_keys: true,
            });
        }
        let mut dead = items
            .map(|id| opt_string(CMD, &id)?.ok_or_else(|| protocol(CMD, "empty node id")))
            .collect::<Result<Vec<_>, _>>()?;
        dead.sort();
        Ok(Membership {
            live: u32::try_from(live).unwrap_or(u32::MAX),
            dead,
            read_keys: false,
        })
    }

    /// The live nodes and their JSON summaries, sorted by id.
    pub async fn read_nodes(&self) -> Result<Vec<(String, String)>, StoreError> {
        Ok(self.read_membership().await?.0)
    }

    /// The live nodes with their JSON summaries, and the ids in the set whose heartbeat has
    /// expired (dead), both sorted by id. Prunes nothing.
    pub async fn read_membership(
        &self,
    ) -> Result<(Vec<(String, String)>, Vec<String>), StoreError> {
        const CMD: &str = "read_nodes";
        let set = self.keys().nodes();
        let mut ids: Vec<String> = self
            .run(CMD, |mut con| async move {
                redis::cmd("SMEMBERS").arg(set).query_async(&mut con).await
            })
            .await?;
        if ids.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        ids.sort();
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("GET").arg(self.keys().node(id));
        }
        let docs: Vec<Value> = self
            .run(
                CMD,
                |mut con| async move { pipe.query_async(&mut con).await },
            )
            .await?;
        if docs.len() != ids.len() {
            return Err(protocol(CMD, "reply count differs from the member count"));
        }
        let mut live = Vec::with_capacity(ids.len());
        let mut dead = Vec::new();
        for (id, doc) in ids.into_iter().zip(docs) {
            match opt_string(CMD, &doc)? {
                Some(doc) => live.push((id, doc)),
                None => dead.push(id),
            }
        }
        Ok((live, dead))
    }

    /// Removes dead ids from the node set. (A node that heartbeats between the caller's read
    /// and this is re-added by its next heartbeat.)
    pub async fn prune_nodes(&self, dead: &[String]) -> Result<(), StoreError> {
        if dead.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        pipe.cmd("SREM")
            .arg(self.keys().nodes())
            .arg(dead)
            .ignore()
            .cmd("ZREM")
            .arg(self.keys().nodes_seen())
            .arg(dead)
            .ignore();
        self.run("prune_nodes", |mut con| async move {
            pipe.query_async::<()>(&mut con).await
        })
        .await
    }

    /// Removes a node (graceful shutdown).
    pub async fn remove_node(&self, node_id: &str) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("DEL")
            .arg(self.keys().node(node_id))
            .ignore()
            .cmd("SREM")
            .arg(self.keys().nodes())
            .arg(node_id)
            .ignore()
            .cmd("ZREM")
            .arg(self.keys().nodes_seen())
            .arg(node_id)
            .ignore();
        self.run("remove_node", |mut con| async move {
            pipe.query_async::<()>(&mut con).await
        })
        .await
    }
}
