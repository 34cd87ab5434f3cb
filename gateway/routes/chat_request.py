"""Parse and check a `/v1/chat/completions` body before anything is spent on it.

Hand-written rather than a pydantic model: a 200 KB prompt must not be copied into objects just to
learn that its shape is right. Errors name the offending parameter the way OpenAI does.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest
from gateway.routes.body import json_object
from gateway.routes.body_fields import FieldRules, check_fields, required_model, stream_flags
from providers.types import ChatRequest

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

_RULES = FieldRules(
    numbers={
        "temperature": (0.0, 2.0),
        "top_p": (0.0, 1.0),
        "presence_penalty": (-2.0, 2.0),
        "frequency_penalty": (-2.0, 2.0),
    },
    ints={
        "n": (1, 128),
        "max_tokens": (1, 2**31 - 1),
        "max_completion_tokens": (1, 2**31 - 1),
        "top_logprobs": (0, 20),
        "seed": (-(2**63), 2**63 - 1),
    },
    bools=("stream", "logprobs", "parallel_tool_calls", "store"),
    objects=("response_format", "metadata", "logit_bias"),
    strings=("user",),
)


def parse_chat_request(raw: bytes) -> ChatRequest:
    body = json_object(raw)
    model = required_model(body)
    _check_messages(body.get("messages"))
    check_fields(body, _RULES)
    _check_tools(body.get("tools"))
    _check_response_format(body.get("response_format"))
    stream, include_usage = stream_flags(body)
    return ChatRequest(body=body, raw=raw, model=model, stream=stream, include_usage=include_usage)


def _check_messages(messages: Any) -> None:
    if messages is None:
        raise InvalidRequest(
            "you must provide a messages parameter",
            param="messages",
            code="missing_required_parameter",
        )
    if not isinstance(messages, list):
        raise InvalidRequest("'messages' must be an array", param="messages", code="invalid_type")
    if not messages:
        raise InvalidRequest("'messages' must contain at least one message", param="messages")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise InvalidRequest(f"'{where}' must be an object", param=where, code="invalid_type")
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:  # a list or dict role is unhashable
            raise InvalidRequest(
                f"'{where}.role' must be one of {', '.join(sorted(ROLES))}; got {role!r}",
                param=f"{where}.role",
                code="invalid_value",
            )
        content = message.get("content")
        if content is None:
            if role != "assistant" and role != "function":
                raise InvalidRequest(
                    f"'{where}.content' is required for role '{role}'",
                    param=f"{where}.content",
                    code="missing_required_parameter",
                )
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    raise InvalidRequest(
                        f"'{where}.content[{j}]' must be an object with a 'type'",
                        param=f"{where}.content[{j}]",
                        code="invalid_type",
                    )
        elif not isinstance(content, str):
            raise InvalidRequest(
                f"'{where}.content' must be a string or an array of content parts",
                param=f"{where}.content",
                code="invalid_type",
            )


def _check_tools(tools: Any) -> None:
    """The shape OpenAI itself requires, so a malformed list is refused here rather than billed or
    refused upstream in the upstream's words."""
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequest("'tools' must be an array of objects", param="tools", code="invalid_type")
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise InvalidRequest(f"'{where}' must be an object", param=where, code="invalid_type")
        kind = tool.get("type", "function")
        if kind != "function":
            continue  # custom tools and whatever comes next: the upstream knows its own
        function = tool.get("function")
        if not isinstance(function, dict):
            raise InvalidRequest(
                f"'{where}.function' must be an object with a 'name'",
                param=f"{where}.function",
                code="invalid_type",
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(
                f"'{where}.function.name' is required (a non-empty string)",
                param=f"{where}.function.name",
                code="missing_required_parameter" if name is None else "invalid_type",
            )
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise InvalidRequest(
                f"'{where}.function.parameters' must be a JSON Schema object",
                param=f"{where}.function.parameters",
                code="invalid_type",
            )


_RESPONSE_FORMATS = ("text", "json_object", "json_schema")


def _check_response_format(value: Any) -> None:
    if value is None:
        return  # not an object at all: `_RULES.objects` said so already
    kind = value.get("type")
    if kind not in _RESPONSE_FORMATS:
        raise InvalidRequest(
            f"'response_format.type' must be one of {', '.join(_RESPONSE_FORMATS)}; got {kind!r}",
            param="response_format.type",
            code="invalid_value",
        )
    if kind != "json_schema":
        return
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise InvalidRequest(
            "'response_format.json_schema' is required for type 'json_schema' (an object with a "
            "'name' and a 'schema')",
            param="response_format.json_schema",
            code="missing_required_parameter" if spec is None else "invalid_type",
        )
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidRequest(
            "'response_format.json_schema.name' is required (a non-empty string)",
            param="response_format.json_schema.name",
            code="missing_required_parameter" if name is None else "invalid_type",
        )
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise InvalidRequest(
            "'response_format.json_schema.schema' is required (a JSON Schema object)",
            param="response_format.json_schema.schema",
            code="missing_required_parameter" if schema is None else "invalid_type",
        )
