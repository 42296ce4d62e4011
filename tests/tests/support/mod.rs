//! The one support module of the black-box test binaries (`node`, `cluster`, `coordinator`,
//! `store`, `deploy`, `harness`): each binary includes it with `#[path]`, so every binary sees
//! the same helpers and uses the subset it needs.
//!
//! Tests wait for conditions, never for time: [`eventually`] polls a condition (the admin API,
//! the metrics, a mock's counters) until it holds or a generous deadline passes.

// clippy's allow-*-in-tests settings cover `#[test]` functions only, not these helpers;
// failing loudly is what a test helper should do. Each binary uses a different subset.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

pub mod coordinator;
pub mod http;
pub mod node;
pub mod scenario;
pub mod webdriver;

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a test waits for state that follows from something it just did (an observation
/// applied by an actor, a value published to the cluster). Generous: the wait ends as soon as
/// the state is there, so only a failing test pays for it.
pub const STATE_DEADLINE: Duration = Duration::from_secs(10);

/// How often [`eventually`] looks again.
const POLL_EVERY: Duration = Duration::from_millis(25);

/// What a polled condition reports: `bool`, or `Option<T>` to hand back what it found.
pub trait Outcome {
    fn holds(&self) -> bool;
}

impl Outcome for bool {
    fn holds(&self) -> bool {
        *self
    }
}

impl<T> Outcome for Option<T> {
    fn holds(&self) -> bool {
        self.is_some()
    }
}

/// Polls `condition` until it holds or `deadline` has passed, and returns its last outcome
/// (`true`/`Some` when it held). A condition that needs no `.await` can return
/// `std::future::ready(..)`.
pub async fn eventually<O, F, Fut>(deadline: Duration, mut condition: F) -> O
where
    O: Outcome,
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
{
    let end = Instant::now() + deadline;
    loop {
        let outcome = condition().await;
        if outcome.holds() || Instant::now() >= end {
            return outcome;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Waits until every node in redis mode says it is in sync with Redis (its health's
/// `cluster_degraded` is false); fails naming the first node that is not, after 15 s.
pub async fn wait_synced(nodes: &[&switchyard_tests::harness::NodeProcess]) {
    for node in nodes {
        let admin = node.admin;
        assert!(
            eventually(Duration::from_secs(15), || async move {
                !switchyard_tests::cluster::cluster_degraded_async(admin).await
            })
            .await,
            "{} did not sync",
            node.client_url()
        );
    }
}
