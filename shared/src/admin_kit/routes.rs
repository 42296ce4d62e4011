//! The fallback for a request no route takes: 405 naming the allowed methods when the path
//! is known with another method, else 404, both in the error envelope (never a framework's
//! plain-text default).

use super::AdminError;

/// Whether a concrete path matches a route template with `{param}` segments (a parameter
/// matches one non-empty segment).
pub fn template_matches(template: &str, path: &str) -> bool {
    let mut t = template.split('/');
    let mut p = path.split('/');
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(ts), Some(ps)) if ts.starts_with('{') && !ps.is_empty() => {}
            (Some(ts), Some(ps)) if ts == ps => {}
            _ => return false,
        }
    }
}

/// The answer for `method path` given the `(method, template)` routes a server has.
pub fn fallback<'a>(
    method: &str,
    path: &str,
    routes: impl IntoIterator<Item = &'a (&'a str, &'a str)>,
) -> AdminError {
    let known: Vec<String> = routes
        .into_iter()
        .filter(|(_, t)| template_matches(t, path))
        .map(|(m, _)| m.to_ascii_uppercase())
        .collect();
    if known.is_empty() {
        AdminError::not_found("not_found", format!("No route for {method} {path}"))
    } else {
        AdminError::new(
            405,
            "invalid_request_error",
            "method_not_allowed",
            format!(
                "{method} is not allowed on {path}; use {}",
                known.join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_concrete_paths() {
        assert!(template_matches("/a/{id}/reset", "/a/x-1/reset"));
        assert!(!template_matches("/a/{id}/reset", "/a//reset"));
        assert!(!template_matches("/a", "/a/x"));
        assert!(template_matches("/a", "/a"));
    }

    #[test]
    fn known_paths_get_405_with_the_methods() {
        let routes = [("get", "/a/{id}"), ("delete", "/a/{id}"), ("get", "/b")];
        let e = fallback("POST", "/a/1", &routes);
        assert_eq!((e.status, e.code.as_str()), (405, "method_not_allowed"));
        assert_eq!(e.message, "POST is not allowed on /a/1; use GET, DELETE");
        let e = fallback("GET", "/c", &routes);
        assert_eq!((e.status, e.code.as_str()), (404, "not_found"));
    }
}
