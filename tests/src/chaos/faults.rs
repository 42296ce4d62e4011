//! The faults a chaos run injects and the schedule they follow. Upstream faults are scripted
//! into every node's mock for as long as their phase lasts; process and network faults act on
//! the [`super::topology::Topology`].

use std::time::Duration;

use crate::mock_upstream::FaultSpec;

use super::scenario::{self, CLIENT_MODELS};

/// The connection [`Fault::RedisOom`] cools and an operator clears during the OOM.
pub const OOM_CLEARED: &str = "b2";

/// One fault of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No fault: the reference phase.
    Baseline,
    /// Every pa connection answers 1.2 s late.
    LatencySpike,
    /// Every pb connection answers 503: the pb breaker must open, then recover.
    Burst503,
    /// a0 answers 429 with `Retry-After: 2`: a0 cools and is not used while cooling.
    RateLimit429,
    /// b1 resets the TCP connection before any byte.
    ResetBeforeBody,
    /// c0 resets the TCP connection after two content frames.
    ResetMidBody,
    /// a1 stalls after two content frames: the stream watchdog must end the stream.
    StalledStream,
    /// b2 streams reasoning only, no text.
    ReasoningOnly,
    /// Node 1 is SIGKILLed mid-stream and restarted.
    KillNode,
    /// Redis is SIGKILLed and restarted from its append-only file.
    RedisRestart,
    /// Node 2 is cut off from Redis, then healed.
    Partition,
    /// Redis is frozen (SIGSTOP) for 1.5 s, then resumed: every call hangs rather than fails.
    RedisStall,
    /// Redis drops every node's event subscription (`CLIENT KILL`): nodes must subscribe
    /// again and resync what they missed.
    SubscriberKill,
    /// Redis fails over: its replica is promoted and the old master SIGKILLed, so every node's
    /// connections drop and come back on the new master, which may have missed the last writes.
    RedisFailover,
    /// Redis runs out of memory (`maxmemory` far below its use, `noeviction`): every write
    /// answers `-OOM` while reads and `PING` still work. b2 cools (429, Retry-After 30 s) just
    /// before, and an operator clears that cooldown during the OOM: the node must not report
    /// the clear as done while Redis keeps the cooldown.
    RedisOom,
    /// The coordinator is SIGKILLed and restarted.
    CoordinatorKill,
    /// c1 answers 402 (credits exhausted): it becomes terminal and must stay so.
    Terminal402,
}

impl Fault {
    /// The schedule's order. The terminal fault comes last so that a terminal connection does
    /// not shrink the pool the other faults act on.
    pub const ALL: [Fault; 17] = [
        Fault::Baseline,
        Fault::LatencySpike,
        Fault::Burst503,
        Fault::RateLimit429,
        Fault::ResetBeforeBody,
        Fault::ResetMidBody,
        Fault::StalledStream,
        Fault::ReasoningOnly,
        Fault::KillNode,
        Fault::RedisRestart,
        Fault::Partition,
        Fault::RedisStall,
        Fault::SubscriberKill,
        Fault::RedisFailover,
        Fault::RedisOom,
        Fault::CoordinatorKill,
        Fault::Terminal402,
    ];

    /// The label used in reports.
    pub fn label(self) -> &'static str {
        match self {
            Fault::Baseline => "baseline",
            Fault::LatencySpike => "latency spike (pa +1.2 s)",
            Fault::Burst503 => "503 burst (all of pb)",
            Fault::RateLimit429 => "429 + Retry-After (a0)",
            Fault::ResetBeforeBody => "TCP reset before body (b1)",
            Fault::ResetMidBody => "TCP reset mid body (c0)",
            Fault::StalledStream => "stalled stream (a1)",
            Fault::ReasoningOnly => "reasoning-only stream (b2)",
            Fault::KillNode => "kill -9 node-1 mid-stream",
            Fault::RedisRestart => "Redis kill + restart",
            Fault::Partition => "node-2 partitioned from Redis",
            Fault::RedisStall => "Redis SIGSTOP 1.5 s",
            Fault::SubscriberKill => "CLIENT KILL of the nodes' subscribers",
            Fault::RedisFailover => "Redis failover to the replica (old master kill -9)",
            Fault::RedisOom => "Redis OOM (maxmemory, noeviction) + an operator clear",
            Fault::CoordinatorKill => "coordinator kill + restart",
            Fault::Terminal402 => "402 credits exhausted (c1)",
        }
    }

    /// The upstream faults this phase scripts into every mock (cleared when it ends).
    pub fn upstream_faults(self) -> Vec<FaultSpec> {
        let on = |conn: &str, spec: FaultSpec| -> Option<FaultSpec> {
            scenario::key_of(conn).map(|k| spec.for_key(k))
        };
        let specs: Vec<Option<FaultSpec>> = match self {
            Fault::LatencySpike => scenario::connections_of("pa")
                .map(|c| {
                    on(
                        c,
                        FaultSpec {
                            latency_before_headers_ms: Some(1_200),
                            ..FaultSpec::default()
                        },
                    )
                })
                .collect(),
            Fault::Burst503 => scenario::connections_of("pb")
                .map(|c| on(c, FaultSpec::status(503)))
                .collect(),
            Fault::RateLimit429 => {
                vec![on("a0", FaultSpec::status(429).header("Retry-After", "2"))]
            }
            Fault::ResetBeforeBody => vec![on(
                "b1",
                FaultSpec {
                    reset_before_body: true,
                    ..FaultSpec::default()
                },
            )],
            Fault::ResetMidBody => vec![on(
                "c0",
                FaultSpec {
                    reset_after_chunks: Some(2),
                    ..FaultSpec::default()
                },
            )],
            Fault::StalledStream => vec![on(
                "a1",
                FaultSpec {
                    stall_after_chunks: Some(2),
                    stall_ms: Some(10_000),
                    ..FaultSpec::default()
                },
            )],
            Fault::ReasoningOnly => vec![on(
                "b2",
                FaultSpec {
                    reasoning_only: true,
                    ..FaultSpec::default()
                },
            )],
            // Once per mock, so that the cooldown is in Redis before the OOM starts and the
            // operator's clear is not undone by a fresh 429.
            Fault::RedisOom => vec![on(
                OOM_CLEARED,
                FaultSpec::status(429).header("Retry-After", "30").times(1),
            )],
            Fault::Terminal402 => vec![on(
                "c1",
                FaultSpec::status(402).header("x-chaos", "credits"),
            )],
            // Killing a node "mid-stream" needs streams in flight: every stream slows down
            // to 20 chunks 150 ms apart.
            Fault::KillNode => vec![Some(FaultSpec {
                chunk_delay_ms: Some(150),
                ..FaultSpec::default()
            })],
            Fault::Baseline
            | Fault::RedisRestart
            | Fault::Partition
            | Fault::RedisStall
            | Fault::SubscriberKill
            | Fault::RedisFailover
            | Fault::CoordinatorKill => Vec::new(),
        };
        specs.into_iter().flatten().collect()
    }
}

/// One scheduled phase: `fault` acts from `start` to `end` (offsets from the run's start);
/// the load keeps running throughout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    pub fault: Fault,
    pub start: Duration,
    pub end: Duration,
}

/// The schedule for a run of `total` seconds: the faults in [`Fault::ALL`] order, each for
/// `phase` (cycling through them again if the run is long enough), followed by a quiet
/// recovery tail of `recovery`. A soak gets a fault every `phase` (30 s for the long form).
pub fn schedule(total: Duration, phase: Duration, recovery: Duration) -> Vec<Phase> {
    let mut out = Vec::new();
    if phase.is_zero() {
        return out;
    }
    let active = total.saturating_sub(recovery);
    let mut at = Duration::ZERO;
    // Bounded: at most one phase per `phase` of the run.
    for fault in Fault::ALL.iter().cycle().take(10_000) {
        if at + phase > active {
            break;
        }
        out.push(Phase {
            fault: *fault,
            start: at,
            end: at + phase,
        });
        at += phase;
    }
    out
}

/// The fraction of requests that go to each client model (uniform) and are streamed (half).
pub fn pick(seq: u64) -> (&'static str, bool) {
    let model = CLIENT_MODELS[(seq % CLIENT_MODELS.len() as u64) as usize];
    let stream = (seq / CLIENT_MODELS.len() as u64).is_multiple_of(2);
    (model, stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_fits_the_run_and_cycles_for_a_soak() {
        let s = schedule(
            Duration::from_secs(120),
            Duration::from_secs(8),
            Duration::from_secs(10),
        );
        assert_eq!(s.len(), 13, "13 faults of 8 s fit in 110 s");
        assert_eq!(s[0].fault, Fault::Baseline);
        assert!(s.last().is_some_and(|p| p.end <= Duration::from_secs(110)));
        let soak = schedule(
            Duration::from_secs(600),
            Duration::from_secs(30),
            Duration::from_secs(30),
        );
        assert_eq!(soak.len(), 19);
        assert_eq!(soak[13].fault, Fault::RedisFailover);
        assert_eq!(soak[14].fault, Fault::RedisOom);
        assert_eq!(soak[17].fault, Fault::Baseline, "the list cycles");
        assert!(schedule(Duration::from_secs(5), Duration::ZERO, Duration::ZERO).is_empty());
    }

    #[test]
    fn upstream_faults_target_their_connection_only() {
        let f = Fault::RateLimit429.upstream_faults();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].matcher.api_key.as_deref(), scenario::key_of("a0"));
        assert_eq!(Fault::Burst503.upstream_faults().len(), 3);
        assert!(Fault::RedisRestart.upstream_faults().is_empty());
        assert!(Fault::RedisStall.upstream_faults().is_empty());
        assert!(Fault::SubscriberKill.upstream_faults().is_empty());
        assert!(Fault::RedisFailover.upstream_faults().is_empty());
        let oom = Fault::RedisOom.upstream_faults();
        assert_eq!(oom.len(), 1);
        assert_eq!(oom[0].times, Some(1), "one 429 per mock");
        assert_eq!(
            oom[0].matcher.api_key.as_deref(),
            scenario::key_of(OOM_CLEARED)
        );
        let slow = Fault::KillNode.upstream_faults();
        assert_eq!(slow.len(), 1);
        assert_eq!(slow[0].chunk_delay_ms, Some(150));
        assert_eq!(slow[0].matcher.api_key, None, "every stream slows down");
        for fault in Fault::ALL {
            for spec in fault.upstream_faults() {
                assert!(spec.validate().is_ok(), "{fault:?}");
            }
        }
    }

    #[test]
    fn the_mix_covers_every_model_streamed_and_not() {
        let mut seen = std::collections::HashSet::new();
        for seq in 0..10 {
            seen.insert(pick(seq));
        }
        assert_eq!(seen.len(), 10);
    }
}
