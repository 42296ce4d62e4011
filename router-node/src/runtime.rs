//! The node's runtime: everything built once from the config, split into the routing table
//! a request needs and what only the edges need.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use switchyard_shared::admission::{RateLimit, RateState};
use switchyard_shared::classify::ErrorRule;
use switchyard_shared::config::{Config, ConfigErrors, ModelIndex, ProviderConfig};
use switchyard_shared::provider_cooldown::ProviderCooldownTracker;
use switchyard_shared::restatement::RestatementRule;
use switchyard_shared::settings::{self, EnvLayer, ResilienceSettings};
use switchyard_shared::sse::{ThroughputSettings, WatchConfig};
use switchyard_shared::strategy::StrategyState;

use crate::actors::ActorStats;
use crate::actors::{ConnHandle, ProviderHandle};
use crate::api::auth::{ClientKey, KeyStore};
use crate::clock::Clock;
use crate::cluster::Cluster;
use crate::metrics::Metrics;
use crate::state::{Affinity, LeasePolicy, RequestQueue, SettingsStore};
use crate::transport::{ClientSettings, UpstreamClient, build_client_with};

/// Readiness and draining flags for the probes.
#[derive(Debug, Default)]
pub struct Lifecycle {
    pub ready: AtomicBool,
    pub draining: AtomicBool,
}

/// Node-wide counters (metrics come from these and from the handles).
#[derive(Debug, Default)]
pub struct NodeStats {
    pub inflight: AtomicI64,
    pub requests_total: AtomicU64,
    /// Requests and tokens by key, model and connection, for `GET /api/usage`.
    pub usage: switchyard_shared::usage::ShardedLedger,
}

/// What a request needs, built once per config: the handles and their lookup tables, the
/// model index, the effective settings and the request path's shared state. The request
/// path (`routing`, `leases`, `caps`) takes only this, never the whole [`Runtime`].
pub struct RoutingTable {
    pub index: ModelIndex,
    pub clock: Clock,
    pub settings: ArcSwap<ResilienceSettings>,
    pub providers: Vec<Arc<ProviderHandle>>,
    pub provider_by_id: HashMap<String, usize>,
    pub connections: Vec<Arc<ConnHandle>>,
    pub conn_by_id: HashMap<String, usize>,
    pub combo_state: HashMap<String, Mutex<StrategyState>>,
    pub restatement: Vec<Vec<RestatementRule>>,
    pub error_rules: Vec<Vec<ErrorRule>>,
    pub affinity: Affinity,
    /// The optional windowed provider cooldown (docs/policy.md, `provider_cooldown`); inert unless enabled.
    pub provider_cooldown: Mutex<ProviderCooldownTracker>,
    pub actor_stats: Arc<ActorStats>,
    /// The Prometheus registry and the request path's metric handles.
    pub metrics: Arc<Metrics>,
    /// Cluster membership and the shared store; `None` in embedded mode.
    pub cluster: Option<Arc<Cluster>>,
    /// Which connections are reserved for exclusive session leases.
    pub leases: LeasePolicy,
    /// `[translation]`: what cross-format translation does with fields it does not know.
    pub unknown_params: switchyard_shared::translate::UnknownParams,
    /// `[fallback]`: the global fallback model and the emergency fallback.
    pub fallback: switchyard_shared::config::FallbackConfig,
    /// `[egress_lock]`: which providers' 429s cool their egress siblings.
    pub egress_lock: switchyard_shared::config::EgressLockConfig,
    /// Sessions' pins to combo target orders and their consecutive combo failures.
    pub combo_sessions: Mutex<switchyard_shared::strategy::SessionPins>,
    /// The Claude OAuth usage wall of each connection (node-local).
    pub usage_wall: crate::usage_wall::UsageWall,
    /// Where the sessions of `context-relay` combos were served last.
    pub relay_homes: crate::state::RelayHomes,
}

/// The node's runtime: the [`RoutingTable`] a request needs, plus what only the edges need
/// (client authentication, the admin API, reload and lifecycle). The routing table is its
/// `table` field, reached by name: no `Deref`, so an edge that hands the request path its
/// part says so (`&rt.table`).
pub struct Runtime {
    pub table: RoutingTable,
    pub config: Config,
    pub settings_warnings: Vec<String>,
    pub keys: KeyStore,
    pub key_rates: Mutex<HashMap<String, RateState>>,
    pub node_id: String,
    /// Shared by every runtime of the process (a config reload hands them on).
    pub lifecycle: Arc<Lifecycle>,
    pub stats: Arc<NodeStats>,
    /// 1 for the config the node started with, +1 per applied reload.
    pub generation: u64,
    /// When this config was loaded (Unix ms).
    pub loaded_at_unix_ms: u64,
    pub management_key_sha256: Option<[u8; 32]>,
    /// The persisted settings layer (`PATCH /api/resilience`) and the environment layer, kept
    /// to recompute the effective settings after a patch.
    pub settings_store: SettingsStore,
    /// Test hooks (actor panic injection) are honoured only with `SWITCHYARD_TEST_HOOKS=1`.
    pub test_hooks: bool,
}

impl Runtime {
    /// Builds the runtime from a validated config and an environment lookup (for secrets and
    /// environment-layer settings). Every error is listed.
    pub fn build(
        config: Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigErrors> {
        Self::build_with_clock(config, env, Clock::new())
    }

    /// [`Runtime::build`] on an existing clock: a config reload keeps the node's time base, so
    /// the deadlines it carries over (cooldowns, lockouts, breakers) keep their meaning.
    pub fn build_with_clock(
        config: Config,
        env: &dyn Fn(&str) -> Option<String>,
        clock: Clock,
    ) -> Result<Self, ConfigErrors> {
        let secrets = config.resolve_secrets(env)?;
        let (settings_store, mut settings_warnings) =
            SettingsStore::load(env, EnvLayer::from_lookup(env));
        let built = settings::build(&config, settings_store.env(), &settings_store.persisted());
        settings_warnings.extend(built.warnings.iter().map(|w| w.to_string()));
        // The config's own warnings (an unknown strategy name …) are printed by `--check`
        // and at startup with the settings' ones.
        settings_warnings.extend(config.warnings().iter().map(|w| w.to_string()));
        let values = built.values();
        let index = ModelIndex::build(&config);

        let mut errors = Vec::new();
        let mut providers = Vec::with_capacity(config.providers.len());
        let mut connections = Vec::with_capacity(config.connections.len());
        let mut provider_by_id = HashMap::new();
        let mut conn_by_id = HashMap::new();
        let mut restatement = Vec::new();
        let mut error_rules = Vec::new();
        let mut clients: HashMap<ClientSettings, UpstreamClient> = HashMap::new();
        for (pidx, provider) in config.providers.iter().enumerate() {
            let mut conn_indices = Vec::new();
            // Pooled clients are shared by every provider with the same client settings
            // (connect timeout, HTTP versions, extra roots): building one loads the TLS root
            // store, which a catalogue of 1,000 providers must not do 1,000 times. The pool is
            // keyed by host, so sharing a client shares nothing between providers but the TLS
            // setup.
            let settings = ClientSettings::of(provider);
            let client = match clients.get(&settings) {
                Some(c) => c.clone(),
                None => match build_client_with(&settings) {
                    Ok(c) => {
                        clients.insert(settings, c.clone());
                        c
                    }
                    Err(e) => {
                        errors.push(switchyard_shared::config::ConfigError {
                            path: format!("providers.{}", provider.id),
                            message: format!("cannot build the upstream client: {e}"),
                        });
                        continue;
                    }
                },
            };
            for conn in config.connections_of(&provider.id) {
                let cidx = connections.len();
                let client = client.clone();
                let queue = RequestQueue::new(settings::effective_queue(&values, conn));
                let key = secrets
                    .upstream_keys
                    .get(&conn.id)
                    .map(|s| s.expose().to_owned());
                connections.push(Arc::new(ConnHandle::new(
                    cidx,
                    pidx,
                    conn.clone(),
                    client,
                    key,
                    queue,
                )));
                conn_by_id.insert(conn.id.clone(), cidx);
                conn_indices.push(cidx);
            }
            provider_by_id.insert(provider.id.clone(), pidx);
            let preflight = &config.quota_preflight;
            providers.push(Arc::new(
                ProviderHandle::new(pidx, provider.clone(), conn_indices).with_quota_preflight(
                    preflight
                        .enabled
                        .then(|| preflight.thresholds(&provider.id)),
                ),
            ));
            restatement.push(restatement_rules(provider));
            error_rules.push(operator_rules(provider));
        }
        if !errors.is_empty() {
            return Err(ConfigErrors { errors });
        }
        let keys = KeyStore::new(
            secrets
                .client_keys
                .iter()
                .filter_map(|k| {
                    let cfg = config.api_key(&k.id)?;
                    Some(ClientKey {
                        id: k.id.clone(),
                        sha256: k.sha256,
                        allowed_models: cfg.allowed_models.clone(),
                        allowed_connections: cfg.allowed_connections.clone(),
                        scopes: cfg.scopes.clone(),
                        requests_per_minute: cfg.requests_per_minute,
                    })
                })
                .collect(),
            config.auth.require_api_key,
        );
        let key_rates = config
            .api_keys
            .iter()
            .filter(|k| k.requests_per_minute > 0)
            .map(|k| {
                let limit = RateLimit {
                    requests_per_minute: k.requests_per_minute,
                    min_time_between_requests_ms: 0,
                };
                (k.id.clone(), RateState::new(limit))
            })
            .collect();
        let combo_state = config
            .combos
            .iter()
            .map(|c| (c.name.clone(), Mutex::new(StrategyState::new())))
            .collect();
        let node_id = if config.server.node_id.is_empty() {
            env("HOSTNAME").unwrap_or_else(|| "switchyard-node".to_owned())
        } else {
            config.server.node_id.clone()
        };
        let cluster = Cluster::from_config(&config.cluster, &node_id, env, None)
            .map_err(|e| ConfigErrors { errors: vec![e] })?;
        let affinity = Affinity::new(values.session_affinity.ttl_ms);
        let actor_stats = Arc::new(ActorStats::default());
        let metrics = Metrics::new(
            &config,
            &providers,
            &connections,
            clock,
            actor_stats.clone(),
        )
        .map_err(|e| ConfigErrors {
            errors: vec![switchyard_shared::config::ConfigError {
                path: "metrics".to_owned(),
                message: format!("cannot register the metrics: {e}"),
            }],
        })?;
        let provider_cooldown =
            Mutex::new(ProviderCooldownTracker::new(values.provider_cooldown()));
        Ok(Self {
            table: RoutingTable {
                index,
                clock,
                settings: ArcSwap::from_pointee(values),
                providers,
                provider_by_id,
                connections,
                conn_by_id,
                combo_state,
                restatement,
                error_rules,
                affinity,
                provider_cooldown,
                actor_stats,
                metrics: Arc::new(metrics),
                cluster,
                leases: LeasePolicy::from_config(&config),
                unknown_params: config.translation.unknown_params,
                fallback: config.fallback.clone(),
                egress_lock: config.egress_lock.clone(),
                combo_sessions: Mutex::default(),
                usage_wall: crate::usage_wall::UsageWall::new(config.connections.len()),
                relay_homes: crate::state::RelayHomes::default(),
            },
            settings_warnings,
            keys,
            key_rates: Mutex::new(key_rates),
            node_id,
            lifecycle: Arc::default(),
            stats: Arc::default(),
            generation: 1,
            loaded_at_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            management_key_sha256: secrets.management_key_sha256,
            settings_store,
            test_hooks: env("SWITCHYARD_TEST_HOOKS").is_some_and(|v| v == "1"),
            config,
        })
    }
}

impl RoutingTable {
    pub fn provider(&self, id: &str) -> Option<&Arc<ProviderHandle>> {
        self.provider_by_id
            .get(id)
            .and_then(|i| self.providers.get(*i))
    }

    pub fn connection(&self, id: &str) -> Option<&Arc<ConnHandle>> {
        self.conn_by_id
            .get(id)
            .and_then(|i| self.connections.get(*i))
    }

    /// The stream watchdog configuration of a provider under the current settings.
    pub fn watch_config(&self, provider: &ProviderConfig) -> WatchConfig {
        let settings = self.settings.load();
        let tw = &settings.stream.throughput_watchdog;
        WatchConfig {
            first_content_ms: provider.timeouts.first_content_ms,
            idle_ms: provider.timeouts.idle_ms,
            stall_ms: provider.timeouts.idle_ms,
            throughput: ThroughputSettings {
                enabled: tw.enabled,
                warmup_ms: tw.warmup_ms,
                window_ms: tw.window_ms,
                min_useful_bytes_per_second: tw.min_useful_bytes_per_second,
                min_useful_bytes: tw.min_useful_bytes,
            }
            .clamped(),
        }
    }
}

fn restatement_rules(provider: &ProviderConfig) -> Vec<RestatementRule> {
    provider
        .status_restatement
        .iter()
        .map(|r| {
            RestatementRule::new(
                r.id.clone(),
                r.from_statuses.clone(),
                r.to_status,
                r.text_markers.clone(),
                r.exclude_markers.clone(),
                Some(r.default_retry_after_ms),
            )
        })
        .collect()
}

fn operator_rules(provider: &ProviderConfig) -> Vec<ErrorRule> {
    provider
        .error_rules
        .iter()
        .map(|r| {
            ErrorRule::new(
                r.status,
                &r.pattern,
                r.scope,
                r.reason
                    .unwrap_or(switchyard_shared::outcome::FailureReason::Unknown),
                r.cooldown_ms,
            )
        })
        .collect()
}
