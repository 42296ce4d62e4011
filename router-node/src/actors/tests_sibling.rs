//! The connection actor's side of the egress sibling lock: the lock takes the origin's
//! deadline without touching the level, never shortens a cooldown, and is handed to the
//! cluster writer like any local cooldown.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::Arbiter;
use switchyard_shared::Millis;
use switchyard_shared::admission::QueueSettings;
use switchyard_shared::config::{ConnectionConfig, ProviderConfig};
use switchyard_shared::outcome::{FailureReason, ProviderCategory};
use switchyard_shared::settings::ResilienceSettings;

use super::change::{LocalChange, StatePublisher};
use super::*;
use crate::state::RequestQueue;

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<LocalChange>>);

impl StatePublisher for Recorder {
    fn publish(&self, change: LocalChange) {
        if let Ok(mut changes) = self.0.lock() {
            changes.push(change);
        }
    }
    fn take_probe(&self, _: &Arc<str>, _: u64) -> Option<u64> {
        None
    }
}

fn start(recorder: Arc<Recorder>) -> Arc<ConnHandle> {
    let provider = Arc::new(ProviderHandle::new(
        0,
        ProviderConfig {
            id: "opencode".into(),
            category: ProviderCategory::Apikey,
            ..ProviderConfig::default()
        },
        vec![0],
    ));
    let conn = Arc::new(ConnHandle::new(
        0,
        0,
        ConnectionConfig {
            id: "oc-b".into(),
            provider: "opencode".into(),
            egress: Some("proxy-1".into()),
            ..ConnectionConfig::default()
        },
        crate::transport::build_client(&Default::default()).unwrap(),
        None,
        RequestQueue::new(QueueSettings::default()),
    ));
    let stats = Arc::new(ActorStats::default());
    let publisher: Arc<dyn StatePublisher> = recorder;
    assert!(stats.cluster.set(publisher).is_ok());
    start_actors(
        std::slice::from_ref(&provider),
        std::slice::from_ref(&conn),
        &ResilienceSettings::default(),
        &Arbiter::current(),
        stats,
    );
    conn
}

fn lock(until: Millis, at: Millis) -> SiblingLock {
    SiblingLock {
        until,
        reason: FailureReason::RateLimitExceeded,
        at,
    }
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        actix_rt::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(cond(), "timed out waiting for: {what}");
}

#[actix_rt::test]
async fn a_sibling_lock_cools_and_goes_to_the_cluster_writer() {
    let recorder = Arc::new(Recorder::default());
    let conn = start(recorder.clone());
    assert!(sibling_lock(&conn, lock(61_000, 1_000)));
    eventually("lock published", || conn.load().epoch == 1).await;
    let snap = conn.load();
    assert_eq!(snap.state.rate_limited_until, Some(61_000));
    assert_eq!(snap.state.backoff_level, 0, "the sibling did not fail");
    assert_eq!(snap.state.last_error, None);
    let changes = recorder.0.lock().map(|c| c.clone()).unwrap_or_default();
    assert!(
        matches!(
            changes.as_slice(),
            [LocalChange::Cooldown {
                duration_ms: 60_000,
                level: 0,
                reason: FailureReason::RateLimitExceeded,
                ..
            }]
        ),
        "{changes:?}"
    );

    // A shorter lock changes nothing and writes nothing.
    assert!(sibling_lock(&conn, lock(30_000, 2_000)));
    // A later longer one extends it: its publication orders after the shorter one.
    assert!(sibling_lock(&conn, lock(90_000, 3_000)));
    eventually("second lock published", || conn.load().epoch == 2).await;
    assert_eq!(conn.load().state.rate_limited_until, Some(90_000));
    assert_eq!(recorder.0.lock().map(|c| c.len()).unwrap_or(0), 2);
}
