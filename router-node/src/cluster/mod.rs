//! Cluster mode: what a node needs to share resilience state with its peers through Redis.
//!
//! Why: with `[cluster] mode = "redis"` any number of stateless nodes behave as one gateway.
//! [`Cluster`] holds the node's identity in the cluster and the shared [`RedisStore`]; the
//! runtime carries it as `Option<Arc<Cluster>>` (`None` in embedded mode), so everything that
//! differs between the modes asks that one question. The request path never waits on Redis
//! except for leased requests and cluster-wide caps, and then never longer than
//! `redis_timeout_ms`.

use std::sync::Arc;

use rand::Rng as _;
use switchyard_shared::config::{ClusterConfig, ClusterMode, ConfigError};
use switchyard_shared::store::{
    HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig, StoreObserver,
};

/// The environment variable that overrides `[cluster] redis_url`, so a password can come from
/// a Kubernetes Secret instead of the config file.
pub const REDIS_URL_ENV: &str = "SWITCHYARD_REDIS_URL";

/// This node's membership in a redis-mode cluster.
pub struct Cluster {
    pub store: Arc<RedisStore>,
    pub config: ClusterConfig,
    pub node_id: String,
    /// Random per process start: tells a restarted node's writes from its previous life's.
    pub boot_id: String,
}

impl Cluster {
    /// The cluster handle for `config`, or `None` in embedded mode. Builds the store without
    /// connecting (a node starts even when Redis is unreachable).
    pub fn from_config(
        config: &ClusterConfig,
        node_id: &str,
        env: &dyn Fn(&str) -> Option<String>,
        observer: Option<Arc<dyn StoreObserver>>,
    ) -> Result<Option<Arc<Self>>, ConfigError> {
        if config.mode != ClusterMode::Redis {
            return Ok(None);
        }
        let url = env(REDIS_URL_ENV)
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| config.redis_url.clone());
        let store_config = RedisStoreConfig {
            url,
            key_prefix: config.key_prefix.clone(),
            timeout_ms: config.redis_timeout_ms,
            health: HealthPolicy::default(),
        };
        let observer = observer.unwrap_or_else(|| Arc::new(NoopObserver));
        let store = RedisStore::connect(&store_config, observer).map_err(|e| ConfigError {
            path: "cluster.redis_url".to_owned(),
            message: e.to_string(),
        })?;
        let mut config = config.clone();
        config.redis_url = redact_url(&store_config.url);
        Ok(Some(Arc::new(Self {
            store: Arc::new(store),
            config,
            node_id: node_id.to_owned(),
            boot_id: random_id(),
        })))
    }

    /// The token this node presents as the owner of probe and permit leases.
    pub fn owner_token(&self) -> String {
        format!("{}:{}", self.node_id, self.boot_id)
    }
}

/// A Redis URL safe to show in health bodies and logs: any password is replaced.
pub fn redact_url(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(at)) if at > scheme.len() + 3 => {
            let host = &url[at + 1..];
            let user = rest.split_once(':').map_or("", |(u, _)| u);
            if user.is_empty() {
                format!("{scheme}://***@{host}")
            } else {
                format!("{scheme}://{user}:***@{host}")
            }
        }
        _ => url.to_owned(),
    }
}

fn random_id() -> String {
    let bytes: [u8; 8] = rand::rng().random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_survive_redaction() {
        assert_eq!(
            redact_url("redis://:s3cret@10.0.0.1:6380/0"),
            "redis://***@10.0.0.1:6380/0"
        );
        assert_eq!(
            redact_url("rediss://app:s3cret@redis.example:6380"),
            "rediss://app:***@redis.example:6380"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6380/0"),
            "redis://127.0.0.1:6380/0"
        );
    }

    #[test]
    fn embedded_mode_has_no_cluster() {
        let cfg = ClusterConfig::default();
        let cluster = Cluster::from_config(&cfg, "n1", &|_| None, None);
        assert!(matches!(cluster, Ok(None)));
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
