//! A provider as the hot path sees it: the breaker view published by its breaker actor.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use switchyard_shared::quota_preflight::Thresholds;

use actix::Addr;
use arc_swap::{ArcSwap, ArcSwapOption};
use switchyard_shared::Millis;
use switchyard_shared::breaker::{BreakerState, BreakerView};
use switchyard_shared::config::ProviderConfig;
use switchyard_shared::lockout::ModelRef;
use switchyard_shared::strategy::StrategyState;

use super::tool_limits::{Learned, ToolLimits};
use crate::actors::ProviderBreakerActor;
use crate::api::errors::ClientFormat;
use crate::counters::TransitionCounts;
use crate::transport::Endpoint;

/// Where the hot path finds a provider's breaker actor: set once at start, replaced only by
/// the actor's own supervision after a panic (see `actors::breaker`).
#[derive(Default)]
pub struct BreakerSlot(ArcSwapOption<Addr<ProviderBreakerActor>>);

impl BreakerSlot {
    /// The current address, if the actor was started.
    pub fn get(&self) -> Option<Addr<ProviderBreakerActor>> {
        self.0.load_full().map(|addr| (*addr).clone())
    }

    /// Sets the first address; an already set slot is left alone (`Err` gives `addr` back).
    pub fn set(&self, addr: Addr<ProviderBreakerActor>) -> Result<(), Addr<ProviderBreakerActor>> {
        if self.0.load().is_some() {
            return Err(addr);
        }
        self.0.store(Some(Arc::new(addr)));
        Ok(())
    }

    /// The restarted actor's address replaces the dead one's.
    pub(crate) fn replace(&self, addr: Addr<ProviderBreakerActor>) {
        self.0.store(Some(Arc::new(addr)));
    }
}

impl std::fmt::Debug for BreakerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.load().is_some() {
            "BreakerSlot(started)"
        } else {
            "BreakerSlot(empty)"
        })
    }
}

/// The breaker as published for readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSnapshot {
    pub view: BreakerView,
    /// Failures counted in the current window: successes must be reported while > 0.
    pub failure_count: u32,
}

impl Default for BreakerSnapshot {
    fn default() -> Self {
        Self {
            view: BreakerView::Closed,
            failure_count: 0,
        }
    }
}

impl BreakerSnapshot {
    /// Whether a success must be sent to the breaker actor (anything but a clean CLOSED).
    pub fn needs_success_report(&self) -> bool {
        self.failure_count > 0 || !matches!(self.view, BreakerView::Closed)
    }

    /// The state name.
    pub fn state(&self) -> BreakerState {
        self.view.state()
    }

    /// Retry-after for a rejected request, when the view is OPEN and not yet due.
    pub fn open_remaining(&self, now: Millis) -> Option<Millis> {
        match self.view {
            BreakerView::Open { until } if until > now => Some(until - now),
            _ => None,
        }
    }
}

/// A provider's shared handle.
pub struct ProviderHandle {
    pub idx: usize,
    pub id: Arc<str>,
    pub config: ProviderConfig,
    pub breaker: ArcSwap<BreakerSnapshot>,
    /// Indices (into the runtime's connection list) of this provider's connections.
    pub connections: Vec<usize>,
    /// Connection selection memory (round-robin position, strict-random deck, lkgp).
    pub strategy_state: Mutex<StrategyState>,
    /// Requests in flight on this provider.
    pub inflight: AtomicU32,
    /// The connection of the last dispatch (`usize::MAX` = none), for sticky counts.
    pub last_used_conn: AtomicUsize,
    /// The breaker actor (it supervises this provider's connection actors); replaced when the
    /// actor is restarted after a panic.
    pub actor: BreakerSlot,
    /// Breaker transitions so far (exported as `switchyard_breaker_transitions_total`).
    pub transitions: TransitionCounts,
    /// Upstream endpoints parsed once (chat, responses, messages), so a request neither
    /// parses a URI nor builds its `Host` value.
    endpoints: [Option<Endpoint>; 3],
    /// The quota preflight's thresholds for this provider's connections; `None` when
    /// `[quota_preflight]` is off.
    pub quota_preflight: Option<Thresholds>,
    /// Tool limits learned from "too many tools" answers, by model: requests above them skip
    /// this provider's target (`tool_limit`) until the limit lapses (`tool_limit_ttl_ms`).
    tool_limits: Mutex<ToolLimits>,
    /// Set once a limit was ever learned: until then every request skips the lock above (the
    /// check runs before every attempt and after every success).
    any_tool_limit: AtomicBool,
}

impl ProviderHandle {
    pub fn new(idx: usize, config: ProviderConfig, connections: Vec<usize>) -> Self {
        let endpoints = [
            ClientFormat::OpenAiChat,
            ClientFormat::OpenAiResponses,
            ClientFormat::Anthropic,
        ]
        .map(|f| Endpoint::parse(&endpoint_url(&config.base_url, f)));
        Self {
            idx,
            id: Arc::from(config.id.as_str()),
            breaker: ArcSwap::from_pointee(BreakerSnapshot::default()),
            connections,
            strategy_state: Mutex::new(StrategyState::new()),
            inflight: AtomicU32::new(0),
            last_used_conn: AtomicUsize::new(usize::MAX),
            actor: BreakerSlot::default(),
            transitions: TransitionCounts::default(),
            endpoints,
            config,
            quota_preflight: None,
            tool_limits: Mutex::new(ToolLimits::default()),
            any_tool_limit: AtomicBool::new(false),
        }
    }

    /// Records that `model` takes at most `limit` tools here until `expires_at` (a lower
    /// limit wins, [`ToolLimits::merge`]); the stored limit when it changed.
    pub fn record_tool_limit(
        &self,
        model: &str,
        limit: u32,
        expires_at: Millis,
        now: Millis,
    ) -> Option<Learned> {
        self.any_tool_limit.store(true, Ordering::Relaxed);
        self.tool_limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .merge(model, limit, expires_at, now)
    }

    /// The live learned tool limit of `model`, if any.
    pub fn tool_limit(&self, model: &str, now: Millis) -> Option<u32> {
        if !self.any_tool_limit.load(Ordering::Relaxed) {
            return None;
        }
        self.tool_limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(model, now)
            .map(|l| l.limit)
    }

    /// A success on `model` that carried `tools` tools: drops a learned limit below that
    /// count (it was wrong). Returns the dropped limit.
    pub fn tool_limit_success(&self, model: &str, tools: usize) -> Option<u32> {
        self.tool_limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_success(model, tools)
    }

    /// Every live learned tool limit, in model order (the admin view).
    pub fn tool_limits(&self, now: Millis) -> Vec<(String, Learned)> {
        self.tool_limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .live(now)
    }

    /// The same handle with the quota preflight on at `thresholds` (`None`: off).
    pub fn with_quota_preflight(mut self, thresholds: Option<Thresholds>) -> Self {
        self.quota_preflight = thresholds;
        self
    }

    /// How the lockout policy names `model` on `connection` of this provider.
    pub fn model_ref<'a>(&'a self, connection: &'a str, model: &'a str) -> ModelRef<'a> {
        ModelRef {
            provider: &self.id,
            connection,
            model,
            // 429/403/402 lock the model's quota family (docs/policy.md, `lockout`).
            family: Some(switchyard_shared::lockout::quota_family(model)),
            per_model_quota: self.config.per_model_quota,
        }
    }

    /// The parsed upstream endpoint for a client format (`None` if the base URL is invalid).
    pub fn endpoint(&self, format: ClientFormat) -> Option<&Endpoint> {
        let i = match format {
            ClientFormat::OpenAiChat => 0,
            ClientFormat::OpenAiResponses => 1,
            ClientFormat::Anthropic => 2,
        };
        self.endpoints.get(i).and_then(Option::as_ref)
    }
}

impl std::fmt::Debug for ProviderHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// `base_url` without trailing slashes, plus the format's endpoint path.
pub fn endpoint_url(base_url: &str, format: ClientFormat) -> String {
    let path = match format {
        ClientFormat::OpenAiChat => "/chat/completions",
        ClientFormat::OpenAiResponses => "/responses",
        ClientFormat::Anthropic => "/messages",
    };
    switchyard_shared::endpoint::join(base_url, path)
}
