#!/usr/bin/env python3
"""Drive a running Switchyard node with the official OpenAI and Anthropic Python SDKs.

Run by tests/tests/node/sdk_compat.rs against a node whose providers are mock upstreams. Every
check must pass for the exit code to be 0; each failure is printed with its reason and the
script exits 1. The SDKs parse every JSON body and every SSE event themselves, so a gateway
that changes the wire format in a way they reject fails here.

Usage:
  sdk_check.py --base-url http://127.0.0.1:PORT --api-key KEY \
      --openai-model oai/gpt-4o-mini --anthropic-model ant/claude-sonnet-4-5 \
      --expect-text "Hello from the mock"
"""

import argparse
import json
import sys
import traceback

import anthropic
import openai

FAILURES = []


def check(name, fn):
    try:
        detail = fn()
    except Exception as e:  # report every failure, then keep going
        FAILURES.append(name)
        print(f"FAIL {name}: {type(e).__name__}: {e}")
        traceback.print_exc(file=sys.stdout)
    else:
        print(f"ok   {name}" + (f" ({detail})" if detail else ""))


def expect(cond, message):
    if not cond:
        raise AssertionError(message)


def openai_checks(args):
    client = openai.OpenAI(
        base_url=args.base_url + "/v1", api_key=args.api_key, max_retries=0, timeout=20
    )
    messages = [{"role": "user", "content": "Say hello"}]

    def chat_json():
        r = client.chat.completions.create(model=args.openai_model, messages=messages)
        expect(r.object == "chat.completion", f"object {r.object!r}")
        expect(r.choices and r.choices[0].message.role == "assistant", f"choices {r.choices!r}")
        text = r.choices[0].message.content
        expect(text == args.expect_text, f"text {text!r} != {args.expect_text!r}")
        expect(r.choices[0].finish_reason == "stop", f"finish {r.choices[0].finish_reason!r}")
        expect(r.usage is not None and r.usage.total_tokens > 0, f"usage {r.usage!r}")
        return f"id={r.id}"

    def chat_stream():
        stream = client.chat.completions.create(
            model=args.openai_model,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, chunks, finish, usage = "", 0, None, None
        for chunk in stream:
            chunks += 1
            expect(chunk.object == "chat.completion.chunk", f"object {chunk.object!r}")
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        expect(text == args.expect_text, f"streamed text {text!r}")
        expect(finish == "stop", f"finish {finish!r}")
        expect(usage is not None and usage.completion_tokens > 0, f"usage {usage!r}")
        return f"{chunks} chunks"

    def chat_stream_helper():
        with client.chat.completions.stream(model=args.openai_model, messages=messages) as s:
            for _ in s:
                pass
            final = s.get_final_completion()
        text = final.choices[0].message.content
        expect(text == args.expect_text, f"helper text {text!r}")

    def responses_json():
        r = client.responses.create(model=args.openai_model, input="Say hello")
        expect(r.output_text == args.expect_text, f"output_text {r.output_text!r}")
        expect(r.status == "completed", f"status {r.status!r}")

    def responses_stream():
        text, kinds = "", set()
        with client.responses.stream(model=args.openai_model, input="Say hello") as s:
            for event in s:
                kinds.add(event.type)
                if event.type == "response.output_text.delta":
                    text += event.delta
            final = s.get_final_response()
        expect(text == args.expect_text, f"streamed text {text!r}")
        expect(final.output_text == args.expect_text, f"final {final.output_text!r}")
        expect("response.completed" in kinds, f"events {sorted(kinds)}")
        return f"{len(kinds)} event types"

    def error_envelope():
        try:
            client.chat.completions.create(model="no-such-model", messages=messages)
        except openai.NotFoundError as e:
            expect(e.status_code == 404, f"status {e.status_code}")
            expect(e.code == "model_not_found", f"code {e.code!r}")
            expect(e.type == "invalid_request_error", f"type {e.type!r}")
            return "NotFoundError"
        raise AssertionError("an unknown model did not raise NotFoundError")

    def models_list():
        ids = [m.id for m in client.models.list()]
        expect(args.openai_model in ids, f"models {ids}")

    check("openai chat json", chat_json)
    check("openai chat stream", chat_stream)
    check("openai chat stream helper", chat_stream_helper)
    check("openai responses json", responses_json)
    check("openai responses stream", responses_stream)
    check("openai error envelope", error_envelope)
    check("openai models list", models_list)


def anthropic_checks(args):
    client = anthropic.Anthropic(
        base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=20
    )
    messages = [{"role": "user", "content": "Say hello"}]

    def messages_json():
        m = client.messages.create(model=args.anthropic_model, max_tokens=64, messages=messages)
        expect(m.type == "message" and m.role == "assistant", f"message {m!r}")
        text = "".join(b.text for b in m.content if b.type == "text")
        expect(text == args.expect_text, f"text {text!r}")
        expect(m.stop_reason == "end_turn", f"stop_reason {m.stop_reason!r}")
        expect(m.usage.output_tokens > 0, f"usage {m.usage!r}")
        return f"id={m.id}"

    def messages_stream_raw():
        events = client.messages.create(
            model=args.anthropic_model, max_tokens=64, messages=messages, stream=True
        )
        kinds, text = [], ""
        for event in events:
            kinds.append(event.type)
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text
        expect(kinds[0] == "message_start", f"first event {kinds[:1]}")
        expect(kinds[-1] == "message_stop", f"last event {kinds[-1:]}")
        expect(text == args.expect_text, f"streamed text {text!r}")
        return f"{len(kinds)} events"

    def messages_stream_helper():
        with client.messages.stream(
            model=args.anthropic_model, max_tokens=64, messages=messages
        ) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
        expect(text == args.expect_text, f"text_stream {text!r}")
        expect(final.stop_reason == "end_turn", f"stop_reason {final.stop_reason!r}")

    def error_envelope():
        try:
            client.messages.create(model="claude-nonexistent", max_tokens=8, messages=messages)
        except anthropic.NotFoundError as e:
            expect(e.status_code == 404, f"status {e.status_code}")
            body = e.body if isinstance(e.body, dict) else {}
            expect(body.get("type") == "error", f"body {e.body!r}")
            expect(body.get("error", {}).get("type") == "not_found_error", f"body {e.body!r}")
            return "NotFoundError"
        raise AssertionError("an unknown model did not raise NotFoundError")

    def auth_error():
        bad = anthropic.Anthropic(base_url=args.base_url, api_key="wrong-key-000000", max_retries=0)
        try:
            bad.messages.create(model=args.anthropic_model, max_tokens=8, messages=messages)
        except anthropic.AuthenticationError as e:
            expect(e.status_code == 401, f"status {e.status_code}")
            return "AuthenticationError"
        raise AssertionError("a wrong key did not raise AuthenticationError")

    check("anthropic messages json", messages_json)
    check("anthropic messages stream (raw events)", messages_stream_raw)
    check("anthropic messages stream helper", messages_stream_helper)
    check("anthropic error envelope", error_envelope)
    check("anthropic auth error", auth_error)


def cross_format_checks(args):
    """Each SDK against a provider of the other wire format, directly and through a combo
    whose first target (of the other format) fails with 503 before the second answers."""
    oa = openai.OpenAI(base_url=args.base_url + "/v1", api_key=args.api_key, max_retries=0, timeout=20)
    an = anthropic.Anthropic(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=20)
    messages = [{"role": "user", "content": "Say hello"}]
    tool = {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }

    def anthropic_sdk_on_openai_provider():
        m = an.messages.create(model=args.openai_model, max_tokens=64, messages=messages, tools=[tool])
        text = "".join(b.text for b in m.content if b.type == "text")
        expect(text == args.expect_text, f"text {text!r}")
        expect(m.stop_reason == "end_turn", f"stop_reason {m.stop_reason!r}")
        expect(m.usage.input_tokens > 0 and m.usage.output_tokens > 0, f"usage {m.usage!r}")

    def anthropic_sdk_stream_on_openai_provider():
        with an.messages.stream(model=args.openai_model, max_tokens=64, messages=messages) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
        expect(text == args.expect_text, f"text_stream {text!r}")
        expect(final.stop_reason == "end_turn", f"stop_reason {final.stop_reason!r}")

    def openai_sdk_on_anthropic_provider():
        r = oa.chat.completions.create(model=args.anthropic_model, messages=messages)
        expect(r.choices[0].message.content == args.expect_text, f"text {r.choices[0].message.content!r}")
        expect(r.choices[0].finish_reason == "stop", f"finish {r.choices[0].finish_reason!r}")
        expect(r.usage is not None and r.usage.total_tokens > 0, f"usage {r.usage!r}")

    def openai_sdk_stream_on_anthropic_provider():
        stream = oa.chat.completions.create(
            model=args.anthropic_model, messages=messages, stream=True,
            stream_options={"include_usage": True},
        )
        text, usage, finish = "", None, None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                text += c.delta.content or ""
                finish = c.finish_reason or finish
        expect(text == args.expect_text, f"text {text!r}")
        expect(finish == "stop", f"finish {finish!r}")
        expect(usage is not None and usage.completion_tokens > 0, f"usage {usage!r}")

    def responses_sdk_on_anthropic_provider():
        r = oa.responses.create(model=args.anthropic_model, input="Say hello")
        expect(r.output_text == args.expect_text, f"output_text {r.output_text!r}")

    def anthropic_sdk_combo_falls_back_across_formats():
        with an.messages.stream(model=args.anthropic_combo, max_tokens=64, messages=messages) as s:
            text = "".join(s.text_stream)
        expect(text == args.expect_text, f"text_stream {text!r}")

    def openai_sdk_combo_falls_back_across_formats():
        stream = oa.chat.completions.create(model=args.openai_combo, messages=messages, stream=True)
        text = "".join((c.delta.content or "") for chunk in stream for c in chunk.choices)
        expect(text == args.expect_text, f"text {text!r}")

    def anthropic_sdk_tool_use_from_openai_provider():
        with an.messages.stream(
            model=args.openai_tool_model, max_tokens=64, messages=messages, tools=[tool]
        ) as s:
            final = s.get_final_message()
        uses = [b for b in final.content if b.type == "tool_use"]
        expect(uses, f"no tool_use block in {final.content!r}")
        expect(uses[0].name == "get_weather", f"tool name {uses[0].name!r}")
        expect(uses[0].input == {"city": "Paris"}, f"tool input {uses[0].input!r}")
        expect(final.stop_reason == "tool_use", f"stop_reason {final.stop_reason!r}")
        # The tool result goes back with the same id, through the same translation.
        follow = messages + [
            {"role": "assistant", "content": [u.model_dump() for u in uses]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny"}
            ]},
        ]
        m = an.messages.create(model=args.openai_model, max_tokens=64, messages=follow, tools=[tool])
        expect(m.type == "message", f"follow-up {m!r}")

    def openai_sdk_tool_calls_from_anthropic_provider():
        stream = oa.chat.completions.create(
            model=args.anthropic_tool_model, messages=messages, stream=True,
            tools=[{"type": "function",
                    "function": {"name": "get_weather", "parameters": tool["input_schema"]}}],
        )
        name, arguments, ids, finish = "", "", set(), None
        for chunk in stream:
            for c in chunk.choices:
                for tc in c.delta.tool_calls or []:
                    if tc.id:
                        ids.add(tc.id)
                    if tc.function and tc.function.name:
                        name += tc.function.name
                    if tc.function and tc.function.arguments:
                        arguments += tc.function.arguments
                finish = c.finish_reason or finish
        expect(name == "get_weather", f"tool name {name!r}")
        expect(json.loads(arguments) == {"city": "Paris"}, f"arguments {arguments!r}")
        expect(len(ids) == 1, f"tool call ids {ids!r}")
        expect(finish == "tool_calls", f"finish {finish!r}")

    check("anthropic sdk -> openai provider (json, tools)", anthropic_sdk_on_openai_provider)
    check("anthropic sdk tool use from an openai provider (stream)",
          anthropic_sdk_tool_use_from_openai_provider)
    check("openai sdk tool calls from an anthropic provider (stream)",
          openai_sdk_tool_calls_from_anthropic_provider)
    check("anthropic sdk -> openai provider (stream)", anthropic_sdk_stream_on_openai_provider)
    check("openai sdk -> anthropic provider (json)", openai_sdk_on_anthropic_provider)
    check("openai sdk -> anthropic provider (stream)", openai_sdk_stream_on_anthropic_provider)
    check("responses sdk -> anthropic provider", responses_sdk_on_anthropic_provider)
    check("anthropic sdk combo: openai 503 -> anthropic", anthropic_sdk_combo_falls_back_across_formats)
    check("openai sdk combo: anthropic 503 -> openai", openai_sdk_combo_falls_back_across_formats)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--api-key", required=True)
    p.add_argument("--openai-model", required=True)
    p.add_argument("--anthropic-model", required=True)
    p.add_argument("--expect-text", required=True)
    p.add_argument("--anthropic-combo", required=True)
    p.add_argument("--openai-combo", required=True)
    p.add_argument("--openai-tool-model", required=True)
    p.add_argument("--anthropic-tool-model", required=True)
    args = p.parse_args()
    print(f"openai {openai.__version__}, anthropic {anthropic.__version__}")
    openai_checks(args)
    anthropic_checks(args)
    cross_format_checks(args)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed: {', '.join(FAILURES)}")
        return 1
    print("all SDK checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
