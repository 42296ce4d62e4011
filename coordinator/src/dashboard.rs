//! The operator dashboard at `/`: static assets compiled into the binary.
//!
//! Why embedded: the coordinator must work offline and from one file (no CDN, no asset
//! directory to ship). The page is plain HTML, CSS and JavaScript; it polls
//! `/api/cluster/health` with the management key the operator enters once (kept in the
//! browser's session storage) and calls the action endpoints from its buttons.

use actix_web::{HttpResponse, web};

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/style.css");

/// `GET /`.
pub async fn index() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("cache-control", "no-cache"))
        .insert_header((
            "content-security-policy",
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        ))
        .body(INDEX)
}

/// `GET /assets/{name}`.
pub async fn asset(path: web::Path<String>) -> HttpResponse {
    let (body, content_type) = match path.as_str() {
        "app.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "style.css" => (STYLE, "text/css; charset=utf-8"),
        _ => {
            return HttpResponse::NotFound()
                .content_type("application/json")
                .body(
                    switchyard_shared::admin_kit::AdminError::not_found(
                        "not_found",
                        "No such asset",
                    )
                    .body()
                    .to_string(),
                );
        }
    };
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("cache-control", "no-cache"))
        .body(body)
}
