//! The Redis connection every store operation goes through.
//!
//! One `ConnectionManager` (multiplexed, reconnects by itself) carries the commands; a second
//! one carries bulk reads ([`RedisStore::run_bulk`]: the resync's scans), so a pipeline of
//! hundreds of reads never sits ahead of a lease fence or a bucket take on the same socket;
//! pub/sub uses its own connection (see the subscriber). The bulk connection is made on its
//! first use. [`RedisStore::run`] is the only way to reach
//! Redis: it skips the call while the health tracker says Redis is down, bounds it by the
//! per-command timeout, feeds the result back into the tracker and reports it to the
//! [`StoreObserver`] (metrics). So no caller can wait on Redis for longer than the timeout.
//!
//! The connection is lazy: building a store never touches the network, so a node starts and
//! serves on local state even when Redis is unreachable at boot.
//!
//! With a `redis+sentinel://` URL (see [`super::sentinel`]) the manager is built for the master
//! a sentinel names, on first use; a failed command drops it, so the next command asks the
//! sentinel again and follows a failover. Connection-record writes then also wait (`WAIT 1`,
//! bounded) for a replica to have them, so a failover right after a cooldown write keeps it.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use redis::{Client, RedisResult};

use super::error::StoreError;
use super::health::{HealthPolicy, HealthTracker, RedisState};
use super::keys::KeySpace;
use super::sentinel::{SentinelTarget, SentinelUrl};
use crate::Millis;

/// Where Redis is and how long a command may take.
#[derive(Debug, Clone)]
pub struct RedisStoreConfig {
    /// `redis://[user:password@]host:port/db`, `rediss://…` for TLS, or
    /// `redis+sentinel://[user:password@]host:port[,host:port…]/master_name[/db]`.
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
    /// The current server's client (in sentinel mode: the last master found, before that
    /// the first sentinel).
    client: Mutex<Client>,
    /// `None` in sentinel mode until the master is known, and again after a failed command.
    manager: Mutex<Option<ConnectionManager>>,
    /// The bulk lane's connection, the same way.
    bulk: Mutex<Option<ConnectionManager>>,
    manager_config: redis::aio::ConnectionManagerConfig,
    sentinel: Option<SentinelTarget>,
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
        let sentinel = match SentinelUrl::parse(&config.url) {
            Some(parsed) => Some(SentinelTarget::new(&parsed?)?),
            None => None,
        };
        let client_url = sentinel
            .as_ref()
            .map_or(config.url.as_str(), |s| s.first.as_str());
        let client = Client::open(client_url)
            .map_err(|e| StoreError::Config(redact_url_error(&e.to_string(), &config.url)))?;
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        let manager_config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            // Reconnects are retried by our own health probes; the manager's own retry loop
            // must stay shorter than one command timeout.
            .set_number_of_retries(1)
            .set_max_delay(timeout);
        let lazy = || match sentinel {
            Some(_) => Ok(None),
            None => ConnectionManager::new_lazy_with_config(client.clone(), manager_config.clone())
                .map(Some)
                .map_err(|e| StoreError::Config(e.to_string())),
        };
        let manager = lazy()?;
        let bulk = lazy()?;
        Ok(Self {
            client: Mutex::new(client),
            manager: Mutex::new(manager),
            bulk: Mutex::new(bulk),
            manager_config,
            sentinel,
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

    /// The client, for the dedicated pub/sub connection. In sentinel mode: the master last
    /// found (a subscriber started before the first command reaches the sentinel instead).
    pub fn client(&self) -> Client {
        match self.client.lock() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The client for a pub/sub connection, after making sure the server is known: in
    /// sentinel mode this asks the sentinel for the master first (best effort; on failure the
    /// last known client is returned).
    pub async fn pubsub_client(&self) -> Client {
        if self.sentinel.is_some() {
            let _ = self.ping().await;
        }
        self.client()
    }

    /// Whether the store finds its server through Redis Sentinel.
    pub fn is_sentinel(&self) -> bool {
        self.sentinel.is_some()
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
        self.run_on(Lane::Request, command, f).await
    }

    /// [`RedisStore::run`] on the bulk connection: for large reads that must not delay the
    /// request path's commands.
    pub(crate) async fn run_bulk<T, F, Fut>(
        &self,
        command: &'static str,
        f: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        self.run_on(Lane::Bulk, command, f).await
    }

    async fn run_on<T, F, Fut>(
        &self,
        lane: Lane,
        command: &'static str,
        f: F,
    ) -> Result<T, StoreError>
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
        let call = async {
            let manager = self.manager(lane).await?;
            f(manager).await
        };
        let result = match tokio::time::timeout(self.timeout, call).await {
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
        if self.sentinel.is_some()
            && matches!(
                result,
                Err(StoreError::Redis { .. } | StoreError::Timeout { .. })
            )
        {
            // The master may have moved: ask the sentinel again on the next command.
            self.forget_connections();
        }
        self.record(&result);
        result
    }

    fn slot(&self, lane: Lane) -> &Mutex<Option<ConnectionManager>> {
        match lane {
            Lane::Request => &self.manager,
            Lane::Bulk => &self.bulk,
        }
    }

    /// The lane's multiplexed connection; in sentinel mode found through the sentinel when
    /// unknown.
    async fn manager(&self, lane: Lane) -> RedisResult<ConnectionManager> {
        if let Some(m) = self.slot(lane).lock().ok().and_then(|m| m.clone()) {
            return Ok(m);
        }
        let Some(sentinel) = &self.sentinel else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "no Redis connection",
            )));
        };
        let client = sentinel.master().await?;
        let manager =
            ConnectionManager::new_lazy_with_config(client.clone(), self.manager_config.clone())?;
        if let Ok(mut c) = self.client.lock() {
            *c = client;
        }
        if let Ok(mut m) = self.slot(lane).lock() {
            *m = Some(manager.clone());
        }
        Ok(manager)
    }

    /// Forgets both lanes' connections (sentinel mode: the master may have moved).
    fn forget_connections(&self) {
        if let Ok(mut m) = self.manager.lock() {
            *m = None;
        }
        if let Ok(mut b) = self.bulk.lock() {
            *b = None;
        }
    }

    /// In sentinel mode, waits (bounded by half the command timeout) until a replica has
    /// every write made so far on this connection, so a failover right after keeps them.
    /// Best effort: an error or a lagging replica is not the write's failure.
    pub(crate) async fn replicate(&self) {
        if self.sentinel.is_none() {
            return;
        }
        let wait_ms = u64::try_from(self.timeout.as_millis() / 2)
            .unwrap_or(0)
            .max(1);
        let _: Result<i64, StoreError> = self
            .run("wait", |mut con| async move {
                redis::cmd("WAIT")
                    .arg(1)
                    .arg(wait_ms)
                    .query_async(&mut con)
                    .await
            })
            .await;
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

/// Which connection a command takes.
#[derive(Debug, Clone, Copy)]
enum Lane {
    /// Leases, fences, buckets, permits, writes: short commands that requests wait on.
    Request,
    /// The resync's scans.
    Bulk,
}

/// Client errors may quote the URL; never let a password in it reach a log.
fn redact_url_error(message: &str, url: &str) -> String {
    match url.split_once('@') {
        Some((credentials, _)) if !credentials.is_empty() => message.replace(credentials, "***"),
        _ => message.to_owned(),
    }
}
