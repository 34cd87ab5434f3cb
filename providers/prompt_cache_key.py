"""OpenAI's `prompt_cache_key`, derived from the team and the request's stable prefix: pure, no I/O.

OpenAI caches prompts automatically: at least 1,024 tokens, with hits in 128-token steps, and only
for an exact prefix served on the machine that saw it. `prompt_cache_key` is combined with the
prefix hash to pick that machine, so requests that share a prefix should carry the same key. The
key here is a SHA-256 over canonical JSON (sorted keys), shortened to 24 hex characters, so every
gateway replica and every restart derives the same key. It covers:

- the team, so one team's traffic never shares a routing bucket with another's;
- the tools (OpenAI renders them ahead of the messages);
- the leading system and developer messages, which are the application's fixed instructions;
- the first user message, but only once the conversation has history (an assistant message after
  it). A conversation then keeps its own key and stays on the machine holding its history. Without
  history the request is usually a one-off question over a shared system prompt, and leaving the
  question out lets all such questions share the instruction prefix.

OpenAI's guide asks for about 15 requests a minute or fewer per prefix and key. Past that, requests
overflow to other machines and the hit rate drops. One busy application sending single-turn
questions with one system prompt goes past this on its own. That is why conversations get a key of
their own, and why the key is a hint, not a guarantee: the saving is read from `cached_tokens` in
the usage, never assumed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from providers.types import JSON

KEY_HEX_CHARS = 24
_SYSTEM_ROLES = frozenset({"system", "developer"})
# The parts of a message that OpenAI renders into the prompt.
_RENDERED = ("role", "name", "content")


def prompt_cache_key(team: str, body: JSON) -> str:
    """24 hex characters naming the team and `body`'s stable prefix (see the module docstring)."""
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    instructions: list[Any] = []
    first_user: Any = None
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            break
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            instructions.append(_rendered(message))
            continue
        later = messages[position + 1 :]
        if role == "user" and any(isinstance(m, dict) and m.get("role") == "assistant" for m in later):
            first_user = _rendered(message)
        break
    prefix = {"tools": body.get("tools") or [], "instructions": instructions, "first_user": first_user}
    digest = hashlib.sha256(team.encode() + b"\x00" + orjson.dumps(prefix, option=orjson.OPT_SORT_KEYS))
    return digest.hexdigest()[:KEY_HEX_CHARS]


def with_prompt_cache_key(body: JSON, key: str) -> JSON:
    """`body` with `prompt_cache_key` set, as a new dict; the very same `body` object when the client
    already chose a key (its choice wins), so the caller can keep forwarding the client's bytes."""
    if body.get("prompt_cache_key"):
        return body
    return {**body, "prompt_cache_key": key}


def _rendered(message: JSON) -> JSON:
    return {field: message[field] for field in _RENDERED if message.get(field) is not None}
