//! Optional provider cooldown (docs/policy.md, `provider_cooldown`; off by default): memory kept across requests of
//! providers that just failed, consulted when combo targets are resolved.
//!
//! Two kinds of entry, both pure and driven by a passed-in `now`:
//! - **provider windows**: a provider cools for `cooldown_ms` once `failure_threshold` failures
//!   fall within `failure_window_ms` (oauth 10 in 15 min → 5 min; apikey 15 in 30 min → 10 min);
//! - **connection entries**: after `n` consecutive failures a connection cools for
//!   `min(min_retry · 2^min(n−1, 10), max_retry)` after its last failure (5 s … 300 s).
//!
//! A success clears the provider's window and the connection's entry. Switchyard decisions the
//! reference left open (it never consumed the window parameters): the failures that trip a
//! cooling are consumed, so the next cooling needs a fresh `failure_threshold`; failures reported
//! while cooling do not extend it; a success does not end an active cooling, because late
//! successes from attempts started before it prove nothing about the provider now.
//!
//! Invariants: a provider window never holds more than `failure_threshold` timestamps; a
//! disabled tracker records nothing and reports nothing as cooling.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::Millis;
use crate::outcome::ProviderCategory;

/// The exponent cap of the connection-level backoff.
pub const MAX_RETRY_EXPONENT: u32 = 10;
/// How long a connection entry is kept after its last failure, at least.
pub const MIN_CONNECTION_RETENTION_MS: Millis = 30 * 60 * 1000;

/// The window gate of one provider category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WindowParams {
    pub failure_threshold: u32,
    pub failure_window_ms: Millis,
    pub cooldown_ms: Millis,
}

impl WindowParams {
    /// The reference profile values: oauth 10 / 15 min / 5 min, apikey 15 / 30 min / 10 min,
    /// local 2 / 5 min / 1 min.
    pub fn for_category(category: ProviderCategory) -> Self {
        let (failure_threshold, failure_window_ms, cooldown_ms) = match category {
            ProviderCategory::Oauth => (10, 900_000, 300_000),
            ProviderCategory::Apikey => (15, 1_800_000, 600_000),
            ProviderCategory::Local => (2, 300_000, 60_000),
        };
        Self {
            failure_threshold,
            failure_window_ms,
            cooldown_ms,
        }
    }

    fn normalized(self, name: &str, warnings: &mut Vec<String>) -> Self {
        let mut p = self;
        if p.failure_threshold == 0 {
            warnings.push(format!(
                "{name}.failure_threshold = 0 would always cool; using 1"
            ));
            p.failure_threshold = 1;
        }
        if p.failure_window_ms == 0 {
            warnings.push(format!(
                "{name}.failure_window_ms = 0 can hold no failure; using 1"
            ));
            p.failure_window_ms = 1;
        }
        p
    }
}

/// `[resilience.provider_cooldown]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderCooldownParams {
    pub enabled: bool,
    pub oauth: WindowParams,
    pub apikey: WindowParams,
    /// Not in the example config; the reference profile carries these values.
    pub local: WindowParams,
    pub min_retry_cooldown_ms: Millis,
    pub max_retry_cooldown_ms: Millis,
}

impl Default for ProviderCooldownParams {
    fn default() -> Self {
        Self {
            enabled: false,
            oauth: WindowParams::for_category(ProviderCategory::Oauth),
            apikey: WindowParams::for_category(ProviderCategory::Apikey),
            local: WindowParams::for_category(ProviderCategory::Local),
            min_retry_cooldown_ms: 5_000,
            max_retry_cooldown_ms: 300_000,
        }
    }
}

impl ProviderCooldownParams {
    pub fn window(&self, category: ProviderCategory) -> &WindowParams {
        match category {
            ProviderCategory::Oauth => &self.oauth,
            ProviderCategory::Apikey => &self.apikey,
            ProviderCategory::Local => &self.local,
        }
    }

    /// The connection-level cooldown after `failure_count` consecutive failures:
    /// `min(min_retry · 2^min(n−1, 10), max_retry)`, 0 without failures.
    pub fn connection_backoff_ms(&self, failure_count: u32) -> Millis {
        if failure_count == 0 {
            return 0;
        }
        let exponent = (failure_count - 1).min(MAX_RETRY_EXPONENT);
        self.min_retry_cooldown_ms
            .saturating_mul(1 << exponent)
            .min(self.max_retry_cooldown_ms)
    }

    /// Clamp into range; never fails, each adjustment yields a warning naming the field.
    pub fn normalized(self) -> (Self, Vec<String>) {
        let mut p = self;
        let mut warnings = Vec::new();
        p.oauth = p.oauth.normalized("oauth", &mut warnings);
        p.apikey = p.apikey.normalized("apikey", &mut warnings);
        p.local = p.local.normalized("local", &mut warnings);
        if p.max_retry_cooldown_ms < p.min_retry_cooldown_ms {
            warnings.push(format!(
                "max_retry_cooldown_ms = {} is below min_retry_cooldown_ms; using {}",
                p.max_retry_cooldown_ms, p.min_retry_cooldown_ms
            ));
            p.max_retry_cooldown_ms = p.min_retry_cooldown_ms;
        }
        (p, warnings)
    }
}

/// One provider's failure window.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProviderWindow {
    failures: VecDeque<Millis>,
    cooling_until: Option<Millis>,
}

impl ProviderWindow {
    /// Count a failure; returns the end of the cooling when this failure starts one.
    pub fn record_failure(&mut self, params: &WindowParams, now: Millis) -> Option<Millis> {
        if self.cooling_until(now).is_some() {
            return None;
        }
        self.cooling_until = None;
        while self
            .failures
            .front()
            .is_some_and(|&at| !in_window(params, at, now))
        {
            self.failures.pop_front();
        }
        self.failures.push_back(now);
        let threshold = usize::try_from(params.failure_threshold.max(1)).unwrap_or(usize::MAX);
        if self.failures.len() < threshold {
            return None;
        }
        self.failures.clear();
        let until = now.saturating_add(params.cooldown_ms);
        self.cooling_until = Some(until);
        Some(until)
    }

    /// A success clears the window (an active cooling still runs out on time).
    pub fn record_success(&mut self) {
        self.failures.clear();
    }

    /// The end of the active cooling, if any.
    pub fn cooling_until(&self, now: Millis) -> Option<Millis> {
        self.cooling_until.filter(|&until| until > now)
    }

    /// Failures currently counted in the window.
    pub fn failures_in_window(&self, params: &WindowParams, now: Millis) -> usize {
        self.failures
            .iter()
            .filter(|&&at| in_window(params, at, now))
            .count()
    }

    fn is_idle(&self, params: &WindowParams, now: Millis) -> bool {
        self.cooling_until(now).is_none() && self.failures_in_window(params, now) == 0
    }
}

/// A failure at `at` counts while `now − at < failure_window_ms`.
fn in_window(params: &WindowParams, at: Millis, now: Millis) -> bool {
    now.saturating_sub(at) < params.failure_window_ms
}

/// One connection's consecutive failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionEntry {
    pub failure_count: u32,
    pub last_failure_at: Millis,
}

impl ConnectionEntry {
    /// The end of the entry's cooling, if it is still cooling at `now`.
    pub fn cooling_until(&self, params: &ProviderCooldownParams, now: Millis) -> Option<Millis> {
        let until = self
            .last_failure_at
            .saturating_add(params.connection_backoff_ms(self.failure_count));
        (until > now).then_some(until)
    }
}

/// All provider windows and connection entries of a node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProviderCooldownTracker {
    params: ProviderCooldownParams,
    providers: HashMap<String, (ProviderCategory, ProviderWindow)>,
    connections: HashMap<(String, String), ConnectionEntry>,
}

impl ProviderCooldownTracker {
    pub fn new(params: ProviderCooldownParams) -> Self {
        Self {
            params: params.normalized().0,
            ..Self::default()
        }
    }

    pub fn params(&self) -> &ProviderCooldownParams {
        &self.params
    }

    /// Replace the parameters (config reload). Disabling drops all memory.
    pub fn set_params(&mut self, params: ProviderCooldownParams) {
        self.params = params.normalized().0;
        if !self.params.enabled {
            self.providers.clear();
            self.connections.clear();
        }
    }

    /// Record a provider failure (and the connection's, when known). Returns the end of a
    /// provider cooling this failure started.
    pub fn record_failure(
        &mut self,
        provider: &str,
        category: ProviderCategory,
        connection: Option<&str>,
        now: Millis,
    ) -> Option<Millis> {
        if !self.params.enabled {
            return None;
        }
        if let Some(connection) = connection {
            let entry = self
                .connections
                .entry((provider.to_owned(), connection.to_owned()))
                .or_insert(ConnectionEntry {
                    failure_count: 0,
                    last_failure_at: now,
                });
            entry.failure_count = entry.failure_count.saturating_add(1);
            entry.last_failure_at = now;
        }
        let window = self.params.window(category);
        let (stored, state) = self
            .providers
            .entry(provider.to_owned())
            .or_insert_with(|| (category, ProviderWindow::default()));
        *stored = category;
        state.record_failure(window, now)
    }

    /// Record a success: the provider's window and the connection's entry are cleared.
    pub fn record_success(&mut self, provider: &str, connection: Option<&str>) {
        if let Some((_, window)) = self.providers.get_mut(provider) {
            window.record_success();
        }
        if let Some(connection) = connection {
            self.connections
                .remove(&(provider.to_owned(), connection.to_owned()));
        }
    }

    /// When the provider (or, if given, that connection of it) stops cooling; `None` when it
    /// may be tried now. The later of the two coolings wins.
    pub fn cooling_until(
        &self,
        provider: &str,
        connection: Option<&str>,
        now: Millis,
    ) -> Option<Millis> {
        if !self.params.enabled {
            return None;
        }
        let provider_until = self
            .providers
            .get(provider)
            .and_then(|(_, window)| window.cooling_until(now));
        let connection_until = connection.and_then(|connection| {
            self.connections
                .get(&(provider.to_owned(), connection.to_owned()))
                .and_then(|entry| entry.cooling_until(&self.params, now))
        });
        provider_until.max(connection_until)
    }

    /// Drop entries that no longer affect anything: idle provider windows, and connection
    /// entries whose last failure is older than `max(30 min, max_retry_cooldown_ms)`.
    pub fn prune(&mut self, now: Millis) {
        let params = self.params;
        self.providers
            .retain(|_, (category, window)| !window.is_idle(params.window(*category), now));
        let retention = params
            .max_retry_cooldown_ms
            .max(MIN_CONNECTION_RETENTION_MS);
        self.connections
            .retain(|_, entry| entry.last_failure_at.saturating_add(retention) > now);
    }

    /// Number of provider windows and connection entries held.
    pub fn len(&self) -> (usize, usize) {
        (self.providers.len(), self.connections.len())
    }

    pub fn is_empty(&self) -> bool {
        self.providers.is_empty() && self.connections.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Millis = 60_000;

    fn enabled() -> ProviderCooldownTracker {
        ProviderCooldownTracker::new(ProviderCooldownParams {
            enabled: true,
            ..ProviderCooldownParams::default()
        })
    }

    #[test]
    fn defaults_match_the_example_config() {
        let p = ProviderCooldownParams::default();
        assert!(!p.enabled);
        assert_eq!(
            p.oauth,
            WindowParams {
                failure_threshold: 10,
                failure_window_ms: 15 * MIN,
                cooldown_ms: 5 * MIN
            }
        );
        assert_eq!(
            p.apikey,
            WindowParams {
                failure_threshold: 15,
                failure_window_ms: 30 * MIN,
                cooldown_ms: 10 * MIN
            }
        );
        assert_eq!(
            (p.min_retry_cooldown_ms, p.max_retry_cooldown_ms),
            (5_000, 300_000)
        );
    }

    #[test]
    fn oauth_cools_after_ten_failures_within_fifteen_minutes() {
        let mut t = enabled();
        for i in 0..9 {
            assert_eq!(
                t.record_failure("claude", ProviderCategory::Oauth, None, i * MIN),
                None
            );
        }
        assert_eq!(t.cooling_until("claude", None, 9 * MIN), None);
        let until = t.record_failure("claude", ProviderCategory::Oauth, None, 14 * MIN);
        assert_eq!(until, Some(19 * MIN));
        assert_eq!(
            t.cooling_until("claude", None, 19 * MIN - 1),
            Some(19 * MIN)
        );
        assert_eq!(t.cooling_until("claude", None, 19 * MIN), None);
        // Another provider is unaffected.
        assert_eq!(t.cooling_until("codex", None, 15 * MIN), None);
    }

    #[test]
    fn apikey_cools_after_fifteen_failures_within_thirty_minutes() {
        let mut t = enabled();
        for i in 0..14 {
            t.record_failure("openai", ProviderCategory::Apikey, None, i * MIN);
        }
        let until = t.record_failure("openai", ProviderCategory::Apikey, None, 29 * MIN);
        assert_eq!(until, Some(39 * MIN));
    }

    #[test]
    fn failures_outside_the_window_do_not_count() {
        let mut t = enabled();
        // Ten failures, but the first has left the 15-minute window by the tenth.
        for i in 0..10 {
            let until = t.record_failure("claude", ProviderCategory::Oauth, None, i * 100_000);
            assert_eq!(until, None, "failure {i}");
        }
        assert_eq!(t.cooling_until("claude", None, 900_000), None);
    }

    #[test]
    fn success_clears_the_window_but_not_an_active_cooling() {
        let mut t = enabled();
        for _ in 0..9 {
            t.record_failure("claude", ProviderCategory::Oauth, None, 0);
        }
        t.record_success("claude", None);
        assert_eq!(
            t.record_failure("claude", ProviderCategory::Oauth, None, 1),
            None
        );

        for _ in 0..9 {
            t.record_failure("claude", ProviderCategory::Oauth, None, 2);
        }
        assert_eq!(t.cooling_until("claude", None, 2), Some(2 + 5 * MIN));
        t.record_success("claude", None);
        assert_eq!(t.cooling_until("claude", None, 3), Some(2 + 5 * MIN));
    }

    #[test]
    fn failures_while_cooling_neither_extend_nor_count() {
        let mut t = enabled();
        for _ in 0..10 {
            t.record_failure("claude", ProviderCategory::Oauth, None, 0);
        }
        for _ in 0..20 {
            assert_eq!(
                t.record_failure("claude", ProviderCategory::Oauth, None, MIN),
                None
            );
        }
        assert_eq!(t.cooling_until("claude", None, MIN), Some(5 * MIN));
        // After the cooling, a fresh threshold is needed.
        for _ in 0..9 {
            t.record_failure("claude", ProviderCategory::Oauth, None, 5 * MIN);
        }
        assert_eq!(t.cooling_until("claude", None, 5 * MIN), None);
    }

    #[test]
    fn connection_backoff_doubles_from_min_to_max() {
        let p = ProviderCooldownParams::default();
        let expected = [
            0, 5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000,
        ];
        for (n, want) in expected.into_iter().enumerate() {
            let n = u32::try_from(n).unwrap();
            assert_eq!(p.connection_backoff_ms(n), want, "n = {n}");
        }
        assert_eq!(p.connection_backoff_ms(u32::MAX), 300_000);
        // The exponent stops at 10 even when max allows more.
        let wide = ProviderCooldownParams {
            max_retry_cooldown_ms: Millis::MAX,
            ..p
        };
        assert_eq!(wide.connection_backoff_ms(11), 5_000 << 10);
        assert_eq!(wide.connection_backoff_ms(30), 5_000 << 10);
    }

    #[test]
    fn connection_entries_back_off_and_clear_on_success() {
        let mut t = enabled();
        t.record_failure("openai", ProviderCategory::Apikey, Some("k1"), 0);
        assert_eq!(t.cooling_until("openai", Some("k1"), 4_999), Some(5_000));
        assert_eq!(t.cooling_until("openai", Some("k1"), 5_000), None);
        assert_eq!(t.cooling_until("openai", Some("k2"), 1), None);
        assert_eq!(t.cooling_until("openai", None, 1), None);
        t.record_failure("openai", ProviderCategory::Apikey, Some("k1"), 6_000);
        assert_eq!(t.cooling_until("openai", Some("k1"), 6_000), Some(16_000));
        t.record_success("openai", Some("k1"));
        assert_eq!(t.cooling_until("openai", Some("k1"), 6_001), None);
    }

    #[test]
    fn disabled_tracker_records_nothing() {
        let mut t = ProviderCooldownTracker::new(ProviderCooldownParams::default());
        for _ in 0..100 {
            assert_eq!(
                t.record_failure("claude", ProviderCategory::Oauth, Some("c"), 0),
                None
            );
        }
        assert!(t.is_empty());
        assert_eq!(t.cooling_until("claude", Some("c"), 0), None);

        let mut t = enabled();
        t.record_failure("claude", ProviderCategory::Oauth, Some("c"), 0);
        t.set_params(ProviderCooldownParams::default());
        assert!(t.is_empty());
    }

    #[test]
    fn prune_drops_only_idle_entries() {
        let mut t = enabled();
        for _ in 0..10 {
            t.record_failure("claude", ProviderCategory::Oauth, Some("c"), 0);
        }
        t.record_failure("openai", ProviderCategory::Apikey, None, 0);
        t.prune(10 * MIN);
        // claude stopped cooling at 5 min; openai's failure is still in its 30-minute window.
        assert_eq!(t.len(), (1, 1));
        t.prune(30 * MIN);
        assert!(t.is_empty());
    }

    #[test]
    fn normalized_names_fields() {
        let (p, warnings) = ProviderCooldownParams {
            oauth: WindowParams {
                failure_threshold: 0,
                failure_window_ms: 0,
                cooldown_ms: 1,
            },
            min_retry_cooldown_ms: 10_000,
            max_retry_cooldown_ms: 1_000,
            ..ProviderCooldownParams::default()
        }
        .normalized();
        assert_eq!(p.oauth.failure_threshold, 1);
        assert_eq!(p.max_retry_cooldown_ms, 10_000);
        for field in [
            "oauth.failure_threshold",
            "oauth.failure_window_ms",
            "max_retry_cooldown_ms",
        ] {
            assert!(
                warnings.iter().any(|w| w.starts_with(field)),
                "{field}: {warnings:?}"
            );
        }
        assert!(ProviderCooldownParams::default().normalized().1.is_empty());
    }

    #[test]
    fn params_deserialize_from_the_example_shape() {
        let p: ProviderCooldownParams = serde_json::from_str(
            r#"{"enabled":false,
                "oauth":{"failure_threshold":10,"failure_window_ms":900000,"cooldown_ms":300000},
                "apikey":{"failure_threshold":15,"failure_window_ms":1800000,"cooldown_ms":600000},
                "min_retry_cooldown_ms":5000,"max_retry_cooldown_ms":300000}"#,
        )
        .unwrap();
        assert_eq!(p, ProviderCooldownParams::default());
    }
}
