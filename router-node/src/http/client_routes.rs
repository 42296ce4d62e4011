//! Client API handlers: `/v1/chat/completions`, `/v1/messages`, `/v1/responses`, `/v1/models`.
//!
//! Non-streaming requests are routed and answered with the upstream JSON. Streaming requests
//! are committed at the first content event; if routing takes longer than
//! `early_keepalive_after_ms`, the client gets `200` + SSE keep-alives at once (so its
//! first-byte timeout does not fire during a cooldown wait) and any later failure arrives
//! in-band as one error event.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::json;
use switchyard_shared::sse::{self, Format};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::errors::{ClientFormat, GatewayError};
use super::request_end::{self, End, RequestCtx, Sent, Served, StreamLine};
use super::{ingress, scrub, trace};
use crate::metrics::labels::Route;
use crate::reload::Rt;
use crate::routing::{self, RouteRequest, Routed, RoutedBody};
use crate::runtime::Runtime;
use crate::telemetry;
use crate::upstream::StreamEnd;

pub async fn chat_completions(rt: Rt, req: HttpRequest, payload: web::Payload) -> HttpResponse {
    handle(rt.get_ref().clone(), req, payload, ClientFormat::OpenAiChat).await
}

pub async fn messages(rt: Rt, req: HttpRequest, payload: web::Payload) -> HttpResponse {
    handle(rt.get_ref().clone(), req, payload, ClientFormat::Anthropic).await
}

pub async fn responses(rt: Rt, req: HttpRequest, payload: web::Payload) -> HttpResponse {
    handle(
        rt.get_ref().clone(),
        req,
        payload,
        ClientFormat::OpenAiResponses,
    )
    .await
}

/// `GET /v1/models`: configured models and combos in OpenAI's list shape (no secrets).
pub async fn models(rt: Rt, req: HttpRequest) -> HttpResponse {
    let timer = rt.table.metrics.start_request(Route::Models);
    if let Err(e) = rt.keys.authenticate(req.headers()) {
        timer.finish(e.status.as_u16(), Duration::ZERO);
        return e.to_response(ClientFormat::OpenAiChat);
    }
    let data: Vec<_> = rt
        .table
        .index
        .client_models()
        .into_iter()
        .map(|id| {
            let owner = id.split_once('/').map_or("switchyard", |(p, _)| p);
            json!({"id": id, "object": "model", "created": 0, "owned_by": owner})
        })
        .collect();
    timer.finish(200, Duration::ZERO);
    HttpResponse::Ok().json(json!({"object": "list", "data": data}))
}

/// A client request inside its trace span (`Span::none()` while traces are off).
async fn handle(
    rt: Arc<Runtime>,
    req: HttpRequest,
    payload: web::Payload,
    format: ClientFormat,
) -> HttpResponse {
    let span = trace::request_span(format, req.headers());
    handle_request(rt, req, payload, format)
        .instrument(span)
        .await
}

async fn handle_request(
    rt: Arc<Runtime>,
    req: HttpRequest,
    payload: web::Payload,
    format: ClientFormat,
) -> HttpResponse {
    let started = Instant::now();
    let timer = rt.table.metrics.start_request(format.into());
    let ctx = RequestCtx::new(request_id(&req), started, timer);
    let _inflight = InflightGuard::new(&rt);
    let refused = |ctx, key: Option<&str>, model: &str, e: GatewayError| {
        let end = End::Error {
            key,
            model,
            error: &e,
            upstream: Duration::ZERO,
        };
        request_end::finish(ctx, &rt, end, e.to_response(format))
    };
    let route_req = match ingress::prepare(&rt, &req, payload, format).await {
        Ok(r) => match cluster_admission(&rt, &req, r).await {
            Ok(r) => r,
            Err((key, model, e)) => return refused(ctx, key.as_deref(), &model, e),
        },
        Err(e) => return refused(ctx, None, "", e),
    };
    let background = route_req.body.background;
    let mut resp = if route_req.body.stream {
        stream_response(rt, route_req, format, ctx).await
    } else {
        // Boxed: the JSON path holds the whole routing future inline, and the handler future
        // is sized for its largest branch. Inline, every stream would carry that unused room
        // (about 4.5 KiB) next to its own boxed routing future while it waits for its first
        // content; one allocation per JSON request costs less than that at 5,000 streams.
        Box::pin(json_or_error(rt, route_req, format, ctx)).await
    };
    if background {
        // `background: true` (Responses) is served synchronously; say so.
        resp.headers_mut().insert(
            actix_web::http::header::HeaderName::from_static("x-switchyard-warning"),
            actix_web::http::header::HeaderValue::from_static("background-degraded-to-synchronous"),
        );
    }
    resp
}

/// The checks after ingress that may ask the shared store: the lease claim (pinning a leased
/// request to its lease's connection) and the key's cluster-wide requests per minute.
async fn cluster_admission(
    rt: &Runtime,
    req: &HttpRequest,
    mut r: RouteRequest,
) -> Result<RouteRequest, (Option<String>, String, GatewayError)> {
    let fail = |r: &RouteRequest, e| Err((r.key_id().map(str::to_owned), r.body.model.clone(), e));
    match crate::leases::fence::claim(&rt.table, req.headers(), r.key.as_deref()).await {
        Ok(lease) => r.lease = lease,
        Err(e) => return fail(&r, e),
    }
    if let Some(k) = r.key.as_deref()
        && let Err(e) = crate::caps::rpm::check_key(&rt.table, k).await
    {
        return fail(&r, e);
    }
    Ok(r)
}

async fn json_or_error(
    rt: Arc<Runtime>,
    route_req: RouteRequest,
    format: ClientFormat,
    ctx: RequestCtx,
) -> HttpResponse {
    match routing::route(&rt.table, &route_req).await {
        Ok(routed) => {
            let resp = json_response(&routed, &ctx.request_id);
            let end = End::Json {
                req: &route_req,
                routed: &routed,
            };
            request_end::finish(ctx, &rt, end, resp)
        }
        Err(e) => {
            let end = error_end(&route_req, &e);
            request_end::finish(ctx, &rt, end, e.to_response(format))
        }
    }
}

/// A routed request's error as its end.
fn error_end<'a>(req: &'a RouteRequest, e: &'a GatewayError) -> End<'a> {
    End::Error {
        key: req.key_id(),
        model: &req.body.model,
        error: e,
        upstream: req.upstream_wait.get(),
    }
}

const X_SWITCHYARD_CONNECTION: HeaderName = HeaderName::from_static("x-switchyard-connection");
const X_SWITCHYARD_ATTEMPTS: HeaderName = HeaderName::from_static("x-switchyard-attempts");
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

fn json_response(routed: &Routed, request_id: &str) -> HttpResponse {
    let RoutedBody::Json(ok) = &routed.body else {
        return GatewayError::internal("unexpected stream result")
            .to_response(ClientFormat::OpenAiChat);
    };
    let mut b = HttpResponse::build(StatusCode::from_u16(ok.status).unwrap_or(StatusCode::OK));
    for (k, v) in &ok.headers {
        b.insert_header((k.clone(), v.clone()));
    }
    // Names as constants and the count as an integer value: no parsing or formatting per
    // request for the headers every answer carries.
    if let Ok(conn) = HeaderValue::from_str(&routed.conn.id) {
        b.insert_header((X_SWITCHYARD_CONNECTION, conn));
    }
    b.insert_header((X_SWITCHYARD_ATTEMPTS, HeaderValue::from(routed.attempts)));
    if let Ok(id) = HeaderValue::from_str(request_id) {
        b.insert_header((X_REQUEST_ID, id));
    }
    for header in routed.translation.iter().flat_map(|t| t.param_headers()) {
        b.insert_header(header);
    }
    let body = scrub::scrub_bytes(&ok.body, routed.conn.scrub_secret.as_ref());
    b.content_type("application/json").body(body)
}

/// A streaming request: route to the commit point, with early keep-alives if that is slow.
async fn stream_response(
    rt: Arc<Runtime>,
    route_req: RouteRequest,
    format: ClientFormat,
    ctx: RequestCtx,
) -> HttpResponse {
    let after = rt.table.settings.load().stream.early_keepalive_after_ms;
    let rt2 = rt.clone();
    let route_req = Arc::new(route_req);
    let rr = route_req.clone();
    // The routing future may move to the keep-alive task below: it carries the request span.
    let mut routing = Box::pin(
        async move { routing::route(&rt2.table, &rr).await }.instrument(telemetry::current()),
    );
    let early = tokio::time::sleep(Duration::from_millis(after.max(1)));
    tokio::select! {
        res = &mut routing => match res {
            Ok(routed) => committed_response(rt, routed, &route_req, ctx),
            Err(e) => {
                let end = error_end(&route_req, &e);
                request_end::finish(ctx, &rt, end, e.to_response(format))
            }
        },
        () = early => {
            // Routing is slow (cooldown wait, queue): commit 200 + keep-alives now.
            let (tx, rx) = mpsc::channel::<Bytes>(16);
            let keepalive = Bytes::from_static(sse::keep_alive_frame(sse_format(format)));
            actix_web::rt::spawn(async move {
                // The first keep-alive goes out with the commit: committing early exists to put
                // a body byte in front of the client's first-byte timeout, not 2.5 s later.
                if tx.send(keepalive.clone()).await.is_err() {
                    return;
                }
                let mut tick = tokio::time::interval(Duration::from_millis(2500));
                tick.tick().await;
                let res = loop {
                    tokio::select! {
                        res = &mut routing => break res,
                        _ = tick.tick() => {
                            if tx.send(keepalive.clone()).await.is_err() {
                                return; // client gone: dropping `routing` cancels upstream work
                            }
                        }
                    }
                };
                match res {
                    Ok(routed) => {
                        let mut body = committed_body(rt.clone(), routed, &route_req, ctx);
                        while let Some(chunk) = body.next().await {
                            let Ok(chunk) = chunk else { break };
                            if tx.send(chunk).await.is_err() {
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        request_end::finish(ctx, &rt, error_end(&route_req, &e), Sent);
                        let frame = sse::format_error_event(sse_format(format), e.error_type, &e.code, &e.message);
                        let _ = tx.send(Bytes::from(frame)).await;
                    }
                }
            }.instrument(telemetry::current()));
            let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|b| (Ok::<Bytes, actix_web::Error>(b), rx))
            });
            HttpResponse::Ok()
                .content_type("text/event-stream")
                .insert_header(("cache-control", "no-cache"))
                .insert_header(("x-accel-buffering", "no"))
                .insert_header(("x-switchyard-early-keepalive", "1"))
                .streaming(stream)
        }
    }
}

fn committed_response(
    rt: Arc<Runtime>,
    routed: Routed,
    route_req: &Arc<RouteRequest>,
    ctx: RequestCtx,
) -> HttpResponse {
    let conn = routed.conn.id.to_string();
    let attempts = routed.attempts;
    let headers = match &routed.body {
        RoutedBody::Stream(s) => s.headers.clone(),
        RoutedBody::Json(j) => j.headers.clone(),
    };
    if matches!(routed.body, RoutedBody::Json(_)) {
        // The upstream answered a stream request with JSON: pass it through as is.
        let resp = json_response(&routed, &ctx.request_id);
        let end = End::Json {
            req: route_req,
            routed: &routed,
        };
        return request_end::finish(ctx, &rt, end, resp);
    }
    let request_id = ctx.request_id.clone();
    let param_headers: Vec<(&str, String)> = routed
        .translation
        .iter()
        .flat_map(|t| t.param_headers())
        .collect();
    let body = committed_body(rt, routed, route_req, ctx);
    let mut b = HttpResponse::Ok();
    for (k, v) in headers {
        b.insert_header((k, v));
    }
    for header in param_headers {
        b.insert_header(header);
    }
    b.content_type("text/event-stream")
        .insert_header((CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        .insert_header((X_ACCEL_BUFFERING, HeaderValue::from_static("no")))
        .insert_header((X_SWITCHYARD_CONNECTION, conn))
        .insert_header((X_SWITCHYARD_ATTEMPTS, HeaderValue::from(attempts)))
        .insert_header((X_REQUEST_ID, request_id))
        .streaming(body)
}

/// The committed stream's body; finalisation (permits, observations, the request's end)
/// runs once.
fn committed_body(
    rt: Arc<Runtime>,
    routed: Routed,
    route_req: &Arc<RouteRequest>,
    mut ctx: RequestCtx,
) -> std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Bytes, actix_web::Error>>>> {
    ctx.commit(route_req.upstream_wait.get());
    trace::routed(&ctx.request_id, route_req, &routed);
    if let Some(policy) = super::seamed::policy(&rt, route_req) {
        return super::seamed::body(rt, routed, route_req, ctx, policy);
    }
    // The request span ends with the stream, not with the handler.
    let span = telemetry::current();
    let RoutedBody::Stream(stream) = &routed.body else {
        return Box::pin(futures_util::stream::empty());
    };
    let line = StreamLine::of(route_req, &routed, stream.ready_after_ms, stream.reopens);
    let Routed {
        body,
        conn,
        provider,
        model,
        target,
        attempts: _,
        probe: _,
        permits,
        translation,
        side_calls,
    } = routed;
    let RoutedBody::Stream(stream) = body else {
        return Box::pin(futures_util::stream::empty());
    };
    let rt_heartbeat = rt.table.settings.load().stream.heartbeat_interval_ms;
    // An upstream may echo this connection's key in error text relayed after the commit.
    // Only for building the scrubber below; the finaliser reads the key from `conn`, so no
    // copy of it is kept for the stream's life.
    let secret = conn.scrub_secret.clone();
    let on_finish = Box::new(move |end: StreamEnd| {
        // Permits and in-flight counts are released here, exactly once.
        drop(permits);
        // After the commit point the breaker has already counted this attempt (as a success
        // at commit); a later failure only informs the connection (error fields, cooldown).
        if let Some(f) = crate::upstream::failure_after_commit(&end, conn.api_key.as_deref()) {
            crate::routing::observe::after_commit_failure(
                &rt.table, &provider, &conn, &model, &target, &f,
            );
        }
        let served = Served {
            provider: &provider,
            model: &model,
            connection: &conn.id,
            side_calls: &side_calls,
        };
        let end = End::Stream {
            line: &line,
            served,
            end: &end,
            span: &span,
        };
        request_end::finish(ctx, &rt, end, Sent);
    });
    super::seamed::client_body(
        stream,
        rt_heartbeat,
        secret.as_ref(),
        translation.as_ref(),
        on_finish,
    )
}

pub fn sse_format(format: ClientFormat) -> Format {
    match format {
        ClientFormat::OpenAiChat => Format::OpenAiChat,
        ClientFormat::OpenAiResponses => Format::OpenAiResponses,
        ClientFormat::Anthropic => Format::Anthropic,
    }
}

fn request_id(req: &HttpRequest) -> String {
    req.headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            v.len() <= 128
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map(str::to_owned)
        .unwrap_or_else(|| generated_request_id(rand::random::<u64>()))
}

/// `req_` and 16 lower-case hex digits, written without the formatting machinery (this runs
/// on every request that brings no id of its own).
fn generated_request_id(n: u64) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(20);
    id.push_str("req_");
    for shift in (0..16).rev() {
        id.push(char::from(HEX[((n >> (shift * 4)) & 0xf) as usize]));
    }
    id
}

/// Counts a request in flight for exactly as long as its handler runs.
struct InflightGuard(Arc<Runtime>);

impl InflightGuard {
    fn new(rt: &Arc<Runtime>) -> Self {
        rt.stats
            .inflight
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        rt.stats
            .requests_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(rt.clone())
    }
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0
            .stats
            .inflight
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::generated_request_id;

    #[test]
    fn generated_request_ids_read_as_the_formatted_ones() {
        for n in [0, 1, 0xabc, u64::MAX, 0x0123_4567_89ab_cdef, 1 << 63] {
            assert_eq!(generated_request_id(n), format!("req_{n:016x}"));
        }
    }
}
