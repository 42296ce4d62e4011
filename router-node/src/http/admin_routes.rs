//! Admin listener: probes (no bearer). The management API is added on top of these.

use std::sync::atomic::Ordering;

use actix_web::{HttpResponse, web};

use crate::reload::Rt;

/// Liveness: the process is serving.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok")
}

/// Readiness: config loaded and actors started, and not draining.
pub async fn readyz(rt: Rt) -> HttpResponse {
    let ready = rt.lifecycle.ready.load(Ordering::Acquire);
    let draining = rt.lifecycle.draining.load(Ordering::Acquire);
    if ready && !draining {
        HttpResponse::Ok().content_type("text/plain").body("ready")
    } else if draining {
        HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body("draining")
    } else {
        HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body("starting")
    }
}

/// Test hook (only registered with `SWITCHYARD_TEST_HOOKS=1`): makes a connection's actor panic
/// inside a handler, so black-box tests can prove supervision restarts it with state intact.
pub async fn inject_panic(rt: Rt, path: web::Path<String>) -> HttpResponse {
    let Some(conn) = rt.table.connection(&path) else {
        return HttpResponse::NotFound().json(serde_json::json!({"error": {"message": "unknown connection", "type": "invalid_request_error", "code": "connection_not_found"}}));
    };
    match conn.actor.load_full() {
        Some(addr) => {
            addr.do_send(crate::actors::InjectPanic);
            HttpResponse::Accepted().json(serde_json::json!({"ok": true}))
        }
        None => HttpResponse::ServiceUnavailable().json(serde_json::json!({"error": {"message": "no actor", "type": "server_error", "code": "actor_unavailable"}})),
    }
}

/// Test hook: makes a provider's breaker actor panic inside a handler, so black-box tests can
/// prove its supervision restarts it.
pub async fn inject_breaker_panic(rt: Rt, path: web::Path<String>) -> HttpResponse {
    let Some(addr) = rt.table.provider(&path).and_then(|p| p.actor.get()) else {
        return HttpResponse::NotFound().json(serde_json::json!({"error": {"message": "unknown provider or no actor", "type": "invalid_request_error", "code": "provider_not_found"}}));
    };
    addr.do_send(crate::actors::InjectPanic);
    HttpResponse::Accepted().json(serde_json::json!({"ok": true}))
}

/// Test hook: makes the cluster writer task panic at its next turn (redis mode).
pub async fn inject_writer_panic(rt: Rt) -> HttpResponse {
    match &rt.table.cluster {
        Some(cluster) => {
            cluster.inject_writer_panic();
            HttpResponse::Accepted().json(serde_json::json!({"ok": true}))
        }
        None => HttpResponse::NotFound().json(serde_json::json!({"error": {"message": "not in redis mode", "type": "invalid_request_error", "code": "not_clustered"}})),
    }
}

/// Test hook: actor restarts so far.
pub async fn actor_restarts(rt: Rt) -> HttpResponse {
    HttpResponse::Ok().json(
        serde_json::json!({"restarts": rt.table.actor_stats.restarts.load(Ordering::Relaxed)}),
    )
}

/// `GET /metrics` (admin listener, no authentication): the text exposition format.
pub async fn scrape(rt: Rt) -> HttpResponse {
    let text = rt.table.metrics.encode().and_then(|mut text| {
        // The cluster families live in the cluster's own registry (it outlives a runtime).
        if let Some(cluster) = &rt.table.cluster {
            let mut buf = Vec::new();
            prometheus::Encoder::encode(
                &prometheus::TextEncoder::new(),
                &cluster.metrics.registry().gather(),
                &mut buf,
            )?;
            text.push_str(&String::from_utf8_lossy(&buf));
        }
        Ok(text)
    });
    match text {
        Ok(text) => HttpResponse::Ok()
            .content_type("text/plain; version=0.0.4; charset=utf-8")
            .body(text),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode metrics");
            HttpResponse::InternalServerError()
                .content_type("text/plain")
                .body("metrics unavailable")
        }
    }
}
