//! Whether Redis is worth calling: a small breaker for the store itself.
//!
//! Why: with Redis down, every call would otherwise wait out its timeout, and a node making a
//! few background writes per second would pile them up. After a run of failures the store
//! reads as `Down` and calls are skipped at once, except one probe per retry interval; the
//! first success brings it back `Up`. Pure: time is passed in.

use serde::Serialize;

use switchyard_shared::Millis;

/// What a node reports about its Redis link (`/api/monitoring/health`, metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RedisState {
    /// The last call succeeded.
    Up,
    /// Recent calls failed, but not enough in a row to give up on Redis.
    Degraded,
    /// Calls are skipped; one probe per retry interval checks whether Redis is back.
    Down,
}

impl RedisState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Degraded => "degraded",
            Self::Down => "down",
        }
    }

    /// The gauge value exported for this state (up = 0, degraded = 1, down = 2).
    pub fn as_gauge(self) -> i64 {
        match self {
            Self::Up => 0,
            Self::Degraded => 1,
            Self::Down => 2,
        }
    }
}

/// When to give up on Redis and how often to probe it while down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Consecutive failures that turn `Degraded` into `Down` (at least 1).
    pub down_after_failures: u32,
    /// While `Down`, one call per this interval is let through as a probe.
    pub retry_interval_ms: Millis,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        Self {
            down_after_failures: 3,
            retry_interval_ms: 500,
        }
    }
}

/// The tracked state. Transitions are returned so the caller can log and count them.
#[derive(Debug, Clone)]
pub struct HealthTracker {
    policy: HealthPolicy,
    state: RedisState,
    consecutive_failures: u32,
    last_attempt_while_down: Option<Millis>,
}

impl HealthTracker {
    pub fn new(policy: HealthPolicy) -> Self {
        Self {
            policy: HealthPolicy {
                down_after_failures: policy.down_after_failures.max(1),
                ..policy
            },
            state: RedisState::Up,
            consecutive_failures: 0,
            last_attempt_while_down: None,
        }
    }

    pub fn state(&self) -> RedisState {
        self.state
    }

    /// Whether a call should go to Redis now. While `Down` this lets one probe through per
    /// retry interval and records it, so concurrent callers do not all probe.
    pub fn admit(&mut self, now: Millis) -> bool {
        if self.state != RedisState::Down {
            return true;
        }
        match self.last_attempt_while_down {
            Some(at) if now.saturating_sub(at) < self.policy.retry_interval_ms => false,
            _ => {
                self.last_attempt_while_down = Some(now);
                true
            }
        }
    }

    /// News that Redis is back (the sentinels named a new master): while `Down`, the next call
    /// goes through as a probe at once instead of after the retry interval.
    pub fn probe_now(&mut self) {
        self.last_attempt_while_down = None;
    }

    /// A call succeeded. Returns the transition, if any.
    pub fn on_success(&mut self) -> Option<(RedisState, RedisState)> {
        self.consecutive_failures = 0;
        self.last_attempt_while_down = None;
        self.transition(RedisState::Up)
    }

    /// A call failed (error or timeout). Returns the transition, if any.
    pub fn on_failure(&mut self, now: Millis) -> Option<(RedisState, RedisState)> {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        let next = if self.consecutive_failures >= self.policy.down_after_failures {
            RedisState::Down
        } else {
            RedisState::Degraded
        };
        if next == RedisState::Down && self.state != RedisState::Down {
            self.last_attempt_while_down = Some(now);
        }
        self.transition(next)
    }

    fn transition(&mut self, next: RedisState) -> Option<(RedisState, RedisState)> {
        let prev = self.state;
        self.state = next;
        (prev != next).then_some((prev, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker() -> HealthTracker {
        HealthTracker::new(HealthPolicy {
            down_after_failures: 3,
            retry_interval_ms: 500,
        })
    }

    #[test]
    fn failures_degrade_then_take_it_down() {
        let mut h = tracker();
        assert_eq!(
            h.on_failure(0),
            Some((RedisState::Up, RedisState::Degraded))
        );
        assert_eq!(h.on_failure(1), None);
        assert_eq!(
            h.on_failure(2),
            Some((RedisState::Degraded, RedisState::Down))
        );
        assert_eq!(h.state(), RedisState::Down);
    }

    #[test]
    fn down_admits_one_probe_per_interval() {
        let mut h = tracker();
        for t in 0..3 {
            h.on_failure(t);
        }
        assert!(!h.admit(100), "inside the interval after going down");
        assert!(h.admit(502));
        assert!(
            !h.admit(503),
            "a second caller in the same interval is skipped"
        );
        assert!(h.admit(1002));
    }

    #[test]
    fn one_success_brings_it_back_up() {
        let mut h = tracker();
        for t in 0..5 {
            h.on_failure(t);
        }
        assert_eq!(h.on_success(), Some((RedisState::Down, RedisState::Up)));
        assert!(h.admit(6));
        assert_eq!(
            h.on_failure(7),
            Some((RedisState::Up, RedisState::Degraded))
        );
    }

    #[test]
    fn zero_threshold_is_treated_as_one() {
        let mut h = HealthTracker::new(HealthPolicy {
            down_after_failures: 0,
            retry_interval_ms: 10,
        });
        assert_eq!(h.on_failure(0), Some((RedisState::Up, RedisState::Down)));
    }
}
