//! Cluster mode: what a node needs to share resilience state with its peers through Redis.
//!
//! Why: with `[cluster] mode = "redis"` any number of stateless nodes behave as one gateway.
//! [`Cluster`] holds the node's identity in the cluster and the shared [`RedisStore`]; the
//! runtime carries it as `Option<Arc<Cluster>>` (`None` in embedded mode), so everything that
//! differs between the modes asks that one question. The request path never waits on Redis
//! except for leased requests, cluster-wide caps and a due half-open probe, and then never
//! longer than `redis_timeout_ms`.
//!
//! This module is the cluster as the request path and the actors see it; the tasks that
//! follow the whole runtime (writer, event subscriber, heartbeats, shared settings) are in
//! [`crate::cluster_sync`], above it.
//!
//! - [`change`]: what actors hand over ([`LocalChange`], through the [`StatePublisher`] that
//!   [`Cluster`] implements); they `try_send` and never wait.
//! - [`replay`]: the bounded queue of local changes kept while Redis is unreachable.
//! - [`probe`]: the cluster-wide half-open probe lease.
//! - [`learned`]: sharing what the request path learns from answers (usage-wall deadlines,
//!   tool limits), written to Redis and announced from a spawned task; a `RetryInfo` queue
//!   pause, announced only.
//! - [`versions`]: which version of each connection record this node's state stands for;
//!   [`learned_versions`]: the same for the learned records (usage walls, tool limits).

pub mod learned;
pub mod learned_versions;
pub mod probe;
pub mod replay;
pub mod versions;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand::Rng as _;
use switchyard_shared::Millis;
use switchyard_shared::config::{ClusterConfig, ClusterMode, ConfigError};
use switchyard_store::{HealthPolicy, RedisState, RedisStore, RedisStoreConfig, StoreObserver};
use tokio::sync::mpsc;

pub use crate::actors::change::{self, LocalChange, Stamped, StatePublisher, breaker_params};

use crate::metrics::cluster::{ClusterMetrics, EventResult};
use replay::ReplayQueue;
use versions::ConnVersions;

pub use switchyard_store::{REDIS_URL_ENV, redact_url};

/// Local changes waiting for the writer. Beyond this they go to the replay queue.
pub const WRITER_QUEUE: usize = 4096;

/// Local changes kept while Redis is unreachable (oldest dropped first).
pub const REPLAY_CAPACITY: usize = 10_000;

impl StatePublisher for Cluster {
    fn publish(&self, change: LocalChange) {
        self.emit(change);
    }

    fn take_probe(&self, provider: &Arc<str>, local: u64) -> Option<u64> {
        Cluster::take_probe(self, provider, local)
    }

    fn release_probe(&self, provider: &Arc<str>, local: u64) {
        if let Some(generation) = Cluster::take_probe(self, provider, local) {
            self.emit(LocalChange::ProbeRelease {
                provider: provider.clone(),
                generation,
            });
        }
    }
}

/// This node's membership in a redis-mode cluster.
pub struct Cluster {
    pub store: Arc<RedisStore>,
    pub config: ClusterConfig,
    pub node_id: String,
    /// Random per process start: tells a restarted node's writes from its previous life's.
    pub boot_id: String,
    /// The Redis and cluster metric families (also the store's observer).
    pub metrics: Arc<ClusterMetrics>,
    /// What the sync tasks know about the cluster.
    pub sync: SyncState,
    /// Connection record versions: what a resync may adopt.
    pub versions: ConnVersions,
    /// Learned record versions (usage walls, tool limits): what a resync may adopt.
    pub learned_versions: learned_versions::LearnedVersions,
    writer_tx: mpsc::Sender<Stamped>,
    /// Held by the running writer; a restarted writer takes it again (an async mutex: a
    /// writer that panicked releases it while unwinding, the queue survives).
    writer_rx: tokio::sync::Mutex<Option<mpsc::Receiver<Stamped>>>,
    /// Test hook: the writer panics at its next turn.
    writer_panic: AtomicBool,
    replay: Mutex<ReplayQueue<Stamped>>,
    /// Local probe generation → cluster probe generation, per provider.
    probes: Mutex<HashMap<(Arc<str>, u64), u64>>,
    /// Provider → node time until which the cluster said someone else probes.
    probe_denied: Mutex<HashMap<Arc<str>, Millis>>,
}

/// The cluster as this node last saw it.
#[derive(Debug, Default)]
pub struct SyncState {
    /// Subscribed to the events channel right now.
    subscribed: AtomicBool,
    /// Live nodes from the last heartbeat round (0 = unknown).
    live_nodes: AtomicU32,
    /// The runtime settings version this node has applied.
    pub settings_version: AtomicU64,
    /// Sequence number of this node's next event.
    seq: AtomicU64,
    /// Supervised cluster tasks that died and wait for their restart.
    tasks_down: AtomicU32,
    /// Wall clock of the last completed resync (epoch ms, 0 = never).
    pub last_resync_ms: AtomicU64,
    /// The settings document (JSON) of the version this node last applied or wrote: the base
    /// a local patch was computed from, for rebasing it onto a concurrent one.
    settings_base: Mutex<Option<(u64, serde_json::Value)>>,
}

impl SyncState {
    /// The number of live nodes from heartbeats (this one included), at least 1. Without
    /// Redis it is the last known count, which is what the `ceil(cap / live_nodes)` fallback
    /// of cluster-wide caps needs.
    pub fn live_nodes(&self) -> u32 {
        self.live_nodes.load(Ordering::Relaxed).max(1)
    }

    /// The count from the last successful heartbeat round; `None` before the first.
    pub fn known_live_nodes(&self) -> Option<u32> {
        Some(self.live_nodes.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }

    pub fn subscribed(&self) -> bool {
        self.subscribed.load(Ordering::Relaxed)
    }

    pub(crate) fn set_subscribed(&self, on: bool) {
        self.subscribed.store(on, Ordering::Relaxed);
    }

    pub(crate) fn set_live_nodes(&self, n: u32) {
        self.live_nodes.store(n, Ordering::Relaxed);
    }

    /// The settings document of `version`, when that is the one this node knows; version 0
    /// (nothing shared yet) is the empty layer.
    pub fn settings_base(&self, version: u64) -> Option<serde_json::Value> {
        if version == 0 {
            return Some(serde_json::Value::Object(serde_json::Map::new()));
        }
        self.settings_base.lock().ok().and_then(|b| {
            b.as_ref()
                .filter(|(v, _)| *v == version)
                .map(|(_, d)| d.clone())
        })
    }

    pub fn set_settings_base(&self, version: u64, doc: serde_json::Value) {
        if let Ok(mut b) = self.settings_base.lock()
            && b.as_ref().is_none_or(|(v, _)| *v <= version)
        {
            *b = Some((version, doc));
        }
    }

    /// A supervised task died (`true`) or was restarted (`false`).
    pub(crate) fn task_down(&self, down: bool) {
        if down {
            self.tasks_down.fetch_add(1, Ordering::Relaxed);
        } else {
            self.tasks_down.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether every supervised cluster task runs.
    pub fn tasks_running(&self) -> bool {
        self.tasks_down.load(Ordering::Relaxed) == 0
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }
}

impl Cluster {
    /// The cluster handle for `config`, or `None` in embedded mode. Builds the store without
    /// connecting (a node starts even when Redis is unreachable). The store reports to the
    /// cluster metrics unless another `observer` is given.
    pub fn from_config(
        config: &ClusterConfig,
        node_id: &str,
        env: &dyn Fn(&str) -> Option<String>,
        observer: Option<Arc<dyn StoreObserver>>,
    ) -> Result<Option<Arc<Self>>, ConfigError> {
        if config.mode != ClusterMode::Redis {
            return Ok(None);
        }
        let url = switchyard_store::effective_url(&config.redis_url, env);
        let store_config = RedisStoreConfig {
            url,
            key_prefix: config.key_prefix.clone(),
            timeout_ms: config.redis_timeout_ms,
            health: HealthPolicy::default(),
        };
        let metrics = ClusterMetrics::new()
            .map(Arc::new)
            .map_err(|e| ConfigError {
                path: "cluster".to_owned(),
                message: format!("cannot register the cluster metrics: {e}"),
            })?;
        let observer = observer.unwrap_or_else(|| metrics.clone());
        let store = RedisStore::connect(&store_config, observer).map_err(|e| ConfigError {
            path: "cluster.redis_url".to_owned(),
            message: e.to_string(),
        })?;
        let mut config = config.clone();
        config.redis_url = redact_url(&store_config.url);
        let (writer_tx, writer_rx) = mpsc::channel(WRITER_QUEUE);
        Ok(Some(Arc::new(Self {
            store: Arc::new(store),
            config,
            node_id: node_id.to_owned(),
            boot_id: random_id(),
            metrics,
            sync: SyncState::default(),
            versions: ConnVersions::default(),
            learned_versions: learned_versions::LearnedVersions::default(),
            writer_tx,
            writer_rx: tokio::sync::Mutex::new(Some(writer_rx)),
            writer_panic: AtomicBool::new(false),
            replay: Mutex::new(ReplayQueue::new(REPLAY_CAPACITY)),
            probes: Mutex::new(HashMap::new()),
            probe_denied: Mutex::new(HashMap::new()),
        })))
    }

    /// The token this node presents as the owner of probe and permit leases.
    pub fn owner_token(&self) -> String {
        format!("{}:{}", self.node_id, self.boot_id)
    }

    /// The number of live nodes (see [`SyncState::live_nodes`]).
    pub fn live_nodes(&self) -> u32 {
        self.sync.live_nodes()
    }

    /// Whether the node serves on local state only: Redis is not up, the event stream is not
    /// subscribed (changes from peers would not arrive), or a cluster task died and waits for
    /// its restart (the writer's changes would only queue).
    pub fn degraded(&self) -> bool {
        self.store.state() != RedisState::Up
            || !self.sync.subscribed()
            || !self.sync.tasks_running()
    }

    /// Test hook: makes the writer panic at its next turn.
    pub fn inject_writer_panic(&self) {
        self.writer_panic.store(true, Ordering::Relaxed);
    }

    pub(crate) fn take_writer_panic(&self) -> bool {
        self.writer_panic.swap(false, Ordering::Relaxed)
    }

    /// Hands a local change to the writer without waiting. When the writer's queue is full the
    /// change goes to the replay queue instead, so a burst is delayed, not lost.
    pub fn emit(&self, change: LocalChange) {
        if let Some(conn) = replay::conn_of(&change) {
            self.versions.local_change(conn);
        }
        let stamped = Stamped {
            change,
            wall_ms: wall_ms(),
        };
        match self.writer_tx.try_send(stamped) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(stamped))
            | Err(mpsc::error::TrySendError::Closed(stamped)) => self.defer(stamped),
        }
    }

    /// Keeps a change for replay once Redis is reachable again.
    pub(crate) fn defer(&self, stamped: Stamped) {
        let mut lost = None;
        if let Ok(mut q) = self.replay.lock() {
            lost = q.push(stamped);
            self.metrics.set_replay(q.len(), u64::from(lost.is_some()));
        }
        if let Some(lost) = lost {
            self.metrics.event(lost.change.kind(), EventResult::Dropped);
            self.unwritten(&lost.change);
        }
    }

    /// The writer is done with `change` (written, refused or dropped); `version` is the
    /// connection record's version after a write that reported one.
    pub(crate) fn settled(&self, change: &LocalChange, version: Option<u64>) {
        if let Some(conn) = replay::conn_of(change) {
            self.versions.settled(conn, version);
        }
    }

    /// The writer gave up on `change` (refused, dropped from a full replay queue, or not
    /// extend-only while Redis failed). A change that lowered the local state (a clear, a
    /// reinstatement, a success, a decay) makes the connection's record adopted again on the
    /// next resync, so the lowering does not outlive it on this node alone; an extend-only one
    /// stays in the local state (the safe direction).
    pub(crate) fn unwritten(&self, change: &LocalChange) {
        self.settled(change, None);
        if !replay::replayable(change)
            && let Some(conn) = replay::conn_of(change)
        {
            self.versions.forget(conn);
        }
    }

    /// Redis failed: drops every queued change that is not extend-only. Replayed after the
    /// outage, a clear, a reinstatement, a decay or a reset would overwrite whatever newer
    /// state another node wrote meanwhile (operator actions fail closed instead while Redis is
    /// unreachable, so what is dropped here was queued behind a burst).
    pub(crate) fn discard_unsafe_replays(&self) {
        let mut discarded = Vec::new();
        if let Ok(mut q) = self.replay.lock() {
            discarded = q.drain_unless(|s| replay::replayable(&s.change));
            self.metrics.set_replay(q.len(), 0);
        }
        for stamped in discarded {
            tracing::warn!(
                kind = stamped.change.kind(),
                "change not replayed after a Redis failure: it is not extend-only"
            );
            self.metrics
                .event(stamped.change.kind(), EventResult::Dropped);
            self.unwritten(&stamped.change);
        }
    }

    /// The oldest change waiting for replay.
    pub(crate) fn pop_replay(&self) -> Option<Stamped> {
        let mut q = self.replay.lock().ok()?;
        let item = q.pop();
        self.metrics.set_replay(q.len(), 0);
        item
    }

    /// Puts a change whose replay failed back at the front.
    pub(crate) fn unpop_replay(&self, stamped: Stamped) {
        let mut lost = None;
        if let Ok(mut q) = self.replay.lock() {
            lost = q.push_front(stamped);
            self.metrics.set_replay(q.len(), u64::from(lost.is_some()));
        }
        if let Some(lost) = lost {
            self.unwritten(&lost.change);
        }
    }

    pub fn replay_depth(&self) -> usize {
        self.replay.lock().map_or(0, |q| q.len())
    }

    /// The writer's receiving end, held for as long as the guard lives; `None` while another
    /// writer runs.
    pub(crate) fn writer_rx(
        &self,
    ) -> Option<tokio::sync::MutexGuard<'_, Option<mpsc::Receiver<Stamped>>>> {
        self.writer_rx.try_lock().ok()
    }

    /// Takes the writer's receiving end away for good (tests: a writer that is gone).
    #[cfg(test)]
    pub(crate) fn take_writer_rx(&self) -> Option<mpsc::Receiver<Stamped>> {
        self.writer_rx.try_lock().ok().and_then(|mut rx| rx.take())
    }

    /// Remembers that local probe `local` of `provider` holds cluster probe `cluster_gen`.
    pub fn bind_probe(&self, provider: &Arc<str>, local: u64, cluster_gen: u64) {
        if let Ok(mut probes) = self.probes.lock() {
            // Bindings whose outcome never came (the lease expired) must not pile up.
            if probes.len() > 1024 {
                probes.clear();
            }
            probes.insert((provider.clone(), local), cluster_gen);
        }
    }

    /// The cluster generation bound to local probe `local`, removing the binding.
    pub fn take_probe(&self, provider: &Arc<str>, local: u64) -> Option<u64> {
        self.probes
            .lock()
            .ok()
            .and_then(|mut p| p.remove(&(provider.clone(), local)))
    }

    /// The cluster generation bound to local probe `local`, keeping the binding.
    pub fn probe_binding(&self, provider: &Arc<str>, local: u64) -> Option<u64> {
        self.probes
            .lock()
            .ok()
            .and_then(|p| p.get(&(provider.clone(), local)).copied())
    }

    /// Until when (node time) the cluster said another node probes `provider`.
    pub fn probe_denied_until(&self, provider: &Arc<str>) -> Option<Millis> {
        self.probe_denied
            .lock()
            .ok()
            .and_then(|d| d.get(provider).copied())
    }

    pub fn set_probe_denied(&self, provider: &Arc<str>, until: Option<Millis>) {
        if let Ok(mut d) = self.probe_denied.lock() {
            match until {
                Some(until) => d.insert(provider.clone(), until),
                None => d.remove(provider),
            };
        }
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.node_id)
            .field("redis_url", &self.config.redis_url)
            .finish_non_exhaustive()
    }
}

/// Wall-clock epoch milliseconds (event timestamps, propagation delay).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn random_id() -> String {
    let bytes: [u8; 8] = rand::rng().random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use switchyard_shared::breaker::BreakerProfile;

    use super::*;

    #[test]
    fn embedded_mode_has_no_cluster() {
        let cfg = ClusterConfig::default();
        let cluster = Cluster::from_config(&cfg, "n1", &|_| None, None);
        assert!(matches!(cluster, Ok(None)));
    }

    fn redis_cluster() -> Arc<Cluster> {
        let cfg = ClusterConfig {
            mode: ClusterMode::Redis,
            redis_url: "redis://127.0.0.1:1/0".to_owned(),
            ..ClusterConfig::default()
        };
        match Cluster::from_config(&cfg, "n1", &|_| None, None) {
            Ok(Some(c)) => c,
            _ => unreachable!("redis mode builds a cluster handle"),
        }
    }

    #[tokio::test]
    async fn live_nodes_is_at_least_one_and_follows_the_heartbeats() {
        let c = redis_cluster();
        assert_eq!(c.live_nodes(), 1, "unknown counts as this node alone");
        c.sync.set_live_nodes(3);
        assert_eq!(c.live_nodes(), 3);
        c.sync.set_live_nodes(0);
        assert_eq!(c.live_nodes(), 1);
        assert!(c.degraded(), "not subscribed yet");
    }

    #[tokio::test]
    async fn changes_wait_for_replay_when_the_writer_is_gone_and_come_out_in_order() {
        let c = redis_cluster();
        drop(c.take_writer_rx());
        for i in 0..3u32 {
            c.emit(LocalChange::Cooldown {
                conn: Arc::from("k"),
                duration_ms: 1000,
                level: i,
                reason: switchyard_shared::outcome::FailureReason::RateLimitExceeded,
                last_error: String::new(),
            });
        }
        assert_eq!(c.replay_depth(), 3);
        let first = c.pop_replay().map(|s| s.change);
        assert!(matches!(
            first,
            Some(LocalChange::Cooldown { level: 0, .. })
        ));
        assert!(
            c.take_writer_rx().is_none(),
            "the receiver is handed out once"
        );
    }

    #[tokio::test]
    async fn probe_bindings_are_taken_once() {
        let c = redis_cluster();
        let p: Arc<str> = Arc::from("openai");
        c.bind_probe(&p, 7, 42);
        assert_eq!(c.take_probe(&p, 7), Some(42));
        assert_eq!(c.take_probe(&p, 7), None);
        c.set_probe_denied(&p, Some(500));
        assert_eq!(c.probe_denied_until(&p), Some(500));
        c.set_probe_denied(&p, None);
        assert_eq!(c.probe_denied_until(&p), None);
    }

    #[test]
    fn shared_breaker_params_follow_the_profile() {
        let profile = BreakerProfile::default();
        let p = breaker_params(&profile);
        assert_eq!(p.failure_threshold, profile.failure_threshold);
        assert_eq!(p.reset_timeout_ms, profile.reset_timeout_ms);
        assert_eq!(
            p.max_reset_timeout_ms,
            profile.reset_timeout_ms * u64::from(profile.max_backoff_multiplier)
        );
        assert_eq!(p.backoff_escalation_count, profile.backoff_escalation_count);
    }

    #[tokio::test]
    async fn env_url_overrides_the_file_and_is_redacted() {
        let cfg = ClusterConfig {
            mode: ClusterMode::Redis,
            ..ClusterConfig::default()
        };
        let env = |k: &str| (k == REDIS_URL_ENV).then(|| "redis://:pw@127.0.0.1:1/0".to_owned());
        let cluster = Cluster::from_config(&cfg, "n1", &env, None);
        let Ok(Some(cluster)) = cluster else {
            unreachable!("redis mode builds a cluster handle")
        };
        assert_eq!(cluster.config.redis_url, "redis://***@127.0.0.1:1/0");
        assert!(cluster.owner_token().starts_with("n1:"));
    }
}
