//! `GET /api/openapi.json`: the OpenAPI 3.1 document of the coordinator's API.
//!
//! Like a node's document it is kept in the repository (`docs/coordinator-openapi.json`) so it
//! is reviewed like code, compiled into the binary so a coordinator serves the document of its
//! own version, and served without a bearer (it describes the API, it grants nothing). Tests
//! check it against the registered routes here, validate it with an OpenAPI validator, and
//! validate real answers against its schemas.

use actix_web::HttpResponse;

/// The document, as stored in the repository.
pub const DOCUMENT: &str = include_str!("../../docs/coordinator-openapi.json");

/// Paths served outside the API (the dashboard), documented too.
pub const PAGE_ROUTES: &[(&str, &str)] = &[("GET", "/"), ("GET", "/assets/{name}")];

/// `GET /api/openapi.json`.
pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(DOCUMENT)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;
    use crate::http::ROUTES;

    const METHODS: &[&str] = &["get", "post", "put", "patch", "delete", "head", "options"];

    #[allow(clippy::expect_used)]
    fn document() -> Value {
        serde_json::from_str(DOCUMENT).expect("docs/coordinator-openapi.json is JSON")
    }

    #[test]
    fn the_document_is_openapi_3_1() {
        let doc = document();
        assert!(
            doc["openapi"]
                .as_str()
                .is_some_and(|v| v.starts_with("3.1"))
        );
    }

    #[test]
    fn documented_and_registered_routes_are_the_same() {
        let doc = document();
        let registered: BTreeSet<(String, String)> = ROUTES
            .iter()
            .chain(PAGE_ROUTES)
            .map(|(m, p)| (m.to_ascii_lowercase(), (*p).to_owned()))
            .collect();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for method in METHODS {
                if item.get(*method).is_some() {
                    documented.insert(((*method).to_owned(), path.clone()));
                }
            }
        }
        assert_eq!(registered, documented);
    }

    #[test]
    fn every_api_error_answer_uses_the_envelope() {
        let doc = document();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                for (status, answer) in op["responses"].as_object().into_iter().flatten() {
                    if status.starts_with('4') || (status.starts_with('5') && path != "/readyz") {
                        assert_eq!(
                            answer["$ref"], "#/components/responses/Error",
                            "{method} {path} {status}"
                        );
                    }
                }
            }
        }
    }
}
