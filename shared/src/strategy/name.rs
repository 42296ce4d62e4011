//! Strategy names: the config contract.
//!
//! The kebab-case names are what operators write in `strategy` and `connection_strategy`, what
//! metrics label and what the admin API returns. `FromStr` and serde also accept the
//! reference's aliases (`usage` → `least-used`, `context` → `context-optimized`,
//! `weekly-reset` → `reset-window`), never case-folded. An unknown name is an error here; a
//! combo's `strategy` reads it leniently instead ([`Strategy::parse_lenient`]): the reference
//! falls back to `priority`, and the config loader reports it as a warning.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A routing strategy, named in config files exactly as [`Strategy::as_str`] spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// The configured order.
    Priority,
    /// Weighted random by `weight`, without replacement.
    Weighted,
    /// Sticky rotation: stay for `sticky_limit` selections, then the least recently used.
    RoundRobin,
    /// Lowest priority value first (ties in configured order): use one until it is not eligible.
    FillFirst,
    /// Uniform shuffle.
    Random,
    /// A shuffled deck: every candidate once per cycle.
    StrictRandom,
    /// Oldest last use first, then fewest in flight.
    LeastUsed,
    /// Power of two choices on a health score.
    P2c,
    /// Cheapest known cost first, ties by priority.
    CostOptimized,
    /// Lowest projected latency first.
    LatencyOptimized,
    /// Quota windows that reset soon first; nearly exhausted ones last.
    ResetAware,
    /// Most remaining quota first.
    Headroom,
    /// Rendezvous hashing of the prompt-cache key, so a prompt returns where it is cached.
    CacheOptimized,
    /// Last known good first.
    Lkgp,
    /// The quota window that resets soonest first; nearly exhausted ones last.
    ResetWindow,
    /// Weighted random by remaining quota.
    QuotaWeighted,
    /// Multi-factor score (health, quota, cost, latency, task fit, …) with 5 % exploration.
    Auto,
    /// The tightest context window that fits the request first; too small ones last.
    ContextOptimized,
    /// Deficit round robin by `weight` over a shared subscription pool, power of two choices
    /// on the in-flight/`max_concurrent` ratio within a round; a member at its cap only when
    /// all are. The reference keeps it internal; here a combo may name it.
    QuotaShare,
    /// Not an order: every target (up to the panel size) answers in parallel and a judge model
    /// synthesises one answer from the panel's (`[combos.fusion]`).
    Fusion,
    /// Not an order: the targets are steps run in sequence, each refining the previous step's
    /// answer (`[combos.pipeline]`).
    Pipeline,
    /// The configured order, the session's last target first; when a session moves to another
    /// connection its older messages go as a summary (`[combos.context_relay]`).
    ContextRelay,
}

impl Strategy {
    /// Every strategy, in the order the example config lists them.
    pub const ALL: [Strategy; 22] = [
        Self::Priority,
        Self::Weighted,
        Self::RoundRobin,
        Self::FillFirst,
        Self::Random,
        Self::StrictRandom,
        Self::LeastUsed,
        Self::P2c,
        Self::CostOptimized,
        Self::LatencyOptimized,
        Self::ResetAware,
        Self::Headroom,
        Self::CacheOptimized,
        Self::Lkgp,
        Self::ResetWindow,
        Self::QuotaWeighted,
        Self::Auto,
        Self::ContextOptimized,
        Self::QuotaShare,
        Self::Fusion,
        Self::Pipeline,
        Self::ContextRelay,
    ];

    /// Other names for strategies, as the reference accepts them.
    pub const ALIASES: [(&'static str, Strategy); 3] = [
        ("usage", Self::LeastUsed),
        ("context", Self::ContextOptimized),
        ("weekly-reset", Self::ResetWindow),
    ];

    /// What an unknown name falls back to in a combo.
    pub const UNKNOWN_FALLBACK: Strategy = Self::Priority;

    /// A combo's strategy when the config names none.
    pub const COMBO_DEFAULT: Strategy = Self::Priority;
    /// A provider's `connection_strategy` when the config names none.
    pub const CONNECTION_DEFAULT: Strategy = Self::FillFirst;

    /// The kebab-case name used in config files, metrics labels and JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Priority => "priority",
            Self::Weighted => "weighted",
            Self::RoundRobin => "round-robin",
            Self::FillFirst => "fill-first",
            Self::Random => "random",
            Self::StrictRandom => "strict-random",
            Self::LeastUsed => "least-used",
            Self::P2c => "p2c",
            Self::CostOptimized => "cost-optimized",
            Self::LatencyOptimized => "latency-optimized",
            Self::ResetAware => "reset-aware",
            Self::Headroom => "headroom",
            Self::CacheOptimized => "cache-optimized",
            Self::Lkgp => "lkgp",
            Self::ResetWindow => "reset-window",
            Self::QuotaWeighted => "quota-weighted",
            Self::Auto => "auto",
            Self::ContextOptimized => "context-optimized",
            Self::QuotaShare => "quota-share",
            Self::Fusion => "fusion",
            Self::Pipeline => "pipeline",
            Self::ContextRelay => "context-relay",
        }
    }

    /// Whether the choice draws from the RNG (the others are deterministic given the state).
    pub const fn uses_rng(self) -> bool {
        matches!(
            self,
            Self::Weighted
                | Self::Random
                | Self::StrictRandom
                | Self::P2c
                | Self::QuotaWeighted
                | Self::Auto
                | Self::QuotaShare
        )
    }

    /// Whether the strategy makes several upstream calls per client request (`fusion`,
    /// `pipeline`) instead of ordering the targets for fallback. The routing order of such a
    /// combo's targets is their configured order.
    pub const fn is_multi_call(self) -> bool {
        matches!(self, Self::Fusion | Self::Pipeline)
    }

    /// A name or alias; an unknown name yields [`Strategy::UNKNOWN_FALLBACK`] and the error to
    /// report as a warning.
    pub fn parse_lenient(name: &str) -> (Strategy, Option<UnknownStrategy>) {
        match name.parse() {
            Ok(strategy) => (strategy, None),
            Err(unknown) => (Self::UNKNOWN_FALLBACK, Some(unknown)),
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A strategy name that is not one of [`Strategy::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown routing strategy `{0}`")]
pub struct UnknownStrategy(pub String);

impl FromStr for Strategy {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .or_else(|| {
                Self::ALIASES
                    .into_iter()
                    .find(|(alias, _)| *alias == s)
                    .map(|(_, st)| st)
            })
            .ok_or_else(|| UnknownStrategy(s.into()))
    }
}

/// Every name, for serde's "expected one of" message.
static NAMES: [&str; Strategy::ALL.len()] = {
    let mut out = [""; Strategy::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = Strategy::ALL[i].as_str();
        i += 1;
    }
    out
};

impl<'de> Deserialize<'de> for Strategy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        name.parse()
            .map_err(|_| serde::de::Error::unknown_variant(&name, &NAMES))
    }
}
