//! Reading the cluster's shared state out of Redis in a few round trips.
//!
//! Why a module of its own: `/api/cluster/health` must answer in well under 100 ms for 50
//! nodes and 10,000 connections, so every read is a pipeline (or one of the store's bulk
//! reads) and the reads run concurrently on the multiplexed connection. Lockouts are rare, so
//! one pipelined `SCARD` over all lockout indexes finds the few connections worth a full read.
//!
//! Reads here never write: node records of gone nodes are left for the leader's janitor.

use std::time::Instant;

use redis::Value;
use switchyard_shared::Millis;
use switchyard_shared::config::Config;
use switchyard_store::{
    ConnRecord, LeaseInfo, LockoutRecord, NodeHeartbeat, RedisStore, SharedBreaker, StoreError,
};

/// The provider and connection ids the coordinator reports on, from the config file.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    pub providers: Vec<String>,
    /// `(connection id, provider id)`, in file order.
    pub connections: Vec<(String, String)>,
}

impl Catalogue {
    pub fn from_config(config: &Config) -> Self {
        Self {
            providers: config.providers.iter().map(|p| p.id.clone()).collect(),
            connections: config
                .connections
                .iter()
                .map(|c| (c.id.clone(), c.provider.clone()))
                .collect(),
        }
    }

    pub fn provider_of(&self, conn: &str) -> Option<&str> {
        self.connections
            .iter()
            .find(|(c, _)| c == conn)
            .map(|(_, p)| p.as_str())
    }

    pub fn has_provider(&self, id: &str) -> bool {
        self.providers.iter().any(|p| p == id)
    }
}

/// The admin toolkit validates request ids against the configured catalogue.
impl switchyard_shared::admin_kit::clear::Catalogue for Catalogue {
    fn has_provider(&self, id: &str) -> bool {
        Catalogue::has_provider(self, id)
    }

    fn provider_of(&self, connection: &str) -> Option<&str> {
        Catalogue::provider_of(self, connection)
    }
}

/// A member of the node set: its heartbeat, or `None` when the key is gone (the node stopped
/// heartbeating longer ago than the key's TTL).
#[derive(Debug, Clone)]
pub struct NodeEntry {
    pub id: String,
    pub heartbeat: Option<NodeHeartbeat>,
}

/// Everything one health document is built from.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The coordinator's wall clock at the read (epoch ms).
    pub read_at_ms: u64,
    /// Round trip of a `TIME` call.
    pub redis_latency_ms: Millis,
    pub nodes: Vec<NodeEntry>,
    pub breakers: Vec<SharedBreaker>,
    pub connections: Vec<ConnRecord>,
    pub lockouts: Vec<LockoutRecord>,
    pub leases: Vec<LeaseInfo>,
    /// The coordinator leader lease (its `api_key_id` is the leader's coordinator id).
    pub leader: Option<LeaseInfo>,
    pub settings_version: Option<u64>,
}

/// Wall-clock epoch milliseconds.
pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Reads the whole snapshot. Fails when Redis does not answer (the caller reports `down`).
pub async fn snapshot(store: &RedisStore, catalogue: &Catalogue) -> Result<Snapshot, StoreError> {
    let started = Instant::now();
    store.time_ms().await?;
    let redis_latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

    let conn_ids: Vec<&str> = catalogue
        .connections
        .iter()
        .map(|(c, _)| c.as_str())
        .collect();
    let providers: Vec<&str> = catalogue.providers.iter().map(String::as_str).collect();
    let leader_keys = [("coordinator", store.leader_lease_keys())];

    let (nodes, breakers, scan, leader, settings) = futures_util::try_join!(
        read_nodes(store),
        store.read_breakers(&providers),
        crate::scan::scan_connections(store, &conn_ids),
        store.read_leases(&leader_keys),
        store.settings_read(),
    )?;
    // The scan names the few connections with lockouts or leases; read those in full.
    let locked: Vec<&str> = scan.locked.iter().map(String::as_str).collect();
    let lease_keys: Vec<(&str, _)> = scan
        .leased
        .iter()
        .map(|c| (c.as_str(), store.connection_lease_keys(c)))
        .collect();
    let reads = locked.iter().map(|c| store.read_lockouts(c));
    let (lockouts, leases) = futures_util::try_join!(
        futures_util::future::try_join_all(reads),
        store.read_leases(&lease_keys),
    )?;
    let lockouts = lockouts.into_iter().flatten().collect();
    Ok(Snapshot {
        read_at_ms: epoch_ms(),
        redis_latency_ms,
        nodes,
        breakers,
        connections: scan.records,
        lockouts,
        leases,
        leader: leader.into_iter().next(),
        settings_version: settings.map(|(v, _)| v),
    })
}

/// Every member of the node set with its heartbeat (two round trips, no pruning).
pub async fn read_nodes(store: &RedisStore) -> Result<Vec<NodeEntry>, StoreError> {
    let set = store.keys().nodes();
    let mut ids: Vec<String> = store
        .run("coordinator_nodes", |mut con| async move {
            redis::cmd("SMEMBERS").arg(set).query_async(&mut con).await
        })
        .await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    ids.sort();
    let keys: Vec<String> = ids.iter().map(|id| store.keys().node(id)).collect();
    let docs: Vec<Option<String>> = store
        .run("coordinator_node_docs", |mut con| async move {
            redis::cmd("MGET").arg(keys).query_async(&mut con).await
        })
        .await?;
    Ok(ids
        .into_iter()
        .zip(docs.into_iter().chain(std::iter::repeat(None)))
        .map(|(id, doc)| NodeEntry {
            heartbeat: doc.as_deref().and_then(NodeHeartbeat::from_json),
            id,
        })
        .collect())
}

/// The lockouts of every connection: one pipelined `SCARD` over the indexes, then a full read
/// of the (few) connections that have any.
pub async fn read_all_lockouts(
    store: &RedisStore,
    conns: &[&str],
) -> Result<Vec<LockoutRecord>, StoreError> {
    if conns.is_empty() {
        return Ok(Vec::new());
    }
    let cmds = conns
        .iter()
        .map(|conn| {
            let mut cmd = redis::cmd("SCARD");
            cmd.arg(store.keys().lockout_index(conn));
            cmd
        })
        .collect();
    let counts: Vec<Value> = store
        .read_pipeline("coordinator_lockout_index", cmds)
        .await?;
    let with_lockouts: Vec<&str> = conns
        .iter()
        .zip(counts)
        .filter(|(_, n)| matches!(n, Value::Int(n) if *n > 0))
        .map(|(c, _)| *c)
        .collect();
    let reads = with_lockouts.iter().map(|c| store.read_lockouts(c));
    let lists = futures_util::future::try_join_all(reads).await?;
    Ok(lists.into_iter().flatten().collect())
}
