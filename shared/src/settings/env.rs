//! The environment layer of the resilience settings.
//!
//! Containers are often configured through environment variables only, so a few settings can be
//! set there (the names are listed in docs/policy.md, `settings`). Reading the process
//! environment is I/O, so [`EnvLayer::from_lookup`] takes the lookup as a closure: production
//! passes `std::env::var`, tests pass a map.
//!
//! Precedence is not uniform, by specification: `RATE_LIMIT_AUTO_ENABLE` wins over the persisted
//! runtime value (it lands in [`EnvLayer::forced`]); every other variable sits between the file
//! and the persisted value ([`EnvLayer::defaults`]). An unparseable value is ignored with a
//! warning naming the variable; an out-of-range one is clamped with a warning.

use super::layer::{Layer, Mode};
use super::{FieldError, ResiliencePatch, ResilienceSettings};

/// Where a variable sits relative to the persisted runtime value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rank {
    /// Sets the default: a persisted runtime value beats it.
    BelowPersisted,
    /// Beats the persisted runtime value.
    AbovePersisted,
}
use Rank::{AbovePersisted, BelowPersisted};

type Setter = fn(&mut ResiliencePatch, &str) -> Result<(), String>;

/// One recognised variable.
struct EnvVar {
    name: &'static str,
    /// The settings path it sets, to name the variable in clamping warnings.
    path: &'static str,
    rank: Rank,
    set: Setter,
}

macro_rules! var {
    ($name:literal, $rank:expr, $parse:ident, $first:ident $(. $rest:ident)*) => {
        EnvVar {
            name: $name,
            path: concat!(stringify!($first) $(, ".", stringify!($rest))*),
            rank: $rank,
            set: |patch, raw| {
                patch.$first$(.$rest)* = Some($parse(raw)?);
                Ok(())
            },
        }
    };
}

const VARS: &[EnvVar] = &[
    var!(
        "SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_THRESHOLD",
        BelowPersisted,
        parse_u32,
        provider_cooldown.oauth.failure_threshold
    ),
    var!(
        "SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_WINDOW_MS",
        BelowPersisted,
        parse_u64,
        provider_cooldown.oauth.failure_window_ms
    ),
    var!(
        "SWITCHYARD_PROVIDER_BREAKER_OAUTH_COOLDOWN_MS",
        BelowPersisted,
        parse_u64,
        provider_cooldown.oauth.cooldown_ms
    ),
    var!(
        "SWITCHYARD_PROVIDER_BREAKER_API_KEY_FAILURE_THRESHOLD",
        BelowPersisted,
        parse_u32,
        provider_cooldown.apikey.failure_threshold
    ),
    var!(
        "SWITCHYARD_PROVIDER_BREAKER_API_KEY_FAILURE_WINDOW_MS",
        BelowPersisted,
        parse_u64,
        provider_cooldown.apikey.failure_window_ms
    ),
    var!(
        "SWITCHYARD_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS",
        BelowPersisted,
        parse_u64,
        provider_cooldown.apikey.cooldown_ms
    ),
    var!(
        "RATE_LIMIT_MAX_WAIT_MS",
        BelowPersisted,
        parse_u64,
        request_queue.max_wait_ms
    ),
    var!(
        "RATE_LIMIT_EXECUTION_MAX_WAIT_MS",
        BelowPersisted,
        parse_u64,
        request_queue.execution_max_wait_ms
    ),
    var!(
        "RATE_LIMIT_MAX_QUEUE_DEPTH",
        BelowPersisted,
        parse_u32,
        request_queue.max_queue_depth
    ),
    var!(
        "RATE_LIMIT_AUTO_ENABLE",
        AbovePersisted,
        parse_bool,
        request_queue.auto_enable_apikey_providers
    ),
    var!(
        "PROVIDER_COOLDOWN_ENABLED",
        BelowPersisted,
        parse_bool,
        provider_cooldown.enabled
    ),
    var!(
        "PROVIDER_COOLDOWN_MIN_MS",
        BelowPersisted,
        parse_u64,
        provider_cooldown.min_retry_cooldown_ms
    ),
    var!(
        "PROVIDER_COOLDOWN_MAX_MS",
        BelowPersisted,
        parse_u64,
        provider_cooldown.max_retry_cooldown_ms
    ),
];

/// The names of every environment variable the settings read, for documentation and `--check`.
pub fn variable_names() -> impl Iterator<Item = &'static str> {
    VARS.iter().map(|var| var.name)
}

/// The settings read from the environment, split by precedence.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvLayer {
    /// Beaten by persisted runtime values.
    pub defaults: ResiliencePatch,
    /// Beats persisted runtime values (`RATE_LIMIT_AUTO_ENABLE`).
    pub forced: ResiliencePatch,
    /// Ignored or clamped variables, each named by the variable.
    pub warnings: Vec<FieldError>,
}

impl EnvLayer {
    /// Reads every recognised variable through `lookup` (e.g. `|name| std::env::var(name).ok()`).
    /// Unset and empty variables are skipped.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Self {
        let mut layer = Self::default();
        for var in VARS {
            let Some(raw) = lookup(var.name) else {
                continue;
            };
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let target = if var.rank == AbovePersisted {
                &mut layer.forced
            } else {
                &mut layer.defaults
            };
            if let Err(problem) = (var.set)(target, raw) {
                layer.warnings.push(FieldError::new(
                    var.name,
                    format!("{problem}; the value is ignored"),
                ));
            }
        }
        for patch in [&mut layer.defaults, &mut layer.forced] {
            let mut clamped = Vec::new();
            ResilienceSettings::bound(patch, &(), Mode::Clamp, "", &mut clamped);
            layer.warnings.extend(clamped.into_iter().map(|issue| {
                let name = VARS
                    .iter()
                    .find(|var| var.path == issue.path)
                    .map_or(issue.path.as_str(), |var| var.name);
                FieldError::new(name, issue.message.clone())
            }));
        }
        layer
    }
}

fn parse_u64(raw: &str) -> Result<u64, String> {
    raw.parse()
        .map_err(|_| format!("{raw:?} is not a non-negative integer"))
}

fn parse_u32(raw: &str) -> Result<u32, String> {
    raw.parse()
        .map_err(|_| format!("{raw:?} is not a non-negative integer below 2^32"))
}

fn parse_bool(raw: &str) -> Result<bool, String> {
    match raw.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{raw:?} is not a boolean (true/false, 1/0, yes/no, on/off)"
        )),
    }
}
