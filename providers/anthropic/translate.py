"""OpenAI chat requests into Anthropic Messages requests, and Anthropic answers back: pure, no I/O.

Decisions, each because of what the client would otherwise silently get wrong:

- `system` / `developer` messages, wherever they sit, are lifted in order into the top-level `system`
  blocks (Anthropic has no system role); `cache_control` on their parts is kept.
- Consecutive same-role turns are merged (tool results become `tool_result` blocks of one user turn,
  placed first as Anthropic requires); a conversation that starts with the assistant, or has no turn at
  all, gets a minimal user turn `"."` in front, as LiteLLM does, because Anthropic rejects it otherwise.
- Rejected with a 400 before any network call: `temperature` outside 0 to 1 (Anthropic's range; clamping
  1.7 to 1 would silently sample differently from what was asked), `n` > 1, `logprobs`, audio, content
  parts Anthropic cannot take, tool-call arguments that are not a JSON object, tool calls left
  unanswered or tool results that answer nothing.
- Dropped because they only nudge sampling or bookkeeping: penalties, `seed`, `logit_bias`,
  `service_tier`, `store`, OpenAI `metadata`, `reasoning_effort`, `prompt_cache_key`.
- `response_format: json_schema` becomes Anthropic's native structured output
  (`output_config.format`); `json_object` has no native twin, so a system instruction asks for one.
- `top_k` and `thinking`, which OpenAI lacks, pass through when a client sends them for Claude.
"""

from __future__ import annotations

from typing import Any

import orjson

from providers.anthropic.content import to_blocks, to_system_blocks, to_tool_result
from providers.errors import UpstreamBadResponse
from providers.errors import invalid_parameter as invalid
from providers.openai_compat import to_openai_usage
from providers.types import JSON
from usage import Usage

SYSTEM_ROLES = frozenset({"system", "developer"})
# Anthropic requires the first turn to be the user's; the smallest turn it accepts.
LEADING_USER_TEXT = "."
JSON_OBJECT_INSTRUCTION = "Respond with a single valid JSON object and nothing else."

FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "pause_turn": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

# Client fields that carry over unchanged because Anthropic spells them the same way.
_PASSTHROUGH = ("top_p", "top_k", "thinking")


def to_anthropic_request(body: JSON, *, model: str, default_max_tokens: int) -> JSON:
    """The Messages API request for an OpenAI chat request (without `stream`; the client adds it)."""
    _reject_untranslatable(body)
    system, messages = to_anthropic_messages(body.get("messages"))
    max_tokens = body.get("max_completion_tokens")
    max_tokens = body.get("max_tokens") if max_tokens is None else max_tokens
    request: JSON = {
        "model": model,
        "max_tokens": default_max_tokens if max_tokens is None else max_tokens,
        "messages": messages,
    }
    temperature = body.get("temperature")
    if temperature is not None:
        if not isinstance(temperature, int | float) or not 0 <= temperature <= 1:
            raise invalid(
                f"temperature {temperature} is out of range for Anthropic models, which accept 0 to 1"
            )
        request["temperature"] = temperature
    for key in _PASSTHROUGH:
        if body.get(key) is not None:
            request[key] = body[key]
    stop = body.get("stop")
    if stop:
        request["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    user = body.get("user") or body.get("safety_identifier")
    if user:
        request["metadata"] = {"user_id": str(user)}
    _add_tools(body, request)
    system += _add_response_format(body.get("response_format"), request)
    if system:
        request["system"] = system
    return request


def _reject_untranslatable(body: JSON) -> None:
    n = body.get("n")
    if isinstance(n, int) and n > 1:
        raise invalid("n > 1 is not supported by Anthropic models: send one request per choice")
    if body.get("logprobs") or body.get("top_logprobs"):
        raise invalid("logprobs are not available from Anthropic models")
    if body.get("audio") or "audio" in (body.get("modalities") or ()):
        raise invalid("audio output is not available from Anthropic models")


def to_anthropic_messages(messages: Any) -> tuple[list[JSON], list[JSON]]:
    """System blocks and strictly alternating user/assistant turns, every tool_use answered next turn."""
    if not isinstance(messages, list):
        raise invalid("messages must be a list")
    system: list[JSON] = []
    turns: list[JSON] = []
    for message in messages:
        if not isinstance(message, dict):
            raise invalid("every message must be an object")
        role = message.get("role")
        if role in SYSTEM_ROLES:
            system += to_system_blocks(message)
            continue
        if role == "tool":
            role, blocks = "user", [to_tool_result(message)]
        elif role in ("user", "assistant"):
            blocks = to_blocks(message)
        else:
            raise invalid(f"message role {role!r} is not supported")
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": LEADING_USER_TEXT}]})
    for turn in turns:
        if turn["role"] == "user":
            # Anthropic wants the tool results first in the turn that answers the tool calls.
            turn["content"].sort(key=lambda block: block.get("type") != "tool_result")
    _check_tool_pairs(turns)
    return system, turns


def _check_tool_pairs(turns: list[JSON]) -> None:
    """Every tool_use answered exactly once in the very next user turn, and no stray results."""
    asked: list[str] = []
    for turn in turns:
        ids = [block["id"] for block in turn["content"] if block.get("type") == "tool_use"]
        if turn["role"] == "assistant":
            if asked:
                raise invalid(f"tool calls {asked} have no tool message answering them")
            asked = ids
            continue
        answered = [b["tool_use_id"] for b in turn["content"] if b.get("type") == "tool_result"]
        if sorted(answered) != sorted(asked):
            missing = sorted(set(asked) - set(answered))
            if missing:
                raise invalid(f"tool calls {missing} have no tool message answering them")
            raise invalid(f"tool messages {sorted(answered)} do not each answer one preceding tool call")
        asked = []
    if asked:
        raise invalid(f"tool calls {asked} have no tool message answering them")


def _add_tools(body: JSON, request: JSON) -> None:
    tools = body.get("tools")
    if not tools:
        return
    request["tools"] = [_to_tool(tool) for tool in tools]
    choice = _to_tool_choice(body.get("tool_choice"))
    if body.get("parallel_tool_calls") is False and choice.get("type") != "none":
        choice["disable_parallel_tool_use"] = True
    if choice != {"type": "auto"}:
        request["tool_choice"] = choice


def _to_tool(tool: Any) -> JSON:
    if (
        not isinstance(tool, dict)
        or tool.get("type") != "function"
        or not isinstance(tool.get("function"), dict)
    ):
        raise invalid("only tools of type 'function' can be sent to Anthropic models")
    function = tool["function"]
    out: JSON = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        out["description"] = function["description"]
    if tool.get("cache_control"):
        out["cache_control"] = tool["cache_control"]
    return out


def _to_tool_choice(choice: Any) -> JSON:
    if choice is None or choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "tool", "name": choice["function"].get("name")}
    raise invalid(f"tool_choice {choice!r} is not supported")


def _add_response_format(response_format: Any, request: JSON) -> list[JSON]:
    """Native structured output for a schema; an instruction (returned as system blocks) for JSON mode."""
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise invalid("response_format.json_schema.schema must be a JSON schema object")
        request["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    elif kind == "json_object":
        return [{"type": "text", "text": JSON_OBJECT_INSTRUCTION}]
    elif kind not in (None, "text"):
        raise invalid(f"response_format {kind!r} is not supported")
    return []


def from_anthropic_response(obj: Any, *, created: int) -> JSON:
    """An OpenAI `chat.completion` for an Anthropic `message`; thinking blocks are counted, not shown."""
    if not isinstance(obj, dict) or obj.get("type") != "message":
        raise UpstreamBadResponse("Anthropic answered with something that is not a message")
    texts: list[str] = []
    tool_calls: list[JSON] = []
    for block in obj.get("content") or ():
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "tool_use":
            tool_calls.append(to_openai_tool_call(block))
    message: JSON = {"role": "assistant", "content": "".join(texts) if texts or not tool_calls else None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    usage = from_anthropic_usage(obj.get("usage"))
    return {
        "id": obj.get("id") or "",
        "object": "chat.completion",
        "created": created,
        "model": obj.get("model") or "",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": to_finish_reason(obj.get("stop_reason")),
                "logprobs": None,
            }
        ],
        "usage": to_openai_usage(usage),
    }


def to_openai_tool_call(block: JSON) -> JSON:
    return {
        "id": block.get("id") or "",
        "type": "function",
        "function": {
            "name": block.get("name") or "",
            "arguments": orjson.dumps(block.get("input") or {}).decode(),
        },
    }


def to_finish_reason(stop_reason: Any) -> str:
    return FINISH_REASONS.get(str(stop_reason), "stop")


def from_anthropic_usage(usage: Any) -> Usage:
    """Anthropic counts only the uncached input in `input_tokens`; OpenAI's prompt count holds all of it."""
    if not isinstance(usage, dict):
        return Usage()
    cache_read = int(usage.get("cache_read_input_tokens") or 0)
    cache_write = int(usage.get("cache_creation_input_tokens") or 0)
    breakdown = usage.get("cache_creation") or {}
    details = usage.get("output_tokens_details") or {}
    return Usage(
        prompt_tokens=int(usage.get("input_tokens") or 0) + cache_read + cache_write,
        completion_tokens=int(usage.get("output_tokens") or 0),
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
        cache_write_1h_tokens=int(breakdown.get("ephemeral_1h_input_tokens") or 0),
        reasoning_tokens=int(details.get("thinking_tokens") or 0),
        raw=usage,
    )
