//! The Redis connection every store operation goes through.
//!
//! One `ConnectionManager` (multiplexed, reconnects by itself) carries all commands; pub/sub
//! uses its own connection (see the subscriber). [`RedisStore::run`] is the only way to reach
//! Redis: it skips the call while the health tracker says Redis is down, bounds it by the
//! per-command timeout, feeds the result back into the tracker and reports it to the
//! [`StoreObserver`] (metrics). So no caller can wait on Redis for longer than the timeout.
//!
//! The connection is lazy: building a store never touches the network, so a node starts and
//! serves on local state even when Redis is unreachable at boot.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use redis::{Client, RedisResult};

use super::error::StoreError;
use super::health::{HealthPolicy, HealthTracker, RedisState};
use super::keys::KeySpace;
use crate::Millis;

/// Where Redis is and how long a command may take.
#[derive(Debug, Clone)]
pub struct RedisStoreConfig {
    /// `redis://[user:password@]host:port/db` or `rediss://…` for TLS.
    pub url: String,
    pub key_prefix: String,
    /// Per-command timeout (`[cluster] redis_timeout_ms`).
    pub timeout_ms: Millis,
    pub health: HealthPolicy,
}

/// Receives one report per command, for metrics. Implementations must not block.
pub trait StoreObserver: Send + Sync {
    /// A command finished (`error` is `None` on success) after `elapsed`.
    fn command(&self, command: &'static str, elapsed: Duration, error: Option<&StoreError>);
    /// The health state changed.
    fn state_changed(&self, from: RedisState, to: RedisState);
}

/// An observer that ignores everything (tests, tools).
#[derive(Debug, Default)]
pub struct NoopObserver;

impl StoreObserver for NoopObserver {
    fn command(&self, _: &'static str, _: Duration, _: Option<&StoreError>) {}
    fn state_changed(&self, _: RedisState, _: RedisState) {}
}

/// The shared store over one Redis server.
pub struct RedisStore {
    client: Client,
    manager: ConnectionManager,
    keys: KeySpace,
    timeout: Duration,
    health: Mutex<HealthTracker>,
    started: Instant,
    observer: Arc<dyn StoreObserver>,
}

impl RedisStore {
    /// Builds the store without connecting. Fails only on a URL the client cannot use.
    pub fn connect(
        config: &RedisStoreConfig,
        observer: Arc<dyn StoreObserver>,
    ) -> Result<Self, StoreError> {
        let client = Client::open(config.url.as_str())
            .map_err(|e| StoreError::Config(redact_url_error(&e.to_string(), &config.url)))?;
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        let manager_config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            // Reconnects are retried by our own health probes; the manager's own retry loop
            // must stay shorter than one command timeout.
            .set_number_of_retries(1)
            .set_max_delay(timeout);
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), manager_config)
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self {
            client,
            manager,
            keys: KeySpace::new(config.key_prefix.clone()),
            timeout,
            health: Mutex::new(HealthTracker::new(config.health)),
            started: Instant::now(),
            observer,
        })
    }

    pub fn keys(&self) -> &KeySpace {
        &self.keys
    }

    /// The client, for the dedicated pub/sub connection.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn state(&self) -> RedisState {
        self.health
            .lock()
            .map(|h| h.state())
            .unwrap_or(RedisState::Down)
    }

    /// Runs one command (or pipeline, or script) on a clone of the multiplexed connection,
    /// bounded by the timeout and gated by the health tracker.
    pub async fn run<T, F, Fut>(&self, command: &'static str, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let now = self.elapsed_ms();
        let admitted = self.health.lock().map(|mut h| h.admit(now)).unwrap_or(true);
        if !admitted {
            return Err(StoreError::Unavailable);
        }
        let started = Instant::now();
        let result = match tokio::time::timeout(self.timeout, f(self.manager.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.is_timeout() => Err(StoreError::Timeout { command }),
            Ok(Err(e)) => Err(StoreError::Redis {
                command,
                message: e.to_string(),
            }),
            Err(_) => Err(StoreError::Timeout { command }),
        };
        self.observer
            .command(command, started.elapsed(), result.as_ref().err());
        self.record(&result);
        result
    }

    /// Redis's clock in epoch milliseconds (`TIME`), the only clock scripts use.
    pub async fn time_ms(&self) -> Result<Millis, StoreError> {
        let (secs, micros): (u64, u64) = self
            .run("time", |mut con| async move {
                redis::cmd("TIME").query_async(&mut con).await
            })
            .await?;
        Ok(secs.saturating_mul(1000).saturating_add(micros / 1000))
    }

    /// `PING`: the health probe.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let _: String = self
            .run("ping", |mut con| async move {
                redis::cmd("PING").query_async(&mut con).await
            })
            .await?;
        Ok(())
    }

    fn record<T>(&self, result: &Result<T, StoreError>) {
        let now = self.elapsed_ms();
        let transition = self.health.lock().ok().and_then(|mut h| match result {
            Ok(_) => h.on_success(),
            // A protocol error means Redis answered: the link is fine.
            Err(StoreError::Protocol { .. }) => h.on_success(),
            Err(_) => h.on_failure(now),
        });
        if let Some((from, to)) = transition {
            self.observer.state_changed(from, to);
        }
    }

    fn elapsed_ms(&self) -> Millis {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(Millis::MAX)
    }
}

/// Client errors may quote the URL; never let a password in it reach a log.
fn redact_url_error(message: &str, url: &str) -> String {
    match url.split_once('@') {
        Some((credentials, _)) if !credentials.is_empty() => message.replace(credentials, "***"),
        _ => message.to_owned(),
    }
}
