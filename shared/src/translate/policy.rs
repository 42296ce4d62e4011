//! The parameter policy: what happens to a request field the provider format has no place for.
//!
//! Every field and variant a translator knows is classified once, in its decoder and in
//! `docs/translation.md`: *carried* (translated), *emulated* (done here) or *dropped* (not
//! forwarded, and named back to the client).
//!
//! Coding agents add fields and variants faster than any table can follow (Claude Code's
//! `system` turns inside `messages`, `output_config`, new thinking and tool types; Codex's
//! `client_metadata`), and a gateway that refuses what the client's own API accepts breaks the
//! client outright. So across formats, anything the provider format cannot express is dropped
//! and named, never refused: a top-level field, a tool, a content block, a message role, an
//! input item. Dropped names are reported back ([`super::TranslatedRequest::dropped`]) so the
//! node names them in the `x-switchyard-dropped-params` header and the access log. (Same-format
//! requests never reach this module's decoders: they are forwarded unchanged, unknown fields
//! included.) [`UnknownParams::Refuse`] is for operators who would rather refuse every such
//! field; only malformed bodies are refused in the default mode.

use serde::{Deserialize, Serialize};

use crate::sse::Format;
use crate::translate::error::TranslateError;

/// What to do with a request field or variant the provider format cannot express
/// (`[translation] unknown_params`: `"drop"` or `"refuse"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownParams {
    /// Drop it and name it in `x-switchyard-dropped-params`. `"drop-hints"`, the name of an
    /// earlier, narrower default, is read as this.
    #[default]
    #[serde(alias = "drop-hints")]
    Drop,
    /// Refuse it (`400 unsupported_parameter` naming it). Fields with a documented drop
    /// (storage and caching hints) are still dropped.
    Refuse,
}

/// The reason decoders give for a field they do not know at all.
pub(crate) const UNKNOWN: &str = "unknown parameter";

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

    /// Records a field dropped by its documented classification (in every mode).
    pub(crate) fn known(&mut self, name: impl Into<String>) {
        let name = name.into();
        if !self.names.contains(&name) {
            self.names.push(name);
        }
    }

    /// A top-level field with no mapping: `reason` says why ([`UNKNOWN`] when the decoder does
    /// not know the field). Dropped and named under its own name, or refused in
    /// [`UnknownParams::Refuse`] mode.
    pub(crate) fn unmapped(
        &mut self,
        key: &str,
        target: Format,
        reason: &str,
    ) -> Result<(), TranslateError> {
        self.variant(key, key, target, reason)
    }

    /// A nested field or variant with no mapping (a content block type, a message role, an
    /// input item, a tool-choice form): dropped and recorded as `name` (a stable name such as
    /// `content[search_result]`, not the request's index path, so the header stays short), or
    /// refused at `path` in [`UnknownParams::Refuse`] mode.
    pub(crate) fn variant(
        &mut self,
        path: &str,
        name: &str,
        target: Format,
        reason: &str,
    ) -> Result<(), TranslateError> {
        match self.mode {
            UnknownParams::Drop => {
                self.known(name);
                Ok(())
            }
            UnknownParams::Refuse => Err(TranslateError::unsupported(path, target, reason)),
        }
    }

    /// A tool the provider format cannot express (a hosted or server tool, a tool namespace, a
    /// free-form custom tool). Offering one tool fewer leaves every answer valid: named as
    /// `tools[<type>]`.
    pub(crate) fn tool(
        &mut self,
        path: &str,
        kind: &str,
        target: Format,
    ) -> Result<(), TranslateError> {
        self.variant(
            &format!("{path}.type"),
            &format!("tools[{kind}]"),
            target,
            &format!("`{kind}` tools have no counterpart"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_old_mode_name_reads_as_drop() {
        #[derive(Deserialize)]
        struct T {
            m: UnknownParams,
        }
        for name in ["drop", "drop-hints"] {
            let t: T = serde_json::from_str(&format!("{{\"m\":\"{name}\"}}")).unwrap();
            assert_eq!(t.m, UnknownParams::Drop);
        }
        let t: T = serde_json::from_str("{\"m\":\"refuse\"}").unwrap();
        assert_eq!(t.m, UnknownParams::Refuse);
        assert!(serde_json::from_str::<T>("{\"m\":\"ignore\"}").is_err());
    }

    #[test]
    fn unmapped_fields_are_dropped_and_named_unless_strict() {
        let mut d = Drops::new(UnknownParams::Drop);
        d.unmapped("client_metadata", Format::Anthropic, UNKNOWN)
            .unwrap();
        d.unmapped("top_k", Format::OpenAiChat, "no counterpart")
            .unwrap();
        d.variant(
            "messages[1].content[0].type",
            "content[search_result]",
            Format::OpenAiChat,
            "no counterpart",
        )
        .unwrap();
        assert_eq!(
            d.names,
            vec!["client_metadata", "top_k", "content[search_result]"]
        );

        let mut strict = Drops::new(UnknownParams::Refuse);
        let err = strict
            .unmapped("client_metadata", Format::Anthropic, UNKNOWN)
            .unwrap_err();
        assert_eq!(err.param(), Some("client_metadata"));
        let err = strict
            .variant("input[3].type", "input[x]", Format::Anthropic, "no")
            .unwrap_err();
        assert_eq!(err.param(), Some("input[3].type"));
        assert!(
            strict
                .tool("tools[3]", "web_search", Format::Anthropic)
                .is_err()
        );
        // A documented drop stays a drop in strict mode.
        strict.known("store");
        assert_eq!(strict.names, vec!["store"]);
    }

    #[test]
    fn unexpressible_tools_are_named_once() {
        let mut d = Drops::new(UnknownParams::Drop);
        d.tool("tools[1]", "web_search", Format::Anthropic).unwrap();
        d.tool("tools[2]", "web_search", Format::Anthropic).unwrap();
        assert_eq!(d.names, vec!["tools[web_search]".to_owned()]);
    }
}
