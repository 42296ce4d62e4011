//! Redis Cluster (cluster mode enabled): the URL form, the cluster client, and the node the
//! subscriber uses.
//!
//! Why: the sharded managed offerings (ElastiCache with cluster mode enabled, Memorystore for
//! Redis Cluster, Azure's OSS cluster policy) speak only the cluster protocol. `redis-rs` has
//! the async cluster client but no URL for a list of seed nodes, so the URL is parsed here.
//!
//! Form: `redis+cluster://[user:password@]host:port[,host:port…][/][?query][#fragment]`, or
//! `rediss+cluster://…` for TLS. The hosts are seeds (a managed offering's configuration or
//! discovery endpoint is one): the client learns the cluster from `CLUSTER SLOTS` and follows
//! its changes. Credentials, TLS, the query (e.g. `protocol=resp3`) and the fragment (e.g.
//! `#insecure`) apply to every node. Redis Cluster has only database 0.
//!
//! Pub/sub: a `PUBLISH` on any node of a Redis Cluster reaches the subscribers of every node, so
//! the subscriber needs no routing. It connects to the seed it used last while that one
//! answers, else to the next seed that does, so losing the node it was on (a killed master, a
//! drained pod) moves it on rather than retrying a dead address.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::Client;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

use super::error::StoreError;

/// A parsed `redis+cluster://` URL: one `redis://` (or `rediss://`) URL per seed node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterUrl {
    pub nodes: Vec<String>,
}

impl ClusterUrl {
    /// `None` when `url` is not a cluster URL; an error when it is one but malformed.
    pub fn parse(url: &str) -> Option<Result<Self, StoreError>> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
            ("redis", rest)
        } else if let Some(rest) = url.strip_prefix("rediss+cluster://") {
            ("rediss", rest)
        } else {
            return None;
        };
        Some(Self::parse_rest(scheme, rest))
    }

    fn parse_rest(scheme: &str, rest: &str) -> Result<Self, StoreError> {
        let bad = |why: &str| StoreError::Config(format!("cluster URL: {why}"));
        let (credentials, rest) = match rest.rsplit_once('@') {
            Some((c, r)) => (format!("{c}@"), r),
            None => (String::new(), rest),
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (hosts, tail) = rest.split_at(end);
        let (path, options) = match tail.find(['?', '#']) {
            Some(at) => tail.split_at(at),
            None => (tail, ""),
        };
        if !matches!(path, "" | "/" | "/0") {
            return Err(bad("Redis Cluster has only database 0"));
        }
        let nodes: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| format!("{scheme}://{credentials}{h}{options}"))
            .collect();
        if nodes.is_empty() {
            return Err(bad("no node address"));
        }
        Ok(Self { nodes })
    }
}

/// The cluster an install runs on: the client that builds the cluster connections, and one
/// plain client per seed for the subscriber.
pub(crate) struct ClusterTarget {
    client: ClusterClient,
    seeds: Vec<Client>,
    /// The seed handed out last: the next [`ClusterTarget::subscriber_client`] tries it first.
    current_seed: AtomicUsize,
}

impl ClusterTarget {
    /// Builds the clients without connecting. `timeout` is the per-command timeout: the
    /// cluster client's own connect, response and retry waits stay within it.
    pub fn new(url: &ClusterUrl, timeout: Duration) -> Result<Self, StoreError> {
        let config = |e: redis::RedisError| StoreError::Config(format!("cluster URL: {e}"));
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let client = ClusterClient::builder(url.nodes.iter().map(String::as_str))
            .connection_timeout(timeout)
            .response_timeout(timeout)
            // The client retries a command on a redirection or a lost node; a few short waits
            // (the library's default first wait is over a second) so a retry can land within
            // one command timeout, after which the store's own health gate takes over.
            .retries(3)
            .min_retry_wait(10)
            .max_retry_wait((timeout_ms / 4).max(11))
            .build()
            .map_err(config)?;
        let seeds = url
            .nodes
            .iter()
            .map(|n| Client::open(n.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(config)?;
        if seeds.is_empty() {
            return Err(StoreError::Config(
                "cluster URL: no node address".to_owned(),
            ));
        }
        Ok(Self {
            client,
            seeds,
            current_seed: AtomicUsize::new(0),
        })
    }

    /// A cluster connection that connects in the background; commands sent before it is up
    /// wait for it (bounded by the store's timeout). Must be called inside a tokio runtime.
    pub fn connection(&self) -> ClusterConnection {
        self.client
            .get_pending_async_connection_with_config(redis::cluster::ClusterConfig::new())
    }

    /// The first seed's client (before any subscriber asked for one).
    pub fn first_seed(&self) -> Client {
        self.seeds[0].clone()
    }

    /// A client for the subscriber: the first seed that answers a `PING` within `timeout`,
    /// starting with the one handed out last (a subscriber rebuilt while its node is fine stays
    /// there); when none answers, the seed after the last one, so retries cycle.
    pub async fn subscriber_client(&self, timeout: Duration) -> Client {
        let n = self.seeds.len();
        let start = self.current_seed.load(Ordering::Relaxed) % n;
        for i in 0..n {
            let at = (start + i) % n;
            if answers_ping(&self.seeds[at], timeout).await {
                self.current_seed.store(at, Ordering::Relaxed);
                return self.seeds[at].clone();
            }
        }
        let next = (start + 1) % n;
        self.current_seed.store(next, Ordering::Relaxed);
        self.seeds[next].clone()
    }
}

async fn answers_ping(client: &Client, timeout: Duration) -> bool {
    let ping = async {
        let mut con = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut con).await
    };
    matches!(tokio::time::timeout(timeout, ping).await, Ok(Ok(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seeds_credentials_tls_and_options() {
        let u = ClusterUrl::parse("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7001/")
            .unwrap()
            .unwrap();
        assert_eq!(
            u.nodes,
            vec!["redis://u:p@10.0.0.1:7000", "redis://u:p@10.0.0.2:7001"]
        );
        let t = ClusterUrl::parse("rediss+cluster://:pw@cfg.example:6379/0#insecure")
            .unwrap()
            .unwrap();
        assert_eq!(t.nodes, vec!["rediss://:pw@cfg.example:6379#insecure"]);
        let q = ClusterUrl::parse("redis+cluster://a:1, b:2?protocol=resp3")
            .unwrap()
            .unwrap();
        assert_eq!(
            q.nodes,
            vec!["redis://a:1?protocol=resp3", "redis://b:2?protocol=resp3"]
        );
    }

    #[test]
    fn other_urls_are_not_cluster_urls_and_bad_ones_fail() {
        assert!(ClusterUrl::parse("redis://127.0.0.1:7000/0").is_none());
        assert!(ClusterUrl::parse("redis+sentinel://h:1/m").is_none());
        assert!(ClusterUrl::parse("redis+cluster://").unwrap().is_err());
        assert!(ClusterUrl::parse("redis+cluster://,/").unwrap().is_err());
        let db = ClusterUrl::parse("redis+cluster://h:1/2")
            .unwrap()
            .unwrap_err();
        assert!(db.to_string().contains("database 0"), "{db}");
    }

    #[test]
    fn the_client_takes_every_seed_and_rejects_a_bad_one() {
        let url = ClusterUrl::parse("redis+cluster://127.0.0.1:1,127.0.0.1:2")
            .unwrap()
            .unwrap();
        let target = ClusterTarget::new(&url, Duration::from_millis(250)).unwrap();
        assert_eq!(target.seeds.len(), 2);
        let bad = ClusterUrl {
            nodes: vec!["redis://h:notaport".to_owned()],
        };
        assert!(matches!(
            ClusterTarget::new(&bad, Duration::from_millis(250)),
            Err(StoreError::Config(_))
        ));
    }

    #[tokio::test]
    async fn the_subscriber_client_moves_to_the_next_seed_when_none_answers() {
        // Nothing listens on these ports (1 and 2 are privileged and unused on loopback), so
        // every attempt fails and each call hands out the next seed in turn. (Staying on a
        // seed that answers is covered by the Redis Cluster failover test.)
        let url = ClusterUrl::parse("redis+cluster://127.0.0.1:1,127.0.0.1:2")
            .unwrap()
            .unwrap();
        let target = ClusterTarget::new(&url, Duration::from_millis(250)).unwrap();
        let first = target.subscriber_client(Duration::from_millis(200)).await;
        let second = target.subscriber_client(Duration::from_millis(200)).await;
        let port = |c: &Client| c.get_connection_info().addr().to_string();
        assert_ne!(port(&first), port(&second));
    }
}
