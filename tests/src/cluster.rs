//! A local cluster for black-box tests: one `redis-server` of the test's own and N real
//! `switchyard-node` processes in redis mode.
//!
//! Each node gets `[cluster] mode = "redis"` with short heartbeats and a short Redis timeout,
//! a distinct `node_id`, and its Redis URL through `SWITCHYARD_REDIS_URL`, so a test can point
//! one node at a fault proxy in front of Redis and the others at Redis itself.

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::time::Duration;

use crate::harness::NodeProcess;
use crate::redis_server::RedisServer;

/// The management key every test node gets (its config must say
/// `management_key_env = "SWITCHYARD_MANAGEMENT_KEY"` to enable the admin API).
pub const MGMT_KEY: &str = "cluster-test-mgmt-7f3a9c";

/// The `[cluster]` table every test node runs with.
pub const CLUSTER_TABLE: &str = r#"
[cluster]
mode = "redis"
redis_url = "redis://127.0.0.1:1/0"
key_prefix = "sy-test:"
heartbeat_interval_ms = 500
node_ttl_ms = 3000
redis_timeout_ms = 250
"#;

/// `body` (a node config without listeners) with `node_id` in `[server]` and the cluster
/// table appended.
pub fn node_config(node_id: &str, body: &str) -> String {
    let id_line = format!("node_id = \"{node_id}\"\n");
    let with_id = match body.find("[server]\n") {
        Some(pos) => {
            let at = pos + "[server]\n".len();
            format!("{}{}{}", &body[..at], id_line, &body[at..])
        }
        None => format!("[server]\n{id_line}\n{body}"),
    };
    format!("{with_id}\n{CLUSTER_TABLE}")
}

/// Starts node `node_id` in redis mode against `redis_url` with extra environment `env`.
pub fn start_node(
    node_id: &str,
    redis_url: &str,
    body: &str,
    env: &[(&str, &str)],
) -> std::io::Result<NodeProcess> {
    let mut all: Vec<(&str, &str)> = env.to_vec();
    all.push(("SWITCHYARD_REDIS_URL", redis_url));
    all.push(("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY));
    NodeProcess::start(&node_config(node_id, body), &all)
}

/// One Redis and `n` nodes named `node-0` … `node-{n-1}`.
pub struct TestCluster {
    pub redis: RedisServer,
    pub nodes: Vec<NodeProcess>,
}

impl TestCluster {
    /// Starts Redis, then the nodes one after another (each waits for its `/readyz`).
    pub fn start(n: usize, body: &str, env: &[(&str, &str)]) -> std::io::Result<Self> {
        let redis = RedisServer::start()?;
        let url = redis.url();
        let nodes = (0..n)
            .map(|i| start_node(&format!("node-{i}"), &url, body, env))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self { redis, nodes })
    }

    /// Waits until every node reports itself subscribed and not degraded, up to `timeout`.
    pub fn wait_synced(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if self.nodes.iter().all(|n| !cluster_degraded(n.admin)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

/// Whether the node's health says `cluster_degraded` (true when it cannot be read).
pub fn cluster_degraded(admin: SocketAddr) -> bool {
    http_get(admin, "/api/monitoring/health")
        .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
        .and_then(|v| v["cluster_degraded"].as_bool())
        .unwrap_or(true)
}

/// [`cluster_degraded`] from async code: the admin call blocks, so it runs on the blocking
/// pool (true, as degraded, when that task fails).
pub async fn cluster_degraded_async(admin: SocketAddr) -> bool {
    tokio::task::spawn_blocking(move || cluster_degraded(admin))
        .await
        .unwrap_or(true)
}

/// A blocking HTTP/1.1 GET with the management key, returning the status and body (no client
/// library needed).
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {MGMT_KEY}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Some((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The value of the first sample in a Prometheus text exposition whose line starts with
/// `prefix` (a metric name with its labels, e.g. `foo_total{kind="x"}`).
pub fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The sum of every series of the metric `name` (all label sets), `None` when it has none.
pub fn metric_sum(text: &str, name: &str) -> Option<f64> {
    let values: Vec<f64> = text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// The `/metrics` text of a node's admin listener.
pub fn metrics_text(admin: SocketAddr) -> String {
    http_get(admin, "/metrics")
        .map(|(_, b)| b)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_goes_into_the_server_table_and_the_cluster_table_is_appended() {
        let c = node_config("n1", "[server]\nworkers = 2\n");
        assert!(c.starts_with("[server]\nnode_id = \"n1\"\nworkers = 2"));
        assert!(c.contains("mode = \"redis\""));
        let c = node_config("n2", "[auth]\n");
        assert!(c.starts_with("[server]\nnode_id = \"n2\""));
    }

    #[test]
    fn a_metric_sum_adds_every_label_set_of_that_name_only() {
        let text = "# HELP x\nfoo_total{kind=\"a\"} 3\nfoo_total{kind=\"b\"} 4\nfoo_totals 9\n";
        assert_eq!(metric_sum(text, "foo_total"), Some(7.0));
        assert_eq!(metric_sum(text, "bar_total"), None);
    }

    #[test]
    fn metric_lines_are_found_by_prefix_and_chunks_are_joined() {
        let text = "# HELP x\nfoo_total{kind=\"a\"} 3\nfoo_total{kind=\"b\"} 4\n";
        assert_eq!(metric(text, "foo_total{kind=\"b\"}"), Some(4.0));
        assert_eq!(metric(text, "bar"), None);
        assert_eq!(dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), "abcde");
    }
}
