//! The bodies of the operator clears, validated the same way on a node and the coordinator:
//! `POST …/cooldowns` (`{connectionIds:[…]}` or `{all:true, provider?}`) and
//! `DELETE …/model-cooldowns` (`{provider, connection?, model?}` or `{all:true}`).
//!
//! Validation only: what a clear then does (actor messages on a node, Redis scripts on the
//! coordinator) stays with each binary. Ids are checked against a [`Catalogue`] of the
//! configured providers and connections, so an unknown one is 404 before anything changes.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::body::check_id;
use super::{AdminError, MAX_IDS};

/// The configured providers and connections, as the validation needs them.
pub trait Catalogue {
    fn has_provider(&self, id: &str) -> bool;
    /// The provider of connection `id`, if it is configured.
    fn provider_of(&self, connection: &str) -> Option<&str>;
}

/// 404 `provider_not_found`.
pub fn provider_not_found(id: &str) -> AdminError {
    AdminError::not_found("provider_not_found", format!("No provider with id {id:?}"))
}

/// 404 `connection_not_found`.
pub fn connection_not_found(id: &str) -> AdminError {
    AdminError::not_found(
        "connection_not_found",
        format!("No connection with id {id:?}"),
    )
}

/// A well-formed, configured provider id (400 `invalid_id`, 404 `provider_not_found`).
pub fn known_provider(cat: &impl Catalogue, id: &str) -> Result<(), AdminError> {
    check_id(id, "provider")?;
    if cat.has_provider(id) {
        Ok(())
    } else {
        Err(provider_not_found(id))
    }
}

/// The provider of a well-formed, configured connection id (400 / 404).
pub fn known_connection<'a>(cat: &'a impl Catalogue, id: &str) -> Result<&'a str, AdminError> {
    check_id(id, "connection")?;
    cat.provider_of(id).ok_or_else(|| connection_not_found(id))
}

/// Body of `POST …/cooldowns`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CooldownClearBody {
    pub connection_ids: Option<Vec<String>>,
    pub all: Option<bool>,
    pub provider: Option<String>,
}

/// What a valid cooldown clear names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CooldownClear {
    /// These connections (configured, without duplicates, in id order).
    Ids(Vec<String>),
    /// Every connection, or every connection of a configured provider.
    All { provider: Option<String> },
}

impl CooldownClearBody {
    /// 400 naming the field for a malformed body, 404 for an unknown id.
    pub fn validate(self, cat: &impl Catalogue) -> Result<CooldownClear, AdminError> {
        match self {
            Self {
                connection_ids: Some(ids),
                all: None,
                provider: None,
            } => {
                if ids.is_empty() || ids.len() > MAX_IDS {
                    return Err(AdminError::field(
                        "connectionIds",
                        "`connectionIds` must list 1 to 1000 connection ids",
                    ));
                }
                let unique: BTreeSet<String> = ids.into_iter().collect();
                let mut unknown = Vec::new();
                for (i, id) in unique.iter().enumerate() {
                    check_id(id, "connection").map_err(|e| {
                        e.with_details([(format!("connectionIds[{i}]"), "invalid id")])
                    })?;
                    if cat.provider_of(id).is_none() {
                        unknown.push(id.as_str());
                    }
                }
                if !unknown.is_empty() {
                    return Err(AdminError::not_found(
                        "connection_not_found",
                        format!("Unknown connection id(s): {}", unknown.join(", ")),
                    )
                    .with_details(
                        unknown
                            .iter()
                            .map(|id| ("connectionIds", format!("unknown id {id:?}"))),
                    ));
                }
                Ok(CooldownClear::Ids(unique.into_iter().collect()))
            }
            Self {
                connection_ids: None,
                all: Some(true),
                provider,
            } => {
                if let Some(p) = &provider {
                    known_provider(cat, p)?;
                }
                Ok(CooldownClear::All { provider })
            }
            _ => Err(AdminError::field(
                "connectionIds",
                "send either {\"connectionIds\": [...]} or {\"all\": true, \"provider\"?: id}",
            )),
        }
    }
}

/// Body of `DELETE …/model-cooldowns`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockoutClearBody {
    pub provider: Option<String>,
    #[serde(alias = "connectionId")]
    pub connection: Option<String>,
    pub model: Option<String>,
    pub all: Option<bool>,
}

/// What a valid lockout clear names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockoutClear {
    /// Every lockout of every connection.
    All,
    /// The lockouts of one configured provider, narrowed to one of its connections and/or
    /// one model.
    Provider {
        provider: String,
        connection: Option<String>,
        model: Option<String>,
    },
}

impl LockoutClearBody {
    /// 400 naming the field for a malformed body, 404 for an unknown provider or connection
    /// (or a connection of another provider).
    pub fn validate(self, cat: &impl Catalogue) -> Result<LockoutClear, AdminError> {
        match self {
            Self {
                all: Some(true),
                provider: None,
                connection: None,
                model: None,
            } => Ok(LockoutClear::All),
            Self { all: Some(_), .. } => Err(AdminError::field(
                "all",
                "`all` must be true and cannot be combined with provider, connection or model",
            )),
            Self { provider: None, .. } => Err(AdminError::field(
                "provider",
                "`provider` is required (or send {\"all\": true})",
            )),
            Self {
                provider: Some(provider),
                connection,
                model,
                all: None,
            } => {
                known_provider(cat, &provider)?;
                if let Some(m) = &model
                    && (m.is_empty() || m.len() > 256)
                {
                    return Err(AdminError::field(
                        "model",
                        "`model` must be 1 to 256 characters",
                    ));
                }
                if let Some(id) = &connection
                    && known_connection(cat, id)? != provider
                {
                    return Err(AdminError::not_found(
                        "connection_not_found",
                        format!("Provider {provider:?} has no connection {id:?}"),
                    ));
                }
                Ok(LockoutClear::Provider {
                    provider,
                    connection,
                    model,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Provider `p` with `p-a`, `p-b`; provider `q` with `q-a`.
    struct Cat;

    impl Catalogue for Cat {
        fn has_provider(&self, id: &str) -> bool {
            matches!(id, "p" | "q")
        }
        fn provider_of(&self, connection: &str) -> Option<&str> {
            match connection {
                "p-a" | "p-b" => Some("p"),
                "q-a" => Some("q"),
                _ => None,
            }
        }
    }

    fn cooldowns(json: &str) -> Result<CooldownClear, AdminError> {
        super::super::body::require::<CooldownClearBody>(json.as_bytes())?.validate(&Cat)
    }

    fn lockouts(json: &str) -> Result<LockoutClear, AdminError> {
        super::super::body::require::<LockoutClearBody>(json.as_bytes())?.validate(&Cat)
    }

    #[test]
    fn cooldown_clears_name_ids_or_all() {
        assert_eq!(
            cooldowns(r#"{"connectionIds":["p-b","p-a","p-b"]}"#),
            Ok(CooldownClear::Ids(vec!["p-a".into(), "p-b".into()]))
        );
        assert_eq!(
            cooldowns(r#"{"all":true,"provider":"q"}"#),
            Ok(CooldownClear::All {
                provider: Some("q".into())
            })
        );
        assert_eq!(
            cooldowns(r#"{"all":true}"#),
            Ok(CooldownClear::All { provider: None })
        );
    }

    #[test]
    fn bad_cooldown_clears_say_why() {
        let code = |json: &str| cooldowns(json).map_err(|e| (e.status, e.code)).unwrap_err();
        assert_eq!(
            code(r#"{"connectionIds":[]}"#),
            (400, "invalid_request".into())
        );
        let many = format!(r#"{{"connectionIds":[{}"x"]}}"#, "\"x\",".repeat(1000));
        assert_eq!(code(&many), (400, "invalid_request".into()));
        assert_eq!(
            code(r#"{"connectionIds":["a/b"]}"#),
            (400, "invalid_id".into())
        );
        assert_eq!(code(r#"{"all":false}"#), (400, "invalid_request".into()));
        assert_eq!(
            code(r#"{"all":true,"connectionIds":["p-a"]}"#),
            (400, "invalid_request".into())
        );
        assert_eq!(
            code(r#"{"all":true,"provider":"z"}"#),
            (404, "provider_not_found".into())
        );
        let unknown = cooldowns(r#"{"connectionIds":["p-a","zz","yy"]}"#).unwrap_err();
        assert_eq!(unknown.code, "connection_not_found");
        assert_eq!(unknown.message, "Unknown connection id(s): yy, zz");
        assert_eq!(unknown.details.len(), 2);
    }

    #[test]
    fn lockout_clears_are_all_or_one_provider() {
        assert_eq!(lockouts(r#"{"all":true}"#), Ok(LockoutClear::All));
        assert_eq!(
            lockouts(r#"{"provider":"p","connectionId":"p-a","model":"m"}"#),
            Ok(LockoutClear::Provider {
                provider: "p".into(),
                connection: Some("p-a".into()),
                model: Some("m".into()),
            })
        );
        let code = |json: &str| lockouts(json).map_err(|e| (e.status, e.code)).unwrap_err();
        assert_eq!(
            code(r#"{"all":true,"provider":"p"}"#),
            (400, "invalid_request".into())
        );
        assert_eq!(code(r#"{"all":false}"#), (400, "invalid_request".into()));
        assert_eq!(code(r#"{"model":"m"}"#), (400, "invalid_request".into()));
        assert_eq!(
            code(r#"{"provider":"z"}"#),
            (404, "provider_not_found".into())
        );
        assert_eq!(
            code(r#"{"provider":"p","model":""}"#),
            (400, "invalid_request".into())
        );
        assert_eq!(
            code(r#"{"provider":"p","connection":"q-a"}"#),
            (404, "connection_not_found".into())
        );
        assert_eq!(
            code(r#"{"provider":"p","connection":"nope"}"#),
            (404, "connection_not_found".into())
        );
    }
}
