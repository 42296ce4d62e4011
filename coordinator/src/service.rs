//! The coordinator's shared state: settings, the store, the catalogue, leadership, the event
//! memory and metrics, plus the two things every handler needs (a health snapshot and
//! publishing an event).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use switchyard_shared::wire::{self, Envelope, WireEvent};
use switchyard_store::{NoopObserver, RedisStore, StoreError};

use crate::config::{Settings, StartupError, redact_url};
use crate::feed::Feed;
use crate::health::{self, CoordinatorView};
use crate::leadership::Leadership;
use crate::metrics::Metrics;
use crate::node_state::Params;
use crate::read::{self, Catalogue, Snapshot, epoch_ms};

/// A health answer never uses a snapshot older than this.
pub const MAX_SNAPSHOT_AGE: Duration = Duration::from_secs(3);
/// How often the background refresh reads while someone is looking.
pub const REFRESH_INTERVAL: Duration = Duration::from_millis(1000);
/// The background refresh stops this long after the last health request.
pub const DEMAND_WINDOW: Duration = Duration::from_secs(30);

/// One read of the cluster state.
#[derive(Debug)]
pub struct Taken {
    /// The snapshot, or why Redis could not be read.
    pub result: Result<Snapshot, String>,
    /// When the read started.
    pub at: Instant,
    pub took: Duration,
}

/// The latest snapshot and when it was last asked for.
#[derive(Debug, Default)]
pub struct SnapshotCache {
    latest: Mutex<Option<Arc<Taken>>>,
    demand: Mutex<Option<Instant>>,
    refresh: tokio::sync::Mutex<()>,
}

impl SnapshotCache {
    fn latest(&self) -> Option<Arc<Taken>> {
        self.latest.lock().ok().and_then(|l| l.clone())
    }

    fn wanted(&self) -> bool {
        self.demand
            .lock()
            .ok()
            .and_then(|d| *d)
            .is_some_and(|at| at.elapsed() < DEMAND_WINDOW)
    }
}

/// Keeps the snapshot fresh while health is being asked for; never returns.
pub async fn refresh_loop(co: Arc<Coordinator>) {
    loop {
        tokio::time::sleep(REFRESH_INTERVAL).await;
        if co.cache.wanted() {
            co.refresh().await;
        }
    }
}

/// One coordinator replica.
pub struct Coordinator {
    pub settings: Settings,
    pub store: Arc<RedisStore>,
    pub catalogue: Catalogue,
    pub params: Params,
    pub feed: Arc<Feed>,
    pub leadership: Leadership,
    pub metrics: Metrics,
    pub started_at_ms: u64,
    /// The token this replica presents as the leader lease owner (stored only as a hash).
    pub owner_token: String,
    pub cache: SnapshotCache,
    /// Per-provider rates over the last 15 minutes, for the dashboard's charts.
    pub history: Mutex<crate::history::History>,
    seq: AtomicU64,
}

impl Coordinator {
    /// Builds the replica without touching the network.
    pub fn new(settings: Settings) -> Result<Self, StartupError> {
        let store = RedisStore::connect(&settings.store_config(), Arc::new(NoopObserver))
            .map_err(|e| StartupError(e.to_string()))?;
        let cluster = &settings.config.cluster;
        let params = Params {
            heartbeat_interval_ms: cluster.heartbeat_interval_ms,
            node_ttl_ms: cluster.node_ttl_ms,
            redis_timeout_ms: cluster.redis_timeout_ms,
            redis_url: redact_url(&settings.redis_url),
        };
        let boot: [u8; 16] = rand::random();
        let owner_token = format!(
            "coordinator:{}:{}",
            settings.coordinator_id,
            hex::encode(boot)
        );
        Ok(Self {
            catalogue: Catalogue::from_config(&settings.config),
            params,
            store: Arc::new(store),
            feed: Arc::new(Feed::default()),
            leadership: Leadership::default(),
            metrics: Metrics::new(),
            started_at_ms: epoch_ms(),
            owner_token,
            cache: SnapshotCache::default(),
            history: Mutex::new(crate::history::History::new(settings.history_interval_ms)),
            seq: AtomicU64::new(0),
            settings,
        })
    }

    /// `origin_node` of the events this replica publishes.
    pub fn origin(&self) -> String {
        format!("coordinator:{}", self.settings.coordinator_id)
    }

    pub fn view(&self) -> CoordinatorView {
        let generation = self.leadership.current();
        CoordinatorView {
            id: self.settings.coordinator_id.clone(),
            leader: generation.is_some(),
            generation,
            started_at_ms: self.started_at_ms,
        }
    }

    /// Reads a fresh snapshot (single flight: concurrent callers share one read) and keeps it.
    pub async fn refresh(&self) -> Arc<Taken> {
        let asked = Instant::now();
        let _one = self.cache.refresh.lock().await;
        if let Some(t) = self.cache.latest()
            && t.at >= asked
        {
            return t; // another caller read while we waited
        }
        let started = Instant::now();
        let result = read::snapshot(&self.store, &self.catalogue)
            .await
            .map_err(|e| e.to_string());
        let taken = Arc::new(Taken {
            result,
            at: started,
            took: started.elapsed(),
        });
        if let Ok(mut latest) = self.cache.latest.lock() {
            *latest = Some(Arc::clone(&taken));
        }
        taken
    }

    /// The health document from a snapshot at most [`MAX_SNAPSHOT_AGE`] old (a `down`
    /// document when Redis cannot be read). While anyone asks, [`refresh_loop`] keeps the
    /// snapshot fresh in the background, so answers do not wait for Redis.
    pub async fn health(&self) -> Value {
        let started = Instant::now();
        if let Ok(mut demand) = self.cache.demand.lock() {
            *demand = Some(started);
        }
        let taken = match self.cache.latest() {
            Some(t) if t.at.elapsed() < MAX_SNAPSHOT_AGE => t,
            _ => self.refresh().await,
        };
        let mut doc = match &taken.result {
            Ok(snap) => health::document(
                snap,
                &self.catalogue,
                &self.params,
                &self.view(),
                &self.feed,
            ),
            Err(e) => health::unreachable(e, &self.params, &self.view(), epoch_ms()),
        };
        doc["snapshot"] = serde_json::json!({
            "ageMs": u64::try_from(taken.at.elapsed().as_millis()).unwrap_or(u64::MAX),
            "readMs": u64::try_from(taken.took.as_millis()).unwrap_or(u64::MAX),
        });
        self.metrics
            .observe_health(started.elapsed(), doc["status"].as_str().unwrap_or("down"));
        doc
    }

    /// Publishes one event on the events channel so every node converges sooner. The state
    /// change is already in Redis; a failed publish only delays nodes until their next resync.
    pub async fn publish(&self, event: WireEvent) -> Result<(), StoreError> {
        let env = Envelope {
            origin_node: self.origin(),
            origin_ts_ms: epoch_ms(),
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            event,
        };
        let kind = env.event.kind();
        let bytes = wire::encode(&env).map_err(|e| StoreError::Protocol {
            command: "publish",
            message: e.to_string(),
        })?;
        let result = self.store.publish(&bytes).await.map(|_| ());
        if let Err(e) = &result {
            tracing::warn!(event = kind, error = %e, "cannot publish event; nodes converge on resync");
        }
        result
    }
}
