//! Translation between OpenAI Chat Completions, OpenAI Responses and Anthropic Messages, so a
//! client of any format can be served by a provider of either provider format (`openai`
//! chat, `anthropic`) — and a combo can fall back across formats mid-request.
//!
//! Pure and per request: the node calls
//! - [`translate_request`] once with the client's body before sending it upstream;
//! - [`translate_response`] on a JSON answer, or a [`StreamTranslator`] fed every upstream SSE
//!   event ([`StreamTranslator::on_event`] / [`StreamTranslator::on_item`], then
//!   [`StreamTranslator::finish`] at EOF) for a streamed one;
//! - [`translate_error_body`] on an upstream error body it passes on;
//! - [`strip_unsigned_thinking`] on an Anthropic request it sends to an Anthropic provider
//!   unchanged, in case earlier turns were served (and translated) by an OpenAI provider.
//!
//! Every direction goes through one neutral model (the private `ir` module: Anthropic-shaped
//! turns of typed blocks), so each format has one decoder and one encoder and each mapping
//! decision lives in one place. `docs/translation.md` tabulates the mappings and everything
//! dropped, and why. A field or variant the provider format cannot express is dropped and
//! named ([`TranslatedRequest::dropped`]), never refused, unless the operator asked for strict
//! mode ([`UnknownParams::Refuse`], then a [`TranslateError::Unsupported`] naming it); only a
//! malformed body is refused by default.
//!
//! Nothing here performs I/O or reads a clock: times are passed in ([`TranslateContext`]).

mod context;
mod error;
mod errors;
mod ir;
pub mod mapping;
mod policy;
mod reasoning_codec;
mod request;
mod response;
mod stream;
mod util;

#[cfg(test)]
mod tests;

use serde_json::Value;

pub use context::{
    DEFAULT_ANTHROPIC_MAX_TOKENS, MaxTokensField, TranslateContext, TranslateOptions,
};
pub use error::{TranslateError, format_name};
pub use errors::{map_error_type, translate_error_body};
pub use ir::TokenUsage;
pub use policy::UnknownParams;
pub use reasoning_codec::strip_unsigned_thinking;
pub use stream::StreamTranslator;

use crate::sse::Format;

/// Translates a client request body in `client` format into a body for a provider speaking
/// `provider` (OpenAI chat or Anthropic). The same format on both sides returns the body
/// unchanged.
pub fn translate_request(
    client: Format,
    provider: Format,
    body: &Value,
    opts: &TranslateOptions,
) -> Result<Value, TranslateError> {
    translate_request_detailed(client, provider, body, opts).map(|t| t.body)
}

/// A translated request body and the client fields it does not carry.
#[derive(Debug, Clone, PartialEq)]
pub struct TranslatedRequest {
    /// The body for the provider.
    pub body: Value,
    /// Client fields accepted and not forwarded, in the order met: top-level names
    /// (`client_metadata`) and `tools[<type>]` for tools the provider format cannot express.
    /// The node names them in `x-switchyard-dropped-params` and the access log.
    pub dropped: Vec<String>,
    /// Client fields Switchyard applied itself instead of forwarding
    /// (`context_management`), for `x-switchyard-emulated-params`.
    pub emulated: Vec<String>,
}

/// [`translate_request`], also reporting what was dropped under the parameter policy
/// ([`TranslateOptions::unknown_params`], see `docs/translation.md`).
pub fn translate_request_detailed(
    client: Format,
    provider: Format,
    body: &Value,
    opts: &TranslateOptions,
) -> Result<TranslatedRequest, TranslateError> {
    if client == provider {
        return Ok(TranslatedRequest {
            body: body.clone(),
            dropped: Vec::new(),
            emulated: Vec::new(),
        });
    }
    let req = request::decode(client, provider, body, opts.unknown_params)?;
    Ok(TranslatedRequest {
        body: request::encode(client, provider, &req, opts)?,
        dropped: req.dropped,
        emulated: req.emulated,
    })
}

/// Translates a provider's successful JSON response in `provider` format into the client's
/// format `client`. The same format on both sides returns the body unchanged.
pub fn translate_response(
    provider: Format,
    client: Format,
    body: &Value,
    ctx: &TranslateContext,
) -> Result<Value, TranslateError> {
    if client == provider {
        return Ok(body.clone());
    }
    let resp = response::decode(provider, client, body)?;
    Ok(response::encode(client, &resp, ctx))
}
