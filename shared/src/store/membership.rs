//! Node membership: heartbeat keys with a TTL.
//!
//! Why: the coordinator and every node need to know which nodes are alive (for the cluster
//! health view and for sharing caps as `ceil(cap / live_nodes)` when Redis permits are out of
//! reach). Each node writes [`KeySpace::node`](super::KeySpace::node) (its JSON summary, `PX`
//! ttl) and adds its id to [`KeySpace::nodes`](super::KeySpace::nodes); a node whose key has
//! expired is dead. Reading does not prune: a dead id stays in the set so the coordinator shows
//! it `down` and its janitor frees its permits (after `node_ttl_ms`); nodes prune only ids dead
//! for much longer ([`RedisStore::prune_nodes`]), so the set does not grow without a
//! coordinator. Node keys carry their own hash tag, so reads are pipelined `GET`s rather than
//! one cross-slot `MGET`.

use redis::Value;

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies::{opt_string, protocol};
use crate::Millis;

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
        let set = self.keys().nodes();
        let dead = dead.to_vec();
        let _: i64 = self
            .run("prune_nodes", |mut con| async move {
                redis::cmd("SREM")
                    .arg(set)
                    .arg(dead)
                    .query_async(&mut con)
                    .await
            })
            .await?;
        Ok(())
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
            .ignore();
        self.run("remove_node", |mut con| async move {
            pipe.query_async::<()>(&mut con).await
        })
        .await
    }
}
