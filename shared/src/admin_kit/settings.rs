//! A settings patch (`PATCH /api/resilience` on a node, `PATCH /api/cluster/settings` on the
//! coordinator): parsed and checked with the same rules on both, answered with the same
//! 400 `invalid_settings` naming every bad field, so nothing is ever half-applied.

use serde_json::Value;

use super::AdminError;
use crate::settings::{FieldError, SettingsPatch};

/// 400 `invalid_settings`, naming the first bad field in the message and all in `details`.
pub fn invalid_settings(errors: Vec<FieldError>) -> AdminError {
    let message = match errors.first() {
        Some(first) if !first.path.is_empty() => {
            format!("Invalid settings: {}: {}", first.path, first.message)
        }
        Some(first) => format!("Invalid settings: {}", first.message),
        None => "Invalid settings".to_owned(),
    };
    AdminError::bad_request("invalid_settings", message)
        .with_details(errors.into_iter().map(|e| (e.path, e.message)))
}

/// The patch in a request body: 400 `missing_body` for an empty one, `invalid_settings` for
/// an unknown key, a wrong type or a patch that sets nothing. (Ranges are checked when the
/// patch is applied to the stored layer, with [`crate::settings::apply_patch`].)
pub fn parse_patch(body: &str) -> Result<SettingsPatch, AdminError> {
    if body.trim().is_empty() {
        return Err(AdminError::bad_request(
            "missing_body",
            "A JSON settings patch is required",
        ));
    }
    let patch = SettingsPatch::from_json(body).map_err(invalid_settings)?;
    if patch.is_empty() {
        return Err(invalid_settings(vec![FieldError::new(
            "",
            "the patch sets no setting",
        )]));
    }
    Ok(patch)
}

/// The dotted path of every setting a patch sets (error rules count as one), for the audit
/// log and the answer.
pub fn changed_paths(patch: &SettingsPatch) -> Vec<String> {
    let mut out = Vec::new();
    leaf_paths(
        &serde_json::to_value(patch).unwrap_or(Value::Null),
        "",
        &mut out,
    );
    out
}

fn leaf_paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() && !prefix.starts_with("provider_error_rules") => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_paths(v, &path, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_unknown_and_no_op_patches_are_refused() {
        assert_eq!(parse_patch("  ").unwrap_err().code, "missing_body");
        let unknown = parse_patch(r#"{"nope":1}"#).unwrap_err();
        assert_eq!(
            (unknown.status, unknown.code.as_str()),
            (400, "invalid_settings")
        );
        assert!(unknown.message.starts_with("Invalid settings"), "{unknown}");
        assert!(!unknown.details.is_empty());
        let empty = parse_patch("{}").unwrap_err();
        assert_eq!(empty.message, "Invalid settings: the patch sets no setting");
    }

    #[test]
    fn an_unknown_key_is_named_by_its_full_path() {
        let e =
            parse_patch(r#"{"provider_breaker":{"apikey":{"failure_treshold":2}}}"#).unwrap_err();
        assert_eq!(
            e.details[0].field,
            "provider_breaker.apikey.failure_treshold"
        );
    }

    #[test]
    fn a_patch_lists_the_leaves_it_sets() {
        let patch =
            parse_patch(r#"{"provider_breaker":{"apikey":{"failure_threshold":3}}}"#).unwrap();
        assert_eq!(
            changed_paths(&patch),
            vec!["provider_breaker.apikey.failure_threshold".to_owned()]
        );
    }

    #[test]
    fn invalid_settings_names_the_first_field() {
        let e = invalid_settings(vec![
            FieldError::new("a.b", "too big"),
            FieldError::new("c", "wrong"),
        ]);
        assert_eq!(e.message, "Invalid settings: a.b: too big");
        assert_eq!(e.details.len(), 2);
        assert_eq!(invalid_settings(vec![]).message, "Invalid settings");
    }
}
