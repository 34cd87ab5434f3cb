"""OpenAI messages as Gemini `contents` (roles `user` and `model`) plus one `systemInstruction`.

Consecutive same-role turns are merged; tool results become `functionResponse` parts of the user turn
that follows the model's `functionCall`s (Gemini wants that order and pairs them by name and
position); a conversation that starts with the model gets a minimal user turn `"."` in front.

Gemini 3 signs its function calls (`thoughtSignature`) and rejects a history that drops the
signature. Answers put it in the tool call's `extra_content.google.thought_signature`, as Google's
own OpenAI-compatible endpoint does; calls without one (from another model, or a client that dropped
it) get the placeholder Google documents for that case on the first call of each step.
"""

from __future__ import annotations

import mimetypes
from typing import Any

import orjson

from providers.errors import invalid_parameter as invalid
from providers.types import JSON

SYSTEM_ROLES = frozenset({"system", "developer"})
LEADING_USER_TEXT = "."
# https://ai.google.dev/gemini-api/docs/thought-signatures
SKIP_SIGNATURE = "skip_thought_signature_validator"


def to_gemini_contents(messages: Any) -> tuple[JSON | None, list[JSON]]:
    """The `systemInstruction` (or None) and the `contents` for an OpenAI message list."""
    if not isinstance(messages, list):
        raise invalid("messages must be a list")
    system: list[JSON] = []
    contents: list[JSON] = []
    calls: list[list[str]] = []  # per content: the tool call ids asked (model) or answered (user)
    names: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, dict):
            raise invalid("every message must be an object")
        role = message.get("role")
        if role in SYSTEM_ROLES:
            system += _parts(message.get("content"), media=False)
            continue
        ids: list[str] = []
        if role == "user":
            parts = _parts(message.get("content"), media=True)
        elif role == "assistant":
            parts = _parts(message.get("content"), media=False) + _function_calls(message, ids, names)
        elif role == "tool":
            parts = [_function_response(message, names)]
            ids = [message["tool_call_id"]]
        else:
            raise invalid(f"message role {role!r} is not supported")
        gemini_role = "model" if role == "assistant" else "user"
        if not parts:
            continue
        if contents and contents[-1]["role"] == gemini_role:
            contents[-1]["parts"] += parts
            calls[-1] += ids
        else:
            contents.append({"role": gemini_role, "parts": parts})
            calls.append(ids)
    if not contents or contents[0]["role"] != "user":
        contents.insert(0, {"role": "user", "parts": [{"text": LEADING_USER_TEXT}]})
        calls.insert(0, [])
    for content in contents:
        # The function responses lead the turn that answers the calls.
        content["parts"].sort(key=lambda part: "functionResponse" not in part)
    _check_pairs(contents, calls)
    return ({"parts": system} if system else None), contents


def _check_pairs(contents: list[JSON], calls: list[list[str]]) -> None:
    """Every functionCall answered exactly once in the very next user turn, and no stray answers."""
    asked: list[str] = []
    for content, ids in zip(contents, calls, strict=True):
        if content["role"] == "model":
            if asked:
                break
            asked = ids
            continue
        if sorted(ids) != sorted(asked):
            if set(asked) - set(ids):
                break
            raise invalid(f"tool messages {sorted(ids)} do not each answer one preceding tool call")
        asked = []
    if asked:
        raise invalid(f"tool calls {sorted(asked)} have no tool message answering them")


def _function_calls(message: JSON, ids: list[str], names: dict[str, str]) -> list[JSON]:
    parts: list[JSON] = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not call.get("id") or not function.get("name"):
            raise invalid("every assistant tool call needs an id and a function name")
        arguments = function.get("arguments") or "{}"
        try:
            args = orjson.loads(arguments) if isinstance(arguments, str) else arguments
        except orjson.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            raise invalid(
                f"arguments of tool call {call['id']} must be a JSON object, got {arguments!r:.100}"
            )
        part: JSON = {"functionCall": {"name": function["name"], "args": args}}
        signature = ((call.get("extra_content") or {}).get("google") or {}).get("thought_signature")
        if signature or not parts:
            part["thoughtSignature"] = signature or SKIP_SIGNATURE
        parts.append(part)
        ids.append(call["id"])
        names[call["id"]] = function["name"]
    return parts


def _function_response(message: JSON, names: dict[str, str]) -> JSON:
    call_id = message.get("tool_call_id")
    if call_id not in names:
        raise invalid(f"tool message {call_id!r} does not answer any earlier tool call")
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    try:
        result = orjson.loads(content) if content else None
    except orjson.JSONDecodeError:
        result = content
    # Gemini's response is a JSON object (a protobuf Struct); anything else is wrapped.
    response = result if isinstance(result, dict) else {"result": result}
    return {"functionResponse": {"name": names[call_id], "response": response}}


def _parts(content: Any, *, media: bool) -> list[JSON]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if not isinstance(content, list):
        raise invalid("message content must be a string or a list of content parts")
    parts: list[JSON] = []
    for item in content:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("text", "refusal"):
            if item.get(kind):
                parts.append({"text": item[kind]})
        elif media and kind == "image_url":
            image = item["image_url"]
            parts.append(_media(image.get("url") if isinstance(image, dict) else image))
        elif media and kind == "file":
            parts.append(_media((item.get("file") or {}).get("file_data")))
        elif media and kind == "input_audio":
            audio = item.get("input_audio") or {}
            data = {"mimeType": f"audio/{audio.get('format', 'wav')}", "data": audio.get("data")}
            parts.append({"inlineData": data})
        else:
            raise invalid(f"content part of type {kind!r} cannot be sent to Gemini in this message")
    return parts


def _media(url: Any) -> JSON:
    """`data:` URLs go inline; http(s) URLs go as `fileData` for Gemini to fetch."""
    if not isinstance(url, str):
        raise invalid("image and file URLs must be strings")
    if url.startswith(("http://", "https://")):
        mime = mimetypes.guess_type(url.split("?", 1)[0])[0] or "image/jpeg"
        return {"fileData": {"mimeType": mime, "fileUri": url}}
    header, sep, data = url.partition(",")
    if not (url.startswith("data:") and sep and header.endswith(";base64")):
        raise invalid("media URLs must be http(s) URLs or base64 data: URLs")
    return {"inlineData": {"mimeType": header[5:-7], "data": data}}
