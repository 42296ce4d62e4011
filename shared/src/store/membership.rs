//! Node membership: heartbeat keys with a TTL.
//!
//! Why: the coordinator and every node need to know which nodes are alive (for the cluster
//! health view and for sharing caps as `ceil(cap / live_nodes)` when Redis permits are out of
//! reach). Each node writes [`KeySpace::node`](super::KeySpace::node) (its JSON summary, `PX`
//! ttl) and adds its id to [`KeySpace::nodes`](super::KeySpace::nodes); a node whose key has
//! expired is dead and its id is pruned on the next read. Node keys carry their own hash tag, so
//! reads are pipelined `GET`s rather than one cross-slot `MGET`.

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

    /// The live nodes and their JSON summaries, sorted by id. Ids whose heartbeat expired are
    /// removed from the set. (A node that heartbeats between the read and the prune is re-added
    /// by its next heartbeat.)
    pub async fn read_nodes(&self) -> Result<Vec<(String, String)>, StoreError> {
        const CMD: &str = "read_nodes";
        let set = self.keys().nodes();
        let mut ids: Vec<String> = self
            .run(CMD, |mut con| async move {
                redis::cmd("SMEMBERS").arg(set).query_async(&mut con).await
            })
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
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
        if !dead.is_empty() {
            let set = self.keys().nodes();
            let _: i64 = self
                .run("prune_nodes", |mut con| async move {
                    redis::cmd("SREM")
                        .arg(set)
                        .arg(dead)
                        .query_async(&mut con)
                        .await
                })
                .await?;
        }
        Ok(live)
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
