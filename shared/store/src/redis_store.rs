//! The Redis connection every store operation goes through.
//!
//! One `ConnectionManager` (multiplexed, reconnects by itself) carries the commands; a second
//! one carries bulk reads ([`RedisStore::run_bulk`]: the resync's scans), so a pipeline of
//! hundreds of reads never sits ahead of a lease fence or a bucket take on the same socket;
//! pub/sub uses its own connection (see the subscriber). The bulk connection is made on its
//! first use. In Sentinel and Cluster mode a third one carries the connection-record writes
//! that are followed by `WAIT` ([`RedisStore::run_replicated`]): `WAIT` blocks the connection
//! it is sent on, for up to half the timeout when no replica answers (after a failover the
//! promoted master has none), and it must be sent on the connection that made the writes. On
//! its own lane it holds up neither the request path's commands nor the resync's reads.
//! [`RedisStore::run`] and its lane variants are the only way to reach
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
//!
//! With a `redis+cluster://` URL (see [`super::cluster`]) each lane is a Redis Cluster
//! connection, built on first use, that sends everything to the master of the install's slot
//! (see [`super::connection`]); the keys are hash-tagged with the prefix so that slot holds them
//! all. The cluster connection follows redirections and failovers by itself; when Redis has
//! been declared down the store drops it anyway, so the next probe starts again from the seed
//! nodes instead of retrying addresses that may be gone. Writes wait for a replica as with
//! Sentinel: a Redis Cluster failover promotes the replica.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use redis::{Client, RedisResult};

use super::cluster::{ClusterTarget, ClusterUrl};
use super::connection::{ClusterLink, InstallRoute, StoreConnection};
use super::error::StoreError;
use super::fault::RedisFault;
use super::health::{HealthPolicy, HealthTracker, RedisState};
use super::keys::KeySpace;
use super::master_generation::{MasterGeneration, MasterSeen};
use super::sentinel::{SentinelTarget, SentinelUrl};
use super::sentinel_watch::MasterSwitches;
use switchyard_shared::Millis;

/// Where Redis is and how long a command may take.
#[derive(Debug, Clone)]
pub struct RedisStoreConfig {
    /// `redis://[user:password@]host:port/db`, `rediss://…` for TLS,
    /// `redis+sentinel://[user:password@]host:port[,host:port…]/master_name[/db]`, or
    /// `redis+cluster://[user:password@]host:port[,host:port…]/` (`rediss+…` for TLS).
    pub url: String,
    /// Without its hash tag: on Redis Cluster the store makes it one ([`KeySpace::hash_tagged`]).
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

/// How the store finds its server.
enum Topology {
    /// One server at the URL.
    Server,
    /// The master a sentinel names.
    Sentinel(SentinelTarget),
    /// A Redis Cluster; the install's keys live on `route`'s slot.
    Cluster {
        target: ClusterTarget,
        route: InstallRoute,
    },
}

/// The shared store over one Redis server, a Sentinel-managed master or a Redis Cluster.
pub struct RedisStore {
    /// The client for pub/sub: the server's (in sentinel mode the last master found, before
    /// that the first sentinel; in cluster mode the seed handed out last).
    client: Mutex<Client>,
    /// `None` in sentinel and cluster mode until first used, and again after the connection
    /// was dropped (sentinel: a failed command; cluster: Redis declared down).
    manager: Mutex<Option<StoreConnection>>,
    /// The bulk lane's connection, the same way.
    bulk: Mutex<Option<StoreConnection>>,
    /// The write lane's connection (Sentinel and Cluster mode only), the same way.
    write: Mutex<Option<StoreConnection>>,
    manager_config: redis::aio::ConnectionManagerConfig,
    topology: Topology,
    keys: KeySpace,
    timeout: Duration,
    health: Mutex<HealthTracker>,
    started: Instant,
    observer: Arc<dyn StoreObserver>,
    /// The server that holds the permits (by run id), and how often it changed.
    masters: MasterGeneration,
}

impl RedisStore {
    /// Builds the store without connecting. Fails only on a URL the client cannot use.
    pub fn connect(
        config: &RedisStoreConfig,
        observer: Arc<dyn StoreObserver>,
    ) -> Result<Self, StoreError> {
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        let redact = |e: StoreError| match e {
            StoreError::Config(m) => StoreError::Config(redact_url_error(&m, &config.url)),
            other => other,
        };
        let (topology, keys) = if let Some(parsed) = ClusterUrl::parse(&config.url) {
            let keys = KeySpace::hash_tagged(&config.key_prefix);
            let target = ClusterTarget::new(&parsed.map_err(redact)?, timeout).map_err(redact)?;
            let route = InstallRoute::for_key(&keys.settings());
            (Topology::Cluster { target, route }, keys)
        } else if let Some(parsed) = SentinelUrl::parse(&config.url) {
            let target = SentinelTarget::new(&parsed?)?;
            let keys = KeySpace::new(config.key_prefix.clone());
            (Topology::Sentinel(target), keys)
        } else {
            (Topology::Server, KeySpace::new(config.key_prefix.clone()))
        };
        let client = match &topology {
            Topology::Server => Client::open(config.url.as_str()),
            Topology::Sentinel(s) => Client::open(s.first.as_str()),
            Topology::Cluster { target, .. } => Ok(target.first_seed()),
        }
        .map_err(|e| StoreError::Config(redact_url_error(&e.to_string(), &config.url)))?;
        let manager_config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            // Reconnects are retried by our own health probes; the manager's own retry loop
            // must stay shorter than one command timeout.
            .set_number_of_retries(1)
            .set_max_delay(timeout);
        let lazy = || match topology {
            Topology::Server => {
                ConnectionManager::new_lazy_with_config(client.clone(), manager_config.clone())
                    .map(|m| Some(StoreConnection::Server(m)))
                    .map_err(|e| StoreError::Config(e.to_string()))
            }
            Topology::Sentinel(_) | Topology::Cluster { .. } => Ok(None),
        };
        let manager = lazy()?;
        let bulk = lazy()?;
        Ok(Self {
            write: Mutex::new(None),
            client: Mutex::new(client),
            manager: Mutex::new(manager),
            bulk: Mutex::new(bulk),
            manager_config,
            topology,
            keys,
            timeout,
            health: Mutex::new(HealthTracker::new(config.health)),
            started: Instant::now(),
            observer,
            masters: MasterGeneration::default(),
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
    /// last known client is returned). In cluster mode it is the seed used last if it still
    /// answers, else the next one that does (a `PUBLISH` reaches the subscribers on every
    /// node), so a subscriber rebuilt after its node died moves on.
    pub async fn pubsub_client(&self) -> Client {
        match &self.topology {
            Topology::Server => {}
            Topology::Sentinel(_) => {
                let _ = self.ping().await;
            }
            Topology::Cluster { target, .. } => {
                let client = target.subscriber_client(self.timeout).await;
                if let Ok(mut c) = self.client.lock() {
                    *c = client.clone();
                }
                return client;
            }
        }
        self.client()
    }

    /// Whether the store finds its server through Redis Sentinel.
    pub fn is_sentinel(&self) -> bool {
        matches!(self.topology, Topology::Sentinel(_))
    }

    /// In sentinel mode, the master switches the sentinels announce (see
    /// [`super::sentinel_watch`]); `None` in the other modes.
    pub fn master_switches(&self) -> Option<MasterSwitches> {
        match &self.topology {
            Topology::Sentinel(s) => {
                Some(MasterSwitches::spawn(&s.sentinels, &s.master, self.timeout))
            }
            Topology::Server | Topology::Cluster { .. } => None,
        }
    }

    /// Follows a master switch the sentinels announced: every lane asks the sentinel again on
    /// its next command, and a store held for down probes at once.
    pub fn follow_master_switch(&self) {
        self.forget_connections();
        if let Ok(mut h) = self.health.lock() {
            h.probe_now();
        }
    }

    /// How many times the server holding the permits changed (another run id: a restart, a
    /// Sentinel or Redis Cluster failover), and since when the store has seen the current one.
    /// Read it after a permit call: a change means the call may have run on a server that
    /// lacks the last grants of the one before.
    pub fn master_generation(&self) -> MasterSeen {
        self.masters.current()
    }

    /// A script named the server that ran it (its `run_id`).
    pub(crate) fn saw_server(&self, run_id: &str) {
        self.masters.observe(run_id, Instant::now());
    }

    /// Whether the store runs on a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.topology, Topology::Cluster { .. })
    }

    /// Whether [`RedisStore::pubsub_client`] can name another server than before (Sentinel: the
    /// master moved; Cluster: the next node), so an owner whose subscription is lost should
    /// build its subscriber again from it rather than let it retry the old address.
    pub fn pubsub_server_moves(&self) -> bool {
        !matches!(self.topology, Topology::Server)
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
        F: FnOnce(StoreConnection) -> Fut,
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
        F: FnOnce(StoreConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        self.run_on(Lane::Bulk, command, f).await
    }

    /// A read pipeline of plain commands (none ignored, not a transaction) on the bulk lane,
    /// one reply per command. When Redis Cluster points it elsewhere (a slot on the move: the
    /// keys that already left answer `MOVED`/`ASK`, which the cluster client does not follow
    /// inside a pipeline), the same commands run one at a time, each redirected like any
    /// single command, so the resync keeps reading through a migration.
    pub async fn read_pipeline(
        &self,
        command: &'static str,
        cmds: Vec<redis::Cmd>,
    ) -> Result<Vec<redis::Value>, StoreError> {
        self.read_pipeline_on(Lane::Bulk, command, cmds).await
    }

    /// [`RedisStore::read_pipeline`] on the request lane.
    pub(crate) async fn read_pipeline_now(
        &self,
        command: &'static str,
        cmds: Vec<redis::Cmd>,
    ) -> Result<Vec<redis::Value>, StoreError> {
        self.read_pipeline_on(Lane::Request, command, cmds).await
    }

    async fn read_pipeline_on(
        &self,
        lane: Lane,
        command: &'static str,
        cmds: Vec<redis::Cmd>,
    ) -> Result<Vec<redis::Value>, StoreError> {
        let mut pipe = redis::pipe();
        for cmd in &cmds {
            pipe.add_command(cmd.clone());
        }
        match self
            .run_on(lane, command, |mut con| async move {
                pipe.query_async(&mut con).await
            })
            .await
        {
            Err(e) if e.redirected() => {
                let mut out = Vec::with_capacity(cmds.len());
                for cmd in cmds {
                    out.push(
                        self.run_on(lane, command, |mut con| async move {
                            cmd.query_async(&mut con).await
                        })
                        .await?,
                    );
                }
                Ok(out)
            }
            other => other,
        }
    }

    /// [`RedisStore::run`] for a write that [`RedisStore::replicate`] follows: in Sentinel and
    /// Cluster mode on the write lane, which `replicate` waits on, so its `WAIT` never blocks
    /// the connection the request path uses. With a single server nothing waits, and the
    /// write stays on the request lane (no third connection).
    pub(crate) async fn run_replicated<T, F, Fut>(
        &self,
        command: &'static str,
        f: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(StoreConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let lane = match self.topology {
            Topology::Server => Lane::Request,
            Topology::Sentinel(_) | Topology::Cluster { .. } => Lane::Write,
        };
        self.run_on(lane, command, f).await
    }

    async fn run_on<T, F, Fut>(
        &self,
        lane: Lane,
        command: &'static str,
        f: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(StoreConnection) -> Fut,
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
            Ok(Err(e)) => Err(classify(command, &e)),
            Err(_) => Err(StoreError::Timeout { command }),
        };
        self.observer
            .command(command, started.elapsed(), result.as_ref().err());
        if self.is_sentinel()
            && result
                .as_ref()
                .is_err_and(StoreError::master_may_have_moved)
        {
            // The master may have moved (a timeout, a reset, `READONLY` from a demoted
            // master): ask the sentinel again on the next command. `OOM` is the master
            // refusing a write; it has not moved.
            self.forget_connections();
        }
        let failed = result.as_ref().is_err_and(StoreError::link_failed);
        self.record(&result);
        if failed && self.is_cluster() && self.state() == RedisState::Down {
            // The cluster connection retries the nodes it knows; once Redis is declared down
            // they may all be gone (replaced pods, a new configuration endpoint address), so
            // the next probe starts again from the seeds.
            self.forget_connections();
        }
        result
    }

    fn slot(&self, lane: Lane) -> &Mutex<Option<StoreConnection>> {
        match lane {
            Lane::Request => &self.manager,
            Lane::Bulk => &self.bulk,
            Lane::Write => &self.write,
        }
    }

    /// The lane's multiplexed connection; in sentinel mode found through the sentinel when
    /// unknown, in cluster mode built (connecting in the background) when unknown.
    async fn manager(&self, lane: Lane) -> RedisResult<StoreConnection> {
        if let Some(m) = self.slot(lane).lock().ok().and_then(|m| m.clone()) {
            return Ok(m);
        }
        match &self.topology {
            Topology::Server => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "no Redis connection",
            ))),
            Topology::Sentinel(sentinel) => {
                let client = sentinel.master().await?;
                let manager = StoreConnection::Server(ConnectionManager::new_lazy_with_config(
                    client.clone(),
                    self.manager_config.clone(),
                )?);
                if let Ok(mut c) = self.client.lock() {
                    *c = client;
                }
                if let Ok(mut m) = self.slot(lane).lock() {
                    *m = Some(manager.clone());
                }
                Ok(manager)
            }
            Topology::Cluster { target, route } => {
                let mut slot = self.slot(lane).lock().map_err(|_| {
                    redis::RedisError::from((redis::ErrorKind::Client, "connection lock poisoned"))
                })?;
                // Built under the lock: two first commands must not start two connections.
                let link = slot.get_or_insert_with(|| {
                    StoreConnection::Cluster(ClusterLink::new(target.connection(), route.clone()))
                });
                Ok(link.clone())
            }
        }
    }

    /// Forgets every lane's connection (sentinel mode: the master may have moved; cluster
    /// mode: start again from the seeds).
    fn forget_connections(&self) {
        for slot in [&self.manager, &self.bulk, &self.write] {
            if let Ok(mut m) = slot.lock() {
                *m = None;
            }
        }
    }

    /// In sentinel and cluster mode, waits (bounded by half the command timeout) until a
    /// replica has every write made so far on the write lane (see
    /// [`RedisStore::run_replicated`]), so a failover right after keeps them (in cluster mode
    /// `WAIT` goes to the install's master, which took them). Best effort: an error or a
    /// lagging replica is not the write's failure.
    pub(crate) async fn replicate(&self) {
        if matches!(self.topology, Topology::Server) {
            return;
        }
        let wait_ms = u64::try_from(self.timeout.as_millis() / 2)
            .unwrap_or(0)
            .max(1);
        let _: Result<i64, StoreError> = self
            .run_on(Lane::Write, "wait", |mut con| async move {
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
            // Redis answered: a protocol error, or a write refused by a server that still
            // serves reads (`OOM`). Taking it for down would stop the reads too.
            Err(e) if !e.link_failed() && !matches!(e, StoreError::Unavailable) => h.on_success(),
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

/// The store error for a failed client call, classified by [`RedisFault::of`].
fn classify(command: &'static str, e: &redis::RedisError) -> StoreError {
    match RedisFault::of(e) {
        RedisFault::Timeout => StoreError::Timeout { command },
        fault => StoreError::Redis {
            command,
            fault,
            message: e.to_string(),
        },
    }
}

/// Which connection a command takes.
#[derive(Debug, Clone, Copy)]
enum Lane {
    /// Leases, fences, buckets, permits, writes: short commands that requests wait on.
    Request,
    /// The resync's scans.
    Bulk,
    /// Connection-record writes and the `WAIT` after them (Sentinel and Cluster mode).
    Write,
}

/// Client errors may quote the URL; never let a password in it reach a log. The password is
/// also replaced on its own: a cluster URL's seeds carry it under another scheme.
fn redact_url_error(message: &str, url: &str) -> String {
    let Some((credentials, _)) = url.rsplit_once('@').filter(|(c, _)| !c.is_empty()) else {
        return message.to_owned();
    };
    let message = message.replace(credentials, "***");
    match credentials.rsplit_once(':') {
        Some((_, password)) if !password.is_empty() && !password.starts_with("//") => {
            message.replace(password, "***")
        }
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_never_show_the_password_of_any_url_form() {
        let url = "redis+cluster://app:s3cret@10.0.0.1:7000,10.0.0.2:7000/";
        let message = "cannot connect to redis://app:s3cret@10.0.0.2:7000";
        let redacted = redact_url_error(message, url);
        assert!(!redacted.contains("s3cret"), "{redacted}");
        assert!(redacted.contains("10.0.0.2:7000"), "{redacted}");
        let user_only = redact_url_error("x redis://app@h:1", "redis://app@h:1");
        assert_eq!(user_only, "x ***@h:1");
    }

    #[tokio::test]
    async fn a_cluster_url_makes_a_cluster_store_with_one_hash_tag() {
        let config = RedisStoreConfig {
            url: "redis+cluster://127.0.0.1:1,127.0.0.1:2/".to_owned(),
            key_prefix: "sy:".to_owned(),
            timeout_ms: 100,
            health: HealthPolicy::default(),
        };
        let store = RedisStore::connect(&config, Arc::new(NoopObserver)).unwrap();
        assert!(store.is_cluster() && !store.is_sentinel() && store.pubsub_server_moves());
        assert_eq!(store.keys().prefix(), "{sy}:");
        // Nothing listens there: the first command fails within the timeout, it never hangs.
        let started = Instant::now();
        assert!(store.ping().await.is_err());
        assert!(started.elapsed() < Duration::from_secs(5));
        let bad = RedisStoreConfig {
            url: "redis+cluster://u:pw@h:1/3".to_owned(),
            ..config
        };
        assert!(matches!(
            RedisStore::connect(&bad, Arc::new(NoopObserver)),
            Err(StoreError::Config(_))
        ));
    }
}
