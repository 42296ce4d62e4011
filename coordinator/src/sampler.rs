//! The history's sampling loop (the history itself, pure, is `crate::history`): every interval, read the node set, fetch each live node's `/metrics`
//! and record the round. Runs on every replica (each keeps its own view; nothing is written
//! to Redis), off every request path.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;

use crate::history::exposition::{self, NodeCounters};
use crate::node_state::NodeState;
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

/// The base URL of a node's admin listener, or `None` for one bound to a wildcard (it names
/// no host the coordinator could reach).
pub fn admin_base(admin_address: &str) -> Option<String> {
    let host = admin_address.rsplit_once(':').map(|(h, _)| h)?;
    let wildcard = matches!(host, "" | "0.0.0.0" | "[::]" | "::");
    (!wildcard).then(|| format!("http://{admin_address}"))
}

/// The admin address to scrape (see [`admin_base`]).
pub fn scrape_url(admin_address: &str) -> Option<String> {
    admin_base(admin_address).map(|base| format!("{base}/metrics"))
}

/// `(node id, admin base URL)` of every node whose heartbeat says it is up (or, with
/// `include_stale`, late but not yet down) and whose admin address can be reached.
pub async fn live_admin_addresses(
    co: &Coordinator,
    include_stale: bool,
) -> Result<Vec<(String, String)>, switchyard_store::StoreError> {
    let nodes = read::read_nodes(&co.store).await?;
    let now = epoch_ms();
    Ok(nodes
        .iter()
        .filter_map(|n| {
            let hb = n.heartbeat.as_ref()?;
            let age = now.saturating_sub(hb.sent_at_ms);
            match NodeState::of(Some(age), &co.params) {
                NodeState::Up => {}
                NodeState::Stale if include_stale => {}
                _ => return None,
            }
            Some((n.id.clone(), admin_base(&hb.admin_address)?))
        })
        .collect())
}

async fn round(co: &Coordinator, client: &reqwest::Client) -> Vec<(String, NodeCounters)> {
    let Ok(targets) = live_admin_addresses(co, false).await else {
        return Vec::new();
    };
    let fetches = targets.into_iter().map(|(node, base)| async move {
        let url = format!("{base}/metrics");
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
