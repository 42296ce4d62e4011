//! One breaker semantics: the shared breaker (the Lua scripts on a real `redis-server`) and the
//! node's pure breaker (`switchyard_shared::breaker::Breaker`) are driven with the same random
//! event sequence — failures, successes, time advances, probe acquire and result, reset — and
//! every transition is compared: state, failure count, open cycles, the end of an OPEN and the
//! probe decision.
//!
//! Time: the scripts read Redis `TIME`, which a test cannot move. A time advance is therefore
//! applied to the data instead: the test subtracts it from the stored `open_until` and from the
//! probe lease's TTL, and the pure breaker runs at "the script's Redis clock + the advances so
//! far". Advances are multiples of 500 ms and every open period and lease a multiple of 1 s, so
//! the few milliseconds of real time between commands never decide a comparison.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use switchyard_shared::Millis;
use switchyard_shared::breaker::{Admission, Breaker, BreakerProfile, BreakerState, BreakerView};
use switchyard_shared::outcome::{BreakerOutcome, FailureKind};
use switchyard_shared::wire::BreakerPhase;
use switchyard_store::{
    BreakerChange, BreakerParams, HealthPolicy, KeySpace, NoopObserver, ProbeGrant, RedisStore,
    RedisStoreConfig, SharedBreaker,
};
use switchyard_tests::redis_server::RedisServer;

const PREFIX: &str = "model:";
/// Granularity of a time advance.
const TICK_MS: Millis = 500;
/// Tolerance on a probe lease's remaining time: `PEXPIRE`/`PTTL` use Redis's command clock,
/// the model the script's `TIME`, and each advance re-sets the TTL.
const LEASE_SLACK_MS: Millis = 100;

#[derive(Debug, Clone, Copy)]
enum Event {
    Failure,
    Success,
    Advance(u32),
    ProbeAcquire,
    ProbeResult(bool),
    /// The result of a probe that is no longer current (or of none at all).
    StaleResult(bool),
    /// Wait out the open period (if OPEN), then acquire the probe and report it: the path to
    /// the escalation, which independent random events reach too rarely.
    ProbeCycle(bool),
    Reset,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        5 => Just(Event::Failure),
        2 => Just(Event::Success),
        4 => (1u32..=8).prop_map(Event::Advance),
        4 => Just(Event::ProbeAcquire),
        4 => prop_oneof![3 => Just(false), 1 => Just(true)].prop_map(Event::ProbeResult),
        1 => any::<bool>().prop_map(Event::StaleResult),
        3 => prop_oneof![3 => Just(false), 1 => Just(true)].prop_map(Event::ProbeCycle),
        1 => Just(Event::Reset),
    ]
}

fn profile() -> impl Strategy<Value = BreakerProfile> {
    (1u32..=5, 0u32..=4, 1u64..=3, 1u32..=8, 0u32..=3).prop_map(
        |(threshold, degradation, reset_s, mult, escalation)| BreakerProfile {
            failure_threshold: threshold,
            degradation_threshold: degradation,
            reset_timeout_ms: reset_s * 1_000,
            max_backoff_multiplier: mult,
            backoff_escalation_count: escalation,
            half_open_requests: 1,
        },
    )
}

fn phase_of(state: BreakerState) -> BreakerPhase {
    match state {
        BreakerState::Closed => BreakerPhase::Closed,
        BreakerState::Degraded => BreakerPhase::Degraded,
        BreakerState::Open => BreakerPhase::Open,
        BreakerState::HalfOpen => BreakerPhase::HalfOpen,
    }
}

/// One model run: a provider of its own on the shared server.
struct Run<'a> {
    store: &'a RedisStore,
    raw: redis::aio::MultiplexedConnection,
    keys: KeySpace,
    provider: String,
    params: BreakerParams,
    pure: Breaker,
    /// Failed probes that escalated the open period (coverage).
    escalated: &'a std::sync::atomic::AtomicU32,
    /// Sum of the time advances so far (virtual time = Redis clock + this).
    shift: Millis,
    /// The outstanding probe: (pure generation, cluster generation).
    probe: Option<(u64, u64)>,
    last_probe: Option<(u64, u64)>,
    log: Vec<String>,
}

impl Run<'_> {
    fn fail(&self, what: impl std::fmt::Display) -> TestCaseError {
        TestCaseError::fail(format!(
            "{what}\nparams {:?}\nevents so far:\n  {}",
            self.params,
            self.log.join("\n  ")
        ))
    }

    fn check(&self, ok: bool, what: impl FnOnce() -> String) -> Result<(), TestCaseError> {
        if ok { Ok(()) } else { Err(self.fail(what())) }
    }

    /// A script's reply against the pure breaker right after the same event.
    fn compare_change(&self, change: &BreakerChange) -> Result<(), TestCaseError> {
        self.compare_stored(&change.after, "script reply")
    }

    fn compare_stored(&self, s: &SharedBreaker, origin: &str) -> Result<(), TestCaseError> {
        let pure_phase = phase_of(self.pure.state());
        self.check(s.phase == pure_phase, || {
            format!("{origin}: phase {:?}, pure {pure_phase:?}", s.phase)
        })?;
        self.check(s.open_cycles == self.pure.open_cycle_count(), || {
            format!(
                "{origin}: cycles {}, pure {}",
                s.open_cycles,
                self.pure.open_cycle_count()
            )
        })?;
        self.check(s.failure_count == self.pure.failure_count(), || {
            format!(
                "{origin}: failures {}, pure {}",
                s.failure_count,
                self.pure.failure_count()
            )
        })?;
        if s.phase == BreakerPhase::Open {
            let now = s.at_ms + self.shift;
            let until = self.pure.view(now);
            // An OPEN that is due reads as HALF_OPEN in the pure view; compare the raw end.
            let pure_until = self.pure.opened_at().map(|at| {
                at + self
                    .pure
                    .profile()
                    .effective_reset_timeout_ms(self.pure.open_cycle_count())
            });
            self.check(Some(s.open_until_ms + self.shift) == pure_until, || {
                format!(
                    "{origin}: open until {} (virtual), pure {pure_until:?} ({until:?})",
                    s.open_until_ms + self.shift
                )
            })?;
        }
        Ok(())
    }

    /// The resync read against the pure breaker's read-only view.
    async fn compare_read(&self) -> Result<(), TestCaseError> {
        let read = self
            .store
            .read_breakers(&[self.provider.as_str()])
            .await
            .map_err(|e| self.fail(format!("read: {e}")))?;
        let s = &read[0];
        let now = s.at_ms + self.shift;
        let view = self.pure.view(now);
        self.check(s.current_phase() == phase_of(view.state()), || {
            format!("read: phase {:?}, pure view {view:?}", s.current_phase())
        })?;
        if let BreakerView::Open { until } = view {
            self.check(s.open_until_ms + self.shift == until, || {
                format!(
                    "read: open until {}, pure {until}",
                    s.open_until_ms + self.shift
                )
            })?;
        }
        if s.phase == BreakerPhase::HalfOpen {
            let live = self.pure.probes_in_flight(now) > 0;
            self.check(live == (s.retry_after_ms > 0), || {
                format!(
                    "read: probe lease left {} ms, pure in flight {live}",
                    s.retry_after_ms
                )
            })?;
        }
        self.check(s.open_cycles == self.pure.open_cycle_count(), || {
            format!(
                "read: cycles {}, pure {}",
                s.open_cycles,
                self.pure.open_cycle_count()
            )
        })?;
        self.check(s.failure_count == self.pure.failure_count(), || {
            format!(
                "read: failures {}, pure {}",
                s.failure_count,
                self.pure.failure_count()
            )
        })
    }

    /// Moves the stored times `ms` into the past (the model moves its clock forward instead).
    async fn advance(&mut self, ms: Millis) -> Result<(), TestCaseError> {
        let script = redis::Script::new(
            r"
            local ou = tonumber(redis.call('HGET', KEYS[1], 'open_until') or '0')
            if ou > 0 then redis.call('HSET', KEYS[1], 'open_until', ou - tonumber(ARGV[1])) end
            local lf = tonumber(redis.call('HGET', KEYS[1], 'last_failure') or '0')
            if lf > 0 then redis.call('HSET', KEYS[1], 'last_failure', lf - tonumber(ARGV[1])) end
            local pttl = redis.call('PTTL', KEYS[2])
            if pttl > 0 then
              if pttl - tonumber(ARGV[1]) > 0 then
                redis.call('PEXPIRE', KEYS[2], pttl - tonumber(ARGV[1]))
              else
                redis.call('DEL', KEYS[2])
              end
            end
            return 1",
        );
        let _: i64 = script
            .key(self.keys.breaker(&self.provider))
            .key(self.keys.breaker_probe(&self.provider))
            .arg(ms)
            .invoke_async(&mut self.raw)
            .await
            .map_err(|e| self.fail(format!("advance: {e}")))?;
        self.shift += ms;
        Ok(())
    }

    async fn step(&mut self, ev: Event) -> Result<(), TestCaseError> {
        if let Event::ProbeCycle(success) = ev {
            let now = self.redis_now().await? + self.shift;
            if let BreakerView::Open { until } = self.pure.view(now) {
                let ticks = (until - now).div_ceil(TICK_MS) + 1;
                Box::pin(self.step(Event::Advance(u32::try_from(ticks).unwrap()))).await?;
            }
            Box::pin(self.step(Event::ProbeAcquire)).await?;
            return Box::pin(self.step(Event::ProbeResult(success))).await;
        }
        self.log.push(format!("{ev:?}"));
        let store = self.store;
        let provider = self.provider.clone();
        match ev {
            Event::Failure | Event::Success => {
                let change = if matches!(ev, Event::Failure) {
                    store.breaker_failure(&provider, &self.params).await
                } else {
                    store.breaker_success(&provider).await
                }
                .map_err(|e| self.fail(format!("{ev:?}: {e}")))?;
                let outcome = if matches!(ev, Event::Failure) {
                    BreakerOutcome::Failure(FailureKind::Transient)
                } else {
                    BreakerOutcome::Success
                };
                self.pure
                    .on_outcome(None, outcome, change.after.at_ms + self.shift);
                self.compare_change(&change)?;
            }
            Event::Advance(ticks) => self.advance(u64::from(ticks) * TICK_MS).await?,
            Event::ProbeCycle(_) => unreachable!("expanded above"),
            Event::ProbeAcquire => {
                let ttl = self.pure.effective_reset_timeout_ms();
                let (grant, at) = store
                    .breaker_probe_acquire_at(&provider, "model", ttl)
                    .await
                    .map_err(|e| self.fail(format!("acquire: {e}")))?;
                let (admission, _) = self.pure.admit(at + self.shift);
                match (admission, grant) {
                    (Admission::Allowed, ProbeGrant::Denied { retry_after_ms: 0 }) => {}
                    (
                        Admission::Probe { generation },
                        ProbeGrant::Granted { generation: g, .. },
                    ) => {
                        self.probe = Some((generation.0, g));
                        self.last_probe = self.probe;
                    }
                    (
                        Admission::Rejected { retry_after_ms: a },
                        ProbeGrant::Denied { retry_after_ms: b },
                    ) if b > 0 => {
                        let slack = if self.pure.state() == BreakerState::HalfOpen {
                            LEASE_SLACK_MS
                        } else {
                            0
                        };
                        self.check(a.abs_diff(b) <= slack, || {
                            format!("acquire: retry after {b}, pure {a}")
                        })?;
                    }
                    (a, g) => return Err(self.fail(format!("acquire: cluster {g:?}, pure {a:?}"))),
                }
            }
            Event::ProbeResult(success) | Event::StaleResult(success) => {
                let ids = if matches!(ev, Event::ProbeResult(_)) {
                    self.probe.take()
                } else {
                    // A replayed old result; with no probe yet, generations nobody holds.
                    Some(self.last_probe.unwrap_or((u64::MAX, u64::MAX)))
                };
                let Some((pure_gen, cluster_gen)) = ids else {
                    return self.compare_read().await;
                };
                let change = store
                    .breaker_probe_result(&provider, cluster_gen, success, &self.params)
                    .await
                    .map_err(|e| self.fail(format!("result: {e}")))?;
                let at = match &change {
                    Some(c) => c.after.at_ms,
                    None => self.redis_now().await?,
                };
                let outcome = if success {
                    BreakerOutcome::Success
                } else {
                    BreakerOutcome::Failure(FailureKind::Transient)
                };
                let effects = self.pure.on_outcome(
                    Some(switchyard_shared::breaker::ProbeGeneration(pure_gen)),
                    outcome,
                    at + self.shift,
                );
                let pure_took_it = effects.iter().any(|e| {
                    let switchyard_shared::breaker::BreakerEffect::Transition(t) = e;
                    t.from == BreakerState::HalfOpen && t.to != BreakerState::HalfOpen
                });
                self.check(pure_took_it == change.is_some(), || {
                    format!(
                        "result: cluster took it {}, pure {pure_took_it}",
                        change.is_some()
                    )
                })?;
                if let Some(change) = change {
                    if change.after.open_cycles > self.params.backoff_escalation_count {
                        self.escalated
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    self.probe = None;
                    self.compare_change(&change)?;
                }
            }
            Event::Reset => {
                let change = store
                    .breaker_reset(&provider)
                    .await
                    .map_err(|e| self.fail(format!("reset: {e}")))?;
                self.pure.reset(change.after.at_ms + self.shift);
                self.probe = None;
                self.compare_change(&change)?;
            }
        }
        self.compare_read().await
    }

    async fn redis_now(&mut self) -> Result<Millis, TestCaseError> {
        let (s, us): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut self.raw)
            .await
            .map_err(|e| self.fail(format!("TIME: {e}")))?;
        Ok(s * 1_000 + us / 1_000)
    }
}

#[test]
fn shared_breaker_follows_the_pure_breaker() {
    let server = RedisServer::start().expect("redis-server");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = RedisStoreConfig {
        url: server.url(),
        key_prefix: PREFIX.to_owned(),
        timeout_ms: 5_000,
        health: HealthPolicy::default(),
    };
    // The connection manager spawns its task on the current runtime.
    let store =
        rt.block_on(async { RedisStore::connect(&config, Arc::new(NoopObserver)).unwrap() });
    let raw = rt.block_on(async {
        redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    });
    let mut runner = TestRunner::new(Config {
        cases: 64,
        max_shrink_iters: 256,
        failure_persistence: None,
        ..Config::default()
    });
    let case = std::sync::atomic::AtomicU32::new(0);
    let escalated = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(
        &(profile(), proptest::collection::vec(event(), 1..=40)),
        |(profile, events)| {
            let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut run = Run {
                store: &store,
                raw: raw.clone(),
                keys: KeySpace::new(PREFIX),
                provider: format!("p{case}"),
                params: BreakerParams::from_profile(&profile),
                pure: Breaker::new(profile),
                escalated: &escalated,
                shift: 0,
                probe: None,
                last_probe: None,
                log: Vec::new(),
            };
            rt.block_on(async {
                for ev in events {
                    run.step(ev).await?;
                }
                Ok(())
            })
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The sequences must reach the escalation, or the comparison proves little.
    let escalated = escalated.load(std::sync::atomic::Ordering::Relaxed);
    assert!(escalated >= 5, "only {escalated} escalated reopenings");
}
