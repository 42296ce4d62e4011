//! What the checker reads besides the clients' records: the cluster's event channel (every
//! cooldown, terminal state, lockout and breaker transition with its origin and time), the
//! nodes' resident memory and open descriptors over time, and the state each node reports
//! at the end.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use switchyard_shared::wire::{self, Envelope};
use switchyard_store::KeySpace;

use crate::cluster::{metric, metrics_text};

/// The key prefix of the test cluster (see [`crate::cluster::CLUSTER_TABLE`]).
pub const KEY_PREFIX: &str = "sy-test:";

/// One event as received, with the receiver's wall clock.
#[derive(Debug, Clone)]
pub struct Seen {
    pub received_ms: u64,
    pub envelope: Envelope,
}

/// Records every event published on the cluster channel (reconnecting across Redis restarts).
///
/// It listens with `PSUBSCRIBE` on the channel's exact name, where the nodes `SUBSCRIBE`: so
/// in `CLIENT LIST` the nodes' subscribers have `sub=1` and the observer `sub=0`, and the
/// subscriber-kill fault can cut the nodes' subscriptions without blinding the checker.
pub struct EventLog {
    pub events: Arc<Mutex<Vec<Seen>>>,
    /// Payloads that did not decode.
    pub undecodable: Arc<Mutex<u64>>,
    task: tokio::task::JoinHandle<()>,
}

impl EventLog {
    pub fn start(redis_url: &str) -> redis::RedisResult<Self> {
        let client = redis::Client::open(redis_url)?;
        let channel = KeySpace::new(KEY_PREFIX).events_channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let undecodable = Arc::new(Mutex::new(0));
        let (ev, bad) = (Arc::clone(&events), Arc::clone(&undecodable));
        let task = tokio::spawn(async move {
            // Ends with the run (the task is aborted on drop); a lost connection is made again.
            loop {
                if let Ok(mut pubsub) = client.get_async_pubsub().await
                    && pubsub.psubscribe(&channel).await.is_ok()
                {
                    let mut messages = pubsub.on_message();
                    while let Some(msg) = messages.next().await {
                        record(msg.get_payload_bytes(), &ev, &bad);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Ok(Self {
            events,
            undecodable,
            task,
        })
    }

    pub fn snapshot(&self) -> Vec<Seen> {
        self.events.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn record(payload: &[u8], events: &Mutex<Vec<Seen>>, undecodable: &Mutex<u64>) {
    match wire::decode(payload) {
        Ok(envelope) => {
            if let Ok(mut v) = events.lock() {
                v.push(Seen {
                    received_ms: epoch_ms(),
                    envelope,
                });
            }
        }
        Err(_) => {
            if let Ok(mut n) = undecodable.lock() {
                *n += 1;
            }
        }
    }
}

/// Wall clock, epoch milliseconds.
pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// One resource sample of one node process.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub node: usize,
    /// Offset from the run's start.
    pub at: Duration,
    pub rss_kib: u64,
    pub fds: u64,
}

/// Reads a process's resident set (KiB) and open descriptor count from `/proc`.
pub fn sample_process(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some((rss, fds))
}

/// Least-squares slope of `(x, y)` points (y per unit of x); 0 with fewer than 2 points.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

/// What one node reports once the load has stopped.
#[derive(Debug, Clone, Default)]
pub struct NodeEnd {
    pub node: usize,
    pub in_flight: f64,
    pub semaphore_in_flight: f64,
    pub permits_held: f64,
    pub requests_total: f64,
    pub tokens_total: f64,
    /// `switchyard_breaker_state` per provider (0 closed … 3 open).
    pub breakers: Vec<(String, f64)>,
    /// Connection ids the node reports as terminal.
    pub terminal: Vec<String>,
    pub metrics: String,
    pub health: String,
}

/// Sum of every sample of `family` (all label sets).
pub fn family_sum(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Reads a node's end state; waits up to `settle` for its gauges to drain first.
pub fn node_end(node: usize, admin: SocketAddr, providers: &[&str], settle: Duration) -> NodeEnd {
    let deadline = Instant::now() + settle;
    let mut text = metrics_text(admin);
    // Bounded by `settle`: gauges drain as the last streams end and permit blocks shrink.
    while Instant::now() < deadline
        && (family_sum(&text, "switchyard_in_flight_requests") > 0.0
            || family_sum(&text, "switchyard_semaphore_in_flight") > 0.0
            || family_sum(&text, "switchyard_cluster_permits_held") > 0.0)
    {
        std::thread::sleep(Duration::from_millis(200));
        text = metrics_text(admin);
    }
    let health = crate::cluster::http_get(admin, "/api/monitoring/health")
        .map(|(_, b)| b)
        .unwrap_or_default();
    let rows = crate::cluster::http_get(admin, "/api/resilience/cooldowns")
        .map(|(_, b)| b)
        .unwrap_or_default();
    let terminal = serde_json::from_str::<serde_json::Value>(&rows)
        .ok()
        .and_then(|v| {
            v["connections"].as_array().map(|list| {
                list.iter()
                    .filter(|c| c["terminal"].is_string())
                    .filter_map(|c| c["id"].as_str().map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default();
    NodeEnd {
        node,
        in_flight: family_sum(&text, "switchyard_in_flight_requests"),
        semaphore_in_flight: family_sum(&text, "switchyard_semaphore_in_flight"),
        permits_held: family_sum(&text, "switchyard_cluster_permits_held"),
        requests_total: family_sum(&text, "switchyard_requests_total"),
        tokens_total: family_sum(&text, "switchyard_gen_ai_client_token_usage_total"),
        breakers: providers
            .iter()
            .map(|p| {
                let v = metric(
                    &text,
                    &format!("switchyard_breaker_state{{provider=\"{p}\"}}"),
                )
                .unwrap_or(-1.0);
                ((*p).to_owned(), v)
            })
            .collect(),
        terminal,
        metrics: text,
        health,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_and_of_noise() {
        let line: Vec<(f64, f64)> = (0..10)
            .map(|x| (f64::from(x), 3.0 * f64::from(x) + 1.0))
            .collect();
        assert!((slope(&line) - 3.0).abs() < 1e-9);
        assert_eq!(slope(&[(1.0, 2.0)]), 0.0);
        assert_eq!(slope(&[(1.0, 2.0), (1.0, 5.0)]), 0.0);
    }

    #[test]
    fn family_sums_add_every_label_set_and_skip_longer_names() {
        let text = "# HELP x\nfoo{a=\"1\"} 2\nfoo{a=\"2\"} 3\nfoo_bar 7\nfoo 1\n";
        assert_eq!(family_sum(text, "foo"), 6.0);
        assert_eq!(family_sum(text, "foo_bar"), 7.0);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let (rss, fds) = sample_process(std::process::id()).unwrap_or((0, 0));
        assert!(rss > 0 && fds > 0);
    }
}
