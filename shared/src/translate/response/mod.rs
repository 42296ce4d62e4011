//! Response-body translation: decode the provider's JSON answer into the neutral
//! [`Response`], encode it in the client's format.

mod anthropic;
pub(crate) mod chat;
pub(crate) mod responses;

use serde_json::Value;

use super::context::TranslateContext;
use super::error::TranslateError;
use super::ir::Response;
use crate::sse::Format;

pub(crate) fn decode(
    provider: Format,
    client: Format,
    body: &Value,
) -> Result<Response, TranslateError> {
    match provider {
        Format::OpenAiChat => chat::decode(body),
        Format::Anthropic => anthropic::decode(body),
        Format::OpenAiResponses => Err(TranslateError::direction(provider, client)),
    }
}

pub(crate) fn encode(client: Format, resp: &Response, ctx: &TranslateContext) -> Value {
    match client {
        Format::OpenAiChat => chat::encode(resp, ctx),
        Format::Anthropic => anthropic::encode(resp, ctx),
        Format::OpenAiResponses => responses::encode(resp, ctx),
    }
}
