//! Streams shaped like real upstream captures (ids shortened, bodies trimmed of fields the tap
//! ignores where noted).

/// Every fixture, for properties that hold for all of them.
pub(in crate::sse) const ALL: &[&str] = &[
    OPENAI_CHAT,
    OPENAI_CHAT_PADDED,
    OPENAI_CHAT_TOOLS,
    OPENAI_CHAT_REASONING,
    OPENAI_CHAT_MIDSTREAM_ERROR,
    OPENAI_CHAT_SERVER_ERROR,
    ANTHROPIC,
    ANTHROPIC_TOOL_USE,
    ANTHROPIC_OVERLOADED,
    RESPONSES,
    RESPONSES_PADDED,
    RESPONSES_TOOLS,
    RESPONSES_ERRORS,
];

/// Chat completions with `stream_options.include_usage`: role chunk, text (with escapes and a
/// literal emoji), finish chunk, usage-only chunk, `[DONE]`.
pub(in crate::sse) const OPENAI_CHAT: &str = r#"data: {"id":"chatcmpl-B9MHDbslfkBeAs8l","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[{"index":0,"delta":{"content":"Caf\u00e9"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[{"index":0,"delta":{"content":" \"ol\u00e9\"\n"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[{"index":0,"delta":{"content":"😀"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_06737a9306","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

"#;

/// Chat completions as OpenAI streams them by default since August 2025: every chunk ends
/// with an `obfuscation` string of random length (padding against length side channels,
/// omitted with `stream_options.include_obfuscation: false`). The first four chunks are a
/// gpt-4o-mini capture published as a contract fixture by the GoModel gateway
/// (ENTERPILOT/GoModel, `tests/contract/testdata/openai/chat_completion_stream.txt`); the
/// finish chunk and `[DONE]` are shaped the same.
pub(in crate::sse) const OPENAI_CHAT_PADDED: &str = r#"data: {"id":"chatcmpl-D0q8CZXN1uEzngZGkU7FuV92lnXWq","object":"chat.completion.chunk","created":1769092764,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_29330a9688","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"obfuscation":"ZGF"}

data: {"id":"chatcmpl-D0q8CZXN1uEzngZGkU7FuV92lnXWq","object":"chat.completion.chunk","created":1769092764,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_29330a9688","choices":[{"index":0,"delta":{"content":","},"logprobs":null,"finish_reason":null}],"obfuscation":"lRK2aBv"}

data: {"id":"chatcmpl-D0q8CZXN1uEzngZGkU7FuV92lnXWq","object":"chat.completion.chunk","created":1769092764,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_29330a9688","choices":[{"index":0,"delta":{"content":" World"},"logprobs":null,"finish_reason":null}],"obfuscation":"kJ"}

data: {"id":"chatcmpl-D0q8CZXN1uEzngZGkU7FuV92lnXWq","object":"chat.completion.chunk","created":1769092764,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_29330a9688","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":null}],"obfuscation":"0wmdEAC"}

data: {"id":"chatcmpl-D0q8CZXN1uEzngZGkU7FuV92lnXWq","object":"chat.completion.chunk","created":1769092764,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_29330a9688","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"obfuscation":"Xq0vB"}

data: [DONE]

"#;

/// Chat completions calling a tool.
pub(in crate::sse) const OPENAI_CHAT_TOOLS: &str = r#"data: {"id":"chatcmpl-9xL","object":"chat.completion.chunk","created":1723000000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9xL","object":"chat.completion.chunk","created":1723000000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9xL","object":"chat.completion.chunk","created":1723000000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-9xL","object":"chat.completion.chunk","created":1723000000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}

data: [DONE]

"#;

/// A DeepSeek-style reasoning stream: `reasoning_content` first, then content.
pub(in crate::sse) const OPENAI_CHAT_REASONING: &str = r#"data: {"id":"6f1c","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"6f1c","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Okay, the user"},"logprobs":null,"finish_reason":null}]}

data: {"id":"6f1c","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08","choices":[{"index":0,"delta":{"content":"Hi","reasoning_content":null},"logprobs":null,"finish_reason":null}]}

"#;

/// An OpenRouter-style stream: processing comments, then an error inside the `200`.
pub(in crate::sse) const OPENAI_CHAT_MIDSTREAM_ERROR: &str = r#": OPENROUTER PROCESSING

data: {"id":"gen-1741","provider":"Example","model":"example/model","object":"chat.completion.chunk","created":1741000000,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null,"native_finish_reason":null}]}

: OPENROUTER PROCESSING

data: {"id":"gen-1741","object":"chat.completion.chunk","created":1741000000,"error":{"code":502,"message":"Provider returned error"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}

"#;

/// OpenAI's own mid-stream failure shape.
pub(in crate::sse) const OPENAI_CHAT_SERVER_ERROR: &str = r#"data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}

"#;

/// Anthropic Messages with extended thinking: message_start, ping, thinking (incl. an empty
/// thinking_delta), signature, text, message_delta with usage, message_stop.
pub(in crate::sse) const ANTHROPIC: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":7,"cache_read_input_tokens":12,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me solve this step by step:\n\n1. First break down 27 * 453"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"27 * 453 = 12,231"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// Anthropic tool use: the first input_json_delta is empty, as the API sends it.
pub(in crate::sse) const ANTHROPIC_TOOL_USE: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-haiku-4-5","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

/// Anthropic's in-band overload after text had started.
pub(in crate::sse) const ANTHROPIC_OVERLOADED: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: error
data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

"#;

/// Responses API with a reasoning summary, text and completion usage.
pub(in crate::sse) const RESPONSES: &str = r#"event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_67c9fdcecf488190","object":"response","created_at":1741290958,"status":"in_progress","error":null,"incomplete_details":null,"model":"o4-mini-2025-04-16","output":[],"usage":null}}

event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67c9fdcecf488190","object":"response","status":"in_progress","output":[],"usage":null}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}

event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Answering a greeting**"}

event: response.output_item.done
data: {"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"**Answering a greeting**"}]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}

event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":7,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Hi"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":0,"delta":" there!"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":10,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Hi there!"}

event: response.completed
data: {"type":"response.completed","sequence_number":11,"response":{"id":"resp_67c9fdcecf488190","object":"response","status":"completed","output":[{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Hi there!"}],"role":"assistant"}],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":4},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}

"#;

/// A Responses stream as OpenAI sends it by default: every text delta carries its
/// `sequence_number` before the text and an `obfuscation` padding after it. A recorded
/// gpt-5-2025-08-07 stream, kept as a replay fixture by the SwiftAgent project
/// (SwiftedMind/SwiftAgent,
/// `Tests/SwiftAgentTests/OpenAIAdapter/OpenAIAdapterStreamingToolCallsTests.swift`, its
/// second response). The events before the content part and the two `done` events after the
/// text are left out, and `response.completed` keeps only its id, status, model and usage.
pub(in crate::sse) const RESPONSES_PADDED: &str = r#"event: response.content_part.added
data: {"type":"response.content_part.added","sequence_number":3,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":"Current","logprobs":[],"obfuscation":"8LmeBsRtk"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":" weather","logprobs":[],"obfuscation":"fl9SWXpF"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":" in","logprobs":[],"obfuscation":"0uzkNlgTVuACI"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":" New","logprobs":[],"obfuscation":"m6CUvXEzWfZv"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":" York","logprobs":[],"obfuscation":"yW0YQNvlCcF"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":9,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":" City","logprobs":[],"obfuscation":"alx43zz35m4"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":10,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":",","logprobs":[],"obfuscation":"upDHkp9MuPeysjI"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":11,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":" USA","logprobs":[],"obfuscation":"1f5eJnDuVv47"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":":","logprobs":[],"obfuscation":"yfTPZO99UZVlx4I"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":13,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":" Sunny","logprobs":[],"obfuscation":"bP4DLMeMRN"}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":14,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"delta":".","logprobs":[],"obfuscation":"oxtpMK8COHrCfpB"}

event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":15,"item_id":"msg_68d930427844819ebda216a5dcfbec4603aa6e5a972b3b23","output_index":0,"content_index":0,"text":"Current weather in New York City, USA: Sunny.","logprobs":[]}

event: response.completed
data: {"type":"response.completed","sequence_number":18,"response":{"id":"resp_68d93041848c819e90d610c34d125a8f03aa6e5a972b3b23","object":"response","created_at":1759064129,"status":"completed","model":"gpt-5-2025-08-07","output":[],"usage":{"input_tokens":114,"input_tokens_details":{"cached_tokens":0},"output_tokens":15,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":129}}}

"#;

/// Responses function calling, then an `incomplete` ending.
pub(in crate::sse) const RESPONSES_TOOLS: &str = r#"event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"{\"location\":\"Paris\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"fc_1","output_index":0,"arguments":"{\"location\":\"Paris\"}"}

event: response.incomplete
data: {"type":"response.incomplete","sequence_number":5,"response":{"id":"resp_2","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":{"input_tokens":20,"output_tokens":64,"total_tokens":84}}}

"#;

/// Responses error events: the top-level `error` event and `response.failed`.
pub(in crate::sse) const RESPONSES_ERRORS: &str = r#"event: error
data: {"type":"error","code":"server_error","message":"The server had an error while processing your request.","param":null,"sequence_number":3}

event: response.failed
data: {"type":"response.failed","sequence_number":4,"response":{"id":"resp_3","object":"response","status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit reached"},"output":[]}}

"#;
