"""Translate an OpenAI Chat Completions request body into the engine's GenerationRequest."""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from sandbox.core.engine import GenerationRequest, ToolCallSpec
from sandbox.core.tokens import Tokenizer
from sandbox.openai.errors import ApiError
from sandbox.openai.logprobs import parse_logprobs

__all__ = ["ChatParams", "from_chat_request", "int_option", "require_model", "stop_sequences"]

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# A non-text part (image, audio, file) costs a flat number of tokens, like a
# low-detail image on OpenAI (85 tokens).
_MEDIA_TOKENS = 85


@dataclass(frozen=True, slots=True)
class ChatParams:
    """A parsed chat request: the engine's part plus the wire-only options."""

    generation: GenerationRequest
    stream: bool
    include_usage: bool
    include_obfuscation: bool
    service_tier: str | None
    # Runners-up per token when `logprobs` is on (0 lists none); None when it is off.
    top_logprobs: int | None = None
    # The first function in `tools`: what a forced tool-call answer calls when none is forced.
    first_tool: str | None = None


def _invalid(message: str, param: str | None, code: str | None = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def require_model(body: object) -> str:
    """The request's ``model``; a 400 as OpenAI words it when absent."""
    model = body.get("model") if isinstance(body, Mapping) else None
    if not isinstance(model, str) or not model:
        raise ApiError(400, "you must provide a model parameter")
    return model


def int_option(body: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(
            f"Invalid type for '{name}': expected an integer, but got {type(value).__name__}.",
            name,
            "invalid_type",
        )
    if value < low:
        raise _invalid(
            f"Invalid '{name}': integer below minimum value. "
            f"Expected a value >= {low}, but got {value} instead.",
            name,
            "integer_below_min_value",
        )
    if value > high:
        raise _invalid(
            f"Invalid '{name}': integer above maximum value. "
            f"Expected a value <= {high}, but got {value} instead.",
            name,
            "integer_above_max_value",
        )
    return value


def _content_text(content: object, param: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(f"Invalid type for '{param}': expected a string or an array.", param)
    parts: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            raise _invalid(f"Invalid type for '{param}': expected an object.", param)
        if part.get("type") == "text" or "text" in part:
            parts.append(str(part.get("text", "")))
        else:
            mark = zlib.crc32(orjson.dumps(part, option=orjson.OPT_SORT_KEYS))
            parts.append(f"[{part.get('type')} {mark:08x}]" + " px" * _MEDIA_TOKENS)
    return "".join(parts)


def _turns(messages: object) -> list[tuple[str, str, str | None]]:
    if messages is None:
        raise _invalid("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    if not isinstance(messages, list):
        raise _invalid("Invalid type for 'messages': expected an array.", "messages", "invalid_type")
    if not messages:
        raise _invalid(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            "messages",
            "empty_array",
        )
    turns: list[tuple[str, str, str | None]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise _invalid(f"Invalid type for 'messages[{i}]': expected an object.", f"messages[{i}]")
        role = message.get("role")
        if role not in _ROLES:
            raise _invalid(
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                "'user', 'function', 'tool', and 'developer'.",
                f"messages[{i}].role",
            )
        text = _content_text(message.get("content"), f"messages[{i}].content")
        for call in message.get("tool_calls") or ():
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            text += f"{function.get('name', '')}({function.get('arguments', '')})"
        name = message.get("name")
        turns.append((str(role), text, name if isinstance(name, str) else None))
    return turns


def stop_sequences(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and len(value) <= 4 and all(isinstance(s, str) for s in value):
        return tuple(value)
    raise _invalid("Invalid 'stop': expected a string or an array of up to 4 strings.", "stop")


def _tool(body: Mapping[str, Any]) -> ToolCallSpec | None:
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if not tools or choice in (None, "none", "auto"):
        return None
    functions = {
        f["name"]: f.get("parameters")
        for t in tools
        if isinstance(t, Mapping)
        and isinstance(f := t.get("function"), Mapping)
        and isinstance(f.get("name"), str)
    }
    if choice == "required":
        name = next(iter(functions), None)
    elif isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        name = choice["function"].get("name")
        if name not in functions:
            raise _invalid(
                f"Invalid value for 'tool_choice': function '{name}' is not in 'tools'.",
                "tool_choice",
            )
    else:
        raise _invalid("Invalid value for 'tool_choice'.", "tool_choice")
    if name is None:
        return None
    return ToolCallSpec(name=name, parameters=functions[name])


def from_chat_request(
    body: object, *, tokenizer: Tokenizer, max_model_len: int, vllm: bool = False
) -> ChatParams:
    """Validate a chat request body (already parsed JSON) and translate it; `vllm` reads vLLM's
    extra sampling parameters too (`ignore_eos`)."""
    model = require_model(body)
    assert isinstance(body, Mapping)
    if not vllm and is_reasoning_model(model):
        _refuse_for_reasoning(body)
    turns = _turns(body.get("messages"))
    tools = body.get("tools")
    preamble = orjson.dumps(tools).decode() if tools else ""
    prompt = tokenizer.render_chat(turns, preamble=preamble)
    max_tokens = int_option(body, "max_completion_tokens", 1, max_model_len)
    if max_tokens is None:
        max_tokens = int_option(body, "max_tokens", 1, max_model_len)
    if len(prompt) + (max_tokens or 0) > max_model_len:
        raise _invalid(
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {len(prompt) + (max_tokens or 0)} tokens ({len(prompt)} in the "
            f"messages, {max_tokens or 0} in the completion). Please reduce the length of "
            "the messages or completion.",
            "messages",
            "context_length_exceeded",
        )
    stream = bool(body.get("stream"))
    options = body.get("stream_options")
    if options is not None and not stream:
        raise _invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        )
    options = options if isinstance(options, Mapping) else {}
    seed = body.get("seed")
    tier = body.get("service_tier")
    generation = GenerationRequest(
        model=model,
        prompt=prompt,
        n=int_option(body, "n", 1, 128) or 1,
        max_tokens=max_tokens,
        stop=stop_sequences(body.get("stop")),
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        tool=_tool(body),
        ignore_eos=vllm and body.get("ignore_eos") is True,
    )
    return ChatParams(
        generation=generation,
        stream=stream,
        include_usage=bool(options.get("include_usage")),
        include_obfuscation=options.get("include_obfuscation", True) is not False,
        service_tier=tier if isinstance(tier, str) else None,
        top_logprobs=parse_logprobs(body, vllm=vllm),
        first_tool=_first_tool(tools),
    )


# OpenAI's reasoning models (o-series, gpt-5 but not gpt-5-chat): what they refuse, in their words.
_REASONING = re.compile(r"^(o\d+(?:-|$)|gpt-5(?!-chat))")
_DEFAULT_ONLY = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
_UNSUPPORTED = ("logprobs", "top_logprobs", "logit_bias")


def is_reasoning_model(model: str) -> bool:
    """Whether api.openai.com treats this model as a reasoning model."""
    return _REASONING.match(model.lower()) is not None


def _refuse_for_reasoning(body: Mapping[str, Any]) -> None:
    if "max_tokens" in body:
        raise ApiError(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            param="max_tokens",
            code="unsupported_parameter",
        )
    for name in _DEFAULT_ONLY:
        value = body.get(name)
        default = 1 if name in ("temperature", "top_p") else 0
        if value is not None and value != default:
            raise ApiError(
                400,
                f"Unsupported value: '{name}' does not support {value} with this model. Only the "
                f"default ({default}) value is supported.",
                param=name,
                code="unsupported_value",
            )
    for name in _UNSUPPORTED:
        if body.get(name) not in (None, False):
            raise ApiError(
                400,
                f"Unsupported parameter: '{name}' is not supported with this model.",
                param=name,
                code="unsupported_parameter",
            )


def _first_tool(tools: object) -> str | None:
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None
