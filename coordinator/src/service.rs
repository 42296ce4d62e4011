//! The coordinator's shared state: settings, the store, the catalogue, leadership, the event
//! memory and metrics, plus the two things every handler needs (a health snapshot and
//! publishing an event).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use switchyard_shared::store::{NoopObserver, RedisStore, StoreError};
use switchyard_shared::wire::{self, Envelope, WireEvent};

use crate::config::{Settings, StartupError, redact_url};
use crate::feed::Feed;
use crate::health::{self, CoordinatorView, Params};
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::read::{self, Catalogue, epoch_ms};

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

    /// The health document (a `down` document when Redis cannot be read).
    pub async fn health(&self) -> Value {
        let started = std::time::Instant::now();
        let doc = match read::snapshot(&self.store, &self.catalogue).await {
            Ok(snap) => health::document(
                &snap,
                &self.catalogue,
                &self.params,
                &self.view(),
                &self.feed,
            ),
            Err(e) => health::unreachable(&e.to_string(), &self.params, &self.view(), epoch_ms()),
        };
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
