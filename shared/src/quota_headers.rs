//! Quota windows read from upstream rate-limit and usage headers.
//!
//! The quota-aware strategies (`reset-aware`, `reset-window`, `headroom`, `quota-weighted`,
//! `auto`) and the quota preflight need, per connection, how much of each window is left and
//! when it resets. Providers say so on every response, each in its own dialect:
//!
//! - OpenAI and the OpenAI-compatible providers (Groq, OpenRouter, Together, …):
//!   `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets as Go-style durations
//!   (`6m0s`, `1s`, `20ms`) — <https://platform.openai.com/docs/guides/rate-limits>;
//! - Anthropic API keys: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
//!   {limit,remaining,reset}`, resets as RFC 3339 instants —
//!   <https://docs.anthropic.com/en/api/rate-limits#response-headers>;
//! - Anthropic subscriptions (Claude OAuth): `anthropic-ratelimit-unified-{5h,7d}-utilization`
//!   (used share, 0–1) with `…-{5h,7d}-reset` (epoch seconds), and on the usage wall
//!   `anthropic-ratelimit-unified-status: rejected` with `anthropic-ratelimit-unified-reset`;
//! - Codex / ChatGPT plans: `x-codex-{primary,secondary}-used-percent` (0–100) with
//!   `…-window-minutes`, `…-reset-after-seconds` and `…-reset-at` (epoch seconds); the primary
//!   window is the 5-hour one, the secondary the weekly one (as in
//!   <https://github.com/earendil-works/pi/issues/4172>);
//! - MiniMax: `x-model-quota-remaining: haiku=0,sonnet=42`, a per-model request count.
//!
//! Parsing is pure and lenient: a header that does not parse is ignored, never an error, and
//! resets are returned as delays from the moment the response was received so the caller can
//! place them on whichever clock its policy runs on ([`QuotaReport::view`]).

use crate::Millis;
use crate::hints::{header, parse_ratelimit_reset, parse_rfc3339_epoch_ms};
use crate::strategy::QuotaView;

const MINUTE_MS: u64 = 60_000;
/// Windows up to a day long count as the short ("session") window; longer ones as weekly.
const SESSION_MAX_MS: u64 = 24 * 60 * MINUTE_MS;
/// Epoch values above this are milliseconds, below it seconds (2286 in epoch seconds).
const EPOCH_MS_THRESHOLD: u64 = 10_000_000_000;

/// Which quota a window measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WindowKind {
    /// A per-minute request budget (`*-requests`).
    Requests,
    /// A per-minute token budget (`*-tokens`).
    Tokens,
    /// Anthropic's input-token budget.
    InputTokens,
    /// Anthropic's output-token budget.
    OutputTokens,
    /// A subscription's short window (Claude 5 h, Codex primary).
    Session,
    /// A subscription's weekly window (Claude 7 d, Codex secondary).
    Weekly,
    /// Anthropic's unified limit as a whole (the usage wall), when it is rejected.
    Unified,
}

impl WindowKind {
    /// Every kind, in the order a report lists them.
    pub const ALL: [WindowKind; 7] = [
        Self::Requests,
        Self::Tokens,
        Self::InputTokens,
        Self::OutputTokens,
        Self::Session,
        Self::Weekly,
        Self::Unified,
    ];

    /// The snake_case name used in config keys (`[quota_preflight]`) and skip reasons.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::Tokens => "tokens",
            Self::InputTokens => "input_tokens",
            Self::OutputTokens => "output_tokens",
            Self::Session => "session",
            Self::Weekly => "weekly",
            Self::Unified => "unified",
        }
    }

    /// Parses [`WindowKind::as_str`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether the window is a long (weekly) one for [`QuotaView::weekly_reset_at`].
    pub const fn is_weekly(self) -> bool {
        matches!(self, Self::Weekly)
    }
}

/// One quota window as the upstream reported it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaWindow {
    pub kind: WindowKind,
    /// Fraction still available, `0.0..=1.0`.
    pub remaining: f64,
    /// Time from the response until the window resets, when stated (0 = already reset).
    pub reset_in_ms: Option<Millis>,
}

/// A [`QuotaWindow`] on the caller's policy clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaWindowAt {
    pub kind: WindowKind,
    pub remaining: f64,
    /// When the response that reported it arrived.
    pub observed_at: Millis,
    pub reset_at: Option<Millis>,
}

/// A per-model request budget (MiniMax `x-model-quota-remaining`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelQuota {
    pub model: String,
    pub remaining: u64,
}

/// Everything one response said about quota.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuotaReport {
    /// At most one window per kind, in [`WindowKind::ALL`] order.
    pub windows: Vec<QuotaWindow>,
    pub models: Vec<ModelQuota>,
}

impl QuotaReport {
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty() && self.models.is_empty()
    }

    pub fn window(&self, kind: WindowKind) -> Option<&QuotaWindow> {
        self.windows.iter().find(|w| w.kind == kind)
    }

    /// The window with the least left (ties: the one that resets last, as it binds longer).
    pub fn tightest(&self) -> Option<&QuotaWindow> {
        self.windows.iter().min_by(|a, b| {
            a.remaining
                .total_cmp(&b.remaining)
                .then(b.reset_in_ms.cmp(&a.reset_in_ms))
        })
    }

    /// The strategies' view, with resets placed on the caller's clock: `received_at` is the
    /// policy time at which the response arrived. `None` when no window was reported.
    ///
    /// `remaining` is the tightest window's; the session reset is that of the tightest short
    /// window (rate-limit windows count as short), the weekly reset that of the weekly window.
    pub fn view(&self, received_at: Millis) -> Option<QuotaView> {
        let tightest = self.tightest()?;
        let at = |w: &QuotaWindow| w.reset_in_ms.map(|d| received_at.saturating_add(d));
        let short = self
            .windows
            .iter()
            .filter(|w| !w.kind.is_weekly())
            .min_by(|a, b| a.remaining.total_cmp(&b.remaining));
        Some(QuotaView {
            remaining: tightest.remaining,
            session_reset_at: short.and_then(at),
            weekly_reset_at: self.window(WindowKind::Weekly).and_then(at),
        })
    }

    /// The windows placed on the caller's clock (`received_at`: policy time of the response),
    /// as a connection keeps them for the quota preflight.
    pub fn windows_at(&self, received_at: Millis) -> Vec<QuotaWindowAt> {
        self.windows
            .iter()
            .map(|w| QuotaWindowAt {
                kind: w.kind,
                remaining: w.remaining,
                observed_at: received_at,
                reset_at: w.reset_in_ms.map(|d| received_at.saturating_add(d)),
            })
            .collect()
    }

    /// The remaining requests of `model` (MiniMax), when reported.
    pub fn model_remaining(&self, model: &str) -> Option<u64> {
        self.models
            .iter()
            .find(|m| m.model.eq_ignore_ascii_case(model))
            .map(|m| m.remaining)
    }

    fn push(&mut self, window: Option<QuotaWindow>) {
        let Some(w) = window else { return };
        if !self.windows.iter().any(|x| x.kind == w.kind) {
            self.windows.push(w);
        }
    }
}

/// Reads every quota window `headers` state. `now_epoch_ms` is the wall clock at which the
/// response arrived (absolute resets are turned into delays from it).
pub fn parse(headers: &[(&str, &str)], now_epoch_ms: u64) -> QuotaReport {
    let mut report = QuotaReport::default();
    for (kind, suffix) in [
        (WindowKind::Requests, "requests"),
        (WindowKind::Tokens, "tokens"),
        (WindowKind::InputTokens, "input-tokens"),
        (WindowKind::OutputTokens, "output-tokens"),
    ] {
        report.push(anthropic_window(headers, kind, suffix, now_epoch_ms));
    }
    for (kind, suffix) in [
        (WindowKind::Requests, "requests"),
        (WindowKind::Tokens, "tokens"),
    ] {
        report.push(openai_window(headers, kind, suffix, now_epoch_ms));
    }
    for (name, default_kind) in [
        ("primary", WindowKind::Session),
        ("secondary", WindowKind::Weekly),
    ] {
        report.push(codex_window(headers, name, default_kind, now_epoch_ms));
    }
    for (name, kind) in [("5h", WindowKind::Session), ("7d", WindowKind::Weekly)] {
        report.push(unified_window(headers, name, kind, now_epoch_ms));
    }
    report.push(unified_wall(headers, now_epoch_ms));
    report
        .windows
        .sort_by_key(|w| WindowKind::ALL.iter().position(|k| *k == w.kind));
    if let Some(v) = header(headers, "x-model-quota-remaining") {
        report.models = model_quota(v);
    }
    report
}

/// `remaining / limit`, or 0 when nothing remains (a limit is not needed to know that).
fn fraction_left(remaining: Option<u64>, limit: Option<u64>) -> Option<f64> {
    match (remaining?, limit) {
        (0, _) => Some(0.0),
        (r, Some(l)) if l > 0 => Some((r as f64 / l as f64).clamp(0.0, 1.0)),
        _ => None,
    }
}

fn number(headers: &[(&str, &str)], name: &str) -> Option<u64> {
    header(headers, name)?.parse().ok()
}

fn float(headers: &[(&str, &str)], name: &str) -> Option<f64> {
    header(headers, name)?
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
}

/// The delay until an epoch instant (seconds, or milliseconds by magnitude); 0 once past.
fn until_epoch(value: u64, now_epoch_ms: u64) -> Millis {
    let at_ms = if value > EPOCH_MS_THRESHOLD {
        value
    } else {
        value.saturating_mul(1000)
    };
    at_ms.saturating_sub(now_epoch_ms)
}

fn anthropic_window(
    headers: &[(&str, &str)],
    kind: WindowKind,
    suffix: &str,
    now_epoch_ms: u64,
) -> Option<QuotaWindow> {
    let get = |field: &str| format!("anthropic-ratelimit-{suffix}-{field}");
    let remaining = fraction_left(
        number(headers, &get("remaining")),
        number(headers, &get("limit")),
    )?;
    let reset_in_ms = header(headers, &get("reset"))
        .and_then(parse_rfc3339_epoch_ms)
        .map(|at| at.saturating_sub(now_epoch_ms));
    Some(QuotaWindow {
        kind,
        remaining,
        reset_in_ms,
    })
}

fn openai_window(
    headers: &[(&str, &str)],
    kind: WindowKind,
    suffix: &str,
    now_epoch_ms: u64,
) -> Option<QuotaWindow> {
    let remaining = fraction_left(
        number(headers, &format!("x-ratelimit-remaining-{suffix}")),
        number(headers, &format!("x-ratelimit-limit-{suffix}")),
    )?;
    let reset_in_ms = header(headers, &format!("x-ratelimit-reset-{suffix}"))
        .and_then(|v| parse_ratelimit_reset(v, now_epoch_ms));
    Some(QuotaWindow {
        kind,
        remaining,
        reset_in_ms,
    })
}

fn codex_window(
    headers: &[(&str, &str)],
    name: &str,
    default_kind: WindowKind,
    now_epoch_ms: u64,
) -> Option<QuotaWindow> {
    let get = |field: &str| format!("x-codex-{name}-{field}");
    let used = float(headers, &get("used-percent"))?;
    let kind = match number(headers, &get("window-minutes")) {
        Some(m) if m > 0 && m.saturating_mul(MINUTE_MS) <= SESSION_MAX_MS => WindowKind::Session,
        Some(m) if m > 0 => WindowKind::Weekly,
        _ => default_kind,
    };
    let reset_in_ms = number(headers, &get("reset-after-seconds"))
        .map(|s| s.saturating_mul(1000))
        .or_else(|| number(headers, &get("reset-at")).map(|at| until_epoch(at, now_epoch_ms)));
    Some(QuotaWindow {
        kind,
        remaining: (1.0 - used / 100.0).clamp(0.0, 1.0),
        reset_in_ms,
    })
}

/// Utilisation is a share (`0.42`); values above 1 are read as percent (`42`), which some
/// proxies re-emit.
fn unified_window(
    headers: &[(&str, &str)],
    name: &str,
    kind: WindowKind,
    now_epoch_ms: u64,
) -> Option<QuotaWindow> {
    let get = |field: &str| format!("anthropic-ratelimit-unified-{name}-{field}");
    let used = float(headers, &get("utilization"))?;
    let used = if used > 1.0 { used / 100.0 } else { used };
    let reset_in_ms = number(headers, &get("reset")).map(|at| until_epoch(at, now_epoch_ms));
    Some(QuotaWindow {
        kind,
        remaining: (1.0 - used).clamp(0.0, 1.0),
        reset_in_ms,
    })
}

/// The usage wall: `anthropic-ratelimit-unified-status: rejected` means nothing is left until
/// `anthropic-ratelimit-unified-reset`.
fn unified_wall(headers: &[(&str, &str)], now_epoch_ms: u64) -> Option<QuotaWindow> {
    let status = header(headers, "anthropic-ratelimit-unified-status")?;
    if !status.eq_ignore_ascii_case("rejected") {
        return None;
    }
    let reset_in_ms = number(headers, "anthropic-ratelimit-unified-reset")
        .map(|at| until_epoch(at, now_epoch_ms));
    Some(QuotaWindow {
        kind: WindowKind::Unified,
        remaining: 0.0,
        reset_in_ms,
    })
}

/// `haiku=0,sonnet=42`: entries that do not parse are skipped.
fn model_quota(value: &str) -> Vec<ModelQuota> {
    value
        .split(',')
        .filter_map(|entry| {
            let (model, n) = entry.split_once('=')?;
            let model = model.trim();
            (!model.is_empty()).then_some(())?;
            Some(ModelQuota {
                model: model.to_owned(),
                remaining: n.trim().parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
