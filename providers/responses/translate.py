"""The whole `POST /v1/responses` body to a chat request: the top-level parameters checked the way
the Responses API checks them, the items translated by `providers.responses.request`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from providers.responses.request import (
    Conversation,
    InputError,
    input_items,
    new_id,
    to_chat_format,
    to_chat_tool_choice,
    to_chat_tools,
)
from providers.types import JSON

# The Responses API refuses fewer than 16 output tokens.
MIN_OUTPUT_TOKENS = 16
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_UNSUPPORTED = {
    "background": "background responses",
    "conversation": "conversations (use previous_response_id)",
    "prompt": "saved prompts",
}
_TYPES: dict[str, tuple[type, ...]] = {
    "instructions": (str,),
    "previous_response_id": (str,),
    "stream": (bool,),
    "store": (bool,),
    "parallel_tool_calls": (bool,),
    "metadata": (dict,),
    "reasoning": (dict,),
    "user": (str,),
    "safety_identifier": (str,),
}


@dataclass(frozen=True, slots=True)
class Translated:
    """A Responses request in chat terms: the chat body, the conversation it continues and adds to
    (without `instructions`, which are not carried over), and its input items as stored."""

    chat: JSON
    context: list[JSON]
    items: list[JSON]


def check_create(body: JSON) -> None:
    """The parameters that do not depend on stored state; raises `InputError`."""
    model = body.get("model")
    if model is None:
        raise InputError(
            "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
        )
    if not isinstance(model, str) or not model:
        raise InputError("'model' must be a non-empty string", param="model", code="invalid_type")
    if body.get("input") is None:
        raise InputError(
            "Missing required parameter: 'input'.", param="input", code="missing_required_parameter"
        )
    for name, kinds in _TYPES.items():
        value = body.get(name)
        if value is not None and (
            not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool))
        ):
            raise InputError(f"'{name}' has the wrong type", param=name, code="invalid_type")
    for name, what in _UNSUPPORTED.items():
        if body.get(name):
            raise InputError(f"'{name}': {what} are not supported through this gateway", param=name)
    limit = body.get("max_output_tokens")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InputError(
                "'max_output_tokens' must be an integer", param="max_output_tokens", code="invalid_type"
            )
        if not MIN_OUTPUT_TOKENS <= limit <= 2**31 - 1:
            raise InputError(
                f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
                f"{MIN_OUTPUT_TOKENS}, but got {limit} instead.",
                param="max_output_tokens",
                code="integer_below_min_value",
            )
    _check_metadata(body.get("metadata"))
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is not None and effort not in EFFORTS:
        raise InputError(
            f"'reasoning.effort' must be one of {', '.join(EFFORTS)}; got {effort!r}",
            param="reasoning.effort",
        )


def _check_metadata(metadata: Any) -> None:
    if metadata is None:
        return
    if len(metadata) > 16 or not all(
        isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512
        for k, v in metadata.items()
    ):
        raise InputError(
            "'metadata' takes at most 16 string values, keys up to 64 and values up to 512 characters",
            param="metadata",
        )


def from_responses_request(body: JSON, *, history: list[JSON] | None = None) -> Translated:
    """The chat request for a checked (`check_create`) Responses body; `history` is the stored
    conversation its `previous_response_id` continues, as chat messages."""
    items = input_items(body["input"])
    conversation = Conversation.resumed(history or [])
    for i, item in enumerate(items):
        conversation.add(item, f"input[{i}]")
    if not conversation.messages:
        raise InputError("'input' holds nothing the model can answer", param="input")
    messages = list(conversation.messages)
    if body.get("instructions"):
        messages.insert(0, {"role": "system", "content": body["instructions"]})
    chat: JSON = {"model": body["model"], "messages": messages}
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    if body.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p", "parallel_tool_calls", "top_logprobs", "service_tier"):
        if body.get(key) is not None:
            chat[key] = body[key]
    user = body.get("user") or body.get("safety_identifier")
    if user:
        chat["user"] = user
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is not None:
        chat["reasoning_effort"] = effort
    if body.get("tools"):
        chat["tools"] = to_chat_tools(body["tools"])
    elif body.get("tools") is not None and not isinstance(body["tools"], list):
        raise InputError("'tools' must be an array", param="tools", code="invalid_type")
    if body.get("tool_choice") is not None:
        choice = to_chat_tool_choice(body["tool_choice"])
        if chat.get("tools"):
            chat["tool_choice"] = choice
    response_format = to_chat_format(body.get("text"))
    if response_format is not None:
        chat["response_format"] = response_format
    return Translated(chat=chat, context=conversation.messages, items=[stored_item(item) for item in items])


def stored_item(item: JSON) -> JSON:
    """An input item as `GET /v1/responses/{id}/input_items` lists it: with an id and a status,
    and a message's content always a list of parts."""
    kind = item.get("type", "message")
    if kind == "message":
        role = item["role"]
        content = item["content"]
        part_type = "output_text" if role == "assistant" else "input_text"
        if isinstance(content, str):
            content = [{"type": part_type, "text": content}]
        if role == "assistant":
            content = [{"annotations": [], **part, "type": part.get("type", part_type)} for part in content]
        return {
            "id": item.get("id") or new_id("msg"),
            "type": "message",
            "role": role,
            "status": "completed",
            "content": content,
        }
    prefix = {"function_call": "fc", "function_call_output": "fco"}.get(kind, "item")
    return {**item, "id": item.get("id") or new_id(prefix), "status": item.get("status") or "completed"}
