//! Admin listener: probes (no bearer). The management API is added on top of these.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use actix_web::{HttpResponse, web};

use crate::runtime::Runtime;

/// Liveness: the process is serving.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok")
}

/// Readiness: config loaded and actors started, and not draining.
pub async fn readyz(rt: web::Data<Arc<Runtime>>) -> HttpResponse {
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
