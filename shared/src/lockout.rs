//! Model lockout (docs/policy.md, `lockout`): a failure that concerns one model (or its quota family) on one
//! connection locks just that, so the connection keeps serving its other models.
//!
//! Pure policy over a [`LockoutTable`] owned by the connection's actor; time is passed in.
//! - **Scope** ([`resolve_lock_key`]): 429/403/402 lock the model's quota family (per-model-quota
//!   providers lock the model); 404 locks the single model (never the family, the reference's
//!   family-wide 404 lock was a bug); anything else locks the exact provider/connection/model
//!   triple. A caller-supplied scope always wins. Families are an input ([`quota_family`] derives
//!   the usual one: the id without its snapshot suffix); without one the exact model is locked.
//! - **Cooldown** ([`LockoutSettings::cooldown_ms`]): an upstream reset is used exactly (only the
//!   30-day [`MAX_UPSTREAM_HINT_MS`] cap applies), a synthetic exact value is capped at
//!   `max_cooldown_ms`, otherwise `min(base · 2^min(n−1, max_backoff_steps), max)` (or `base`
//!   when exponential is off).
//! - **Escalation**: a failure within `reset_after_ms` (the provider breaker's reset timeout) plus
//!   the last applied cooldown of the previous one counts `n + 1`; later ones start again at 1.
//! - **Success decay**: `floor(n / 2)`; at 0 the entry, lock included, is removed.
//!
//! Invariants: `until` never moves backwards under failures and locks (extend-only, so replaying
//! cluster events is safe); an entry outlives its lock only while it can still escalate.
//! `enabled` gates only the combo path ([`LockoutSettings::applies_to`]): per-model-quota
//! providers lock regardless, as in the reference.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::Millis;
use crate::outcome::{CooldownHint, FailureReason, MAX_UPSTREAM_HINT_MS};

/// Validation bounds of [`LockoutSettings`] (docs/policy.md, `lockout`).
pub const BASE_COOLDOWN_RANGE_MS: (Millis, Millis) = (5_000, 600_000);
pub const MAX_COOLDOWN_RANGE_MS: (Millis, Millis) = (5_000, 3_600_000);
pub const MAX_BACKOFF_STEPS_LIMIT: u32 = 20;
pub const ERROR_CODE_RANGE: (u16, u16) = (100, 599);

/// `[resilience.model_lockout]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct LockoutSettings {
    pub enabled: bool,
    pub error_codes: Vec<u16>,
    pub base_cooldown_ms: Millis,
    pub max_cooldown_ms: Millis,
    pub max_backoff_steps: u32,
    pub use_exponential_backoff: bool,
}

impl Default for LockoutSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            error_codes: vec![403, 404, 429, 502, 503, 504],
            base_cooldown_ms: 120_000,
            max_cooldown_ms: 1_800_000,
            max_backoff_steps: 10,
            use_exponential_backoff: true,
        }
    }
}

impl LockoutSettings {
    /// Clamp into the reference's ranges; never fails, each adjustment yields a warning naming
    /// the field. Error codes are sorted and deduplicated.
    pub fn normalized(self) -> (Self, Vec<String>) {
        let mut s = self;
        let mut warnings = Vec::new();
        let (lo, hi) = BASE_COOLDOWN_RANGE_MS;
        if !(lo..=hi).contains(&s.base_cooldown_ms) {
            let fixed = s.base_cooldown_ms.clamp(lo, hi);
            warnings.push(format!(
                "base_cooldown_ms = {} is outside {lo}..={hi}; using {fixed}",
                s.base_cooldown_ms
            ));
            s.base_cooldown_ms = fixed;
        }
        let (lo, hi) = MAX_COOLDOWN_RANGE_MS;
        let fixed = s.max_cooldown_ms.clamp(lo, hi).max(s.base_cooldown_ms);
        if fixed != s.max_cooldown_ms {
            warnings.push(format!(
                "max_cooldown_ms = {} must be within {lo}..={hi} and at least base_cooldown_ms; using {fixed}",
                s.max_cooldown_ms
            ));
            s.max_cooldown_ms = fixed;
        }
        if s.max_backoff_steps > MAX_BACKOFF_STEPS_LIMIT {
            warnings.push(format!(
                "max_backoff_steps = {} is above {MAX_BACKOFF_STEPS_LIMIT}; using {MAX_BACKOFF_STEPS_LIMIT}",
                s.max_backoff_steps
            ));
            s.max_backoff_steps = MAX_BACKOFF_STEPS_LIMIT;
        }
        let (lo, hi) = ERROR_CODE_RANGE;
        let (valid, invalid): (Vec<u16>, Vec<u16>) = s
            .error_codes
            .iter()
            .partition(|code| (lo..=hi).contains(*code));
        if !invalid.is_empty() {
            warnings.push(format!(
                "error_codes {invalid:?} are outside {lo}..={hi}; dropped"
            ));
        }
        s.error_codes = valid;
        s.error_codes.sort_unstable();
        s.error_codes.dedup();
        (s, warnings)
    }

    /// Whether the combo path locks the model for this upstream status.
    pub fn applies_to(&self, status: u16) -> bool {
        self.enabled && self.error_codes.contains(&status)
    }

    /// The synthetic cooldown of the `failure_count`-th failure in a row:
    /// `min(base · 2^min(n−1, max_backoff_steps), max)`, or `base` when exponential is off.
    pub fn backoff_ms(&self, failure_count: u32) -> Millis {
        if !self.use_exponential_backoff {
            return self.base_cooldown_ms.min(self.max_cooldown_ms);
        }
        let exponent = failure_count.saturating_sub(1).min(self.max_backoff_steps);
        let factor = 1u64.checked_shl(exponent).unwrap_or(Millis::MAX);
        self.base_cooldown_ms
            .saturating_mul(factor)
            .min(self.max_cooldown_ms)
    }

    /// The cooldown a failure applies, or `None` when the hint says not to cool at all.
    pub fn cooldown_ms(&self, failure_count: u32, hint: CooldownHint) -> Option<Millis> {
        match hint {
            CooldownHint::None => None,
            CooldownHint::ScaledBackoff => Some(self.backoff_ms(failure_count)),
            CooldownHint::Fixed(ms) => Some(ms.min(self.max_cooldown_ms)),
            CooldownHint::Upstream(ms) => Some(ms.min(MAX_UPSTREAM_HINT_MS)),
        }
    }
}

/// The combo path's choice (reference `selectLockoutCooldownMs`): an upstream hint longer than
/// the base is used exactly; otherwise the exponential backoff, or the base when exponential is
/// off.
pub fn select_lockout_cooldown(
    upstream_hint_ms: Option<Millis>,
    settings: &LockoutSettings,
) -> CooldownHint {
    match upstream_hint_ms {
        Some(ms) if ms > settings.base_cooldown_ms => CooldownHint::Upstream(ms),
        _ if settings.use_exponential_backoff => CooldownHint::ScaledBackoff,
        _ => CooldownHint::Fixed(settings.base_cooldown_ms),
    }
}

/// Why a model is locked (shown in the cooldown APIs and skip reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockReason {
    RateLimited,
    QuotaExhausted,
    NotFound,
    Forbidden,
    ServerError,
    ModelCapacity,
    /// A 200 whose body failed response validation.
    QualityFailure,
    Unknown,
}

impl LockReason {
    /// The combo path's reason by status (reference `classifyLockoutReason`, plus 404 and 402).
    pub fn for_status(status: u16) -> Self {
        match status {
            429 => Self::RateLimited,
            402 | 403 => Self::QuotaExhausted,
            404 => Self::NotFound,
            _ => Self::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::RateLimited => "rate_limited",
            Self::QuotaExhausted => "quota_exhausted",
            Self::NotFound => "not_found",
            Self::Forbidden => "forbidden",
            Self::ServerError => "server_error",
            Self::ModelCapacity => "model_capacity",
            Self::QualityFailure => "quality_failure",
            Self::Unknown => "unknown",
        }
    }

    /// Whether waiting for the lock to expire can help (a missing model will stay missing).
    pub fn is_retryable(self) -> bool {
        self != Self::NotFound
    }
}

impl From<FailureReason> for LockReason {
    fn from(reason: FailureReason) -> Self {
        match reason {
            FailureReason::QuotaExhausted => Self::QuotaExhausted,
            FailureReason::RateLimitExceeded => Self::RateLimited,
            FailureReason::ModelCapacity => Self::ModelCapacity,
            FailureReason::ServerError => Self::ServerError,
            FailureReason::AuthError => Self::Forbidden,
            FailureReason::Unknown => Self::Unknown,
        }
    }
}

/// What a lock covers on its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockoutScope {
    /// The model's quota family (the exact model when it has none).
    Family,
    /// The exact model.
    Model,
}

/// The model part of a [`LockKey`]: an exact model id or a quota family name. Kept apart so a
/// model can never collide with a family of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockTarget {
    Model(String),
    Family(String),
}

impl LockTarget {
    pub fn name(&self) -> &str {
        match self {
            Self::Model(name) | Self::Family(name) => name,
        }
    }
}

/// What a lock is keyed by; `model` is an exact model or a quota family. JSON:
/// `{provider, connection, model}` or `{provider, connection, family}`. Combo-level locks
/// without a pinned connection use the empty connection id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LockKey {
    pub provider: String,
    pub connection: String,
    #[serde(flatten)]
    pub model: LockTarget,
}

/// A model as the router sees it when it records or checks a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModelRef<'a> {
    pub provider: &'a str,
    pub connection: &'a str,
    pub model: &'a str,
    /// The model's quota family, when one is known.
    pub family: Option<&'a str>,
    /// Providers whose quota is per model lock the model even for quota statuses.
    pub per_model_quota: bool,
}

impl ModelRef<'_> {
    pub fn key(&self, scope: LockoutScope) -> LockKey {
        let model = match (scope, self.family) {
            (LockoutScope::Family, Some(family)) => LockTarget::Family(family.to_owned()),
            _ => LockTarget::Model(self.model.to_owned()),
        };
        LockKey {
            provider: self.provider.to_owned(),
            connection: self.connection.to_owned(),
            model,
        }
    }
}

/// The quota family of a model id: the id without its snapshot suffix (`-2024-08-06`,
/// `-20250929`, `-0613`, `@20240620`, `-latest`), since providers meter a model's dated
/// snapshots and its alias together (`gpt-4o-mini-2024-07-18` and `gpt-4o-mini`,
/// `claude-sonnet-4-5-20250929` and `claude-sonnet-4-5`). A model without one is its own
/// family. A prefix of `model`, so a [`ModelRef`] can borrow it.
pub fn quota_family(model: &str) -> &str {
    fn all_digits(s: &str, n: usize) -> bool {
        s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
    }
    let mut family = model;
    loop {
        let stripped = if let Some(rest) = family.strip_suffix("-latest") {
            Some(rest)
        } else if let Some((rest, tail)) = family.rsplit_once(['-', '@']) {
            let dated = all_digits(tail, 8) || (all_digits(tail, 4) && tail.as_bytes()[0] <= b'1');
            let iso = || {
                // `…-YYYY-MM-DD`: three dash-separated numeric parts.
                let mut parts = family.rsplitn(4, '-');
                let (d, m, y) = (parts.next()?, parts.next()?, parts.next()?);
                let rest = parts.next()?;
                (all_digits(y, 4) && all_digits(m, 2) && all_digits(d, 2)).then_some(rest)
            };
            match iso() {
                Some(rest) => Some(rest),
                None if dated => Some(rest),
                None => None,
            }
        } else {
            None
        };
        match stripped {
            Some(rest) if !rest.is_empty() => family = rest,
            _ => return family,
        }
    }
}

/// The scope a failure with `status` locks (see the module docs).
pub fn lockout_scope_for_status(
    status: u16,
    per_model_quota: bool,
    requested: Option<LockoutScope>,
) -> LockoutScope {
    match (requested, status) {
        (Some(scope), _) => scope,
        (None, 402 | 403 | 429) if !per_model_quota => LockoutScope::Family,
        (None, _) => LockoutScope::Model,
    }
}

/// The key a failure with `status` on `target` locks.
pub fn resolve_lock_key(
    target: &ModelRef<'_>,
    status: u16,
    requested: Option<LockoutScope>,
) -> LockKey {
    target.key(lockout_scope_for_status(
        status,
        target.per_model_quota,
        requested,
    ))
}

/// One failure to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LockFailure {
    pub reason: LockReason,
    /// Where the cooldown comes from: `Upstream` bypasses `max_cooldown_ms`, `Fixed` does not.
    pub hint: CooldownHint,
    /// The provider breaker's reset timeout: the escalation window before the last cooldown.
    pub reset_after_ms: Millis,
}

/// A lock and the failure memory that escalates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockEntry {
    pub reason: LockReason,
    pub until: Millis,
    pub locked_at: Millis,
    pub failure_count: u32,
    pub last_failure_at: Millis,
    pub last_cooldown_ms: Millis,
    pub reset_after_ms: Millis,
}

impl LockEntry {
    pub fn is_active(&self, now: Millis) -> bool {
        self.until > now
    }

    pub fn remaining_ms(&self, now: Millis) -> Millis {
        self.until.saturating_sub(now)
    }

    /// Until when a new failure still escalates from this entry.
    pub fn escalates_until(&self) -> Millis {
        self.last_failure_at
            .saturating_add(self.reset_after_ms)
            .saturating_add(self.last_cooldown_ms)
    }

    /// The entry after `failure` at `now` (pure; the table stores it). `None` when the hint
    /// says not to cool, in which case nothing changes.
    pub fn after_failure(
        previous: Option<&Self>,
        failure: &LockFailure,
        settings: &LockoutSettings,
        now: Millis,
    ) -> Option<Self> {
        let failure_count = match previous {
            Some(prev)
                if now.saturating_sub(prev.last_failure_at)
                    < failure.reset_after_ms.saturating_add(prev.last_cooldown_ms) =>
            {
                prev.failure_count.saturating_add(1)
            }
            _ => 1,
        };
        let cooldown = settings.cooldown_ms(failure_count, failure.hint)?;
        let mut entry = Self::locked(previous, failure.reason, cooldown, now);
        entry.failure_count = failure_count;
        entry.last_failure_at = now;
        entry.reset_after_ms = failure.reset_after_ms;
        Some(entry)
    }

    /// Extend-only lock without escalation: `until = max(old, now + cooldown)`.
    fn locked(previous: Option<&Self>, reason: LockReason, cooldown: Millis, now: Millis) -> Self {
        let until = now.saturating_add(cooldown);
        match previous {
            Some(prev) => Self {
                reason,
                until: prev.until.max(until),
                locked_at: if prev.is_active(now) {
                    prev.locked_at
                } else {
                    now
                },
                last_cooldown_ms: cooldown,
                ..*prev
            },
            None => Self {
                reason,
                until,
                locked_at: now,
                failure_count: 1,
                last_failure_at: now,
                last_cooldown_ms: cooldown,
                reset_after_ms: 0,
            },
        }
    }
}

/// All model locks of one owner (a connection actor, or a node for combo-level locks).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockoutTable {
    entries: HashMap<LockKey, LockEntry>,
}

impl LockoutTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record a failure on `key`: escalate, compute the cooldown, extend the lock. Returns the
    /// stored entry, or `None` when the hint says not to cool (nothing changes then).
    pub fn record_failure(
        &mut self,
        key: LockKey,
        failure: LockFailure,
        settings: &LockoutSettings,
        now: Millis,
    ) -> Option<LockEntry> {
        let entry = LockEntry::after_failure(self.entries.get(&key), &failure, settings, now)?;
        self.entries.insert(key, entry);
        Some(entry)
    }

    /// The entry [`Self::record_failure`] would store, without storing it: what a failure is
    /// about to lock, for the answer to the request that caused it (the table itself changes
    /// only in its owner).
    pub fn preview_failure(
        &self,
        key: &LockKey,
        failure: &LockFailure,
        settings: &LockoutSettings,
        now: Millis,
    ) -> Option<LockEntry> {
        LockEntry::after_failure(self.entries.get(key), failure, settings, now)
    }

    /// Lock `key` for `cooldown_ms` without escalating (reference `lockModel`, used for
    /// combo-managed transient 429s and remote events). Extend-only.
    pub fn lock(
        &mut self,
        key: LockKey,
        reason: LockReason,
        cooldown_ms: Millis,
        now: Millis,
    ) -> LockEntry {
        let entry = LockEntry::locked(self.entries.get(&key), reason, cooldown_ms, now);
        self.entries.insert(key, entry);
        entry
    }

    pub fn get(&self, key: &LockKey) -> Option<&LockEntry> {
        self.entries.get(key)
    }

    /// The entry locking `key` at `now`, if any.
    pub fn locked(&self, key: &LockKey, now: Millis) -> Option<&LockEntry> {
        self.entries.get(key).filter(|entry| entry.is_active(now))
    }

    pub fn is_locked(&self, key: &LockKey, now: Millis) -> bool {
        self.locked(key, now).is_some()
    }

    /// The lock that keeps `model` unusable longest: its exact key or its family's.
    pub fn model_lock(&self, model: &ModelRef<'_>, now: Millis) -> Option<&LockEntry> {
        let exact = self.locked(&model.key(LockoutScope::Model), now);
        let family = model
            .family
            .and_then(|_| self.locked(&model.key(LockoutScope::Family), now));
        match (exact, family) {
            (Some(a), Some(b)) => Some(if b.until > a.until { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// Success decay: halve the failure count; at 0 the entry is removed. Returns the count
    /// left (0 when removed or absent).
    pub fn decay(&mut self, key: &LockKey) -> u32 {
        let Some(entry) = self.entries.get_mut(key) else {
            return 0;
        };
        entry.failure_count /= 2;
        let left = entry.failure_count;
        if left == 0 {
            self.entries.remove(key);
        }
        left
    }

    /// Success on `model`: decay its exact entry and its family's.
    pub fn decay_model(&mut self, model: &ModelRef<'_>) {
        self.decay(&model.key(LockoutScope::Model));
        if model.family.is_some() {
            self.decay(&model.key(LockoutScope::Family));
        }
    }

    /// Remove the entries of `provider`, narrowed to a connection and to a model or family
    /// name when given. Returns how many were removed.
    pub fn clear(
        &mut self,
        provider: &str,
        connection: Option<&str>,
        model: Option<&str>,
    ) -> usize {
        let before = self.entries.len();
        self.entries.retain(|key, _| {
            let matches = key.provider == provider
                && connection.is_none_or(|c| key.connection == c)
                && model.is_none_or(|m| key.model.name() == m);
            !matches
        });
        before - self.entries.len()
    }

    /// Active locks at `now`, soonest expiry first.
    pub fn active(&self, now: Millis) -> Vec<(&LockKey, &LockEntry)> {
        let mut active: Vec<_> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.is_active(now))
            .collect();
        active.sort_by(|a, b| a.1.until.cmp(&b.1.until).then_with(|| a.0.cmp(b.0)));
        active
    }

    /// Drop entries whose lock has expired and that can no longer escalate. Returns how many.
    pub fn prune_expired(&mut self, now: Millis) -> usize {
        let before = self.entries.len();
        self.entries
            .retain(|_, entry| entry.is_active(now) || entry.escalates_until() > now);
        before - self.entries.len()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const S: Millis = 1_000;
    const MIN: Millis = 60 * S;

    fn model(family: Option<&'static str>, per_model_quota: bool) -> ModelRef<'static> {
        ModelRef {
            provider: "gemini",
            connection: "c1",
            model: "gemini-2.5-pro",
            family,
            per_model_quota,
        }
    }

    fn key(name: &str) -> LockKey {
        LockKey {
            provider: "p".into(),
            connection: "c".into(),
            model: LockTarget::Model(name.into()),
        }
    }

    fn failure(hint: CooldownHint) -> LockFailure {
        LockFailure {
            reason: LockReason::RateLimited,
            hint,
            reset_after_ms: 30 * S,
        }
    }

    #[test]
    fn quota_families_drop_snapshot_suffixes() {
        for (model, family) in [
            ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("gpt-4o-mini", "gpt-4o-mini"),
            ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
            ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
            ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
            ("gpt-4-0613", "gpt-4"),
            ("gpt-3.5-turbo-1106", "gpt-3.5-turbo"),
            ("gemini-1.5-pro-002", "gemini-1.5-pro-002"),
            ("qwen-2024", "qwen-2024"),
            ("20250929", "20250929"),
            ("", ""),
        ] {
            assert_eq!(quota_family(model), family, "{model}");
        }
    }

    #[test]
    fn a_429_on_a_snapshot_locks_its_family_and_the_alias_with_it() {
        let s = LockoutSettings::default();
        let dated = ModelRef {
            provider: "openai",
            connection: "c1",
            model: "gpt-4o-mini-2024-07-18",
            family: Some(quota_family("gpt-4o-mini-2024-07-18")),
            per_model_quota: false,
        };
        let alias = ModelRef {
            model: "gpt-4o-mini",
            family: Some(quota_family("gpt-4o-mini")),
            ..dated
        };
        let mut t = LockoutTable::new();
        let key = resolve_lock_key(&dated, 429, None);
        assert_eq!(key.model, LockTarget::Family("gpt-4o-mini".into()));
        t.record_failure(key, failure(CooldownHint::Fixed(60 * S)), &s, 0);
        assert!(t.model_lock(&alias, 0).is_some());
        // A 404 stays on the exact model.
        assert_eq!(
            resolve_lock_key(&dated, 404, None).model,
            LockTarget::Model("gpt-4o-mini-2024-07-18".into())
        );
    }

    #[test]
    fn default_settings() {
        let s = LockoutSettings::default();
        assert!(!s.enabled);
        assert_eq!(s.error_codes, [403, 404, 429, 502, 503, 504]);
        assert_eq!(
            (s.base_cooldown_ms, s.max_cooldown_ms),
            (120_000, 1_800_000)
        );
        assert_eq!(s.max_backoff_steps, 10);
        assert!(s.use_exponential_backoff);
        assert!(s.clone().normalized().1.is_empty());
        assert!(!s.applies_to(429));
        let on = LockoutSettings { enabled: true, ..s };
        assert!(on.applies_to(429) && on.applies_to(404));
        assert!(!on.applies_to(500) && !on.applies_to(400));
    }

    #[test]
    fn normalized_clamps_with_named_warnings() {
        let (s, warnings) = LockoutSettings {
            enabled: true,
            error_codes: vec![429, 99, 429, 600, 403],
            base_cooldown_ms: 1_000_000,
            max_cooldown_ms: 1,
            max_backoff_steps: 50,
            use_exponential_backoff: true,
        }
        .normalized();
        assert_eq!(s.base_cooldown_ms, 600_000);
        assert_eq!(s.max_cooldown_ms, 600_000);
        assert_eq!(s.max_backoff_steps, 20);
        assert_eq!(s.error_codes, [403, 429]);
        for field in [
            "base_cooldown_ms",
            "max_cooldown_ms",
            "max_backoff_steps",
            "error_codes",
        ] {
            assert!(
                warnings.iter().any(|w| w.starts_with(field)),
                "{field}: {warnings:?}"
            );
        }
        let (s, _) = LockoutSettings {
            base_cooldown_ms: 1,
            max_cooldown_ms: 9_999_999,
            ..LockoutSettings::default()
        }
        .normalized();
        assert_eq!((s.base_cooldown_ms, s.max_cooldown_ms), (5_000, 3_600_000));
    }

    #[test]
    fn exponential_backoff_is_capped() {
        let s = LockoutSettings::default();
        let expected = [120, 240, 480, 960, 1_800, 1_800];
        for (n, want) in (1..).zip(expected) {
            assert_eq!(s.backoff_ms(n), want * S, "n = {n}");
        }
        assert_eq!(s.backoff_ms(0), 120 * S);
        assert_eq!(s.backoff_ms(u32::MAX), 1_800 * S);
        let steps = LockoutSettings {
            max_cooldown_ms: 3_600_000,
            max_backoff_steps: 2,
            ..LockoutSettings::default()
        };
        assert_eq!(steps.backoff_ms(5), 480 * S);
        let flat = LockoutSettings {
            use_exponential_backoff: false,
            ..LockoutSettings::default()
        };
        assert_eq!(flat.backoff_ms(7), 120 * S);
    }

    #[test]
    fn upstream_resets_bypass_the_cap_synthetic_ones_do_not() {
        let s = LockoutSettings::default();
        assert_eq!(
            s.cooldown_ms(1, CooldownHint::Fixed(2 * 3_600 * S)),
            Some(1_800 * S)
        );
        assert_eq!(
            s.cooldown_ms(1, CooldownHint::Upstream(2 * 3_600 * S)),
            Some(2 * 3_600 * S)
        );
        assert_eq!(
            s.cooldown_ms(1, CooldownHint::Upstream(Millis::MAX)),
            Some(MAX_UPSTREAM_HINT_MS)
        );
        assert_eq!(s.cooldown_ms(3, CooldownHint::ScaledBackoff), Some(480 * S));
        assert_eq!(s.cooldown_ms(3, CooldownHint::None), None);
    }

    #[test]
    fn combo_path_cooldown_selection() {
        let s = LockoutSettings::default();
        assert_eq!(
            select_lockout_cooldown(Some(3_600 * S), &s),
            CooldownHint::Upstream(3_600 * S)
        );
        assert_eq!(
            select_lockout_cooldown(Some(120 * S), &s),
            CooldownHint::ScaledBackoff
        );
        assert_eq!(
            select_lockout_cooldown(None, &s),
            CooldownHint::ScaledBackoff
        );
        let flat = LockoutSettings {
            use_exponential_backoff: false,
            ..s
        };
        assert_eq!(
            select_lockout_cooldown(Some(S), &flat),
            CooldownHint::Fixed(120 * S)
        );
        // The exact upstream value is honoured beyond max_cooldown_ms.
        let mut table = LockoutTable::new();
        let hint = select_lockout_cooldown(Some(3_600 * S), &flat);
        let entry = table
            .record_failure(key("m"), failure(hint), &flat, 0)
            .unwrap();
        assert_eq!(entry.until, 3_600 * S);
    }

    #[test]
    fn scope_by_status() {
        let fam = model(Some("pro"), false);
        let family = |n: &str| LockTarget::Family(n.into());
        let exact = LockTarget::Model("gemini-2.5-pro".into());
        // (target, status, requested, expected)
        let rows = [
            (fam, 429, None, family("pro")),
            (fam, 403, None, family("pro")),
            (fam, 402, None, family("pro")),
            (fam, 404, None, exact.clone()),
            (fam, 500, None, exact.clone()),
            (fam, 503, None, exact.clone()),
            (model(Some("pro"), true), 429, None, exact.clone()),
            (model(None, false), 429, None, exact.clone()),
            (fam, 404, Some(LockoutScope::Family), family("pro")),
            (fam, 429, Some(LockoutScope::Model), exact.clone()),
            (
                model(None, false),
                502,
                Some(LockoutScope::Family),
                exact.clone(),
            ),
        ];
        for (target, status, requested, expected) in rows {
            let key = resolve_lock_key(&target, status, requested);
            assert_eq!(key.model, expected, "{status} {requested:?} {target:?}");
            assert_eq!(
                (key.provider.as_str(), key.connection.as_str()),
                ("gemini", "c1")
            );
        }
    }

    #[test]
    fn failures_escalate_within_the_window() {
        let s = LockoutSettings::default();
        let mut t = LockoutTable::new();
        let hint = CooldownHint::ScaledBackoff;
        let e = t.record_failure(key("m"), failure(hint), &s, 0).unwrap();
        assert_eq!((e.failure_count, e.until, e.locked_at), (1, 120 * S, 0));
        // Within reset (30 s) + last cooldown (120 s) of the previous failure.
        let e = t
            .record_failure(key("m"), failure(hint), &s, 149 * S)
            .unwrap();
        assert_eq!((e.failure_count, e.until), (2, 389 * S));
        // The first lock had run out at 120 s, so this lock period starts now.
        assert_eq!(e.locked_at, 149 * S);
        // A failure during an active lock keeps its start.
        let e = t
            .record_failure(key("m"), failure(hint), &s, 150 * S)
            .unwrap();
        assert_eq!(
            (e.failure_count, e.until, e.locked_at),
            (3, 630 * S, 149 * S)
        );
        // At 150 s + 30 s + 480 s the window has closed: back to 1, the longer lock is kept.
        let e = t
            .record_failure(key("m"), failure(hint), &s, 660 * S)
            .unwrap();
        assert_eq!(
            (e.failure_count, e.until, e.locked_at),
            (1, 780 * S, 660 * S)
        );
        assert_eq!(e.last_cooldown_ms, 120 * S);
    }

    #[test]
    fn until_is_extend_only() {
        let s = LockoutSettings::default();
        let mut t = LockoutTable::new();
        t.record_failure(key("m"), failure(CooldownHint::Upstream(3_600 * S)), &s, 0);
        let e = t
            .record_failure(key("m"), failure(CooldownHint::Fixed(10 * S)), &s, S)
            .unwrap();
        assert_eq!(e.until, 3_600 * S);
        assert_eq!(e.last_cooldown_ms, 10 * S);
        let e = t.lock(key("m"), LockReason::RateLimited, 5 * S, 2 * S);
        assert_eq!(e.until, 3_600 * S);
        let e = t.lock(key("m"), LockReason::RateLimited, 7_200 * S, 2 * S);
        assert_eq!(e.until, 7_202 * S);
    }

    #[test]
    fn no_cooldown_hint_changes_nothing() {
        let s = LockoutSettings::default();
        let mut t = LockoutTable::new();
        assert_eq!(
            t.record_failure(key("m"), failure(CooldownHint::None), &s, 0),
            None
        );
        assert!(t.is_empty());
    }

    #[test]
    fn success_decay_halves_and_clears() {
        let s = LockoutSettings::default();
        let with_count = |n: u32| {
            let mut t = LockoutTable::new();
            for i in 0..n {
                t.record_failure(
                    key("m"),
                    failure(CooldownHint::ScaledBackoff),
                    &s,
                    Millis::from(i),
                );
            }
            assert_eq!(t.get(&key("m")).unwrap().failure_count, n);
            t
        };
        let mut t = with_count(4);
        assert_eq!(t.decay(&key("m")), 2);
        assert!(t.is_locked(&key("m"), 10));

        let mut t = with_count(1);
        assert_eq!(t.decay(&key("m")), 0);
        assert!(t.get(&key("m")).is_none());
        assert!(!t.is_locked(&key("m"), 10));

        let mut t = with_count(3);
        assert_eq!(t.decay(&key("m")), 1);
        assert_eq!(t.decay(&key("m")), 0);
        assert!(t.is_empty());
        assert_eq!(t.decay(&key("m")), 0);
    }

    #[test]
    fn model_lock_checks_exact_and_family() {
        let s = LockoutSettings::default();
        let m = model(Some("pro"), false);
        let mut t = LockoutTable::new();
        let family_key = resolve_lock_key(&m, 429, None);
        t.record_failure(family_key, failure(CooldownHint::Upstream(600 * S)), &s, 0);
        let sibling = ModelRef {
            model: "gemini-2.5-pro-preview",
            ..m
        };
        assert_eq!(t.model_lock(&sibling, 0).unwrap().until, 600 * S);
        assert!(t.model_lock(&model(None, false), 0).is_none());

        t.record_failure(
            resolve_lock_key(&m, 404, None),
            failure(CooldownHint::Fixed(900 * S)),
            &s,
            0,
        );
        assert_eq!(t.model_lock(&m, 0).unwrap().until, 900 * S);
        assert_eq!(t.model_lock(&sibling, 0).unwrap().until, 600 * S);

        t.decay_model(&m);
        assert!(t.is_empty());
    }

    #[test]
    fn clear_active_and_prune() {
        let s = LockoutSettings::default();
        let mut t = LockoutTable::new();
        let k = |p: &str, c: &str, m: &str| LockKey {
            provider: p.into(),
            connection: c.into(),
            model: LockTarget::Model(m.into()),
        };
        t.lock(k("a", "1", "x"), LockReason::Unknown, 10 * S, 0);
        t.lock(k("a", "1", "y"), LockReason::Unknown, 20 * S, 0);
        t.lock(k("a", "2", "x"), LockReason::Unknown, 30 * S, 0);
        t.lock(k("b", "1", "x"), LockReason::Unknown, 40 * S, 0);
        let active: Vec<_> = t
            .active(15 * S)
            .into_iter()
            .map(|(key, _)| key.clone())
            .collect();
        assert_eq!(
            active,
            [k("a", "1", "y"), k("a", "2", "x"), k("b", "1", "x")]
        );

        assert_eq!(t.clone().clear("a", None, None), 3);
        assert_eq!(t.clone().clear("a", Some("1"), None), 2);
        assert_eq!(t.clone().clear("a", None, Some("x")), 2);
        assert_eq!(t.clone().clear("a", Some("2"), Some("y")), 0);

        // Plain locks carry no escalation window beyond their cooldown.
        assert_eq!(t.prune_expired(25 * S), 2);
        assert_eq!(t.len(), 2);
        // A recorded failure stays for its escalation window after the lock ends.
        t.record_failure(
            k("c", "1", "x"),
            failure(CooldownHint::ScaledBackoff),
            &s,
            0,
        );
        // Its lock ends at 120 s, its escalation window at 0 + 30 s + 120 s.
        assert_eq!(t.prune_expired(140 * S), 2);
        assert!(t.get(&k("c", "1", "x")).is_some());
        assert_eq!(t.prune_expired(150 * S), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn json_shapes() {
        let key = LockKey {
            provider: "openai".into(),
            connection: "c1".into(),
            model: LockTarget::Model("gpt-5".into()),
        };
        let json = serde_json::to_value(&key).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"provider":"openai","connection":"c1","model":"gpt-5"})
        );
        let back: LockKey = serde_json::from_value(json).unwrap();
        assert_eq!(back, key);
        let family: LockKey =
            serde_json::from_str(r#"{"provider":"antigravity","connection":"","family":"gemini"}"#)
                .unwrap();
        assert_eq!(family.model, LockTarget::Family("gemini".into()));

        let mut t = LockoutTable::new();
        let entry = t.lock(key, LockReason::QuotaExhausted, 5 * S, 0);
        let json = serde_json::to_value(entry).unwrap();
        assert_eq!(json["reason"], "quota_exhausted");
        assert_eq!(json["until"], 5_000);
        assert_eq!(json["lockedAt"], 0);
        assert_eq!(json["failureCount"], 1);
        assert_eq!(json["lastCooldownMs"], 5_000);
    }

    #[test]
    fn reasons() {
        assert_eq!(LockReason::for_status(429), LockReason::RateLimited);
        assert_eq!(LockReason::for_status(403), LockReason::QuotaExhausted);
        assert_eq!(LockReason::for_status(404), LockReason::NotFound);
        assert_eq!(LockReason::for_status(502), LockReason::Unknown);
        assert!(!LockReason::NotFound.is_retryable());
        assert!(LockReason::RateLimited.is_retryable());
        assert_eq!(
            LockReason::from(FailureReason::RateLimitExceeded).as_str(),
            "rate_limited"
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Fail(CooldownHint, Millis),
        Lock(Millis),
        Advance(Millis),
    }

    fn hint() -> impl Strategy<Value = CooldownHint> {
        prop_oneof![
            Just(CooldownHint::None),
            Just(CooldownHint::ScaledBackoff),
            (0..Millis::MAX).prop_map(CooldownHint::Fixed),
            (0..Millis::MAX).prop_map(CooldownHint::Upstream),
            (0..10 * MIN).prop_map(CooldownHint::Upstream),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (hint(), 0..3_600_000u64).prop_map(|(h, reset)| Op::Fail(h, reset)),
            (0..Millis::MAX).prop_map(Op::Lock),
            (0..40 * MIN).prop_map(Op::Advance),
        ]
    }

    fn settings() -> impl Strategy<Value = LockoutSettings> {
        (0..1_000_000u64, 0..4_000_000u64, 0..25u32, any::<bool>()).prop_map(
            |(base, max, steps, exp)| {
                LockoutSettings {
                    base_cooldown_ms: base,
                    max_cooldown_ms: max,
                    max_backoff_steps: steps,
                    use_exponential_backoff: exp,
                    ..LockoutSettings::default()
                }
                .normalized()
                .0
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn until_never_decreases(settings in settings(), ops in prop::collection::vec(op(), 1..80)) {
            let mut t = LockoutTable::new();
            let mut now: Millis = 0;
            let mut until: Option<Millis> = None;
            for op in ops {
                match op {
                    Op::Fail(hint, reset_after_ms) => {
                        let failure = LockFailure { reason: LockReason::Unknown, hint, reset_after_ms };
                        let stored = t.record_failure(key("m"), failure, &settings, now);
                        prop_assert_eq!(stored.is_none(), hint == CooldownHint::None);
                        if let Some(entry) = stored {
                            prop_assert!(entry.failure_count >= 1);
                            prop_assert!(entry.until >= now);
                            if hint == CooldownHint::ScaledBackoff {
                                prop_assert!(entry.last_cooldown_ms <= settings.max_cooldown_ms);
                            }
                        }
                    }
                    Op::Lock(ms) => {
                        t.lock(key("m"), LockReason::Unknown, ms, now);
                    }
                    Op::Advance(ms) => now = now.saturating_add(ms),
                }
                let current = t.get(&key("m")).map(|entry| entry.until);
                prop_assert!(current >= until, "{:?} < {:?}", current, until);
                until = current;
            }
        }

        #[test]
        fn decay_eventually_removes(failures in 1usize..200) {
            let settings = LockoutSettings::default();
            let mut t = LockoutTable::new();
            for _ in 0..failures {
                t.record_failure(key("m"), failure(CooldownHint::ScaledBackoff), &settings, 0);
            }
            let mut previous = t.get(&key("m")).map_or(0, |entry| entry.failure_count);
            let mut steps = 0;
            while !t.is_empty() {
                let left = t.decay(&key("m"));
                prop_assert_eq!(left, previous / 2);
                previous = left;
                steps += 1;
                prop_assert!(steps <= 33);
            }
        }
    }
}
