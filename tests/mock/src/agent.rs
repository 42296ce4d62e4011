//! The scripted agent model: asks for one tool call, then answers.
//!
//! Coding agents (Claude Code, Codex) are driven end to end through the gateway against this
//! mock. A real model would call one of the agent's tools and, once the tool's result comes
//! back, answer in text; [`AgentScript`] plays exactly that in every wire format the mock
//! serves: a request whose conversation carries no tool result gets the scripted tool call, a
//! request that carries one gets the final text. [`AgentLog`] records what the mock saw, so a
//! test can check the round trip really happened (the tool ran and its output came back).

use std::sync::Mutex;

use serde_json::Value;

use super::fault::{Route, ToolCallSpec};
use super::lock;

/// The scripted model of [`super::MockConfig::agent`].
#[derive(Debug, Clone, PartialEq)]
pub struct AgentScript {
    /// The tool call of the first turn: a tool the agent offers (Claude Code: `Bash`;
    /// Codex: `exec_command`), with arguments it accepts.
    pub tool: ToolCallSpec,
    /// The answer once the tool's result is in the conversation.
    pub final_text: String,
}

/// What one request gets from the script.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AgentTurn {
    /// Ask for the scripted tool call.
    CallTool(ToolCallSpec),
    /// Answer with this text.
    Answer(String),
}

/// What the scripted model saw, for tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentSeen {
    /// Requests answered with the tool call.
    pub tool_calls_sent: u64,
    /// Requests whose conversation carried a tool result (answered with the final text).
    pub tool_results_seen: u64,
    /// The text of the last tool result seen.
    pub last_tool_result: Option<String>,
    /// Requests that offered no tool of the scripted name (answered with the final text).
    pub without_tool: u64,
}

/// The shared record behind [`AgentSeen`].
#[derive(Debug, Default)]
pub(crate) struct AgentLog(Mutex<AgentSeen>);

impl AgentLog {
    pub(crate) fn snapshot(&self) -> AgentSeen {
        lock(&self.0).clone()
    }

    pub(crate) fn reset(&self) {
        *lock(&self.0) = AgentSeen::default();
    }
}

/// The turn for a request `body` on `route`, recorded in `log`. `None` for routes the script
/// does not play (models) or a body that is not JSON.
pub(crate) fn turn(
    script: &AgentScript,
    route: Route,
    body: &[u8],
    log: &AgentLog,
) -> Option<AgentTurn> {
    if route == Route::Models {
        return None;
    }
    let body: Value = serde_json::from_slice(body).ok()?;
    let result = last_tool_result(route, &body);
    let offered = offers_tool(&body, &script.tool.name);
    let mut seen = lock(&log.0);
    Some(match result {
        Some(text) => {
            seen.tool_results_seen += 1;
            seen.last_tool_result = Some(text);
            AgentTurn::Answer(script.final_text.clone())
        }
        None if offered => {
            seen.tool_calls_sent += 1;
            AgentTurn::CallTool(script.tool.clone())
        }
        None => {
            seen.without_tool += 1;
            AgentTurn::Answer(script.final_text.clone())
        }
    })
}

/// Whether the request offers a tool named `name` (OpenAI chat nests it under `function`).
fn offers_tool(body: &Value, name: &str) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| {
            tools.iter().any(|t| {
                t.get("name").and_then(Value::as_str) == Some(name)
                    || t.pointer("/function/name").and_then(Value::as_str) == Some(name)
            })
        })
}

/// The text of the conversation's last tool result, in `route`'s format.
fn last_tool_result(route: Route, body: &Value) -> Option<String> {
    let items = match route {
        Route::Responses => body.get("input")?.as_array()?,
        _ => body.get("messages")?.as_array()?,
    };
    items.iter().rev().find_map(|item| match route {
        Route::Responses => (item.get("type").and_then(Value::as_str)
            == Some("function_call_output"))
        .then(|| text_of(item.get("output").unwrap_or(&Value::Null))),
        Route::ChatCompletions => (item.get("role").and_then(Value::as_str) == Some("tool"))
            .then(|| text_of(item.get("content").unwrap_or(&Value::Null))),
        Route::Messages => item
            .get("content")
            .and_then(Value::as_array)
            .and_then(|blocks| {
                blocks
                    .iter()
                    .rev()
                    .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            })
            .map(|b| text_of(b.get("content").unwrap_or(&Value::Null))),
        Route::Models => None,
    })
}

/// Text of a string or of a list of text parts/blocks.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn script() -> AgentScript {
        AgentScript {
            tool: ToolCallSpec {
                name: "Bash".into(),
                arguments: json!({"command": "echo hi"}),
            },
            final_text: "done".into(),
        }
    }

    fn play(route: Route, body: Value, log: &AgentLog) -> Option<AgentTurn> {
        turn(&script(), route, &serde_json::to_vec(&body).unwrap(), log)
    }

    #[test]
    fn calls_the_tool_then_answers_in_every_format() {
        let log = AgentLog::default();
        let tools = json!([{"name": "Bash", "input_schema": {}}]);
        let first = play(
            Route::Messages,
            json!({"tools": tools, "messages": [{"role": "user", "content": "go"}]}),
            &log,
        );
        assert_eq!(first, Some(AgentTurn::CallTool(script().tool)));
        let second = play(
            Route::Messages,
            json!({"tools": tools, "messages": [
                {"role": "user", "content": "go"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "hi\n"}]}
            ]}),
            &log,
        );
        assert_eq!(second, Some(AgentTurn::Answer("done".into())));
        let chat = play(
            Route::ChatCompletions,
            json!({"tools": [{"type": "function", "function": {"name": "Bash"}}],
                   "messages": [{"role": "tool", "tool_call_id": "t", "content": [{"type": "text", "text": "hi"}]}]}),
            &log,
        );
        assert_eq!(chat, Some(AgentTurn::Answer("done".into())));
        let responses = play(
            Route::Responses,
            json!({"tools": [{"type": "function", "name": "Bash"}],
                   "input": [{"type": "function_call_output", "call_id": "c", "output": "hi there"}]}),
            &log,
        );
        assert_eq!(responses, Some(AgentTurn::Answer("done".into())));
        let seen = log.snapshot();
        assert_eq!(seen.tool_calls_sent, 1);
        assert_eq!(seen.tool_results_seen, 3);
        assert_eq!(seen.last_tool_result.as_deref(), Some("hi there"));
    }

    #[test]
    fn a_request_without_the_tool_gets_the_answer() {
        let log = AgentLog::default();
        let turn = play(Route::ChatCompletions, json!({"messages": []}), &log);
        assert_eq!(turn, Some(AgentTurn::Answer("done".into())));
        assert_eq!(log.snapshot().without_tool, 1);
        assert_eq!(play(Route::Models, json!({}), &log), None);
    }
}
