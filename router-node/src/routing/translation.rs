//! Serving any client format from any provider format.
//!
//! A client speaks OpenAI Chat, OpenAI Responses or Anthropic Messages; a provider speaks
//! `openai` (chat completions, and Responses natively) or `anthropic`. When the two differ the
//! request is translated before it goes upstream, and the answer — a JSON body or every SSE
//! event — on the way back, with the pure translators of `switchyard_shared::translate`. The
//! upstream attempt itself (URL, readiness, watchdogs) runs in the provider's wire format, so
//! the commit point and the stream watchdogs behave the same on translated streams.

use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use switchyard_shared::config::{ProviderConfig, ProviderFormat};
use switchyard_shared::sse::{Format, SseParser};
use switchyard_shared::translate::{
    self, StreamTranslator, TranslateContext, TranslateError, TranslateOptions,
};

use crate::api::body::ParsedBody;
use crate::api::errors::{ClientFormat, ErrorSource, GatewayError};

/// How one target is reached from the client's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The format spoken on the wire to the provider (URL path, SSE parsing, in-band frames).
    pub wire: ClientFormat,
    /// Whether bodies must be translated between the client and the wire format.
    pub translate: bool,
}

/// The plan for a client format and a provider format.
pub fn plan(client: ClientFormat, provider: ProviderFormat) -> Plan {
    match (client, provider) {
        (ClientFormat::OpenAiChat, ProviderFormat::Openai) => native(ClientFormat::OpenAiChat),
        // OpenAI providers serve the Responses API themselves: pass it through.
        (ClientFormat::OpenAiResponses, ProviderFormat::Openai) => {
            native(ClientFormat::OpenAiResponses)
        }
        (ClientFormat::Anthropic, ProviderFormat::Anthropic) => native(ClientFormat::Anthropic),
        (ClientFormat::Anthropic, ProviderFormat::Openai) => Plan {
            wire: ClientFormat::OpenAiChat,
            translate: true,
        },
        (ClientFormat::OpenAiChat | ClientFormat::OpenAiResponses, ProviderFormat::Anthropic) => {
            Plan {
                wire: ClientFormat::Anthropic,
                translate: true,
            }
        }
    }
}

/// The plan for a client format and a configured provider: [`plan`], except that Responses
/// requests to an `openai` provider that does not serve that API (`responses_api`: by default
/// every host but OpenAI's own) are translated to Chat Completions.
pub fn plan_for(client: ClientFormat, provider: &ProviderConfig) -> Plan {
    if client == ClientFormat::OpenAiResponses
        && provider.format == ProviderFormat::Openai
        && !provider.serves_responses_natively()
    {
        return Plan {
            wire: ClientFormat::OpenAiChat,
            translate: true,
        };
    }
    plan(client, provider.format)
}

fn native(wire: ClientFormat) -> Plan {
    Plan {
        wire,
        translate: false,
    }
}

/// The SSE/translation format of an HTTP-level client format.
pub fn format_of(f: ClientFormat) -> Format {
    match f {
        ClientFormat::OpenAiChat => Format::OpenAiChat,
        ClientFormat::OpenAiResponses => Format::OpenAiResponses,
        ClientFormat::Anthropic => Format::Anthropic,
    }
}

/// The translation state of one request towards one target.
#[derive(Debug, Clone)]
pub struct Translation {
    pub client: ClientFormat,
    pub wire: ClientFormat,
    pub ctx: TranslateContext,
    /// Client fields the translation dropped, comma-separated (empty when none), for the
    /// `x-switchyard-dropped-params` header and the access log.
    pub dropped: String,
    /// Client fields Switchyard applied itself instead of forwarding (`context_management`),
    /// comma-separated, for the `x-switchyard-emulated-params` header and the access log.
    pub emulated: String,
}

/// The response header naming the client fields a translation dropped.
pub const DROPPED_PARAMS_HEADER: &str = "x-switchyard-dropped-params";

/// The response header naming the client fields a translation emulated.
pub const EMULATED_PARAMS_HEADER: &str = "x-switchyard-emulated-params";

impl Translation {
    /// The dropped fields, when there are any.
    pub fn dropped(&self) -> Option<&str> {
        (!self.dropped.is_empty()).then_some(self.dropped.as_str())
    }

    /// The emulated fields, when there are any.
    pub fn emulated(&self) -> Option<&str> {
        (!self.emulated.is_empty()).then_some(self.emulated.as_str())
    }

    /// The response headers that name dropped and emulated fields.
    pub fn param_headers(&self) -> impl Iterator<Item = (&'static str, String)> + '_ {
        [
            (DROPPED_PARAMS_HEADER, self.dropped()),
            (EMULATED_PARAMS_HEADER, self.emulated()),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?.to_owned())))
    }
}

/// The upstream body for `plan`: the client's body with `model` replaced, translated when the
/// formats differ. Unsupported parameters are a 400 naming the parameter.
pub fn upstream_body(
    client: ClientFormat,
    plan: Plan,
    body: &ParsedBody,
    upstream_model: &str,
    now_unix_secs: u64,
    opts: &TranslateOptions,
) -> Result<(Bytes, Option<Translation>), GatewayError> {
    if !plan.translate {
        if client == ClientFormat::Anthropic && memchr_thinking(&body.raw) {
            // Earlier turns may carry thinking blocks an OpenAI provider produced (no
            // signature); Anthropic rejects those, so drop them before sending.
            if let Ok(mut v) = serde_json::from_slice::<Value>(&body.raw)
                && translate::strip_unsigned_thinking(&mut v) > 0
            {
                v["model"] = Value::from(upstream_model);
                return Ok((
                    Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
                    None,
                ));
            }
        }
        return Ok((body.with_model(upstream_model), None));
    }
    let request: Value = serde_json::from_slice(&body.raw).map_err(|e| {
        GatewayError::bad_request(
            "invalid_json",
            format!("Request body is not valid JSON: {e}"),
        )
    })?;
    let translated = translate::translate_request_detailed(
        format_of(client),
        format_of(plan.wire),
        &request,
        opts,
    )
    .map_err(translate_error)?;
    let mut out = translated.body;
    out["model"] = Value::from(upstream_model);
    let bytes = serde_json::to_vec(&out)
        .map_err(|_| GatewayError::internal("could not encode the translated request"))?;
    let ctx = TranslateContext::new(format_of(client), &request, now_unix_secs);
    Ok((
        Bytes::from(bytes),
        Some(Translation {
            client,
            wire: plan.wire,
            ctx,
            dropped: translated.dropped.join(","),
            emulated: translated.emulated.join(","),
        }),
    ))
}

fn memchr_thinking(raw: &[u8]) -> bool {
    raw.windows(10).any(|w| w == b"\"thinking\"")
}

/// A translation refusal as a client error naming the parameter.
pub fn translate_error(e: TranslateError) -> GatewayError {
    let status = actix_web::http::StatusCode::from_u16(e.status())
        .unwrap_or(actix_web::http::StatusCode::BAD_REQUEST);
    let mut err = GatewayError::new(
        status,
        if e.status() == 400 {
            "invalid_request_error"
        } else {
            "server_error"
        },
        e.code(),
        e.to_string(),
    )
    .with_source(if e.status() == 400 {
        ErrorSource::Downstream
    } else {
        ErrorSource::Upstream
    });
    if let Some(param) = e.param() {
        err = err.with_field("param", param);
    }
    err
}

/// Translates a JSON answer from the wire format into the client's.
pub fn json_body(t: &Translation, body: &Bytes) -> Result<Bytes, GatewayError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| {
        GatewayError::new(
            actix_web::http::StatusCode::BAD_GATEWAY,
            "server_error",
            "upstream_invalid_json",
            "The provider returned a body that is not JSON",
        )
    })?;
    let out = translate::translate_response(format_of(t.wire), format_of(t.client), &value, &t.ctx)
        .map_err(translate_error)?;
    serde_json::to_vec(&out)
        .map(Bytes::from)
        .map_err(|_| GatewayError::internal("could not encode the translated response"))
}

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, actix_web::Error>>>>;

/// Translates a committed upstream SSE stream event by event into the client's format.
pub fn stream_body(t: &Translation, upstream: ByteStream) -> Result<ByteStream, GatewayError> {
    let translator = StreamTranslator::new(format_of(t.wire), format_of(t.client), t.ctx.clone())
        .map_err(translate_error)?;
    struct State {
        upstream: ByteStream,
        parser: SseParser,
        translator: StreamTranslator,
        done: bool,
    }
    let state = State {
        upstream,
        parser: SseParser::new(),
        translator,
        done: false,
    };
    Ok(Box::pin(futures_util::stream::unfold(
        state,
        |mut s| async move {
            loop {
                if s.done {
                    return None;
                }
                match s.upstream.next().await {
                    Some(Ok(chunk)) => {
                        let mut out = Vec::new();
                        let translator = &mut s.translator;
                        s.parser
                            .feed(&chunk, &mut |item| out.extend(translator.on_item(&item)));
                        if !out.is_empty() {
                            return Some((Ok(Bytes::from(out)), s));
                        }
                    }
                    Some(Err(e)) => {
                        s.done = true;
                        return Some((Err(e), s));
                    }
                    None => {
                        s.done = true;
                        let out = s.translator.finish();
                        if out.is_empty() {
                            return None;
                        }
                        return Some((Ok(Bytes::from(out)), s));
                    }
                }
            }
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_every_pair() {
        use ClientFormat::*;
        assert_eq!(
            plan(OpenAiChat, ProviderFormat::Openai),
            Plan {
                wire: OpenAiChat,
                translate: false
            }
        );
        assert_eq!(
            plan(OpenAiResponses, ProviderFormat::Openai),
            Plan {
                wire: OpenAiResponses,
                translate: false
            }
        );
        assert_eq!(
            plan(Anthropic, ProviderFormat::Anthropic),
            Plan {
                wire: Anthropic,
                translate: false
            }
        );
        assert_eq!(
            plan(Anthropic, ProviderFormat::Openai),
            Plan {
                wire: OpenAiChat,
                translate: true
            }
        );
        assert_eq!(
            plan(OpenAiChat, ProviderFormat::Anthropic),
            Plan {
                wire: Anthropic,
                translate: true
            }
        );
        assert_eq!(
            plan(OpenAiResponses, ProviderFormat::Anthropic),
            Plan {
                wire: Anthropic,
                translate: true
            }
        );
    }

    #[test]
    fn responses_reach_only_openai_hosts_natively_by_default() {
        use switchyard_shared::config::ResponsesApi;
        let provider = |base_url: &str, responses_api: ResponsesApi| ProviderConfig {
            format: ProviderFormat::Openai,
            base_url: base_url.to_owned(),
            responses_api,
            ..ProviderConfig::default()
        };
        let native = Plan {
            wire: ClientFormat::OpenAiResponses,
            translate: false,
        };
        let to_chat = Plan {
            wire: ClientFormat::OpenAiChat,
            translate: true,
        };
        let responses = ClientFormat::OpenAiResponses;
        let openai = provider("https://api.openai.com/v1", ResponsesApi::Auto);
        assert_eq!(plan_for(responses, &openai), native);
        let azure = provider("https://r.openai.azure.com/openai/v1", ResponsesApi::Auto);
        assert_eq!(plan_for(responses, &azure), native);
        let vllm = provider("http://127.0.0.1:8000/v1", ResponsesApi::Auto);
        assert_eq!(plan_for(responses, &vllm), to_chat);
        let native_vllm = provider("http://127.0.0.1:8000/v1", ResponsesApi::Native);
        assert_eq!(plan_for(responses, &native_vllm), native);
        let forced = provider("https://api.openai.com/v1", ResponsesApi::Translate);
        assert_eq!(plan_for(responses, &forced), to_chat);
        // Other client formats are unaffected.
        assert_eq!(
            plan_for(ClientFormat::OpenAiChat, &vllm),
            plan(ClientFormat::OpenAiChat, ProviderFormat::Openai)
        );
    }
}
