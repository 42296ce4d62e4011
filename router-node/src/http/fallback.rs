//! The client listener's fallback: 405 for a known path with another method, else 404.
//!
//! actix's method guards send a `GET /v1/chat/completions` to the default service, which would
//! answer 404 and tell the client the route does not exist. A wrong method is a 405 with an
//! `Allow` header, in the route's error envelope like every other client error.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};

use super::errors::{ClientFormat, ErrorSource, GatewayError};

/// The client routes and their one method each.
const ROUTES: [(&str, &str, ClientFormat); 6] = [
    ("/v1/chat/completions", "POST", ClientFormat::OpenAiChat),
    ("/v1/messages", "POST", ClientFormat::Anthropic),
    ("/v1/messages/count_tokens", "POST", ClientFormat::Anthropic),
    ("/v1/responses", "POST", ClientFormat::OpenAiResponses),
    ("/v1/models", "GET", ClientFormat::OpenAiChat),
    ("/api/v1/session-leases", "POST", ClientFormat::OpenAiChat),
];

/// Any request no client route took.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    let path = req.path();
    match ROUTES.iter().find(|(p, _, _)| *p == path) {
        Some((_, allowed, format)) => GatewayError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "method_not_allowed",
            format!("{} is not allowed on {path}; use {allowed}", req.method()),
        )
        .with_source(ErrorSource::Downstream)
        .with_header("allow", allowed)
        .to_response(*format),
        None => GatewayError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "not_found",
            format!("No route for {} {path}", req.method()),
        )
        .with_source(ErrorSource::Downstream)
        .to_response(ClientFormat::OpenAiChat),
    }
}
