//! The Claude OAuth usage-wall keys of `[[connections]]` (`low_priority_mode`,
//! `auto_limit_reset`, `organization_uuid`), beyond the contract: what is wrong with them on
//! their own.

use super::Config;
use super::error::Collector;

/// The session-limit reset is claimed for an organization: without one it cannot be made,
/// and an empty one names nothing. Both are reported rather than silently ignored.
pub(super) fn validate(config: &Config, errors: &mut Collector) {
    for (i, conn) in config.connections.iter().enumerate() {
        let org = conn.organization_uuid.as_deref().map(str::trim);
        if org.is_some_and(str::is_empty) {
            errors.push(
                format!("connections[{i}].organization_uuid"),
                "must not be empty (omit it when auto_limit_reset is off)",
            );
        } else if conn.auto_limit_reset && org.is_none() {
            errors.push(
                format!("connections[{i}].organization_uuid"),
                "is required when auto_limit_reset is on (the reset is claimed for it)",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Result<Config, String> {
        let text = format!(
            "[auth]\nrequire_api_key = false\n\n[[providers]]\nid = \"claude\"\ncategory = \"oauth\"\nformat = \"anthropic\"\n\
             base_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\n\n[[connections]]\n\
             id = \"a\"\nprovider = \"claude\"\napi_key_env = \"K\"\n{extra}\n"
        );
        Config::from_toml_str(&text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_reset_needs_an_organization() {
        let err = config("auto_limit_reset = true").err().unwrap_or_default();
        assert!(err.contains("connections[0].organization_uuid"), "{err}");
        let err = config("organization_uuid = \" \"")
            .err()
            .unwrap_or_default();
        assert!(err.contains("must not be empty"), "{err}");
        let ok = config(
            "auto_limit_reset = true\nlow_priority_mode = true\norganization_uuid = \"org-1\"",
        );
        let conn = ok.map(|c| c.connections[0].clone());
        assert!(
            conn.as_ref()
                .is_ok_and(|c| c.auto_limit_reset && c.low_priority_mode),
            "{conn:?}"
        );
    }

    #[test]
    fn both_options_are_off_by_default() {
        let conn = config("").map(|c| c.connections[0].clone());
        assert!(
            conn.as_ref()
                .is_ok_and(|c| !c.auto_limit_reset && !c.low_priority_mode),
            "{conn:?}"
        );
    }
}
