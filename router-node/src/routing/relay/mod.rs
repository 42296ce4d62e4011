//! The `context-relay` combo strategy (docs/policy.md, `strategy`): when a session moves to another
//! connection or target, the older part of its conversation travels as a summary.
//!
//! Why: a session that leaves its connection (cooling, failing, ineligible) lands on one that
//! holds none of its prompt cache and may have a smaller context window; a summary of the
//! older turns plus the last few unchanged is a cheaper, shorter hand-off than the whole
//! history. Targets are ordered like `priority`, with the session's last target first
//! ([`home_first`]), so a session stays where it is until it has to move.
//!
//! Flow: the request of a session carries a [`RelayCtx`] (its home: the target and connection
//! that served the session last). When the pipeline is about to dispatch to another
//! connection ([`before_dispatch`]), the conversation is cut ([`messages::plan`]); when it is
//! long enough, the summariser is called once per request ([`summarise`]) and every dispatch
//! that moves gets the rewritten body. Fail-open: a summariser that fails or times out leaves
//! the conversation unchanged. The outcome is counted (`switchyard_context_relays_total`) and
//! named in `x-switchyard-context-relay`; the summariser's usage is added to a JSON answer's.
//! The home moves to whatever served the request ([`on_served`]).

pub mod messages;
pub mod summarise;

#[cfg(test)]
mod messages_tests;

use std::sync::Arc;

use actix_web::http::header::{HeaderName, HeaderValue};
use bytes::Bytes;
use switchyard_shared::config::{ComboRoute, Resolved, Target};
use switchyard_shared::strategy::{Strategy, stable_hash};

use super::dispatch::{RouteRequest, Routed, RoutedBody, SideCall, target_key};
use super::pipeline::{RequestCtx, TargetCtx};
use crate::actors::ConnHandle;
use crate::api::body::parse_body;
use crate::runtime::RoutingTable;
use crate::state::relay_homes::Home;

/// The response header naming the relay's outcome.
pub const HEADER: &str = "x-switchyard-context-relay";

/// How a relay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The moved request carried the summary.
    Summarised,
    /// The summariser failed or timed out; the conversation went unchanged.
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Summarised => "summarised",
            Self::Failed => "failed",
        }
    }
}

/// What a move sends, decided once per request.
#[derive(Debug)]
enum Decision {
    /// Not yet asked.
    Pending,
    /// The conversation goes as it is (too short, another format, or the summariser failed).
    Unchanged,
    /// The rewritten client body.
    Rewritten(Bytes),
}

/// A `context-relay` request of a session.
#[derive(Debug)]
pub struct RelayCtx {
    combo: Arc<ComboRoute>,
    key: u64,
    home: Option<Home>,
    decision: Decision,
    outcome: Option<Outcome>,
    /// The summariser's call, booked with the answer on its own connection.
    summariser: Option<SideCall>,
}

impl RelayCtx {
    /// The relay of a request: a `context-relay` combo and a session key, else `None`.
    pub fn for_request(rt: &RoutingTable, req: &RouteRequest, resolved: &Resolved) -> Option<Self> {
        let Resolved::Combo(combo) = resolved else {
            return None;
        };
        if combo.strategy != Strategy::ContextRelay {
            return None;
        }
        let session = req.session.as_deref()?;
        let key = stable_hash(format!("{}\0{session}", combo.name).as_bytes());
        Some(Self {
            combo: combo.clone(),
            key,
            home: rt.relay_homes.get(key),
            decision: Decision::Pending,
            outcome: None,
            summariser: None,
        })
    }
}

/// The session's home target first, the rest in `order`'s order.
pub fn home_first(relay: Option<&RelayCtx>, targets: &[Target], order: &mut [usize]) {
    let Some(home) = relay.and_then(|r| r.home.as_ref()) else {
        return;
    };
    let is_home = |&i: &usize| targets.get(i).is_some_and(|t| target_key(t) == home.target);
    if let Some(at) = order.iter().position(is_home) {
        order[..=at].rotate_right(1);
    }
}

/// Before a dispatch on `conn`: when the session moves (another target or connection than its
/// home), the target's body becomes the relayed one (the summariser is asked once per request).
pub async fn before_dispatch(
    rt: &RoutingTable,
    req: &RouteRequest,
    ctx: &mut TargetCtx,
    rc: &mut RequestCtx,
    conn: &ConnHandle,
) {
    let Some(relay) = rc.relay.as_mut() else {
        return;
    };
    let Some(home) = &relay.home else {
        return;
    };
    if home.target == ctx.key && home.connection == conn.id {
        return;
    }
    if matches!(relay.decision, Decision::Pending) {
        relay.decision = decide(rt, req, relay).await;
    }
    let Decision::Rewritten(body) = &relay.decision else {
        return;
    };
    match retranslate(rt, req, ctx, body.clone()) {
        Ok(()) => {}
        // The relayed body should translate wherever the client's did; if not, the
        // conversation goes unchanged rather than failing the request.
        Err(e) => tracing::warn!(code = %e.code, "relayed body not translatable; sent unchanged"),
    }
}

/// Asks the summariser when the conversation is long enough; counts the outcome.
async fn decide(rt: &RoutingTable, req: &RouteRequest, relay: &mut RelayCtx) -> Decision {
    let opts = &relay.combo.context_relay;
    let Some(plan) = messages::plan(
        req.format,
        &req.body.raw,
        opts.min_messages as usize,
        opts.keep_last as usize,
    ) else {
        return Decision::Unchanged;
    };
    let transcript = messages::transcript(&plan.split.older);
    let summary = summarise::summarise(rt, req, &relay.combo, plan.shape, &transcript).await;
    let (decision, outcome) = match summary {
        Ok(s) => {
            relay.summariser = s.call;
            let body = messages::rewritten_body(&plan, &s.text);
            (Decision::Rewritten(Bytes::from(body)), Outcome::Summarised)
        }
        Err(why) => {
            tracing::info!(combo = %relay.combo.name, why = %why,
                "context relay: no summary; the conversation goes unchanged");
            (Decision::Unchanged, Outcome::Failed)
        }
    };
    tracing::debug!(combo = %relay.combo.name, relay = outcome.as_str(), "context relay");
    rt.metrics.context_relay(outcome.as_str());
    relay.outcome = Some(outcome);
    decision
}

/// Replaces the target's upstream body with `body` in the provider's wire format.
fn retranslate(
    rt: &RoutingTable,
    req: &RouteRequest,
    ctx: &mut TargetCtx,
    body: Bytes,
) -> Result<(), crate::api::errors::GatewayError> {
    let parsed = parse_body(body)?;
    let plan = super::translation::plan_for(req.format, &ctx.provider.config);
    let (upstream_body, translation) = super::translation::upstream_body(
        req.format,
        plan,
        &parsed,
        &ctx.model,
        rt.clock.epoch_ms() / 1000,
        &switchyard_shared::translate::TranslateOptions {
            unknown_params: rt.unknown_params,
            ..Default::default()
        },
    )?;
    ctx.upstream_body = upstream_body;
    ctx.translation = translation;
    Ok(())
}

/// After a successful dispatch: the session's home is where it was served; the relay's
/// outcome goes into the answer's headers and the summariser's call onto the answer, booked
/// with it on the summariser's own connection (JSON or stream).
pub fn on_served(rt: &RoutingTable, rc: &mut RequestCtx, mut routed: Routed) -> Routed {
    let Some(relay) = rc.relay.take() else {
        return routed;
    };
    rt.relay_homes.set(
        relay.key,
        Home {
            target: routed.target.clone(),
            connection: routed.conn.id.clone(),
        },
        rt.clock.now(),
    );
    let Some(outcome) = relay.outcome else {
        return routed;
    };
    routed.side_calls.extend(relay.summariser);
    let headers = match &mut routed.body {
        RoutedBody::Json(ok) => &mut ok.headers,
        RoutedBody::Stream(s) => &mut s.headers,
    };
    headers.push((
        HeaderName::from_static(HEADER),
        HeaderValue::from_static(outcome.as_str()),
    ));
    routed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(p: &str) -> Target {
        Target {
            provider: p.into(),
            model: "m".into(),
            connection: None,
            weight: 1,
        }
    }

    #[test]
    fn the_home_target_goes_first_and_the_rest_keep_their_order() {
        let targets = [target("a"), target("b"), target("c")];
        let relay = |home: Option<&str>| RelayCtx {
            combo: Arc::new(ComboRoute {
                name: "r".into(),
                strategy: Strategy::ContextRelay,
                options: Default::default(),
                fusion: Default::default(),
                pipeline: Default::default(),
                context_relay: Default::default(),
                targets: targets.to_vec(),
            }),
            key: 1,
            home: home.map(|t| Home {
                target: t.into(),
                connection: "x".into(),
            }),
            decision: Decision::Pending,
            outcome: None,
            summariser: None,
        };
        let mut order = vec![0, 1, 2];
        home_first(Some(&relay(Some("c/m"))), &targets, &mut order);
        assert_eq!(order, [2, 0, 1]);
        let mut order = vec![0, 1, 2];
        home_first(Some(&relay(None)), &targets, &mut order);
        assert_eq!(order, [0, 1, 2]);
        home_first(Some(&relay(Some("gone/m"))), &targets, &mut order);
        assert_eq!(order, [0, 1, 2]);
        home_first(None, &targets, &mut order);
        assert_eq!(order, [0, 1, 2]);
    }
}
