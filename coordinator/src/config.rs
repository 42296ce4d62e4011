//! What the coordinator takes from the node config file and its environment.
//!
//! Why one file for both: operators keep a single `switchyard.toml` for the whole deployment.
//! The coordinator uses its `[cluster]` section (Redis URL, key prefix, node TTL), `[auth]`
//! (the management bearer) and the provider/connection catalogue (which breakers, cooldowns and
//! leases to read). Upstream keys are never resolved here: the coordinator does not call
//! upstreams, so it must not need their secrets.

use std::net::SocketAddr;
use std::path::Path;

use switchyard_shared::Millis;
use switchyard_shared::admin_kit;
use switchyard_shared::config::{ClusterMode, Config, ConfigErrors};
use switchyard_store::{HealthPolicy, RedisStoreConfig};

/// Overrides `[cluster] redis_url` (same variable as on nodes).
pub use switchyard_store::{REDIS_URL_ENV, redact_url};
/// Overrides the listen address.
pub const LISTEN_ENV: &str = "SWITCHYARD_COORDINATOR_LISTEN";
/// The leader lease TTL in milliseconds (default [`DEFAULT_LEASE_TTL_MS`]).
pub const LEASE_TTL_ENV: &str = "SWITCHYARD_COORDINATOR_LEASE_TTL_MS";
/// How often the leader runs its janitor pass (default [`DEFAULT_JANITOR_INTERVAL_MS`]).
pub const JANITOR_INTERVAL_ENV: &str = "SWITCHYARD_COORDINATOR_JANITOR_INTERVAL_MS";
/// How often the dashboard's history samples the nodes (default [`DEFAULT_HISTORY_INTERVAL_MS`]).
pub const HISTORY_INTERVAL_ENV: &str = "SWITCHYARD_COORDINATOR_HISTORY_INTERVAL_MS";
/// This replica's id (default: `[server] node_id`, then the host name).
pub const ID_ENV: &str = "SWITCHYARD_COORDINATOR_ID";

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9100";
pub const DEFAULT_LEASE_TTL_MS: Millis = 10_000;
pub const DEFAULT_JANITOR_INTERVAL_MS: Millis = 5_000;
pub const DEFAULT_HISTORY_INTERVAL_MS: Millis = crate::history::DEFAULT_INTERVAL_MS;

/// Everything the coordinator needs, resolved once at startup.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub listen: SocketAddr,
    /// The Redis URL with any password (never logged; see [`redact_url`]).
    pub redis_url: String,
    pub management_key_sha256: Option<[u8; 32]>,
    /// Digests of the configured client keys, so a client key gets 403 instead of 401.
    pub client_key_sha256: Vec<[u8; 32]>,
    pub coordinator_id: String,
    pub lease_ttl_ms: Millis,
    pub janitor_interval_ms: Millis,
    pub history_interval_ms: Millis,
}

/// A startup problem, printed and turned into exit code 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupError(pub String);

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn config_errors(e: &ConfigErrors) -> StartupError {
    let lines: Vec<String> = e.errors.iter().map(ToString::to_string).collect();
    StartupError(lines.join("; "))
}

impl Settings {
    /// Loads `path` and resolves the environment through `env`.
    pub fn load(
        path: &Path,
        listen: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, StartupError> {
        let config = Config::load(path).map_err(|e| config_errors(&e))?;
        Self::from_config(config, listen, env)
    }

    pub fn from_config(
        config: Config,
        listen: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, StartupError> {
        if config.cluster.mode != ClusterMode::Redis {
            return Err(StartupError(
                "the coordinator needs [cluster] mode = \"redis\"".to_owned(),
            ));
        }
        let listen_text = env(LISTEN_ENV)
            .filter(|v| !v.trim().is_empty())
            .or_else(|| listen.map(str::to_owned))
            .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen = listen_text
            .trim()
            .parse()
            .map_err(|_| StartupError(format!("invalid listen address {listen_text:?}")))?;
        let redis_url = switchyard_store::effective_url(&config.cluster.redis_url, env);
        let management_key_sha256 = management_key(&config, env)?;
        let client_key_sha256 = client_keys(&config, env);
        let coordinator_id = env(ID_ENV)
            .filter(|v| !v.trim().is_empty())
            .or_else(|| Some(config.server.node_id.clone()).filter(|v| !v.is_empty()))
            .or_else(host_name)
            .unwrap_or_else(|| "coordinator".to_owned());
        let lease_ttl_ms = env_millis(env, LEASE_TTL_ENV, DEFAULT_LEASE_TTL_MS)?.max(300);
        let janitor_interval_ms =
            env_millis(env, JANITOR_INTERVAL_ENV, DEFAULT_JANITOR_INTERVAL_MS)?.max(100);
        let history_interval_ms =
            env_millis(env, HISTORY_INTERVAL_ENV, DEFAULT_HISTORY_INTERVAL_MS)?.max(100);
        Ok(Self {
            config,
            listen,
            redis_url,
            management_key_sha256,
            client_key_sha256,
            coordinator_id,
            lease_ttl_ms,
            janitor_interval_ms,
            history_interval_ms,
        })
    }

    /// The store configuration: the nodes' `[cluster]` values.
    pub fn store_config(&self) -> RedisStoreConfig {
        RedisStoreConfig {
            url: self.redis_url.clone(),
            key_prefix: self.config.cluster.key_prefix.clone(),
            timeout_ms: self.config.cluster.redis_timeout_ms,
            health: HealthPolicy::default(),
        }
    }
}

fn env_millis(
    env: &dyn Fn(&str) -> Option<String>,
    name: &str,
    default: Millis,
) -> Result<Millis, StartupError> {
    match env(name).filter(|v| !v.trim().is_empty()) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| StartupError(format!("{name} must be a number of milliseconds"))),
    }
}

fn management_key(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<[u8; 32]>, StartupError> {
    let name = &config.auth.management_key_env;
    if name.is_empty() {
        return Ok(None);
    }
    match env(name).filter(|v| !v.is_empty()) {
        Some(key) => Ok(Some(admin_kit::auth::digest(&key))),
        None => Err(StartupError(format!(
            "the management bearer variable {name} (auth.management_key_env) is not set"
        ))),
    }
}

/// Client keys whose variable is set here or whose digest is in the file; others are skipped
/// (the coordinator only needs them to answer 403 rather than 401).
fn client_keys(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Vec<[u8; 32]> {
    config
        .api_keys
        .iter()
        .filter_map(|key| match (&key.key_env, &key.key_sha256) {
            (Some(var), _) => env(var)
                .filter(|v| !v.is_empty())
                .map(|v| admin_kit::auth::digest(&v)),
            (None, Some(hex_digest)) => hex::decode(hex_digest.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok()),
            (None, None) => None,
        })
        .collect()
}

fn host_name() -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text =
            format!("[cluster]\nmode = \"redis\"\n{extra}\n[auth]\nrequire_api_key = false\n");
        Config::from_toml_str(&text).unwrap()
    }

    trait WithEnv {
        fn with_management_env(self, name: &str) -> Self;
    }

    impl WithEnv for Config {
        fn with_management_env(mut self, name: &str) -> Self {
            self.auth.management_key_env = name.to_owned();
            self
        }
    }

    #[test]
    fn env_overrides_listen_and_url_and_the_key_is_required() {
        let env = |k: &str| match k {
            LISTEN_ENV => Some("127.0.0.1:9999".to_owned()),
            REDIS_URL_ENV => Some("redis://:pw@127.0.0.1:1/0".to_owned()),
            "SWITCHYARD_MANAGEMENT_KEY" => Some("m".to_owned()),
            _ => None,
        };
        let s = Settings::from_config(config(""), Some("127.0.0.1:1"), &env).unwrap();
        assert_eq!(s.listen.port(), 9999);
        assert_eq!(redact_url(&s.redis_url), "redis://***@127.0.0.1:1/0");
        assert!(s.management_key_sha256.is_some());
        let missing = Settings::from_config(config(""), None, &|_| None);
        assert!(missing.is_err());
        let off =
            Settings::from_config(config("").with_management_env(""), None, &|_| None).unwrap();
        assert_eq!(off.listen.port(), 9100);
        assert!(off.management_key_sha256.is_none());
    }

    #[test]
    fn embedded_mode_is_refused() {
        let c = Config::from_toml_str("[auth]\nrequire_api_key = false\n").unwrap();
        assert!(Settings::from_config(c, None, &|_| Some("k".into())).is_err());
    }
}
