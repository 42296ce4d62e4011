//! `GET /api/openapi.json`: the OpenAPI 3.1 document of the client and admin APIs.
//!
//! The document is kept in the repository (`docs/openapi.json`) so it is reviewed like code,
//! and compiled into the binary so the node always serves the document of its own version.
//! It needs no bearer: it describes the API, it grants nothing. Tests check that it is valid
//! and that every route the node registers is in it.

use actix_web::HttpResponse;

/// The document, as stored in the repository.
pub const DOCUMENT: &str = include_str!("../../../docs/openapi.json");

pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(DOCUMENT)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::DOCUMENT;
    use crate::admin::{ADMIN_ROUTES, LISTENER_ROUTES};

    /// Routes only registered with `SWITCHYARD_TEST_HOOKS=1`; deliberately undocumented.
    const TEST_ONLY_PREFIX: &str = "/test-hooks/";

    const METHODS: &[&str] = &["get", "post", "put", "patch", "delete", "head", "options"];

    fn document() -> Value {
        serde_json::from_str(DOCUMENT).expect("docs/openapi.json is JSON")
    }

    /// `(method, path)` of every `.route("PATH", web::METHOD()…)` in a source file.
    fn routes_in_source(src: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for chunk in src.split(".route(").skip(1) {
            let chunk = chunk.trim_start();
            let Some(rest) = chunk.strip_prefix('"') else {
                continue;
            };
            let Some((path, rest)) = rest.split_once('"') else {
                continue;
            };
            let Some((_, after)) = rest.split_once("web::") else {
                continue;
            };
            let method: String = after.chars().take_while(char::is_ascii_lowercase).collect();
            out.push((method, path.to_owned()));
        }
        out
    }

    fn documented(doc: &Value, method: &str, path: &str) -> bool {
        doc["paths"][path][method].is_object()
    }

    #[test]
    fn the_document_is_openapi_3_with_paths() {
        let doc = document();
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
        assert!(doc["paths"].as_object().is_some_and(|p| !p.is_empty()));
    }

    #[test]
    fn every_management_and_listener_route_is_documented() {
        let doc = document();
        for (method, path) in ADMIN_ROUTES.iter().chain(LISTENER_ROUTES) {
            assert!(
                documented(&doc, method, path),
                "{} {path} is registered but not in docs/openapi.json",
                method.to_uppercase()
            );
        }
    }

    #[test]
    fn every_route_registered_in_the_server_is_documented() {
        let doc = document();
        let src = include_str!("../http/server.rs");
        let routes = routes_in_source(src);
        assert!(
            routes.iter().any(|(_, p)| p == "/v1/chat/completions"),
            "the route scanner found nothing: {routes:?}"
        );
        for (method, path) in routes {
            if path.starts_with(TEST_ONLY_PREFIX) {
                continue;
            }
            assert!(
                documented(&doc, &method, &path),
                "{} {path} is registered in http/server.rs but not in docs/openapi.json",
                method.to_uppercase()
            );
        }
    }

    #[test]
    fn every_documented_operation_is_served() {
        let doc = document();
        let server: Vec<(String, String)> = routes_in_source(include_str!("../http/server.rs"));
        let paths = doc["paths"].as_object().expect("paths");
        for (path, item) in paths {
            for method in METHODS {
                if !item[*method].is_object() {
                    continue;
                }
                let registered = ADMIN_ROUTES
                    .iter()
                    .chain(LISTENER_ROUTES)
                    .any(|(m, p)| m == method && p == path)
                    || server.iter().any(|(m, p)| m == method && p == path);
                assert!(
                    registered,
                    "docs/openapi.json documents {} {path}, which the node does not serve",
                    method.to_uppercase()
                );
            }
        }
    }

    #[test]
    fn management_operations_require_the_bearer() {
        let doc = document();
        for (method, path) in ADMIN_ROUTES {
            let op = &doc["paths"][path][method];
            let open = *path == "/api/openapi.json";
            let security = op["security"].as_array().expect("security listed");
            assert_eq!(
                security.is_empty(),
                open,
                "{path}: only the document itself is open"
            );
        }
    }
}
