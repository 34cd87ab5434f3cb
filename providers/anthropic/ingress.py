"""The gateway's Anthropic-compatible ingress: Messages requests in, OpenAI-shaped core, Anthropic out.

Pure translation only; the `/v1/messages` route calls these around the usual chat pipeline.

What does not survive the trip through the OpenAI shape, by design:
- extended `thinking` (the parameter and assistant thinking blocks) is dropped: OpenAI messages cannot
  carry the signed blocks Anthropic demands back in tool loops, so the request runs without thinking;
- `top_k`, `is_error` on tool results, and server tools (web search, code execution) have no OpenAI
  field: `top_k` and `is_error` are dropped, server tools are rejected;
- `cache_control` marks are kept on the content parts (and on the last message for a top-level mark),
  so an Anthropic upstream still caches; an OpenAI-compatible upstream must ignore or strip them.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from providers.errors import UpstreamBadResponse, invalid_parameter
from providers.openai_compat import from_openai_usage
from providers.sse import encode_event
from providers.types import JSON
from usage import Usage

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


# The top-level fields read below, with the JSON types the Messages API gives them.
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "system": (str, list),
    "tools": list,
    "stop_sequences": list,
    "metadata": dict,
    "output_config": dict,
}


def from_anthropic_request(body: Any) -> JSON:
    """An OpenAI chat request for an Anthropic Messages request; streams always ask for usage."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise invalid_parameter("a Messages request needs a messages list")
    for name, kind in _FIELD_TYPES.items():
        if body.get(name) is not None and not isinstance(body[name], kind):
            raise invalid_parameter(f"{name}: a value of the wrong type")
    messages: list[JSON] = []
    if body.get("system"):
        messages.append({"role": "system", "content": _from_parts(body["system"], system=True)})
    for message in body["messages"]:
        messages += _from_message(message)
    if body.get("cache_control") and messages:
        messages[-1]["cache_control"] = body["cache_control"]
    request: JSON = {"model": body.get("model"), "messages": messages}
    if body.get("max_tokens") is not None:
        request["max_completion_tokens"] = body["max_tokens"]
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            request[key] = body[key]
    if body.get("stop_sequences"):
        request["stop"] = list(body["stop_sequences"])
    if body.get("stream"):
        request["stream"] = True
        request["stream_options"] = {"include_usage": True}
    user = (body.get("metadata") or {}).get("user_id")
    if user:
        request["user"] = user
    if body.get("tools"):
        request["tools"] = [_from_tool(tool) for tool in body["tools"]]
        _add_tool_choice(body.get("tool_choice"), request)
    output_format = (body.get("output_config") or {}).get("format")
    if isinstance(output_format, dict) and output_format.get("type") == "json_schema":
        schema = {"name": "output", "schema": output_format.get("schema") or {}, "strict": True}
        request["response_format"] = {"type": "json_schema", "json_schema": schema}
    return request


def _from_message(message: Any) -> list[JSON]:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise invalid_parameter("every message needs the role 'user' or 'assistant'")
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": message["role"], "content": content}]
    if not isinstance(content, list):
        raise invalid_parameter("message content must be a string or a list of content blocks")
    if message["role"] == "assistant":
        return [_from_assistant(content)]
    # Tool results answer the previous assistant turn, so they go first, as OpenAI `tool` messages;
    # images inside them (OpenAI tool messages take text only) move to the user message after them.
    out: list[JSON] = []
    parts: list[JSON] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            result = block.get("content") or ""
            converted = _from_parts(result)
            if not isinstance(converted, str):
                parts += [part for part in converted if part["type"] != "text"]
                converted = [part for part in converted if part["type"] == "text"] or ""
            tool: JSON = {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": converted}
            if block.get("cache_control"):
                tool["cache_control"] = block["cache_control"]
            out.append(tool)
        else:
            parts += _from_parts([block])
    if parts:
        out.append({"role": "user", "content": parts})
    return out


def _from_assistant(content: list[Any]) -> JSON:
    texts: list[JSON] = []
    calls: list[JSON] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            arguments = orjson.dumps(block.get("input") or {}).decode()
            function = {"name": block.get("name"), "arguments": arguments}
            calls.append({"id": block.get("id"), "type": "function", "function": function})
        elif kind == "text":
            texts += _from_parts([block])
        elif kind not in ("thinking", "redacted_thinking"):
            raise invalid_parameter(f"assistant content block {kind!r} is not supported")
    message: JSON = {"role": "assistant", "content": texts or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _from_parts(blocks: Any, *, system: bool = False) -> Any:
    """Anthropic content blocks as OpenAI content parts, `cache_control` marks kept."""
    if isinstance(blocks, str):
        return blocks
    parts: list[JSON] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            part: JSON = {"type": "text", "text": block.get("text") or ""}
        elif kind in ("image", "document") and not system:
            part = _from_media(kind, block.get("source") or {})
        else:
            raise invalid_parameter(f"content block {kind!r} is not supported here")
        if block.get("cache_control"):
            part["cache_control"] = block["cache_control"]
        parts.append(part)
    return parts


def _from_media(kind: str, source: JSON) -> JSON:
    if source.get("type") == "url" and kind == "image":
        return {"type": "image_url", "image_url": {"url": source.get("url")}}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        if kind == "image":
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"filename": "document.pdf", "file_data": url}}
    if source.get("type") == "text" and kind == "document":
        return {"type": "text", "text": source.get("data") or ""}
    raise invalid_parameter(f"{kind} source {source.get('type')!r} is not supported")


def _from_tool(tool: Any) -> JSON:
    if not isinstance(tool, dict) or tool.get("type", "custom") != "custom" or "input_schema" not in tool:
        name = tool.get("type") if isinstance(tool, dict) else tool
        raise invalid_parameter(f"tool {name!r} is not supported: only client tools with an input_schema")
    function: JSON = {"name": tool.get("name"), "parameters": tool["input_schema"]}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _add_tool_choice(choice: Any, request: JSON) -> None:
    if not isinstance(choice, dict):
        return
    kind = choice.get("type")
    if kind == "any":
        request["tool_choice"] = "required"
    elif kind == "tool":
        request["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif kind in ("auto", "none"):
        request["tool_choice"] = kind
    if choice.get("disable_parallel_tool_use"):
        request["parallel_tool_calls"] = False


def to_anthropic_response(completion: Any, *, model: str, usage: Usage | None = None) -> JSON:
    """An Anthropic `message` for an OpenAI `chat.completion` (first choice); `usage` overrides the body's."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if not choices:
        raise UpstreamBadResponse("the answer to re-encode for Anthropic has no choices")
    message = choices[0].get("message") or {}
    blocks: list[JSON] = []
    text = _text_of(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    blocks += [_to_tool_use(call) for call in message.get("tool_calls") or ()]
    return {
        "id": message_id(completion.get("id")),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": STOP_REASONS.get(str(choices[0].get("finish_reason")), "end_turn"),
        "stop_sequence": None,
        "usage": to_anthropic_usage(usage or from_openai_usage(completion.get("usage"))),
    }


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    return content or ""


def _to_tool_use(call: JSON) -> JSON:
    function = call.get("function") or {}
    try:
        arguments = orjson.loads(function.get("arguments") or "{}")
    except orjson.JSONDecodeError:
        arguments = None
    # Anthropic's input is always an object; keep a model's malformed arguments visible, not lost.
    arguments = arguments if isinstance(arguments, dict) else {"arguments": function.get("arguments")}
    return {
        "type": "tool_use",
        "id": call.get("id") or "",
        "name": function.get("name") or "",
        "input": arguments,
    }


def to_anthropic_usage(usage: Usage) -> JSON:
    """Anthropic's split: `input_tokens` is only what was neither read from nor written to the cache."""
    uncached = usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens
    written_1h = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    return {
        "input_tokens": max(0, uncached),
        "output_tokens": usage.completion_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        # The split by TTL, as Anthropic reports it: 1-hour writes are priced 2x base input, 5-minute
        # ones 1.25x, so a client reconciling its bill needs both.
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens - written_1h,
            "ephemeral_1h_input_tokens": written_1h,
        },
    }


def to_anthropic_error(status: int, message: str) -> JSON:
    """Anthropic's error body for a gateway answer of `status`; its SDK picks the exception by status."""
    error_type = ERROR_TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": error_type, "message": message}}


Event = tuple[str, JSON]


def encode_events(events: list[Event]) -> bytes:
    """Anthropic's SSE framing: every event named, its data one JSON line."""
    return b"".join(encode_event(name, orjson.dumps(data)) for name, data in events)


def message_id(upstream_id: Any) -> str:
    """An Anthropic-shaped id (`msg_…`) for an answer whatever answered it: clients and SDKs that
    check the prefix see the one they expect; the upstream's own id stays recognisable inside it."""
    text = str(upstream_id or "")
    if text.startswith("msg_"):
        return text
    rest = text.removeprefix("chatcmpl-") or os.urandom(12).hex()
    return f"msg_{rest}"
