//! The parameter policy: what happens to a request field the provider format has no place for.
//!
//! Every field a translator knows is classified once, in its decoder and in
//! `docs/translation.md`: *carried* (translated), *emulated* (done here), *dropped* (it only
//! informs or steers the provider; the answer means the same without it) or *refused* (a valid
//! answer would mean something else without it: `400` naming the parameter).
//!
//! Coding agents add fields faster than any table can follow (Codex's `client_metadata`,
//! Claude Code's beta fields), so a field the translator does *not* know is judged by its
//! name: one that marks itself as metadata or a hint ([`is_hint_name`]) is dropped, anything
//! else is refused. [`UnknownParams::Refuse`] turns that guess off for operators who want
//! every unknown field refused. Dropped fields are reported back
//! ([`super::TranslatedRequest::dropped`]) so the node can name them in the
//! `x-switchyard-dropped-params` header and the access log.

use serde::{Deserialize, Serialize};

use crate::sse::Format;
use crate::translate::error::TranslateError;

/// What to do with a request field the translator does not know (`[translation]
/// unknown_params`: `"drop-hints"` or `"refuse"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownParams {
    /// Drop it when its name marks it as metadata or a hint ([`is_hint_name`]); refuse it
    /// otherwise.
    #[default]
    DropHints,
    /// Refuse every unknown field (`400 unsupported_parameter`).
    Refuse,
}

/// Name fragments that mark a field as informing or steering the provider rather than
/// shaping the answer: metadata, caching and scheduling hints, beta flags, tracing, end-user
/// and session identifiers, storage. Matched case-insensitively anywhere in the name.
pub const HINT_MARKERS: &[&str] = &[
    "metadata",
    "cache",
    "hint",
    "beta",
    "trace",
    "telemetry",
    "analytics",
    "client_",
    "session",
    "user",
    "store",
    "tier",
    "safety_identifier",
];

/// The reason decoders give for a field they do not know at all.
pub(crate) const UNKNOWN: &str = "unknown parameter";

/// Whether a field's name marks it as metadata or a hint (see [`HINT_MARKERS`]).
pub fn is_hint_name(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    HINT_MARKERS.iter().any(|m| key.contains(m))
}

/// Fields dropped while decoding one request, in the order met.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Drops {
    pub(crate) mode: UnknownParams,
    pub(crate) names: Vec<String>,
}

impl Drops {
    pub(crate) fn new(mode: UnknownParams) -> Self {
        Self {
            mode,
            names: Vec::new(),
        }
    }

    /// Records a field dropped by its documented classification.
    pub(crate) fn known(&mut self, name: impl Into<String>) {
        let name = name.into();
        if !self.names.contains(&name) {
            self.names.push(name);
        }
    }

    /// A top-level field with no mapping: `reason` is the decoder's refusal reason
    /// ([`UNKNOWN`] when it does not know the field). Only unknown, hint-named fields are
    /// dropped, and only under [`UnknownParams::DropHints`].
    pub(crate) fn unmapped(
        &mut self,
        key: &str,
        target: Format,
        reason: &str,
    ) -> Result<(), TranslateError> {
        if reason == UNKNOWN && self.mode == UnknownParams::DropHints && is_hint_name(key) {
            self.known(key);
            Ok(())
        } else {
            Err(TranslateError::unsupported(key, target, reason))
        }
    }

    /// A tool the provider format cannot express (a hosted or server tool, a tool
    /// namespace). Offering one tool fewer leaves every answer valid, so it is dropped under
    /// [`UnknownParams::DropHints`] and named as `tools[<type>]`; [`UnknownParams::Refuse`]
    /// refuses it. A `tool_choice` that forces such a tool is refused by the caller in both
    /// modes.
    pub(crate) fn tool(
        &mut self,
        path: &str,
        kind: &str,
        target: Format,
    ) -> Result<(), TranslateError> {
        match self.mode {
            UnknownParams::DropHints => {
                self.known(format!("tools[{kind}]"));
                Ok(())
            }
            UnknownParams::Refuse => Err(TranslateError::unsupported(
                format!("{path}.type"),
                target,
                &format!("`{kind}` tools have no counterpart"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_names_are_recognised_case_insensitively() {
        for name in [
            "client_metadata",
            "metadata",
            "prompt_cache_key",
            "cache_hint",
            "anthropic_beta",
            "traceparent",
            "end_user",
            "SessionId",
            "store",
        ] {
            assert!(is_hint_name(name), "{name} should count as a hint");
        }
        for name in [
            "n",
            "top_k",
            "response_format",
            "logit_bias",
            "audio",
            "context_management",
        ] {
            assert!(!is_hint_name(name), "{name} should not count as a hint");
        }
    }

    #[test]
    fn unknown_hints_drop_only_in_drop_hints_mode() {
        let mut d = Drops::new(UnknownParams::DropHints);
        assert!(
            d.unmapped("client_metadata", Format::Anthropic, UNKNOWN)
                .is_ok()
        );
        assert_eq!(d.names, vec!["client_metadata".to_owned()]);
        let err = d
            .unmapped("frobnicate", Format::Anthropic, UNKNOWN)
            .unwrap_err();
        assert_eq!(err.param(), Some("frobnicate"));
        // A field the decoder refuses for a stated reason is refused whatever its name.
        assert!(
            d.unmapped("user_logprobs", Format::Anthropic, "no counterpart")
                .is_err()
        );

        let mut strict = Drops::new(UnknownParams::Refuse);
        assert!(
            strict
                .unmapped("client_metadata", Format::Anthropic, UNKNOWN)
                .is_err()
        );
        assert!(
            strict
                .tool("tools[3]", "web_search", Format::Anthropic)
                .is_err()
        );
        assert!(strict.names.is_empty());
    }

    #[test]
    fn unexpressible_tools_are_named_once() {
        let mut d = Drops::new(UnknownParams::DropHints);
        d.tool("tools[1]", "web_search", Format::Anthropic).unwrap();
        d.tool("tools[2]", "web_search", Format::Anthropic).unwrap();
        assert_eq!(d.names, vec!["tools[web_search]".to_owned()]);
    }
}
