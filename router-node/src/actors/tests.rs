//! Actor tests. Time is passed as `at` values, so nothing sleeps except short polls that wait
//! for the arbiter to run the actors. The actors run on the test's own arbiter: nothing they do
//! happens until the test yields, which makes mailbox saturation deterministic.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix::{Addr, Arbiter};
use switchyard_shared::Millis;
use switchyard_shared::admission::QueueSettings;
use switchyard_shared::breaker::{Admission, BreakerState, BreakerView, ProbeGeneration};
use switchyard_shared::config::{ConnectionConfig, ProviderConfig};
use switchyard_shared::cooldown::FailureObservation;
use switchyard_shared::lockout::{LockFailure, LockReason, LockoutScope, ModelRef};
use switchyard_shared::outcome::{
    BreakerOutcome, CooldownHint, FailureKind, FailureReason, ProviderCategory, TerminalSignal,
};
use switchyard_shared::settings::ResilienceSettings;

use super::*;
use crate::actors::{ConnHandle, ProviderHandle};
use crate::state::RequestQueue;

const PROVIDER: &str = "acme";
const CONN: &str = "acme-1";
const MODEL: &str = "gpt-x";

struct Node {
    provider: Arc<ProviderHandle>,
    conn: Arc<ConnHandle>,
    stats: Arc<ActorStats>,
}

fn provider_handle(idx: usize, connections: Vec<usize>) -> Arc<ProviderHandle> {
    let config = ProviderConfig {
        id: PROVIDER.into(),
        category: ProviderCategory::Apikey,
        ..ProviderConfig::default()
    };
    Arc::new(ProviderHandle::new(idx, config, connections))
}

fn conn_handle(idx: usize, provider_idx: usize) -> Arc<ConnHandle> {
    let config = ConnectionConfig {
        id: CONN.into(),
        provider: PROVIDER.into(),
        ..ConnectionConfig::default()
    };
    Arc::new(ConnHandle::new(
        idx,
        provider_idx,
        config,
        crate::transport::build_client(&Default::default()).unwrap(),
        None,
        RequestQueue::new(QueueSettings::default()),
    ))
}

/// One provider with one connection, actors started on the current arbiter.
fn start(settings: &ResilienceSettings) -> Node {
    let provider = provider_handle(0, vec![0]);
    let conn = conn_handle(0, 0);
    let stats = Arc::new(ActorStats::default());
    start_actors(
        std::slice::from_ref(&provider),
        std::slice::from_ref(&conn),
        settings,
        &Arbiter::current(),
        stats.clone(),
    );
    Node {
        provider,
        conn,
        stats,
    }
}

/// Polls `cond` (yielding to the actors) for up to a second.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        actix_rt::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(cond(), "timed out waiting for: {what}");
}

fn conn_addr(conn: &ConnHandle) -> Addr<ConnectionActor> {
    conn.actor
        .load_full()
        .map(|addr| (*addr).clone())
        .expect("connection actor address")
}

fn breaker_addr(provider: &ProviderHandle) -> Addr<ProviderBreakerActor> {
    provider.actor.get().expect("breaker actor address")
}

fn model_ref() -> ModelRef<'static> {
    ModelRef {
        provider: PROVIDER,
        connection: CONN,
        model: MODEL,
        family: None,
        per_model_quota: false,
    }
}

fn rate_limited(at: Millis, retry_after_ms: Millis) -> ObserveFailure {
    ObserveFailure {
        model: Arc::from(MODEL),
        observation: FailureObservation {
            status: Some(429),
            reason: FailureReason::RateLimitExceeded,
            hint: CooldownHint::Upstream(retry_after_ms),
            terminal: TerminalSignal::None,
            stream_stall: false,
            message: "rate limited".into(),
        },
        lockout: Some((
            model_ref().key(LockoutScope::Model),
            LockFailure {
                reason: LockReason::RateLimited,
                hint: CooldownHint::Upstream(retry_after_ms),
                reset_after_ms: 0,
            },
        )),
        at,
    }
}

fn banned(at: Millis) -> ObserveFailure {
    ObserveFailure {
        model: Arc::from(MODEL),
        observation: FailureObservation {
            status: Some(403),
            reason: FailureReason::AuthError,
            hint: CooldownHint::None,
            terminal: TerminalSignal::Banned,
            stream_stall: false,
            message: "account deactivated".into(),
        },
        lockout: None,
        at,
    }
}

fn success(at: Millis) -> ObserveSuccess {
    ObserveSuccess {
        model: Arc::from(MODEL),
        started: at,
        started_epoch_ms: 0,
        at,
    }
}

fn epoch(conn: &ConnHandle) -> u64 {
    conn.load().epoch
}

#[actix_rt::test]
async fn failure_sets_cooldown_and_lockout_and_success_clears_them() {
    let node = start(&ResilienceSettings::default());
    assert!(observe(&node.conn, rate_limited(1_000, 2_000)));
    eventually("failure published", || epoch(&node.conn) == 1).await;

    let snap = node.conn.snapshot.load_full();
    assert_eq!(snap.cooldown_remaining(1_000), 2_000);
    assert!(snap.needs_success_report());
    let lock = snap.model_lock(&model_ref(), 1_000).expect("model locked");
    assert_eq!(lock.until, 3_000, "an upstream hint is used exactly");
    assert_eq!(lock.failure_count, 1);
    // The escalation window came from the provider's breaker reset timeout (apikey: 30 s).
    assert_eq!(lock.reset_after_ms, 30_000);

    assert!(observe_success(&node.conn, success(3_500)));
    eventually("success published", || epoch(&node.conn) == 2).await;
    let snap = node.conn.snapshot.load_full();
    assert_eq!(
        snap.cooldown_remaining(1_000),
        0,
        "the cooldown is gone, not just lapsed"
    );
    assert_eq!(snap.state.rate_limited_until, None);
    assert!(
        snap.lockouts.is_empty(),
        "a count of 1 decays to 0 and is removed"
    );
    assert_eq!(node.conn.dropped_observations.load(Ordering::Relaxed), 0);
}

#[actix_rt::test]
async fn a_success_of_an_attempt_older_than_the_failure_clears_nothing() {
    let node = start(&ResilienceSettings::default());
    assert!(observe(&node.conn, rate_limited(1_000, 2_000)));
    eventually("failure published", || epoch(&node.conn) == 1).await;
    // Dispatched at 900, before the 429 at 1 000, finished at 1 200: stale.
    let mut stale = success(1_200);
    stale.started = 900;
    assert!(observe_success(&node.conn, stale));
    // A second 429 queued behind it: had the stale success cleared the cooldown and decayed
    // the lockout, this one would start a new lockout (count 1) in a third publication.
    assert!(observe(&node.conn, rate_limited(1_300, 2_000)));
    let count = |n: &Node| {
        n.conn
            .snapshot
            .load_full()
            .model_lock(&model_ref(), 1_300)
            .map_or(0, |l| l.failure_count)
    };
    eventually("second failure handled", || {
        count(&node) == 2 || epoch(&node.conn) >= 3
    })
    .await;
    assert_eq!(
        count(&node),
        2,
        "the lockout escalated instead of restarting"
    );
    assert_eq!(epoch(&node.conn), 2, "the stale success published nothing");
    assert!(node.conn.snapshot.load_full().cooldown_remaining(1_300) > 0);
}

#[actix_rt::test]
async fn a_peers_success_ends_a_cooldown_unless_a_later_failure_was_seen_here() {
    let node = start(&ResilienceSettings::default());
    let addr = conn_addr(&node.conn);
    let remote = |change, at| ApplyRemote { change, at };
    // A peer's 30 s cooldown, merged here at 1 000.
    addr.send(remote(
        RemoteConn::Cooldown {
            remaining_ms: 30_000,
            level: 1,
            terminal: None,
        },
        1_000,
    ))
    .await
    .unwrap();
    eventually("cooldown merged", || epoch(&node.conn) == 1).await;
    // A success elsewhere of an attempt dispatched at 900: this node saw the failure after
    // that, so the announcement is stale here and the cooldown stays.
    addr.send(remote(RemoteConn::Eased { started: 900 }, 1_100))
        .await
        .unwrap();
    let snap = node.conn.snapshot.load_full();
    assert_eq!(snap.cooldown_remaining(1_100), 29_900);
    assert_eq!(epoch(&node.conn), 1, "a stale announcement changes nothing");
    // Dispatched at 1 050, after the failure: the cooldown ends here too.
    addr.send(remote(RemoteConn::Eased { started: 1_050 }, 1_200))
        .await
        .unwrap();
    eventually("success applied", || epoch(&node.conn) == 2).await;
    let snap = node.conn.snapshot.load_full();
    assert_eq!(snap.cooldown_remaining(1_200), 0);
    assert_eq!(
        snap.state.backoff_level, 0,
        "the level fell by one, as on the origin"
    );
}

#[actix_rt::test]
async fn repeated_lockout_escalates_and_success_halves_it() {
    let node = start(&ResilienceSettings::default());
    let mut failure = rate_limited(1_000, 0);
    if let Some((_, lock)) = failure.lockout.as_mut() {
        lock.hint = CooldownHint::ScaledBackoff;
    }
    failure.observation.hint = CooldownHint::Fixed(1);
    observe(&node.conn, failure.clone());
    failure.at = 2_000;
    observe(&node.conn, failure.clone());
    failure.at = 3_000;
    observe(&node.conn, failure);
    eventually("three failures applied", || {
        node.conn
            .load()
            .lockouts
            .get(&model_ref().key(LockoutScope::Model))
            .is_some_and(|e| e.failure_count == 3)
    })
    .await;

    let before = epoch(&node.conn);
    observe_success(&node.conn, success(4_000));
    eventually("decay published", || epoch(&node.conn) > before).await;
    let entry = node
        .conn
        .load()
        .lockouts
        .get(&model_ref().key(LockoutScope::Model))
        .copied()
        .expect("entry kept");
    assert_eq!(entry.failure_count, 1, "3 halves to 1");
}

#[actix_rt::test]
async fn operator_actions_report_what_they_did() {
    let node = start(&ResilienceSettings::default());
    let addr = conn_addr(&node.conn);

    observe(&node.conn, rate_limited(1_000, 60_000));
    let cleared = addr.send(ClearCooldown { at: 1_001 }).await.expect("reply");
    assert_eq!(
        cleared,
        ClearResult::Cleared {
            lockouts_cleared: 1
        }
    );
    assert_eq!(node.conn.load().cooldown_remaining(1_001), 0);
    let again = addr.send(ClearCooldown { at: 1_002 }).await.expect("reply");
    assert_eq!(again, ClearResult::Unchanged);

    observe(&node.conn, rate_limited(2_000, 60_000));
    let removed = addr
        .send(ClearLockouts {
            model: Some("other-model".into()),
            at: 2_001,
        })
        .await
        .expect("reply");
    assert_eq!(removed, 0);
    let removed = addr
        .send(ClearLockouts {
            model: Some(MODEL.into()),
            at: 2_001,
        })
        .await
        .expect("reply");
    assert_eq!(removed, 1);
    assert!(node.conn.load().lockouts.is_empty());

    observe(&node.conn, banned(3_000));
    let skipped = addr.send(ClearCooldown { at: 3_001 }).await.expect("reply");
    assert_eq!(skipped, ClearResult::SkippedTerminal);
    assert!(node.conn.load().terminal().is_some());
    assert!(addr.send(Reinstate { at: 3_002 }).await.expect("reply"));
    assert!(node.conn.load().terminal().is_none());
    assert!(!addr.send(Reinstate { at: 3_003 }).await.expect("reply"));

    addr.send(SetRateLimitProtection(Some(true)))
        .await
        .expect("reply");
    assert_eq!(node.conn.load().rate_limit_protection, Some(true));
}

#[actix_rt::test]
async fn prune_drops_only_lockouts_that_can_no_longer_escalate() {
    let node = start(&ResilienceSettings::default());
    let addr = conn_addr(&node.conn);
    observe(&node.conn, rate_limited(1_000, 5_000));
    // Locked until 6 000; escalation stays possible for the 30 s reset window after that.
    let pruned = addr
        .send(PruneLockouts { at: 10_000 })
        .await
        .expect("reply");
    assert_eq!(pruned, 0);
    let before = epoch(&node.conn);
    let pruned = addr
        .send(PruneLockouts { at: 40_000 })
        .await
        .expect("reply");
    assert_eq!(pruned, 1);
    assert!(node.conn.load().lockouts.is_empty());
    assert_eq!(epoch(&node.conn), before + 1);
}

#[test]
fn the_pruning_time_base_follows_the_latest_time_and_never_goes_back() {
    let base = connection::TimeBase::new(5_000);
    assert!(base.now() >= 5_000);
    // An older, out-of-order `at` does not move it back…
    assert!(base.advance(4_000).now() >= 5_000);
    // …a later one moves it forward.
    assert!(base.advance(9_000).now() >= 9_000);
    std::thread::sleep(Duration::from_millis(5));
    assert!(base.now() >= 5_005, "real time elapsed is added");
}

fn transient(at: Millis) -> BreakerObserve {
    BreakerObserve {
        generation: None,
        outcome: BreakerOutcome::Failure(FailureKind::Transient),
        at,
    }
}

#[actix_rt::test]
async fn breaker_opens_admits_one_probe_and_closes_on_its_success() {
    let mut settings = ResilienceSettings::default();
    // The smallest reset the profile accepts; time is simulated through `at` anyway.
    settings.provider_breaker.apikey.reset_timeout_ms = 1_000;
    let node = start(&settings);
    let addr = breaker_addr(&node.provider);

    for i in 0..12 {
        assert!(observe_breaker(
            &node.provider,
            &node.stats,
            transient(10_000 + i)
        ));
    }
    let status = addr
        .send(GetBreakerStatus { at: 10_011 })
        .await
        .expect("reply");
    assert_eq!(status.state, BreakerState::Open);
    assert_eq!(
        node.provider.breaker.load().view,
        BreakerView::Open { until: 11_011 }
    );
    assert_eq!(node.provider.breaker.load().failure_count, 12);

    // Not yet due: rejected with the time left.
    let early = addr.send(AdmitProbe { at: 10_500 }).await.expect("reply");
    assert_eq!(
        early,
        Admission::Rejected {
            retry_after_ms: 511
        }
    );

    // Two workers ask at once after the reset timeout: exactly one probe.
    let (a, b) = futures_util::future::join(
        addr.send(AdmitProbe { at: 11_011 }),
        addr.send(AdmitProbe { at: 11_011 }),
    )
    .await;
    let (a, b) = (a.expect("reply"), b.expect("reply"));
    let generation = match (a, b) {
        (Admission::Probe { generation }, Admission::Rejected { .. })
        | (Admission::Rejected { .. }, Admission::Probe { generation }) => generation,
        other => panic!("expected one probe and one rejection, got {other:?}"),
    };
    assert_eq!(node.provider.breaker.load().view, BreakerView::HalfOpen);

    // A late outcome of an unknown probe changes nothing.
    observe_breaker(
        &node.provider,
        &node.stats,
        BreakerObserve {
            generation: Some(ProbeGeneration(generation.0 + 100)),
            outcome: BreakerOutcome::Success,
            at: 11_100,
        },
    );
    observe_breaker(
        &node.provider,
        &node.stats,
        BreakerObserve {
            generation: Some(generation),
            outcome: BreakerOutcome::Success,
            at: 11_200,
        },
    );
    let status = addr
        .send(GetBreakerStatus { at: 11_201 })
        .await
        .expect("reply");
    assert_eq!(status.state, BreakerState::Closed);
    assert_eq!(*node.provider.breaker.load(), Default::default());
    assert!(!node.provider.breaker.load().needs_success_report());
    // CLOSED→DEGRADED, DEGRADED→OPEN, OPEN→HALF_OPEN, HALF_OPEN→CLOSED.
    assert_eq!(status.transition_history.len(), 4);
    assert_eq!(addr.send(GetTransitionCount).await.expect("reply"), 4);
    assert_eq!(
        node.stats
            .breaker_dropped_observations
            .load(Ordering::Relaxed),
        0
    );
}

#[actix_rt::test]
async fn released_probe_frees_the_slot_and_reset_closes() {
    let mut settings = ResilienceSettings::default();
    settings.provider_breaker.apikey.reset_timeout_ms = 1_000;
    let node = start(&settings);
    let addr = breaker_addr(&node.provider);
    for i in 0..12 {
        observe_breaker(&node.provider, &node.stats, transient(i));
    }
    let first = addr.send(AdmitProbe { at: 2_000 }).await.expect("reply");
    let Admission::Probe { generation } = first else {
        panic!("expected a probe, got {first:?}");
    };
    // Dropping the guard queues the release ahead of the next admission (one mailbox, FIFO).
    drop(ProbeGuard::new(
        generation,
        node.provider.clone(),
        node.stats.clone(),
        crate::clock::Clock::new(),
    ));
    assert_eq!(
        node.stats
            .breaker_dropped_observations
            .load(Ordering::Relaxed),
        0
    );
    let second = addr.send(AdmitProbe { at: 2_002 }).await.expect("reply");
    assert!(matches!(second, Admission::Probe { .. }), "{second:?}");

    addr.send(ResetBreaker { at: 2_003 }).await.expect("reply");
    assert_eq!(node.provider.breaker.load().view, BreakerView::Closed);
}

#[actix_rt::test]
async fn panicked_connection_actor_is_restarted_with_its_state() {
    let node = start(&ResilienceSettings::default());
    observe(&node.conn, rate_limited(1_000, 60_000));
    eventually("cooldown published", || epoch(&node.conn) == 1).await;
    let old = conn_addr(&node.conn);

    old.do_send(InjectPanic);
    eventually("a new actor address", || conn_addr(&node.conn) != old).await;
    assert_eq!(node.stats.restarts.load(Ordering::Relaxed), 1);
    assert!(!old.connected(), "the panicked actor is gone");

    let snap = node.conn.snapshot.load_full();
    assert_eq!(snap.cooldown_remaining(1_000), 60_000, "state survived");
    assert_eq!(snap.lockouts.len(), 1);

    // The new actor applies observations and continues the epoch sequence.
    assert!(observe_success(&node.conn, success(70_000)));
    eventually("success applied", || epoch(&node.conn) == 2).await;
    assert_eq!(node.conn.load().cooldown_remaining(1_000), 0);
    assert!(observe(&node.conn, rate_limited(80_000, 2_000)));
    eventually("failure applied", || epoch(&node.conn) == 3).await;
    assert_eq!(node.conn.load().cooldown_remaining(80_000), 2_000);
}

#[actix_rt::test]
async fn panicked_breaker_actor_is_restarted_with_its_state_and_keeps_supervising() {
    let mut settings = ResilienceSettings::default();
    settings.provider_breaker.apikey.reset_timeout_ms = 1_000;
    let node = start(&settings);
    for i in 0..12 {
        assert!(observe_breaker(
            &node.provider,
            &node.stats,
            transient(10_000 + i)
        ));
    }
    let old = breaker_addr(&node.provider);
    let status = old
        .send(GetBreakerStatus { at: 10_011 })
        .await
        .expect("reply");
    assert_eq!(status.state, BreakerState::Open);
    let child = conn_addr(&node.conn);
    let before = supervision::snapshot()
        .into_iter()
        .find(|t| t.task == "breaker:acme")
        .map_or(0, |t| t.restarts);

    old.do_send(InjectPanic);
    eventually("a new breaker address", || {
        breaker_addr(&node.provider) != old
    })
    .await;
    let record = supervision::snapshot()
        .into_iter()
        .find(|t| t.task == "breaker:acme")
        .expect("recorded");
    assert_eq!(record.restarts, before + 1);
    assert!(record.running);

    // The breaker is still OPEN (its state survived) and closes through its probe.
    let new = breaker_addr(&node.provider);
    let status = new
        .send(GetBreakerStatus { at: 10_500 })
        .await
        .expect("reply");
    assert_eq!(status.state, BreakerState::Open);
    let Admission::Probe { generation } = new.send(AdmitProbe { at: 11_011 }).await.expect("reply")
    else {
        panic!("the restarted breaker admits its probe after the reset timeout");
    };
    observe_breaker(
        &node.provider,
        &node.stats,
        BreakerObserve {
            generation: Some(generation),
            outcome: BreakerOutcome::Success,
            at: 11_100,
        },
    );
    eventually("closed", || {
        node.provider.breaker.load().view == BreakerView::Closed
    })
    .await;

    // The connection actor outlived the old breaker; the new one supervises it.
    assert_eq!(conn_addr(&node.conn), child);
    child.do_send(InjectPanic);
    eventually("the child restarted", || conn_addr(&node.conn) != child).await;
    assert_eq!(node.stats.restarts.load(Ordering::Relaxed), 1);
}

#[actix_rt::test]
async fn a_crash_looping_actor_is_left_stopped_after_its_budget() {
    let node = start(&ResilienceSettings::default());
    for round in 0..MAX_RESTARTS_PER_WINDOW {
        let addr = conn_addr(&node.conn);
        addr.do_send(InjectPanic);
        eventually("restart", || {
            node.stats.restarts.load(Ordering::Relaxed) == round as u64 + 1
        })
        .await;
    }
    conn_addr(&node.conn).do_send(InjectPanic);
    eventually("given up", || node.conn.actor.load().is_none()).await;
    assert_eq!(
        node.stats.restarts.load(Ordering::Relaxed),
        MAX_RESTARTS_PER_WINDOW as u64
    );
    assert_eq!(node.stats.restarts_exhausted.load(Ordering::Relaxed), 1);
    assert!(!observe(&node.conn, rate_limited(1_000, 1_000)));
    assert_eq!(node.conn.dropped_observations.load(Ordering::Relaxed), 1);
}

#[actix_rt::test]
async fn normal_stops_and_stale_notices_do_not_restart() {
    let node = start(&ResilienceSettings::default());
    let breaker = breaker_addr(&node.provider);
    // Let the breaker start its child (incarnation 1).
    breaker.send(GetTransitionCount).await.expect("reply");
    let child = conn_addr(&node.conn);

    for (incarnation, panicked) in [(0, true), (7, true), (1, false)] {
        breaker
            .send(ChildStopped {
                conn_idx: node.conn.idx,
                incarnation,
                panicked,
            })
            .await
            .expect("reply");
    }
    assert_eq!(node.stats.restarts.load(Ordering::Relaxed), 0);
    assert!(conn_addr(&node.conn) == child, "the handle keeps its actor");
}

#[actix_rt::test]
async fn full_or_missing_mailboxes_count_dropped_observations() {
    // No actor at all.
    let orphan = conn_handle(0, 0);
    assert!(!observe(&orphan, rate_limited(1_000, 1_000)));
    assert!(!observe_success(&orphan, success(1_000)));
    assert_eq!(orphan.dropped_observations.load(Ordering::Relaxed), 2);
    let stats = ActorStats::default();
    let lonely = provider_handle(0, vec![]);
    assert!(!observe_breaker(&lonely, &stats, transient(1)));
    assert_eq!(
        stats.breaker_dropped_observations.load(Ordering::Relaxed),
        1
    );

    // A saturated mailbox: the actors cannot run until this test yields.
    let node = start(&ResilienceSettings::default());
    let sent = 400;
    let delivered = (0..sent)
        .filter(|i| observe(&node.conn, rate_limited(1_000 + i, 1_000)))
        .count() as u64;
    let dropped = node.conn.dropped_observations.load(Ordering::Relaxed);
    assert!(delivered >= MAILBOX_CAPACITY as u64, "{delivered}");
    assert!(dropped > 0);
    assert_eq!(delivered + dropped, sent);
}

#[actix_rt::test]
async fn actors_on_a_dedicated_arbiter_work_and_stop_without_restarts() {
    let arbiter = Arbiter::new();
    let provider = provider_handle(0, vec![0]);
    let conn = conn_handle(0, 0);
    let stats = Arc::new(ActorStats::default());
    start_actors(
        std::slice::from_ref(&provider),
        std::slice::from_ref(&conn),
        &ResilienceSettings::default(),
        &arbiter.handle(),
        stats.clone(),
    );
    // Queued before the arbiter thread has necessarily run anything: not dropped.
    assert!(observe(&conn, rate_limited(1_000, 2_000)));
    eventually("failure applied", || epoch(&conn) == 1).await;

    let old = conn_addr(&conn);
    old.do_send(InjectPanic);
    eventually("restart", || conn_addr(&conn) != old).await;
    assert_eq!(stats.restarts.load(Ordering::Relaxed), 1);

    // Stopping the arbiter drops the actors without a panic: nothing is restarted.
    assert!(arbiter.stop());
    let joined = actix_rt::task::spawn_blocking(move || arbiter.join()).await;
    assert!(matches!(joined, Ok(Ok(()))));
    assert_eq!(stats.restarts.load(Ordering::Relaxed), 1);
    assert!(!conn_addr(&conn).connected());
}

#[actix_rt::test]
async fn applied_settings_change_the_breaker_threshold_at_once() {
    let node = start(&ResilienceSettings::default());
    let addr = breaker_addr(&node.provider);
    let mut lower = ResilienceSettings::default();
    lower.provider_breaker.apikey.failure_threshold = 2;
    lower.provider_breaker.apikey.reset_timeout_ms = 1_000;
    let told = addr
        .send(ApplySettings {
            settings: Arc::new(lower),
            at: 1,
        })
        .await
        .expect("reply");
    assert_eq!(told, 1, "the one connection actor gets the new parameters");
    observe_breaker(&node.provider, &node.stats, transient(10));
    observe_breaker(&node.provider, &node.stats, transient(11));
    let status = addr.send(GetBreakerStatus { at: 12 }).await.expect("reply");
    assert_eq!(status.state, BreakerState::Open);
    assert_eq!(status.effective_reset_timeout, 1_000);
}

/// Config reload: a breaker handed over from an old actor seeds the new one (an OPEN breaker
/// stays open), and retiring the old actors stops them and clears the connection's address.
#[actix_rt::test]
async fn breaker_hands_over_on_reload_and_retired_actors_stop() {
    let mut settings = ResilienceSettings::default();
    settings.provider_breaker.apikey.reset_timeout_ms = 1_000;
    let old = start(&settings);
    for i in 0..12 {
        assert!(observe_breaker(
            &old.provider,
            &old.stats,
            transient(10_000 + i)
        ));
    }
    let old_breaker = breaker_addr(&old.provider);
    let old_conn = conn_addr(&old.conn);
    let handed = old_breaker.send(GetBreaker).await.expect("reply");

    let provider = provider_handle(0, vec![0]);
    let conn = conn_handle(0, 0);
    let seeds = HashMap::from([(PROVIDER.to_owned(), handed)]);
    start_actors_seeded(
        std::slice::from_ref(&provider),
        std::slice::from_ref(&conn),
        &settings,
        &Arbiter::current(),
        old.stats.clone(),
        &seeds,
    );
    let status = breaker_addr(&provider)
        .send(GetBreakerStatus { at: 10_011 })
        .await
        .expect("reply");
    assert_eq!(status.state, BreakerState::Open);

    old_breaker.do_send(Retire);
    eventually("old actors stopped", || {
        !old_breaker.connected() && !old_conn.connected() && old.conn.actor.load().is_none()
    })
    .await;
    assert_eq!(old.stats.restarts.load(Ordering::Relaxed), 0);
    assert!(conn_addr(&conn).connected(), "the new actor keeps running");
}

fn remote_breaker(
    to: switchyard_shared::wire::BreakerPhase,
    generation: u64,
    at: Millis,
    resync: bool,
) -> ApplyRemoteBreaker {
    ApplyRemoteBreaker {
        to,
        generation,
        retry_after_ms: 60_000,
        at,
        resync,
    }
}

#[actix_rt::test]
async fn cluster_breaker_transitions_apply_in_generation_order() {
    use switchyard_shared::wire::BreakerPhase as P;
    let node = start(&ResilienceSettings::default());
    let addr = breaker_addr(&node.provider);
    let state = |n: &Node| n.provider.breaker.load().state();
    addr.send(remote_breaker(P::Open, 5, 1_000, false))
        .await
        .unwrap();
    assert_eq!(state(&node), BreakerState::Open);
    // A CLOSED of the same generation is stale (it cannot close a newer OPEN)…
    addr.send(remote_breaker(P::Closed, 5, 1_100, false))
        .await
        .unwrap();
    assert_eq!(state(&node), BreakerState::Open);
    // …a newer one closes.
    addr.send(remote_breaker(P::Closed, 6, 1_200, false))
        .await
        .unwrap();
    assert_eq!(state(&node), BreakerState::Closed);
    // An event from an older generation is ignored; a resync that reads one means Redis lost
    // its data, so it is adopted (an OPEN), but an old CLOSED never closes anything.
    addr.send(remote_breaker(P::Open, 2, 1_300, false))
        .await
        .unwrap();
    assert_eq!(state(&node), BreakerState::Closed);
    addr.send(remote_breaker(P::Open, 1, 1_400, true))
        .await
        .unwrap();
    assert_eq!(state(&node), BreakerState::Open);
    addr.send(remote_breaker(P::Closed, 0, 1_500, true))
        .await
        .unwrap();
    assert_eq!(state(&node), BreakerState::Open);
}
