//! The one error type translation returns, typed so the node can answer without parsing text.
//!
//! A malformed request (and, in strict mode, one that uses something the target format cannot
//! express) is the client's problem: a `400` that names the parameter;
//! an upstream body we cannot read is the provider's problem (`502`); a direction the core does
//! not implement is a node bug (`500`).

use thiserror::Error;

use crate::sse::Format;

/// Why a body could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TranslateError {
    /// The client used a parameter or value with no counterpart in the provider's format.
    #[error(
        "parameter `{param}` is not supported when the request is served in {target} format: {reason}"
    )]
    Unsupported {
        /// The JSON path of the offending parameter, e.g. `n` or `messages[2].content[0].type`.
        param: String,
        /// The provider format, for the message.
        target: &'static str,
        reason: String,
    },
    /// The client request is malformed (a required field missing or of the wrong type).
    #[error("invalid `{param}`: {reason}")]
    Invalid { param: String, reason: String },
    /// The provider answered with a body that is not valid in its own format.
    #[error("the provider's {format} response could not be read: {reason}")]
    Upstream {
        format: &'static str,
        reason: String,
    },
    /// The core has no translation for this pair of formats.
    #[error("no translation from {from} to {to}")]
    Direction {
        from: &'static str,
        to: &'static str,
    },
}

impl TranslateError {
    /// The HTTP status the node should answer with.
    pub fn status(&self) -> u16 {
        match self {
            Self::Unsupported { .. } | Self::Invalid { .. } => 400,
            Self::Upstream { .. } => 502,
            Self::Direction { .. } => 500,
        }
    }

    /// The offending parameter's path, for client errors.
    pub fn param(&self) -> Option<&str> {
        match self {
            Self::Unsupported { param, .. } | Self::Invalid { param, .. } => Some(param),
            Self::Upstream { .. } | Self::Direction { .. } => None,
        }
    }

    /// A machine-readable code for the error body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unsupported { .. } => "unsupported_parameter",
            Self::Invalid { .. } => "invalid_parameter",
            Self::Upstream { .. } => "upstream_translation_failed",
            Self::Direction { .. } => "translation_unavailable",
        }
    }

    pub(crate) fn unsupported(param: impl Into<String>, target: Format, reason: &str) -> Self {
        Self::Unsupported {
            param: param.into(),
            target: format_name(target),
            reason: reason.to_owned(),
        }
    }

    pub(crate) fn invalid(param: impl Into<String>, reason: &str) -> Self {
        Self::Invalid {
            param: param.into(),
            reason: reason.to_owned(),
        }
    }

    pub(crate) fn upstream(format: Format, reason: impl Into<String>) -> Self {
        Self::Upstream {
            format: format_name(format),
            reason: reason.into(),
        }
    }

    pub(crate) fn direction(from: Format, to: Format) -> Self {
        Self::Direction {
            from: format_name(from),
            to: format_name(to),
        }
    }
}

/// A format's human name, for messages.
pub fn format_name(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "OpenAI Chat Completions",
        Format::OpenAiResponses => "OpenAI Responses",
        Format::Anthropic => "Anthropic Messages",
    }
}
