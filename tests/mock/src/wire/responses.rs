//! OpenAI Responses (`response` objects and the `response.*` event stream).
//!
//! Every streamed event carries a `sequence_number` equal to its position in the stream, so
//! an in-band error inserted at a cut point continues the sequence.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{ErrorInfo, Frame, Kind, Reply, sse_event};
use crate::ids;

/// The in-band `event: error` of a Responses stream.
pub(crate) fn error_frame(err: &ErrorInfo, sequence_number: usize) -> Bytes {
    sse_event(
        "error",
        &json!({
            "type": "error",
            "code": err.code.as_deref().unwrap_or(&err.kind),
            "message": err.message,
            "param": null,
            "sequence_number": sequence_number,
        }),
    )
}

struct Ids {
    response: String,
    reasoning: String,
    message: String,
    function: String,
    call: String,
    created_at: u64,
}

fn usage(reply: &Reply) -> Value {
    let output = reply.output_tokens();
    json!({
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_chunks},
        "total_tokens": reply.input_tokens + output,
    })
}

fn response_object(reply: &Reply, ids: &Ids, status: &str, output: Vec<Value>) -> Value {
    let completed = status == "completed";
    json!({
        "id": ids.response,
        "object": "response",
        "created_at": ids.created_at,
        "status": status,
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "max_output_tokens": null,
        "model": reply.model,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "service_tier": "default",
        "store": true,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": if completed { usage(reply) } else { Value::Null },
        "user": null,
        "metadata": {},
    })
}

fn has_message(reply: &Reply) -> bool {
    reply.chunks > 0 || (reply.reasoning_chunks == 0 && reply.tool_call.is_none())
}

fn reasoning_item(ids: &Ids, text: Option<String>) -> Value {
    let summary = match text {
        Some(t) => json!([{"type": "summary_text", "text": t}]),
        None => json!([]),
    };
    json!({"id": ids.reasoning, "type": "reasoning", "summary": summary})
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
}

fn message_item(ids: &Ids, text: Option<&str>) -> Value {
    let (status, content) = match text {
        Some(t) => ("completed", json!([text_part(t)])),
        None => ("in_progress", json!([])),
    };
    json!({"id": ids.message, "type": "message", "status": status, "role": "assistant", "content": content})
}

fn function_item(ids: &Ids, name: &str, arguments: Option<&str>) -> Value {
    json!({
        "id": ids.function,
        "type": "function_call",
        "status": if arguments.is_some() { "completed" } else { "in_progress" },
        "arguments": arguments.unwrap_or(""),
        "call_id": ids.call,
        "name": name,
    })
}

fn new_ids() -> Ids {
    Ids {
        response: ids::responses("resp_"),
        reasoning: ids::responses("rs_"),
        message: ids::responses("msg_"),
        function: ids::responses("fc_"),
        call: ids::openai_call(),
        created_at: ids::unix_now(),
    }
}

fn completed_output(reply: &Reply, ids: &Ids) -> Vec<Value> {
    let mut output = Vec::new();
    if reply.reasoning_chunks > 0 {
        output.push(reasoning_item(ids, Some(reply.reasoning())));
    }
    if has_message(reply) {
        output.push(message_item(ids, Some(&reply.text())));
    }
    if let (Some(tool), Some((arguments, _))) = (&reply.tool_call, reply.tool_arguments()) {
        output.push(function_item(ids, &tool.name, Some(&arguments)));
    }
    output
}

/// A non-streamed `response`.
pub(crate) fn response_json(reply: &Reply) -> Value {
    let ids = new_ids();
    let output = completed_output(reply, &ids);
    response_object(reply, &ids, "completed", output)
}

/// Builds frames with consecutive sequence numbers.
struct Seq {
    frames: Vec<Frame>,
}

impl Seq {
    fn push(&mut self, kind: Kind, name: &str, mut data: Value) {
        data["type"] = Value::String(name.to_owned());
        data["sequence_number"] = json!(self.frames.len());
        self.frames.push(Frame {
            kind,
            bytes: sse_event(name, &data),
        });
    }
}

/// The event stream of a Responses call: `response.created`, `response.in_progress`, then
/// per output item `response.output_item.added`, its part and delta events and
/// `response.output_item.done`, and finally `response.completed`.
pub(crate) fn response_frames(reply: &Reply) -> Vec<Frame> {
    let ids = new_ids();
    let mut s = Seq {
        frames: Vec::with_capacity(reply.chunks as usize + reply.reasoning_chunks as usize + 16),
    };
    let pending = response_object(reply, &ids, "in_progress", Vec::new());
    s.push(
        Kind::Meta,
        "response.created",
        json!({"response": pending.clone()}),
    );
    s.push(
        Kind::Meta,
        "response.in_progress",
        json!({"response": pending}),
    );

    let mut output_index = 0usize;
    if reply.reasoning_chunks > 0 {
        let text = reply.reasoning();
        let at =
            json!({"item_id": ids.reasoning, "output_index": output_index, "summary_index": 0});
        s.push(
            Kind::Meta,
            "response.output_item.added",
            json!({"output_index": output_index, "item": reasoning_item(&ids, None)}),
        );
        let mut added = at.clone();
        added["part"] = json!({"type": "summary_text", "text": ""});
        s.push(Kind::Meta, "response.reasoning_summary_part.added", added);
        for n in 0..reply.reasoning_chunks {
            let mut d = at.clone();
            d["delta"] = json!(Reply::thought(n));
            s.push(Kind::Content, "response.reasoning_summary_text.delta", d);
        }
        let mut done = at.clone();
        done["text"] = json!(text);
        s.push(Kind::Meta, "response.reasoning_summary_text.done", done);
        let mut part_done = at;
        part_done["part"] = json!({"type": "summary_text", "text": text});
        s.push(
            Kind::Meta,
            "response.reasoning_summary_part.done",
            part_done,
        );
        s.push(
            Kind::Meta,
            "response.output_item.done",
            json!({"output_index": output_index, "item": reasoning_item(&ids, Some(text))}),
        );
        output_index += 1;
    }

    if has_message(reply) {
        let text = reply.text();
        let at = json!({"item_id": ids.message, "output_index": output_index, "content_index": 0});
        s.push(
            Kind::Meta,
            "response.output_item.added",
            json!({"output_index": output_index, "item": message_item(&ids, None)}),
        );
        let mut added = at.clone();
        added["part"] = text_part("");
        s.push(Kind::Meta, "response.content_part.added", added);
        for n in 0..reply.chunks {
            let mut d = at.clone();
            d["delta"] = json!(reply.piece(n));
            d["logprobs"] = json!([]);
            s.push(Kind::Content, "response.output_text.delta", d);
        }
        let mut done = at.clone();
        done["text"] = json!(text);
        done["logprobs"] = json!([]);
        s.push(Kind::Meta, "response.output_text.done", done);
        let mut part_done = at;
        part_done["part"] = text_part(&text);
        s.push(Kind::Meta, "response.content_part.done", part_done);
        s.push(
            Kind::Meta,
            "response.output_item.done",
            json!({"output_index": output_index, "item": message_item(&ids, Some(&text))}),
        );
        output_index += 1;
    }

    if let (Some(tool), Some((arguments, pieces))) = (&reply.tool_call, reply.tool_arguments()) {
        s.push(
            Kind::Meta,
            "response.output_item.added",
            json!({"output_index": output_index, "item": function_item(&ids, &tool.name, None)}),
        );
        for piece in pieces {
            s.push(
                Kind::Content,
                "response.function_call_arguments.delta",
                json!({"item_id": ids.function, "output_index": output_index, "delta": piece}),
            );
        }
        s.push(
            Kind::Meta,
            "response.function_call_arguments.done",
            json!({"item_id": ids.function, "output_index": output_index, "arguments": arguments}),
        );
        s.push(
            Kind::Meta,
            "response.output_item.done",
            json!({"output_index": output_index, "item": function_item(&ids, &tool.name, Some(&arguments))}),
        );
    }

    let output = completed_output(reply, &ids);
    s.push(
        Kind::Trailer,
        "response.completed",
        json!({"response": response_object(reply, &ids, "completed", output)}),
    );
    s.frames
}
