//! The sampling loop: every interval, read the node set, fetch each live node's `/metrics`
//! and record the round. Runs on every replica (each keeps its own view; nothing is written
//! to Redis), off every request path.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use super::exposition::{self, NodeCounters};
use crate::health::NodeState;
use crate::read::{self, epoch_ms};
use crate::service::Coordinator;

/// A node that does not answer within this is left out of the round.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// Samples forever (the server aborts the task on shutdown).
pub async fn run(co: Arc<Coordinator>) {
    let Ok(client) = reqwest::Client::builder()
        .timeout(SCRAPE_TIMEOUT)
        .no_proxy()
        .build()
    else {
        tracing::warn!("history: no HTTP client; charts stay empty");
        return;
    };
    let interval = Duration::from_millis(co.settings.history_interval_ms);
    loop {
        tokio::time::sleep(interval).await;
        let samples = round(&co, &client).await;
        let at = epoch_ms();
        if let Ok(mut h) = co.history.lock() {
            h.record(at, samples, &co.catalogue.providers);
        }
    }
}

/// The admin address to scrape, or `None` for one bound to a wildcard (it names no host the
/// coordinator could reach).
pub fn scrape_url(admin_address: &str) -> Option<String> {
    let host = admin_address.rsplit_once(':').map(|(h, _)| h)?;
    let wildcard = matches!(host, "" | "0.0.0.0" | "[::]" | "::");
    (!wildcard).then(|| format!("http://{admin_address}/metrics"))
}

async fn round(co: &Coordinator, client: &reqwest::Client) -> Vec<(String, NodeCounters)> {
    let Ok(nodes) = read::read_nodes(&co.store).await else {
        return Vec::new();
    };
    let now = epoch_ms();
    let targets: Vec<(String, String)> = nodes
        .iter()
        .filter_map(|n| {
            let hb = n.heartbeat.as_ref()?;
            let age = now.saturating_sub(hb.sent_at_ms);
            if NodeState::of(Some(age), &co.params) != NodeState::Up {
                return None;
            }
            Some((n.id.clone(), scrape_url(&hb.admin_address)?))
        })
        .collect();
    let fetches = targets.into_iter().map(|(node, url)| async move {
        let text = client.get(&url).send().await.ok()?.text().await.ok()?;
        Some((node, exposition::parse(&text)))
    });
    join_all(fetches).await.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_admin_addresses_are_not_scraped() {
        assert_eq!(
            scrape_url("127.0.0.1:9091").as_deref(),
            Some("http://127.0.0.1:9091/metrics")
        );
        assert_eq!(
            scrape_url("node-1.svc:9091").as_deref(),
            Some("http://node-1.svc:9091/metrics")
        );
        assert_eq!(scrape_url("0.0.0.0:9091"), None);
        assert_eq!(scrape_url("[::]:9091"), None);
        assert_eq!(scrape_url("nonsense"), None);
    }
}
