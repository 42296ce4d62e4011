//! What a strategy sees: a small `Copy` view per eligible candidate, the per-request context and
//! the caller-owned state of the stateful strategies.
//!
//! Views are built by the caller from whatever it tracks (connection actors, cluster state,
//! quota headers); they carry numbers only, so selection never touches anything outside the
//! slice. Float inputs are sanitised when read (NaN, infinities and negatives count as
//! "unknown"), so a bad quota header cannot poison an ordering.

use super::quota_share::Deficits;
use crate::Millis;

/// Requests kept on one candidate before round-robin rotates (the reference's
/// `stickyRoundRobinLimit` default).
pub const DEFAULT_STICKY_LIMIT: u32 = 3;

/// Quota as last reported by the upstream (rate-limit or usage headers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaView {
    /// Fraction still available in the tightest window, `0.0..=1.0`. Out-of-range values are
    /// clamped; NaN reads as "unknown".
    pub remaining: f64,
    /// When the short (session, ~5 h) window resets.
    pub session_reset_at: Option<Millis>,
    /// When the weekly window resets.
    pub weekly_reset_at: Option<Millis>,
}

/// A model's price/capability class, from the model catalog (`auto` prefers higher tiers a
/// little; `tier` is one of its minor factors).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ModelTier {
    /// Frontier models (Opus, o3, GPT-5, Gemini Pro).
    Premium,
    /// General-purpose models (Sonnet, GPT-4.1, DeepSeek).
    Standard,
    /// Small and fast models (Haiku, mini/nano, Flash, Llama 8B).
    Economy,
}

/// One eligible candidate (a connection of a provider, or a target of a combo).
///
/// The caller has already removed everything that must not be tried (open breaker, cooldown,
/// model lockout, foreign lease); strategies only order and choose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Index into the caller's own list; `pick` and `order` return these.
    pub index: usize,
    /// Stable hash of the candidate's id ([`super::stable_hash`] of the id string). Identifies
    /// the candidate in [`StrategyState`] and seeds rendezvous hashing, so it must be the same on
    /// every node.
    pub id_hash: u64,
    /// Lower is preferred.
    pub priority: u32,
    /// For `weighted`; 0 = only when nothing weighted is left (all zero = uniform).
    pub weight: u32,
    /// Requests currently executing on it.
    pub in_flight: u32,
    /// Its concurrency cap (`max_concurrent`), 0 = uncapped; `quota-share` de-prioritises a
    /// candidate whose `in_flight` reached it.
    pub max_concurrent: u32,
    pub last_used_at: Option<Millis>,
    /// Consecutive selections of this candidate (round-robin stickiness, p2c penalty).
    pub consecutive_use_count: u32,
    /// The cooldown backoff level; > 0 means it was recently rate limited.
    pub backoff_level: u32,
    /// Price per 1k tokens, when known.
    pub cost: Option<f64>,
    /// Latency estimate in ms, already projected to now (see [`super::Ewma::get_at`]).
    pub latency_ms: Option<f64>,
    pub quota: Option<QuotaView>,
    /// Last successful attempt (for `lkgp`).
    pub last_success_at: Option<Millis>,
    /// The target model's context window in tokens (model catalog), for `context-optimized`
    /// and `auto`.
    pub context_window: Option<u32>,
    /// The target model's tier (model catalog), for `auto`.
    pub tier: Option<ModelTier>,
    /// `false`: eligible but degraded (e.g. a half-open breaker probe). Every strategy orders
    /// healthy candidates first and picks an unhealthy one only when no healthy one is left.
    pub healthy: bool,
}

impl Candidate {
    /// A healthy candidate with weight 1, priority 0 and no history.
    pub const fn new(index: usize, id_hash: u64) -> Self {
        Self {
            index,
            id_hash,
            priority: 0,
            weight: 1,
            in_flight: 0,
            max_concurrent: 0,
            last_used_at: None,
            consecutive_use_count: 0,
            backoff_level: 0,
            cost: None,
            latency_ms: None,
            quota: None,
            last_success_at: None,
            context_window: None,
            tier: None,
            healthy: true,
        }
    }

    /// Cost for ordering: unknown costs sort after every known one.
    pub(super) fn cost_key(&self) -> f64 {
        known(self.cost).unwrap_or(f64::INFINITY)
    }

    /// Latency for ordering: unmeasured reads as 0 so it gets tried (and measured), which is
    /// also what a fully decayed estimate converges to.
    pub(super) fn latency_key(&self) -> f64 {
        known(self.latency_ms).unwrap_or(0.0)
    }

    /// Remaining quota fraction clamped to `0..=1`, `None` when unknown.
    pub(super) fn remaining(&self) -> Option<f64> {
        let r = self.quota?.remaining;
        (!r.is_nan()).then(|| r.clamp(0.0, 1.0))
    }
}

fn known(x: Option<f64>) -> Option<f64> {
    x.filter(|v| v.is_finite() && *v >= 0.0)
}

/// Tunables of `reset-aware` (the reference's combo config defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResetAwareWeights {
    /// Weight of the session-window score; normalised with `weekly_weight` to sum to 1.
    pub session_weight: f64,
    pub weekly_weight: f64,
    /// Scores within this absolute band (0..1) of the best count as tied; ties go by priority.
    pub tie_band: f64,
    /// Candidates with less remaining quota than this fraction go last.
    pub exhaustion_guard: f64,
}

impl Default for ResetAwareWeights {
    fn default() -> Self {
        Self {
            session_weight: 0.35,
            weekly_weight: 0.65,
            tie_band: 0.05,
            exhaustion_guard: 0.10,
        }
    }
}

/// Per-selection inputs that are not about one candidate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelectCtx {
    /// The caller's clock; strategies never read one.
    pub now: Millis,
    /// Round-robin: selections kept on one candidate before rotating (0 behaves as 1).
    pub sticky_limit: u32,
    /// The request already failed over (some candidates were excluded): round-robin skips
    /// stickiness and goes straight to the least recently used one, so a retry does not land
    /// on the account that just failed.
    pub fallback: bool,
    /// `cache-optimized`: hash of the prompt-cache key ([`super::stable_hash`] of its bytes, or
    /// any caller-chosen u64). `None` degrades to `fill-first`.
    pub cache_key: Option<u64>,
    pub reset_aware: ResetAwareWeights,
    /// Estimated tokens the request needs (prompt plus requested output), for
    /// `context-optimized` and `auto`'s task fit; `None` when unknown.
    pub prompt_tokens: Option<u32>,
    /// Share of the pool's provider breakers that are OPEN (`0..=1`), for `auto`'s incident
    /// mode. Open targets are usually filtered out before selection, so the caller says it.
    pub open_breaker_share: f64,
}

impl SelectCtx {
    /// Defaults for everything but the clock.
    pub fn new(now: Millis) -> Self {
        Self {
            now,
            sticky_limit: DEFAULT_STICKY_LIMIT,
            fallback: false,
            cache_key: None,
            reset_aware: ResetAwareWeights::default(),
            prompt_tokens: None,
            open_breaker_share: 0.0,
        }
    }
}

/// Round-robin position: the current candidate and how many times in a row it was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sticky {
    pub(super) id_hash: u64,
    pub(super) index: usize,
    pub(super) count: u32,
}

/// Strict-random deck: a per-cycle seed that permutes the candidates, and the last position
/// dealt. A new seed (drawn from the caller's RNG) starts the next cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Deck {
    pub(super) seed: u64,
    pub(super) last: Option<(u64, usize)>,
}

/// Memory of the stateful strategies (`round-robin`, `strict-random`, `lkgp`, `quota-share`)
/// for one provider or combo.
///
/// The caller owns it: a node keeps one per provider and per combo behind a plain mutex (it is
/// `Copy` and about 350 bytes, most of it `quota-share`'s deficit table; the critical section
/// is one O(n) `pick`, well under a microsecond), and a cluster may share nothing at all: each
/// node rotating on its own still spreads load. Both `pick` and `order` advance it by exactly
/// one selection (the first element counts as used).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StrategyState {
    pub(super) sticky: Option<Sticky>,
    pub(super) deck: Option<Deck>,
    pub(super) last_good: Option<u64>,
    pub(super) quota_share: Deficits,
}

impl StrategyState {
    pub const fn new() -> Self {
        Self {
            sticky: None,
            deck: None,
            last_good: None,
            quota_share: Deficits::new(),
        }
    }

    /// `quota-share`'s deficit of a member (requests it is owed this round), `None` when the
    /// member has no slot.
    pub fn quota_share_deficit(&self, id_hash: u64) -> Option<i32> {
        self.quota_share.get(id_hash)
    }

    /// Remember a success for `lkgp`.
    pub fn record_success(&mut self, id_hash: u64) {
        self.last_good = Some(id_hash);
    }

    /// Forget `id_hash` as last known good, and end round-robin stickiness on it so the next
    /// selection rotates.
    pub fn record_failure(&mut self, id_hash: u64) {
        if self.last_good == Some(id_hash) {
            self.last_good = None;
        }
        if self.sticky.is_some_and(|s| s.id_hash == id_hash) {
            self.sticky = None;
        }
    }

    /// The `lkgp` memory.
    pub fn last_good(&self) -> Option<u64> {
        self.last_good
    }

    /// Round-robin's current candidate and its consecutive selection count.
    pub fn sticky(&self) -> Option<(u64, u32)> {
        self.sticky.map(|s| (s.id_hash, s.count))
    }
}
