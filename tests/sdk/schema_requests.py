#!/usr/bin/env python3
"""Request bodies for every variant the official SDKs' request types allow.

The `anthropic` and `openai` Python packages generate their request types from the
providers' API specifications, so a body built from those types is one the provider's API
accepts. This script introspects three of them:

- `anthropic.types.MessageCreateParams` (Anthropic Messages, `/v1/messages`);
- `openai.types.chat.CompletionCreateParams` (Chat Completions, `/v1/chat/completions`);
- `openai.types.responses.ResponseCreateParams` (Responses, `/v1/responses`);

and writes one JSON line per variant: `{"api", "label", "body"}`. The strategy: one minimal
valid base request per API; for each field position whose type is a union (or a `Literal` of
several values), one request per member, recursively down to a bounded depth, with the other
fields at type-correct placeholder values. A few cross-field constraints are special-cased so a
provider would accept the body: a tool result follows the tool call with the same id, and an
assistant turn is followed by a user turn. The model is the placeholder `MODEL`, which the
caller replaces.

Usage: schema_requests.py [--out FILE]. A summary (variants per API) goes to stderr.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import typing
from typing import Any, Iterator, Union, get_args, get_origin, get_type_hints

import typing_extensions

MODEL = "MODEL"
# How deep variants are expanded below a top-level field; deeper positions take their default.
MAX_DEPTH = 6
# Field names whose placeholder is not a plain value of their type.
TOOL_ID = {"anthropic": "toolu_01", "chat": "call_01", "responses": "call_01"}
PNG_1PX = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PDF_B64 = "JVBERi0xLjQKJSVFT0YK"  # "%PDF-1.4\n%%EOF\n"
OBJECT_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def strip(t: Any) -> Any:
    """The type under Required/NotRequired/Annotated/ReadOnly wrappers."""
    while True:
        origin = get_origin(t)
        if origin in (typing_extensions.Required, typing_extensions.NotRequired):
            t = get_args(t)[0]
        elif origin is typing_extensions.Annotated:
            t = get_args(t)[0]
        elif getattr(typing_extensions, "ReadOnly", None) is not None and origin is getattr(
            typing_extensions, "ReadOnly"
        ):
            t = get_args(t)[0]
        else:
            return t


def is_union(t: Any) -> bool:
    origin = get_origin(t)
    if origin is Union:
        return True
    # `X | Y` (types.UnionType) on newer Pythons.
    return type(t).__name__ == "UnionType"


def is_list(t: Any) -> bool:
    origin = get_origin(t)
    if origin is None:
        return False
    if getattr(origin, "__name__", "") == "SequenceNotStr":
        return True
    return origin in (list, collections.abc.Iterable, collections.abc.Sequence, typing.Iterable)


def is_model(t: Any) -> bool:
    """A pydantic model: the response block types the Messages API also accepts as input."""
    return isinstance(t, type) and hasattr(t, "model_fields")


def fields_of(t: Any) -> tuple[dict, set]:
    """A TypedDict's or model's fields and which of them are required. `__required_keys__` is
    unreliable under `from __future__ import annotations`, so `Required[...]` is read from the
    hints themselves."""
    if is_model(t):
        hints = {}
        required = set()
        for name, f in t.model_fields.items():
            key = f.alias or name
            hints[key] = f.annotation
            if f.is_required():
                required.add(key)
        return hints, required
    hints = get_type_hints(t, include_extras=True)
    total = getattr(t, "__total__", True)
    required = set()
    for k, h in hints.items():
        origin = get_origin(h)
        if origin is typing_extensions.Required or (
            total and origin is not typing_extensions.NotRequired
        ):
            required.add(k)
    return hints, required


class Gen:
    """Generates values and variants for one API."""

    def __init__(self, api: str):
        self.api = api

    # --- placeholders -------------------------------------------------------------------

    def scalar(self, key: str, t: Any, parent: dict) -> Any:
        """A plausible placeholder for a scalar field `key` of type `t`."""
        if t is str:
            return self.string(key, parent)
        if t is bool:
            return key not in ("stream", "background")
        if t is int:
            return {
                "max_tokens": 2048,
                "budget_tokens": 1024,
                "max_completion_tokens": 256,
                "max_output_tokens": 256,
                "n": 1,
                "top_logprobs": 1,
                "seed": 7,
                "max_tool_calls": 4,
                "max_uses": 2,
            }.get(key, 1)
        if t is float:
            return {"temperature": 0.5, "top_p": 0.9}.get(key, 0.5)
        if t is object or t is Any:
            return {}
        if t is type(None):
            return None
        return "x"

    def string(self, key: str, parent: dict) -> str:
        if key == "model":
            return MODEL
        if key in ("id", "tool_use_id", "call_id", "tool_call_id"):
            return TOOL_ID[self.api]
        if key == "name":
            return "get_weather"
        if key == "arguments":
            return '{"city": "Paris"}'
        if key in ("url",):
            return "https://example.com/picture.png"
        if key == "image_url":
            return f"data:image/png;base64,{PNG_1PX}"
        if key == "file_data":
            return f"data:application/pdf;base64,{PDF_B64}"
        if key == "data":
            return PDF_B64 if parent.get("media_type") == "application/pdf" else PNG_1PX
        if key in ("text", "content", "input", "output", "instructions", "thinking"):
            return "Hello"
        if key == "filename":
            return "a.pdf"
        if key == "signature":
            return "c2lnbmF0dXJl"
        return "x"

    # --- values -------------------------------------------------------------------------

    def default(self, t: Any, key: str, parent: dict, depth: int) -> Any:
        """One type-correct value of `t`."""
        return self.variants(t, key, parent, depth, expand=False)[0][1]

    def variants(
        self, t: Any, key: str, parent: dict, depth: int, expand: bool = True
    ) -> list[tuple[str, Any]]:
        """(label, value) pairs, one per variant of `t`; the first is the default. Labels are
        empty for the default and describe the choice otherwise."""
        t = strip(t)
        if isinstance(t, typing.ForwardRef) or isinstance(t, str):
            return [("", {})]
        origin = get_origin(t)
        if is_union(t):
            members = [m for m in get_args(t) if strip(m) is not type(None)]
            if not expand or depth <= 0:
                return self.variants(members[0], key, parent, depth, expand=False)[:1]
            out: list[tuple[str, Any]] = []
            for m in members:
                vs = self.variants(m, key, parent, depth - 1, expand)
                # Each member's label starts with what tells it apart (its `type`, its role).
                prefix = "" if is_list(strip(m)) else self.describe(m, vs[0][1])
                for label, v in vs:
                    out.append((prefix + label or self.describe(m, v), v))
            return out
        if origin is typing_extensions.Literal or origin is typing.Literal:
            values = list(get_args(t))
            if not expand or key in ("type", "role"):
                return [("", values[0])]
            return [("" if i == 0 else f"={v}", v) for i, v in enumerate(values)]
        if is_list(t):
            (item,) = get_args(t)[:1] or (object,)
            return [
                (label and f"[]{label}", [v])
                for label, v in self.variants(item, key, parent, depth, expand)
            ]
        if origin in (dict, collections.abc.Mapping) or t is dict:
            if key in ("schema", "parameters", "input_schema"):
                return [("", dict(OBJECT_SCHEMA))]
            if key == "input":
                return [("", {"city": "Paris"})]
            return [("", {})]
        if typing_extensions.is_typeddict(t) or is_model(t):
            return self.typeddict(t, depth, expand)
        return [("", self.scalar(key, t, parent))]

    def describe(self, member: Any, value: Any) -> str:
        """A label for a union member: its discriminator when it has one."""
        if isinstance(value, dict):
            for k in ("type", "role"):
                if isinstance(value.get(k), str):
                    return f".{k}={value[k]}"
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for k in ("type", "role"):
                if isinstance(value[0].get(k), str):
                    return f"[].{k}={value[0][k]}"
        if isinstance(value, str):
            return ":string"
        return f":{type(value).__name__}"

    def typeddict(self, td: Any, depth: int, expand: bool) -> list[tuple[str, Any]]:
        hints, required = fields_of(td)
        base: dict = {}
        # Discriminators first, so placeholders can depend on them (`media_type`).
        for k in sorted(required, key=lambda k: (k not in ("type", "role", "media_type"), k)):
            base[k] = self.default(hints[k], k, base, depth - 1)
        self.fix(base)
        out = [("", base)]
        if not expand or depth <= 0:
            return out
        for k, t in hints.items():
            if k in ("type", "role"):
                continue
            vs = self.variants(t, k, base, depth - 1, True)
            for i, (label, v) in enumerate(vs):
                if k in required and i == 0:
                    continue
                body = dict(base)
                body[k] = v
                self.fix(body)
                out.append((f".{k}{label}", body))
        return out

    def fix(self, obj: dict) -> None:
        """Cross-field plausibility inside one object."""
        if obj.get("type") == "enabled" and "budget_tokens" in obj:
            obj["budget_tokens"] = 1024


# --- conversations -------------------------------------------------------------------------


def anthropic_conversation(msg: dict) -> list[dict]:
    """`msg` in a conversation Anthropic would accept."""
    before: list[dict] = [{"role": "user", "content": "What is the weather in Paris?"}]
    after: list[dict] = []
    blocks = msg.get("content") if isinstance(msg.get("content"), list) else []
    kinds = {b.get("type") for b in blocks if isinstance(b, dict)}
    if msg["role"] == "user" and "tool_result" in kinds:
        before.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": TOOL_ID["anthropic"], "name": "get_weather",
                     "input": {"city": "Paris"}}
                ],
            }
        )
    if msg["role"] == "assistant":
        if "tool_use" in kinds:
            after.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": TOOL_ID["anthropic"],
                         "content": "18 degrees"}
                    ],
                }
            )
        else:
            after.append({"role": "user", "content": "Go on."})
    if msg["role"] == "system":
        after.append({"role": "user", "content": "Go on."})
    if msg["role"] == "user" and "tool_result" not in kinds:
        before = []
    return before + [msg] + after


def chat_conversation(msg: dict) -> list[dict]:
    role = msg.get("role")
    before: list[dict] = [{"role": "user", "content": "What is the weather in Paris?"}]
    after: list[dict] = []
    if role == "tool":
        before.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": TOOL_ID["chat"], "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
                ],
            }
        )
        after.append({"role": "user", "content": "Thanks."})
    elif role == "assistant":
        for call in msg.get("tool_calls") or []:
            after.append({"role": "tool", "tool_call_id": call.get("id"), "content": "18 degrees"})
        after.append({"role": "user", "content": "Go on."})
    elif role in ("system", "developer"):
        after.append({"role": "user", "content": "Go on."})
    elif role == "function":
        after.append({"role": "user", "content": "Go on."})
    else:
        before = []
    return before + [msg] + after


CALLS = {
    "function_call_output": {"type": "function_call", "call_id": TOOL_ID["responses"],
                             "name": "get_weather", "arguments": '{"city": "Paris"}'},
    "custom_tool_call_output": {"type": "custom_tool_call", "call_id": TOOL_ID["responses"],
                                "name": "get_weather", "input": "Paris"},
}
OUTPUTS = {
    "function_call": {"type": "function_call_output", "call_id": TOOL_ID["responses"],
                      "output": "18 degrees"},
    "custom_tool_call": {"type": "custom_tool_call_output", "call_id": TOOL_ID["responses"],
                         "output": "18 degrees"},
}


def responses_conversation(item: dict) -> list[dict]:
    kind = item.get("type", "message")
    before: list[dict] = [{"role": "user", "content": "What is the weather in Paris?"}]
    after: list[dict] = []
    if kind in CALLS:
        before.append(CALLS[kind])
    if kind in OUTPUTS:
        after.append(OUTPUTS[kind])
    if kind == "message" and item.get("role") == "user":
        before = []
    return before + [item] + after


# --- requests ------------------------------------------------------------------------------


def params_type(api: str) -> Any:
    if api == "anthropic":
        from anthropic.types import message_create_params as m

        return m.MessageCreateParamsBase
    if api == "chat":
        from openai.types.chat import completion_create_params as m

        return m.CompletionCreateParamsBase
    from openai.types.responses import response_create_params as m

    return m.ResponseCreateParamsBase


def base_request(api: str) -> dict:
    if api == "anthropic":
        return {"model": MODEL, "max_tokens": 2048,
                "messages": [{"role": "user", "content": "Hello"}]}
    if api == "chat":
        return {"model": MODEL, "messages": [{"role": "user", "content": "Hello"}]}
    return {"model": MODEL, "input": [{"role": "user", "content": "Hello"}]}


TOOL = {
    "anthropic": {"name": "get_weather", "description": "Weather", "input_schema": OBJECT_SCHEMA},
    "chat": {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                              "parameters": OBJECT_SCHEMA}},
    "responses": {"type": "function", "name": "get_weather", "description": "Weather",
                  "parameters": OBJECT_SCHEMA, "strict": False},
}


def plausible(api: str, body: dict) -> dict:
    """Cross-field constraints a provider checks at the top level."""
    # A tool choice needs tools to choose from.
    if "tool_choice" in body and "tools" not in body:
        body["tools"] = [TOOL[api]]
    if api == "chat" and "parallel_tool_calls" in body and "tools" not in body:
        body["tools"] = [TOOL[api]]
    if api == "anthropic":
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            body["max_tokens"] = max(body.get("max_tokens", 0), 2048)
    if api == "chat" and body.get("top_logprobs") is not None:
        body["logprobs"] = True
    return body


def requests(api: str) -> Iterator[tuple[str, dict]]:
    gen = Gen(api)
    td = params_type(api)
    hints, _ = fields_of(td)
    conversation_key = "input" if api == "responses" else "messages"
    yield "base", plausible(api, base_request(api))
    for key, t in hints.items():
        if key == "model":
            continue
        base = base_request(api)
        if key == conversation_key:
            item_type = get_args(strip(t))
            # Responses `input` is `str | list[item]`: the string form is the base request's
            # sibling; the items are expanded one by one.
            if api == "responses":
                yield "input:string", {**base, "input": "Hello"}
                item_type = get_args(get_args(strip(t))[1])
                list_type = strip(get_args(strip(t))[1])
                item_type = get_args(list_type)
            (item,) = item_type[:1]
            for label, msg in gen.variants(item, "", {}, MAX_DEPTH):
                if not isinstance(msg, dict):
                    continue
                conv = {
                    "anthropic": anthropic_conversation,
                    "chat": chat_conversation,
                    "responses": responses_conversation,
                }[api](msg)
                yield f"{key}[]{label or gen.describe(item, msg)}", plausible(
                    api, {**base, key: conv}
                )
            continue
        for label, value in gen.variants(t, key, base, MAX_DEPTH):
            yield f"{key}{label}", plausible(api, {**base, key: value})
    # Streaming is its own request shape (the field is in the stream/non-stream subclasses).
    yield "stream=true", plausible(api, {**base_request(api), "stream": True})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="write the JSON lines here (default: stdout)")
    args = ap.parse_args()
    out = open(args.out, "w") if args.out else sys.stdout
    counts = {}
    for api in ("anthropic", "chat", "responses"):
        seen = set()
        n = 0
        for label, body in requests(api):
            key = json.dumps(body, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            out.write(json.dumps({"api": api, "label": label, "body": body}) + "\n")
            n += 1
        counts[api] = n
    if args.out:
        out.close()
    for api, n in counts.items():
        print(f"schema_requests: {api}: {n} variants", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
