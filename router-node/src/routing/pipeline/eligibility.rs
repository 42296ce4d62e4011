//! Step 1, eligibility: may this target be tried, and on which connection?

use std::sync::Arc;

use switchyard_shared::Millis;
use switchyard_shared::breaker::BreakerView;
use switchyard_shared::config::Target;

use super::{RequestCtx, Step, TargetCtx};
use crate::actors::{self, Admitted, ProbeGuard};
use crate::actors::{ConnHandle, ProviderHandle};
use crate::api::errors::GatewayError;
use crate::routing::dispatch::{RouteRequest, target_key};
use crate::routing::report::TargetSkip;
use crate::routing::{select, translation};
use crate::runtime::RoutingTable;

/// The target's provider and its body in the provider's wire format. A parameter that format
/// cannot carry is the client's error (400 naming it), whatever state the provider is in.
pub fn prepare(
    rt: &RoutingTable,
    req: &RouteRequest,
    target: &Target,
) -> Result<Step<TargetCtx>, GatewayError> {
    let Some(provider) = rt.provider(&target.provider).cloned() else {
        return Ok(Step::Skip(TargetSkip::NoConnections));
    };
    let plan = translation::plan_for(req.format, &provider.config);
    let model: Arc<str> = target.model.clone();
    let (upstream_body, translation) = translation::upstream_body(
        req.format,
        plan,
        &req.body,
        &model,
        rt.clock.epoch_ms() / 1000,
        &switchyard_shared::translate::TranslateOptions {
            unknown_params: rt.unknown_params,
            ..Default::default()
        },
    )?;
    Ok(Step::Go(TargetCtx {
        key: target_key(target),
        provider,
        model,
        pinned: target.connection.clone(),
        wire: plan.wire,
        upstream_body,
        translation,
        probe: None,
        gate_rejection: None,
        fallback: false,
        retries: super::retry::TargetRetries::default(),
    }))
}

/// The provider-level gates: the optional windowed provider cooldown, then the breaker. A
/// breaker due for a probe admits this request as the probe (locally, then cluster-wide).
pub async fn breaker_gate(
    rt: &RoutingTable,
    provider: &Arc<ProviderHandle>,
) -> Step<Option<ProbeGuard>> {
    let now = rt.clock.now();
    if rt.settings.load().provider_cooldown.enabled
        && let Some(until) = rt
            .provider_cooldown
            .lock()
            .ok()
            .and_then(|t| t.cooling_until(&provider.id, None, now))
    {
        return Step::Skip(TargetSkip::ProviderCooldown {
            retry_after_ms: until - now,
        });
    }
    match provider.breaker.load().view {
        BreakerView::Closed | BreakerView::Degraded => Step::Go(None),
        BreakerView::Open { until } if until > now => Step::Skip(TargetSkip::CircuitOpen {
            retry_after_ms: until - now,
        }),
        BreakerView::Open { .. } | BreakerView::HalfOpen => {
            let mut admitted = actors::admit_probe(provider, &rt.actor_stats, rt.clock, now).await;
            if let Some(cluster) = &rt.cluster {
                let ttl = crate::cluster::probe::lease_ttl_ms(provider);
                admitted =
                    crate::cluster::probe::admit(cluster, provider, admitted, ttl, now).await;
            }
            match admitted {
                Admitted::Allowed => Step::Go(None),
                Admitted::Probe(probe) => Step::Go(Some(probe)),
                Admitted::Rejected { retry_after_ms } => {
                    Step::Skip(TargetSkip::CircuitOpen { retry_after_ms })
                }
            }
        }
    }
}

/// The connection for the next attempt: eligibility (snapshots, exclusions, the key's and the
/// lease's allowed connections), then the pin or the connection strategy. With none left, the
/// reason says why, most specific first.
pub fn pick_connection(
    rt: &RoutingTable,
    req: &RouteRequest,
    ctx: &mut TargetCtx,
    rc: &RequestCtx,
    now: Millis,
) -> Step<Arc<ConnHandle>> {
    let elig = select::eligible(
        rt,
        &ctx.provider,
        &ctx.model,
        ctx.pinned.as_deref(),
        &req.allowed_connections(),
        req.lease.is_some(),
        &rc.excluded,
        &rc.pending_blocks,
        now,
    );
    if elig.candidates.is_empty() {
        let skip = if let Some(g) = ctx.gate_rejection.take() {
            g
        } else if rc
            .report
            .last_failure
            .as_ref()
            .is_some_and(|f| f.target == ctx.key)
        {
            TargetSkip::Failed
        } else if elig.total == 0 {
            TargetSkip::NoConnections
        } else if elig.not_allowed == elig.total {
            TargetSkip::NotAllowed
        } else if elig.excluded > 0 && elig.blocked.is_empty() {
            // Every connection left failed earlier in this request (on another target).
            TargetSkip::RequestExhaustion
        } else if elig.quota_cut > 0 && elig.quota_cut == elig.blocked.len() {
            TargetSkip::QuotaCutoff {
                connections: elig.blocked,
            }
        } else {
            TargetSkip::Blocked {
                connections: elig.blocked,
            }
        };
        return Step::Skip(skip);
    }
    match select::pick(
        rt,
        &ctx.provider,
        &elig.candidates,
        req.session.as_deref(),
        ctx.fallback,
        now,
    ) {
        Some(conn) => Step::Go(conn),
        None => Step::Skip(TargetSkip::NoConnections),
    }
}
