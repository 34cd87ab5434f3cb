"""Response objects of the Responses API, built from chat answers: the object the request opens
(`response.created`), its output items, its usage, and the finished object.

Pure: ids and the clock come in as arguments."""

from __future__ import annotations

from typing import Any

from providers.responses.request import new_id
from providers.types import JSON
from usage import Usage

# Chat finish reasons that leave a response `incomplete`, and the reason it says.
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def skeleton(body: JSON, *, response_id: str, created_at: int, model: str) -> JSON:
    """The response as it stands before any output: the request's parameters echoed back."""
    reasoning = body.get("reasoning") or {}
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": model,
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "service_tier": body.get("service_tier"),
        "store": body.get("store", True),
        "temperature": body.get("temperature"),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [_echo_tool(tool) for tool in body.get("tools") or ()],
        "top_p": body.get("top_p"),
        "truncation": body.get("truncation") or "disabled",
        "usage": None,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _echo_tool(tool: JSON) -> JSON:
    return {
        "type": "function",
        "name": tool.get("name"),
        "description": tool.get("description"),
        "parameters": tool.get("parameters") or {"type": "object"},
        "strict": tool.get("strict", True),
    }


def message_item(text: str, *, item_id: str, status: str = "completed") -> JSON:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [text_part(text)] if status == "completed" else [],
    }


def text_part(text: str) -> JSON:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def call_item(*, item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> JSON:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def output_of(completion: JSON) -> tuple[list[JSON], str | None]:
    """The output items of a `chat.completion` (its first choice) and its finish reason."""
    choices = completion.get("choices") or []
    if not choices:
        return [], None
    message = choices[0].get("message") or {}
    items: list[JSON] = []
    text = _text_of(message.get("content"))
    if text:
        items.append(message_item(text, item_id=new_id("msg")))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            call_item(
                item_id=new_id("fc"),
                call_id=str(call.get("id") or new_id("call")),
                name=str(function.get("name") or ""),
                arguments=str(function.get("arguments") or ""),
            )
        )
    return items, choices[0].get("finish_reason")


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def to_responses_usage(usage: Usage) -> JSON:
    """OpenAI's convention holds on both sides: cached and cache-write tokens are part of
    `input_tokens`, reasoning tokens part of `output_tokens`."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def finished(response: JSON, *, output: list[JSON], usage: Usage, finish_reason: str | None, at: int) -> JSON:
    """`response` (a skeleton) completed, or incomplete when the answer was cut short."""
    incomplete = INCOMPLETE.get(finish_reason or "")
    done = {
        **response,
        "status": "incomplete" if incomplete else "completed",
        "output": output,
        "usage": to_responses_usage(usage),
    }
    if incomplete:
        done["incomplete_details"] = {"reason": incomplete}
    else:
        done["completed_at"] = at
    return done


def failed(response: JSON, *, output: list[JSON], message: str, code: str = "server_error") -> JSON:
    return {**response, "status": "failed", "output": output, "error": {"code": code, "message": message}}
