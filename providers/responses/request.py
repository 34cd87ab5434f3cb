"""A Responses API request (`POST /v1/responses`) as an OpenAI chat request, so every provider the
chat pipeline reaches answers it.

Pure translation: the conversation a `previous_response_id` names is passed in as chat messages
(read from storage by the caller). What does not survive the trip, by design:
- `reasoning` items in `input` are dropped: they carry a provider's own reasoning state, which
  chat messages cannot hold (the answer itself never depends on them);
- built-in tools (web search, file search, computer use, MCP…), `item_reference`, `background`,
  `conversation` and saved `prompt`s have no chat equivalent and are refused with a 400.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from providers.types import JSON

# Item types of the Responses API that only OpenAI's own servers can run or resolve.
HOSTED_ITEMS = frozenset(
    {
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "web_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "custom_tool_call",
        "custom_tool_call_output",
        "tool_search_call",
        "tool_search_output",
        "item_reference",
        "compaction",
        "program",
        "program_output",
        "additional_tools",
    }
)
INPUT_ROLES = ("user", "system", "developer", "assistant")


class InputError(ValueError):
    """A request the Responses API itself would refuse with a 400, naming the parameter."""

    def __init__(self, message: str, *, param: str | None = None, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.code = code


def new_id(prefix: str) -> str:
    """An id in OpenAI's style (`resp_…`, `msg_…`, `fc_…`): a prefix and 48 hex digits."""
    return f"{prefix}_{os.urandom(24).hex()}"


@dataclass(slots=True)
class Conversation:
    """Chat messages built from Responses items, with the tool calls seen so far, so an output
    that answers no call is caught before anything is spent on it."""

    messages: list[JSON] = field(default_factory=list)
    calls: set[str] = field(default_factory=set)

    @classmethod
    def resumed(cls, messages: list[JSON]) -> Conversation:
        calls = {
            str(call.get("id"))
            for message in messages
            for call in message.get("tool_calls") or ()
            if isinstance(call, dict)
        }
        return cls(list(messages), calls)

    def add(self, item: JSON, where: str) -> None:
        kind = item.get("type", "message")
        if kind == "message":
            self.messages.append(_from_message(item, where))
        elif kind == "function_call":
            self._add_call(item, where)
        elif kind == "function_call_output":
            self._add_output(item, where)
        elif kind == "reasoning":
            return
        elif kind in HOSTED_ITEMS:
            raise InputError(
                f"'{where}.type' {kind!r} is not supported through this gateway (only messages, "
                "function calls and their outputs)",
                param=f"{where}.type",
            )
        else:
            raise InputError(f"'{where}.type': unknown item type {kind!r}", param=f"{where}.type")

    def _add_call(self, item: JSON, where: str) -> None:
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        for key, value in (("call_id", call_id), ("name", name), ("arguments", arguments)):
            if not isinstance(value, str) or (key != "arguments" and not value):
                raise InputError(
                    f"'{where}.{key}' must be a string", param=f"{where}.{key}", code="invalid_type"
                )
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        last = self.messages[-1] if self.messages else None
        # Parallel calls are one assistant turn in chat: consecutive calls join the turn before them.
        if last is not None and last.get("role") == "assistant":
            last.setdefault("tool_calls", []).append(call)
        else:
            self.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        self.calls.add(str(call_id))

    def _add_output(self, item: JSON, where: str) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InputError(
                f"'{where}.call_id' is required: the id of the function call this output answers",
                param=f"{where}.call_id",
                code="missing_required_parameter",
            )
        if call_id not in self.calls:
            raise InputError(
                f"No tool call found for function call output with call_id {call_id}.",
                param=f"{where}.call_id",
            )
        output = item.get("output")
        if isinstance(output, list):
            output = "".join(_text_of(part, f"{where}.output") for part in output)
        if not isinstance(output, str):
            raise InputError(
                f"'{where}.output' must be a string or a list of input_text parts",
                param=f"{where}.output",
                code="invalid_type",
            )
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})


def _from_message(item: JSON, where: str) -> JSON:
    role = item.get("role")
    if not isinstance(role, str) or role not in INPUT_ROLES:
        raise InputError(
            f"'{where}.role' must be one of {', '.join(INPUT_ROLES)}; got {role!r}", param=f"{where}.role"
        )
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise InputError(
            f"'{where}.content' must be a string or a list of content parts",
            param=f"{where}.content",
            code="invalid_type",
        )
    if role == "assistant":
        text = "".join(_text_of(part, f"{where}.content[{i}]") for i, part in enumerate(content))
        return {"role": "assistant", "content": text}
    return {
        "role": role,
        "content": [_from_part(part, f"{where}.content[{i}]") for i, part in enumerate(content)],
    }


_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


def _text_of(part: Any, where: str) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind not in _TEXT_PARTS:
        raise InputError(f"'{where}' must be a text part; got {kind!r}", param=where)
    text = part.get("refusal" if kind == "refusal" else "text")
    if not isinstance(text, str):
        raise InputError(f"'{where}.text' must be a string", param=f"{where}.text", code="invalid_type")
    return text


def _from_part(part: Any, where: str) -> JSON:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in _TEXT_PARTS:
        return {"type": "text", "text": _text_of(part, where)}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str) or not url:
            raise InputError(
                f"'{where}.image_url' is required (a URL or a data URL; file ids are not supported)",
                param=f"{where}.image_url",
            )
        image: JSON = {"url": url}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        data = part.get("file_data")
        if not isinstance(data, str) or not data:
            raise InputError(
                f"'{where}.file_data' is required (file ids and URLs are not supported)",
                param=f"{where}.file_data",
            )
        return {"type": "file", "file": {"filename": str(part.get("filename") or "file"), "file_data": data}}
    raise InputError(f"'{where}.type': unknown content part type {kind!r}", param=f"{where}.type")


def input_items(value: Any) -> list[JSON]:
    """`input` as a list of items: a string is one user message."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise InputError("'input' must be a string or an array of items", param="input", code="invalid_type")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise InputError(f"'input[{i}]' must be an object", param=f"input[{i}]", code="invalid_type")
    return value


def to_chat_tools(tools: Any) -> list[JSON]:
    if not isinstance(tools, list):
        raise InputError("'tools' must be an array", param="tools", code="invalid_type")
    out: list[JSON] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            raise InputError(
                f"'{where}.type' {kind!r} is not supported through this gateway (function tools only)",
                param=f"{where}.type",
            )
        assert isinstance(tool, dict)
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(
                f"'{where}.name' is required (a non-empty string)",
                param=f"{where}.name",
                code="missing_required_parameter",
            )
        function: JSON = {"name": name, "parameters": tool.get("parameters") or {"type": "object"}}
        if not isinstance(function["parameters"], dict):
            raise InputError(
                f"'{where}.parameters' must be a JSON Schema object",
                param=f"{where}.parameters",
                code="invalid_type",
            )
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        if isinstance(tool.get("strict"), bool):
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def to_chat_tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise InputError(
        "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": …}",
        param="tool_choice",
    )


def to_chat_format(text: Any) -> JSON | None:
    """`text.format` as a chat `response_format` (None for plain text)."""
    if text is None:
        return None
    if not isinstance(text, dict):
        raise InputError("'text' must be an object", param="text", code="invalid_type")
    fmt = text.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise InputError(
            f"'text.format.type' must be one of text, json_object, json_schema; got {kind!r}",
            param="text.format.type",
        )
    assert isinstance(fmt, dict)
    name, schema = fmt.get("name"), fmt.get("schema")
    if not isinstance(name, str) or not name:
        raise InputError(
            "'text.format.name' is required", param="text.format.name", code="missing_required_parameter"
        )
    if not isinstance(schema, dict):
        raise InputError(
            "'text.format.schema' is required (a JSON Schema object)",
            param="text.format.schema",
            code="missing_required_parameter",
        )
    spec: JSON = {"name": name, "schema": schema}
    for key in ("strict", "description"):
        if fmt.get(key) is not None:
            spec[key] = fmt[key]
    return {"type": "json_schema", "json_schema": spec}
