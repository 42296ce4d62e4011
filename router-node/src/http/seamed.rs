//! Mid-stream continuation at the edge (`[resilience.stream_recovery]
//! midstream_continuation`): the committed stream's body becomes a
//! [`crate::upstream::seams::SeamedBody`] whose next segment is routed here, and
//! its finalisation is split so that nothing is done twice.
//!
//! Why split: a seamed stream has one client response but one upstream stream per segment.
//! Per segment, when that segment ends: its permits are released, its connection learns of a
//! failure after the commit, its usage is booked for its own connection, and its provider's
//! stream metrics move. Once per request, when the client's stream ends: the access line
//! (with `seams` and the connections of every segment), the request timer, the trace span and
//! the continuation metric.
//!
//! Where it applies: an OpenAI Chat Completions client stream, without an exclusive session
//! lease (a continuation on another connection would break the lease's pin), on a model that
//! is not a multi-call combo (`fusion`, `pipeline`: a continuation would rerun the whole
//! panel). A continuation is routed like the client's request (its model, key, session and
//! headers) with the connections that already served the stream left out.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use switchyard_shared::config::Resolved;
use switchyard_shared::sse;

use super::errors::ClientFormat;
use super::request_end::{self, End, RequestCtx, Sent, Served, StreamLine};
use super::scrub;
use super::seam_log::SegmentRecord;
use crate::api::body::parse_body;
use crate::routing::translation::{self, Translation};
use crate::routing::{self, RouteRequest, Routed, RoutedBody};
use crate::runtime::Runtime;
use crate::telemetry;
use crate::upstream::seams::{ClientBody, Continue, NextSegment, SeamPolicy, SeamedBody, SeamsEnd};
use crate::upstream::{CommittedStream, OnFinish, StreamEnd, failure_after_commit};

/// The continuation policy for this request, `None` when continuation does not apply.
pub fn policy(rt: &Runtime, req: &RouteRequest) -> Option<SeamPolicy> {
    let settings = rt.table.settings.load();
    let recovery = &settings.stream_recovery;
    let multi_call = matches!(
        rt.table.index.resolve(&req.body.model),
        Ok(Resolved::Combo(c)) if c.strategy.is_multi_call()
    );
    (recovery.midstream_continuation
        && req.format == ClientFormat::OpenAiChat
        && req.lease.is_none()
        && !multi_call)
        .then(|| SeamPolicy {
            max_continuations: recovery.max_continuations,
            heartbeat_ms: settings.stream.heartbeat_interval_ms,
        })
}

/// A committed stream as the client's body: keep-alives, the connection's key scrubbed, and
/// translated when the provider speaks another format. `on_finish` runs once.
pub fn client_body(
    stream: CommittedStream,
    heartbeat_ms: u64,
    secret: Option<&scrub::ScrubSecret>,
    translation: Option<&Translation>,
    on_finish: OnFinish,
) -> ClientBody {
    let scrubbed = scrub::scrub_stream(
        stream
            .with_heartbeat_interval_ms(heartbeat_ms)
            .into_body(on_finish),
        secret,
    );
    match translation {
        None => scrubbed,
        // The provider speaks another format: translate event by event for the client. The
        // watchdogs already ran on the provider's own events.
        Some(t) => match translation::stream_body(t, scrubbed) {
            Ok(s) => s,
            Err(e) => {
                let frame = sse::format_error_event(
                    super::client_routes::sse_format(t.client),
                    e.error_type,
                    &e.code,
                    &e.message,
                );
                Box::pin(futures_util::stream::once(async move {
                    Ok::<Bytes, actix_web::Error>(Bytes::from(frame))
                }))
            }
        },
    }
}

type Ledger = Arc<Mutex<Vec<SegmentRecord>>>;

/// What every segment's finaliser needs besides its own routed parts.
#[derive(Clone)]
struct Shared {
    rt: Arc<Runtime>,
    key_id: Option<String>,
    heartbeat_ms: u64,
    ledger: Ledger,
}

/// A routed stream as one segment: its body, with its own finaliser (permits, the
/// connection's failure after commit, stream metrics, usage for its connection, the ledger).
fn open_segment(shared: &Shared, routed: Routed) -> Result<ClientBody, String> {
    let Routed {
        body,
        conn,
        provider,
        model,
        target,
        permits,
        translation,
        side_calls,
        ..
    } = routed;
    let RoutedBody::Stream(stream) = body else {
        return Err("the continuation was answered without a stream".to_owned());
    };
    let secret = conn.api_key.clone();
    let scrub_secret = conn.scrub_secret.clone();
    let s = shared.clone();
    let (conn2, secret2) = (conn.clone(), secret.clone());
    let on_finish: OnFinish = Box::new(move |end: StreamEnd| {
        drop(permits);
        if let Some(f) = failure_after_commit(&end, secret2.as_deref()) {
            routing::observe::after_commit_failure(
                &s.rt.table,
                &provider,
                &conn2,
                &model,
                &target,
                &f,
            );
        }
        let served = Served {
            provider: &provider,
            model: &model,
            connection: &conn2.id,
            side_calls: &side_calls,
        };
        request_end::segment_ended(&s.rt, s.key_id.as_deref(), &served, &end);
        if let Ok(mut ledger) = s.ledger.lock() {
            ledger.push(SegmentRecord {
                conn_idx: conn2.idx,
                connection: conn2.id.clone(),
                end,
            });
        }
    });
    Ok(client_body(
        stream,
        shared.heartbeat_ms,
        scrub_secret.as_ref(),
        translation.as_ref(),
        on_finish,
    ))
}

/// Routes one continuation body: the client's request with this body, the connections that
/// served the stream so far left out.
fn continuer(shared: Shared, base: Arc<RouteRequest>) -> Continue {
    Box::new(move |body: Bytes| -> NextSegment {
        let shared = shared.clone();
        let base = base.clone();
        Box::pin(async move {
            let excluded = match shared.ledger.lock() {
                Ok(ledger) => ledger.iter().map(|r| r.conn_idx).collect(),
                Err(_) => return Err("internal state unavailable".to_owned()),
            };
            let req = RouteRequest {
                format: base.format,
                body: parse_body(body).map_err(|e| e.message)?,
                key: base.key.clone(),
                session: base.session.clone(),
                forward_headers: base.forward_headers.clone(),
                upstream_wait: Default::default(),
                lease: None,
                excluded_connections: excluded,
            };
            let routed = routing::route(&shared.rt.table, &req)
                .await
                .map_err(|e| e.message)?;
            open_segment(&shared, routed)
        })
    })
}

/// The committed stream's body with mid-stream continuation; finalisation is split as the
/// module docs say.
pub fn body(
    rt: Arc<Runtime>,
    routed: Routed,
    route_req: &Arc<RouteRequest>,
    ctx: RequestCtx,
    policy: SeamPolicy,
) -> ClientBody {
    let span = telemetry::current();
    let RoutedBody::Stream(stream) = &routed.body else {
        return Box::pin(futures_util::stream::empty());
    };
    let line = StreamLine::of(route_req, &routed, stream.ready_after_ms, stream.reopens);
    let shared = Shared {
        rt: rt.clone(),
        key_id: route_req.key_id().map(str::to_owned),
        heartbeat_ms: policy.heartbeat_ms,
        ledger: Arc::new(Mutex::new(Vec::new())),
    };
    let first_body = match open_segment(&shared, routed) {
        Ok(body) => body,
        Err(_) => return Box::pin(futures_util::stream::empty()),
    };
    let ledger = shared.ledger.clone();
    let on_end = Box::new(move |seams: SeamsEnd| {
        let segments = ledger
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        let end = End::Seamed {
            line: &line,
            segments: &segments,
            seams: &seams,
            span: &span,
        };
        request_end::finish(ctx, &rt, end, Sent);
    });
    Box::pin(SeamedBody::new(
        first_body,
        route_req.body.raw.clone(),
        policy,
        continuer(shared, route_req.clone()),
        on_end,
    ))
}
