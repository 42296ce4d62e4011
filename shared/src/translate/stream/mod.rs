//! Stream translation: one stateful [`StreamTranslator`] per response stream.
//!
//! Each upstream event is decoded into neutral [`Ev`]ents (Anthropic's event model: a message
//! start, typed content blocks that start, receive deltas and stop, a finish with the stop
//! reason and usage, an end), which an encoder turns into frames of the client's format. The
//! decoders synthesise what their format leaves implicit (chat has no block boundaries, so a
//! change of delta kind closes one block and opens the next); the encoders keep what theirs
//! needs (Responses repeats every item whole when it is done, and the whole response at the
//! end).
//!
//! The translator never invents a clean ending: a stream that stops before its finish event
//! yields no closing frames, so the node's truncation handling still applies. The node should
//! keep feeding the **upstream** events to its watchdogs and tap (`inspect` in the provider's
//! format) and only send the translated bytes to the client.

mod anthropic_in;
mod anthropic_out;
mod chat_in;
mod chat_out;
mod responses_out;

use crate::sse::{FinishReason, Format, SseEvent, SseItem, UpstreamStreamError, keep_alive_frame};

use super::context::TranslateContext;
use super::error::TranslateError;
use super::ir::TokenUsage;

/// One neutral stream event. Block indexes are the decoder's; encoders renumber.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ev {
    Start {
        id: String,
        model: String,
        usage: TokenUsage,
    },
    BlockStart {
        index: usize,
        kind: BlockKind,
    },
    Delta {
        index: usize,
        delta: Delta,
    },
    BlockStop {
        index: usize,
    },
    Finish {
        reason: FinishReason,
        stop_sequence: Option<String>,
        usage: TokenUsage,
    },
    End,
    Error(UpstreamStreamError),
    Ping,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Text,
    Reasoning,
    Redacted(String),
    ToolCall { id: String, name: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Delta {
    Text(String),
    Reasoning(String),
    Signature(String),
    Arguments(String),
}

enum Decoder {
    Chat(chat_in::ChatDecoder),
    Anthropic(anthropic_in::AnthropicDecoder),
}

enum Encoder {
    Chat(chat_out::ChatEncoder),
    Anthropic(anthropic_out::AnthropicEncoder),
    Responses(responses_out::ResponsesEncoder),
}

enum Mode {
    /// Same format both sides: events are re-emitted as they came (event, id and data).
    Passthrough,
    Translate(Decoder, Box<Encoder>),
}

/// Translates one response stream from the provider's format to the client's, event by event.
pub struct StreamTranslator {
    to: Format,
    mode: Mode,
    events: Vec<Ev>,
}

impl StreamTranslator {
    /// A translator for a stream in `from` (the provider's format) to `to` (the client's).
    /// Responses is a client format only, so it cannot be `from` unless `to` is Responses too.
    pub fn new(from: Format, to: Format, ctx: TranslateContext) -> Result<Self, TranslateError> {
        let mode = if from == to {
            Mode::Passthrough
        } else {
            let decoder = match from {
                Format::OpenAiChat => Decoder::Chat(chat_in::ChatDecoder::default()),
                Format::Anthropic => Decoder::Anthropic(anthropic_in::AnthropicDecoder::default()),
                Format::OpenAiResponses => return Err(TranslateError::direction(from, to)),
            };
            let encoder = match to {
                Format::OpenAiChat => Encoder::Chat(chat_out::ChatEncoder::new(ctx)),
                Format::Anthropic => Encoder::Anthropic(anthropic_out::AnthropicEncoder::new(ctx)),
                Format::OpenAiResponses => {
                    Encoder::Responses(responses_out::ResponsesEncoder::new(ctx))
                }
            };
            Mode::Translate(decoder, Box::new(encoder))
        };
        Ok(Self {
            to,
            mode,
            events: Vec::new(),
        })
    }

    /// The bytes of zero or more SSE frames in the client's format for one upstream event.
    pub fn on_event(&mut self, event: &SseEvent<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        match &mut self.mode {
            Mode::Passthrough => passthrough(event, &mut out),
            Mode::Translate(decoder, encoder) => {
                match decoder {
                    Decoder::Chat(d) => d.decode(event, &mut self.events),
                    Decoder::Anthropic(d) => d.decode(event, &mut self.events),
                }
                encode_all(encoder, &mut self.events, &mut out);
            }
        }
        out
    }

    /// Like [`Self::on_event`] for any parser item: a comment (an upstream keep-alive) becomes
    /// the client format's keep-alive frame; framing errors produce nothing.
    pub fn on_item(&mut self, item: &SseItem<'_>) -> Vec<u8> {
        match item {
            SseItem::Event(event) => self.on_event(event),
            SseItem::Comment(_) => keep_alive_frame(self.to).to_vec(),
            SseItem::Error(_) => Vec::new(),
        }
    }

    /// Call at the end of the upstream stream: emits the closing frames a complete stream
    /// still owes (a chat stream whose provider omitted `[DONE]`), and nothing for a stream
    /// that was cut short.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Mode::Translate(decoder, encoder) = &mut self.mode {
            match decoder {
                Decoder::Chat(d) => d.finish(&mut self.events),
                Decoder::Anthropic(_) => {}
            }
            encode_all(encoder, &mut self.events, &mut out);
        }
        out
    }
}

fn encode_all(encoder: &mut Encoder, events: &mut Vec<Ev>, out: &mut Vec<u8>) {
    for ev in events.drain(..) {
        match encoder {
            Encoder::Chat(e) => e.encode(ev, out),
            Encoder::Anthropic(e) => e.encode(ev, out),
            Encoder::Responses(e) => e.encode(ev, out),
        }
    }
}

fn passthrough(event: &SseEvent<'_>, out: &mut Vec<u8>) {
    if let Some(name) = event.event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name);
        out.push(b'\n');
    }
    if let Some(id) = event.id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id);
        out.push(b'\n');
    }
    for line in event.data.split(|b| *b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.push(b'\n');
}
