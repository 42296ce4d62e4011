//! The request bodies a multi-call combo sends, and the answer text it reads back: pure
//! functions over JSON, in the client's wire format (the per-target pipeline translates them
//! to each provider's format like any client body).
//!
//! Why the client's format: a sub-request is routed exactly like the client's own request,
//! so a judge or the last step answers the client directly, with no second translation.

use serde_json::{Map, Value, json};
use switchyard_shared::sse::Usage;

use crate::api::errors::ClientFormat;

/// Who says a message appended to the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

/// Why a client body cannot carry the extra messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyShape(pub &'static str);

/// One panel member's answer, as the judge sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelAnswer {
    /// `provider/model`.
    pub label: String,
    pub text: String,
}

/// The client's body with `extra` appended to its conversation and `stream` set: `messages`
/// (Chat Completions, Anthropic Messages) or `input` (Responses; a string input becomes its
/// one user message). A non-streaming body loses `stream_options`.
pub fn with_messages(
    raw: &[u8],
    format: ClientFormat,
    extra: &[(Role, &str)],
    stream: bool,
) -> Result<Vec<u8>, BodyShape> {
    let mut body: Map<String, Value> =
        serde_json::from_slice(raw).map_err(|_| BodyShape("the body is not a JSON object"))?;
    body.insert("stream".to_owned(), Value::Bool(stream));
    if !stream {
        body.remove("stream_options");
    }
    if !extra.is_empty() {
        let key = match format {
            ClientFormat::OpenAiChat | ClientFormat::Anthropic => "messages",
            ClientFormat::OpenAiResponses => "input",
        };
        let mut list = match body.remove(key) {
            Some(Value::Array(items)) => items,
            Some(Value::String(text)) if format == ClientFormat::OpenAiResponses => {
                vec![json!({"role": "user", "content": text})]
            }
            None if format == ClientFormat::OpenAiResponses => Vec::new(),
            _ => return Err(BodyShape("the conversation is not a list of messages")),
        };
        list.extend(
            extra
                .iter()
                .map(|(role, text)| json!({"role": role.as_str(), "content": text})),
        );
        body.insert(key.to_owned(), Value::Array(list));
    }
    serde_json::to_vec(&Value::Object(body)).map_err(|_| BodyShape("the body cannot be written"))
}

/// The judge's instruction: every panel answer, labelled and numbered, then what to do.
pub fn judge_prompt(answers: &[PanelAnswer]) -> String {
    let mut out = format!(
        "{} assistants answered the conversation above independently. Their answers follow.\n",
        answers.len()
    );
    for (i, a) in answers.iter().enumerate() {
        out.push_str(&format!(
            "\n<answer index=\"{}\" model=\"{}\">\n{}\n</answer>\n",
            i + 1,
            a.label,
            a.text
        ));
    }
    out.push_str(
        "\nWrite the single best answer to the conversation: combine what the answers get \
         right, correct what they get wrong, and do not mention that there were several \
         answers.",
    );
    out
}

/// The messages a pipeline step adds after the client's conversation: the previous step's
/// answer and the step prompt. The first step (no previous answer) adds nothing.
pub fn step_messages<'a>(previous: Option<&'a str>, step_prompt: &'a str) -> Vec<(Role, &'a str)> {
    match previous {
        Some(answer) => vec![(Role::Assistant, answer), (Role::User, step_prompt)],
        None => Vec::new(),
    }
}

/// The text of a non-streamed answer in the client's format: Chat Completions
/// `choices[0].message.content` (a string or text parts), Anthropic `content[]` text blocks,
/// Responses `output_text` or the `output_text` parts of its `message` items.
pub fn answer_text(format: ClientFormat, body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    match format {
        ClientFormat::OpenAiChat => {
            let content = v.pointer("/choices/0/message/content")?;
            match content {
                Value::String(s) => Some(s.clone()),
                Value::Array(parts) => Some(text_parts(parts, "text")),
                _ => None,
            }
        }
        ClientFormat::Anthropic => Some(text_parts(v.get("content")?.as_array()?, "text")),
        ClientFormat::OpenAiResponses => {
            if let Some(s) = v.get("output_text").and_then(Value::as_str) {
                return Some(s.to_owned());
            }
            let items = v.get("output")?.as_array()?;
            Some(
                items
                    .iter()
                    .filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))
                    .filter_map(|i| i.get("content").and_then(Value::as_array))
                    .map(|parts| text_parts(parts, "output_text"))
                    .collect(),
            )
        }
    }
}

/// The `text` of every part whose `type` is `kind`, joined.
fn text_parts(parts: &[Value], kind: &str) -> String {
    parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect()
}

/// Adds `more` to `total`, field by field (a field neither reported stays unknown).
pub fn add_usage(total: &mut Option<Usage>, more: Option<&Usage>) {
    let Some(more) = more else {
        return;
    };
    let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    };
    let t = total.get_or_insert_with(Usage::default);
    t.input = sum(t.input, more.input);
    t.output = sum(t.output, more.output);
    t.cache_read = sum(t.cache_read, more.cache_read);
    t.cache_creation = sum(t.cache_creation, more.cache_creation);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_of(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn a_step_appends_the_previous_answer_and_the_prompt() {
        let raw = br#"{"model":"c","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Q"}]}"#;
        let extra = step_messages(Some("first draft"), "Refine the answer above.");
        let out = json_of(&with_messages(raw, ClientFormat::OpenAiChat, &extra, false).unwrap());
        assert_eq!(out["stream"], false);
        assert!(out.get("stream_options").is_none());
        assert_eq!(out["model"], "c");
        let m = out["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0]["content"], "Q");
        assert_eq!(m[1], json!({"role": "assistant", "content": "first draft"}));
        assert_eq!(
            m[2],
            json!({"role": "user", "content": "Refine the answer above."})
        );
        // The first step is the client's request as it is, with `stream` decided here.
        assert!(step_messages(None, "x").is_empty());
        let first = json_of(&with_messages(raw, ClientFormat::OpenAiChat, &[], true).unwrap());
        assert_eq!(first["messages"].as_array().unwrap().len(), 1);
        assert_eq!(first["stream"], true);
    }

    #[test]
    fn responses_input_as_a_string_becomes_a_message_list() {
        let raw = br#"{"model":"c","input":"Q"}"#;
        let extra = [(Role::User, "judge this")];
        let out =
            json_of(&with_messages(raw, ClientFormat::OpenAiResponses, &extra, false).unwrap());
        assert_eq!(
            out["input"],
            json!([{"role": "user", "content": "Q"}, {"role": "user", "content": "judge this"}])
        );
        let bad = br#"{"model":"c","messages":"Q"}"#;
        assert!(with_messages(bad, ClientFormat::Anthropic, &extra, false).is_err());
        assert!(with_messages(b"[1]", ClientFormat::Anthropic, &extra, false).is_err());
    }

    #[test]
    fn the_judge_prompt_carries_every_answer_labelled() {
        let answers = [
            PanelAnswer {
                label: "pa/m".into(),
                text: "alpha".into(),
            },
            PanelAnswer {
                label: "pb/m".into(),
                text: "beta".into(),
            },
        ];
        let p = judge_prompt(&answers);
        assert!(p.starts_with("2 assistants"), "{p}");
        assert!(p.contains("<answer index=\"1\" model=\"pa/m\">\nalpha\n</answer>"));
        assert!(p.contains("<answer index=\"2\" model=\"pb/m\">\nbeta\n</answer>"));
        assert!(p.find("alpha") < p.find("beta"));
    }

    #[test]
    fn answer_text_reads_each_format() {
        let chat = br#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#;
        assert_eq!(
            answer_text(ClientFormat::OpenAiChat, chat).as_deref(),
            Some("hi")
        );
        let anthropic = br#"{"content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#;
        assert_eq!(
            answer_text(ClientFormat::Anthropic, anthropic).as_deref(),
            Some("ab")
        );
        let responses = br#"{"output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"r"}]}]}"#;
        assert_eq!(
            answer_text(ClientFormat::OpenAiResponses, responses).as_deref(),
            Some("r")
        );
        assert_eq!(answer_text(ClientFormat::OpenAiChat, b"{}"), None);
        assert_eq!(answer_text(ClientFormat::OpenAiChat, b"not json"), None);
    }

    #[test]
    fn usage_adds_field_by_field() {
        let mut total = None;
        add_usage(&mut total, None);
        assert_eq!(total, None);
        let a = Usage {
            input: Some(10),
            output: Some(5),
            ..Usage::default()
        };
        let b = Usage {
            input: Some(1),
            cache_read: Some(3),
            ..Usage::default()
        };
        add_usage(&mut total, Some(&a));
        add_usage(&mut total, Some(&b));
        let t = total.unwrap();
        assert_eq!(
            (t.input, t.output, t.cache_read, t.cache_creation),
            (Some(11), Some(5), Some(3), None)
        );
    }
}
