"""One OpenAI message's content as Anthropic content blocks: text, images, PDFs, tool calls and results.

`cache_control` marks a client put on a content part (or on the whole message, LiteLLM's convention,
meaning its last block) are kept, so prompt caching works through the gateway.
"""

from __future__ import annotations

from typing import Any

import orjson

from providers.errors import invalid_parameter as _invalid
from providers.types import JSON


def to_system_blocks(message: JSON) -> list[JSON]:
    blocks = _content_blocks(message.get("content"), allow_media=False)
    return _mark_last(blocks, message.get("cache_control"))


def to_blocks(message: JSON) -> list[JSON]:
    """A user or assistant message's blocks; empty text is left out because Anthropic rejects it."""
    blocks = _content_blocks(message.get("content"), allow_media=message.get("role") == "user")
    if message.get("role") == "assistant":
        blocks += [_to_tool_use(call) for call in message.get("tool_calls") or ()]
    return _mark_last(blocks, message.get("cache_control"))


def to_tool_result(message: JSON) -> JSON:
    call_id = message.get("tool_call_id")
    if not call_id:
        raise _invalid("a tool message needs the tool_call_id it answers")
    block: JSON = {"type": "tool_result", "tool_use_id": call_id}
    content = message.get("content")
    if isinstance(content, str):
        if content:
            block["content"] = content
    elif content:
        blocks = _content_blocks(content, allow_media=False)
        if blocks:
            block["content"] = blocks
    if message.get("cache_control"):
        block["cache_control"] = message["cache_control"]
    return block


def _to_tool_use(call: Any) -> JSON:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not call.get("id") or not function.get("name"):
        raise _invalid("every assistant tool call needs an id and a function name")
    arguments = function.get("arguments") or "{}"
    try:
        parsed = orjson.loads(arguments) if isinstance(arguments, str) else arguments
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise _invalid(f"arguments of tool call {call['id']} must be a JSON object, got {arguments!r:.100}")
    return {"type": "tool_use", "id": call["id"], "name": function["name"], "input": parsed}


def _content_blocks(content: Any, *, allow_media: bool) -> list[JSON]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise _invalid("message content must be a string or a list of content parts")
    blocks: list[JSON] = []
    for part in content:
        block = _to_block(part, allow_media=allow_media)
        if block is None:
            continue
        if isinstance(part, dict) and part.get("cache_control"):
            block["cache_control"] = part["cache_control"]
        blocks.append(block)
    return blocks


def _to_block(part: Any, *, allow_media: bool) -> JSON | None:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("text", "refusal"):
        text = part.get(kind)
        return {"type": "text", "text": text} if text else None
    if allow_media and kind == "image_url":
        image = part["image_url"]
        return {"type": "image", "source": _to_source(image["url"] if isinstance(image, dict) else image)}
    if allow_media and kind == "file":
        data = (part.get("file") or {}).get("file_data")
        if isinstance(data, str) and data.startswith("data:application/pdf"):
            return {"type": "document", "source": _to_source(data)}
        raise _invalid("only PDF files sent inline as file_data can be given to Anthropic models")
    raise _invalid(f"content part of type {kind!r} cannot be sent to Anthropic models in this message")


def _to_source(url: Any) -> JSON:
    """A `data:` URL becomes inline base64; an http(s) URL is fetched by Anthropic itself."""
    if not isinstance(url, str):
        raise _invalid("image_url.url must be a string")
    if url.startswith(("http://", "https://")):
        return {"type": "url", "url": url}
    header, sep, data = url.partition(",")
    if not (url.startswith("data:") and sep and header.endswith(";base64")):
        raise _invalid("image URLs must be http(s) URLs or base64 data: URLs")
    return {"type": "base64", "media_type": header[5:-7], "data": data}


def _mark_last(blocks: list[JSON], cache_control: Any) -> list[JSON]:
    if cache_control and blocks:
        blocks[-1]["cache_control"] = cache_control
    return blocks
