//! Redis Sentinel: finding the current master, and finding it again after a failover.
//!
//! Why: Kubernetes deployments commonly run Redis as one master with replicas behind Sentinel.
//! A `redis+sentinel://` URL names the sentinels and the monitored master; the store asks a
//! sentinel for the master's address when it first needs a connection and again after a
//! command failed (the old master may be gone, or demoted and read-only). `redis-rs` has the
//! sentinel client but no URL form for it, so the URL is parsed here.
//!
//! Form: `redis+sentinel://[user:password@]host:port[,host:port…]/master_name[/db]`, or
//! `rediss+sentinel://…` for TLS to the Redis nodes. The credentials and the TLS mode apply to
//! the master (and replicas); the sentinels are reached without them.

use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{Client, RedisConnectionInfo, RedisResult, TlsMode};

use super::error::StoreError;

/// A parsed `redis+sentinel://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    /// `redis://host:port` of each sentinel.
    pub sentinels: Vec<String>,
    pub master: String,
    pub db: i64,
    pub username: Option<String>,
    pub password: Option<String>,
    pub tls: bool,
}

impl SentinelUrl {
    /// `None` when `url` is not a sentinel URL; an error when it is one but malformed.
    pub fn parse(url: &str) -> Option<Result<Self, StoreError>> {
        let (tls, rest) = if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            (false, rest)
        } else if let Some(rest) = url.strip_prefix("rediss+sentinel://") {
            (true, rest)
        } else {
            return None;
        };
        Some(Self::parse_rest(tls, rest))
    }

    fn parse_rest(tls: bool, rest: &str) -> Result<Self, StoreError> {
        let bad = |why: &str| StoreError::Config(format!("sentinel URL: {why}"));
        let (credentials, rest) = match rest.rsplit_once('@') {
            Some((c, r)) => (Some(c), r),
            None => (None, rest),
        };
        let (username, password) = match credentials {
            Some(c) => match c.split_once(':') {
                Some((u, p)) => (
                    (!u.is_empty()).then(|| u.to_owned()),
                    (!p.is_empty()).then(|| p.to_owned()),
                ),
                None => ((!c.is_empty()).then(|| c.to_owned()), None),
            },
            None => (None, None),
        };
        let (hosts, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("missing /master_name"))?;
        let mut parts = path.trim_end_matches('/').split('/');
        let master = parts
            .next()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| bad("missing master name"))?
            .to_owned();
        let db = match parts.next() {
            Some(db) => db
                .parse()
                .map_err(|_| bad("the database is not a number"))?,
            None => 0,
        };
        let sentinels: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.trim().is_empty())
            .map(|h| format!("redis://{}", h.trim()))
            .collect();
        if sentinels.is_empty() {
            return Err(bad("no sentinel address"));
        }
        Ok(Self {
            sentinels,
            master,
            db,
            username,
            password,
            tls,
        })
    }

    fn node_info(&self) -> SentinelNodeConnectionInfo {
        let mut redis = RedisConnectionInfo::default().set_db(self.db);
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        let info = SentinelNodeConnectionInfo::default().set_redis_connection_info(redis);
        if self.tls {
            info.set_tls_mode(TlsMode::Secure)
        } else {
            info
        }
    }
}

/// The sentinels of one monitored master.
pub(crate) struct SentinelTarget {
    sentinel: tokio::sync::Mutex<Sentinel>,
    pub master: String,
    /// `redis://host:port` of every sentinel, for their switch events.
    pub sentinels: Vec<String>,
    node: SentinelNodeConnectionInfo,
    /// The first sentinel's URL: the client handed out before the master is known.
    pub first: String,
}

impl SentinelTarget {
    pub fn new(url: &SentinelUrl) -> Result<Self, StoreError> {
        let sentinel = Sentinel::build(url.sentinels.clone())
            .map_err(|e| StoreError::Config(format!("sentinel URL: {e}")))?;
        Ok(Self {
            sentinel: tokio::sync::Mutex::new(sentinel),
            master: url.master.clone(),
            sentinels: url.sentinels.clone(),
            node: url.node_info(),
            first: url.sentinels.first().cloned().unwrap_or_default(),
        })
    }

    /// A client for the current master (the sentinel also checks that it is one).
    pub async fn master(&self) -> RedisResult<Client> {
        let mut sentinel = self.sentinel.lock().await;
        sentinel
            .async_master_for(&self.master, Some(&self.node))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_master_db_and_credentials() {
        let u = SentinelUrl::parse("redis+sentinel://u:p@10.0.0.1:26379,10.0.0.2:26380/main/2")
            .unwrap()
            .unwrap();
        assert_eq!(
            u.sentinels,
            vec!["redis://10.0.0.1:26379", "redis://10.0.0.2:26380"]
        );
        assert_eq!(u.master, "main");
        assert_eq!(u.db, 2);
        assert_eq!(
            (u.username.as_deref(), u.password.as_deref()),
            (Some("u"), Some("p"))
        );
        assert!(!u.tls);
        let t = SentinelUrl::parse("rediss+sentinel://:pw@s:1/m")
            .unwrap()
            .unwrap();
        assert!(t.tls);
        assert_eq!(
            (t.username, t.password.as_deref(), t.db),
            (None, Some("pw"), 0)
        );
    }

    #[test]
    fn other_urls_are_not_sentinel_urls_and_bad_ones_fail() {
        assert!(SentinelUrl::parse("redis://127.0.0.1:7000/0").is_none());
        assert!(SentinelUrl::parse("redis+sentinel://h:1").unwrap().is_err());
        assert!(
            SentinelUrl::parse("redis+sentinel://h:1/")
                .unwrap()
                .is_err()
        );
        assert!(SentinelUrl::parse("redis+sentinel:///m").unwrap().is_err());
        assert!(
            SentinelUrl::parse("redis+sentinel://h:1/m/x")
                .unwrap()
                .is_err()
        );
    }
}
