"""The response cache: whole answers to deterministic requests, kept in the `StateStore` and replayed
to later identical requests, whole or as a stream.

What is stored is an OpenAI `chat.completion` body, the model that answered and its usage. The usage
lets a hit be billed at zero while the ledger still knows what it would have cost upstream. The
store is whatever the gateway runs on: process memory by default, Redis (shared by every replica)
when configured. Entries expire after `ttl_seconds`, and bodies above `max_body_bytes` are never
stored.

A streamed answer is stored by reassembling its chunks (`from_stream`). A stored answer is served to
a streaming request by cutting it back into chunks (`to_stream_chunks`, or `replay_chunks` for a
dialect's own encoder): a role delta, the content in a few deltas, one delta per tool call, the
finish chunk and the usage chunk. A replay carries the `id` and `created` of the answer it repeats,
exactly like the non-streamed replay of the same body.

Key and cacheability rules live in `gateway.caching.keys`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import orjson

from gateway.state.store import StateStore
from providers.openai_compat import from_openai_usage, to_openai_usage
from providers.sse import DONE, DONE_EVENT, SSEDecoder, encode_data
from providers.types import JSON, Completion, StreamChunk
from usage import Usage

_FORMAT = 1
# Content is replayed in deltas of at most this many characters: "a few" chunks, not one per token.
DELTA_CHARS = 1024


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """A finished answer as stored: the OpenAI-shaped body, the model that answered, its usage."""

    body: bytes
    model: str
    usage: Usage

    @classmethod
    def from_completion(cls, completion: Completion) -> CachedAnswer:
        return cls(body=completion.body, model=completion.model, usage=completion.usage)

    def to_completion(self) -> Completion:
        """The answer as the adapters return it, for a dialect to render."""
        return Completion(body=self.body, usage=self.usage, model=self.model)


class ResponseCache:
    """Answers in the `StateStore` under keys from `gateway.caching.keys.response_cache_key`."""

    def __init__(self, store: StateStore, *, ttl_seconds: float, max_body_bytes: int) -> None:
        self._store = store
        self._ttl = ttl_seconds
        self._max_body_bytes = max_body_bytes

    async def get(self, key: str) -> CachedAnswer | None:
        value = await self._store.get(key)
        return None if value is None else decode(value)

    async def put(self, key: str, answer: CachedAnswer) -> bool:
        """Store `answer`; False (and nothing stored) when its body is over the size limit."""
        if len(answer.body) > self._max_body_bytes:
            return False
        await self._store.set(key, encode(answer), ttl=self._ttl)
        return True


def encode(answer: CachedAnswer) -> bytes:
    """One header line of JSON (format, model, usage), then the body bytes as they are."""
    header = {"v": _FORMAT, "model": answer.model, "usage": asdict(answer.usage)}
    return orjson.dumps(header) + b"\n" + answer.body


def decode(value: bytes) -> CachedAnswer | None:
    """The stored answer, or None for a value this version cannot read (treated as a miss)."""
    header, newline, body = value.partition(b"\n")
    try:
        meta = orjson.loads(header)
        if not newline or meta.get("v") != _FORMAT:
            return None
        return CachedAnswer(body=body, model=str(meta["model"]), usage=Usage(**meta["usage"]))
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
        return None


def to_stream_chunks(answer: CachedAnswer, *, include_usage: bool) -> list[bytes]:
    """The answer as an OpenAI SSE stream: `data:` frames of `chat.completion.chunk`, then `[DONE]`."""
    frames = [encode_data(chunk.data) for chunk in replay_chunks(answer, include_usage=include_usage)]
    return [*frames, DONE_EVENT]


def replay_chunks(answer: CachedAnswer, *, include_usage: bool = True) -> list[StreamChunk]:
    """The answer as the chunks an adapter would have streamed; the usage chunk last when asked."""
    completion = orjson.loads(answer.body)
    base: JSON = {
        "id": completion.get("id") or "",
        "object": "chat.completion.chunk",
        "created": int(completion.get("created") or 0),
        "model": completion.get("model") or answer.model,
    }
    for field in ("system_fingerprint", "service_tier"):
        if completion.get(field) is not None:
            base[field] = completion[field]
    if include_usage:
        base["usage"] = None  # OpenAI sets it on every chunk once usage was asked for
    chunks: list[StreamChunk] = []
    for choice in completion.get("choices") or ():
        for delta, finish, logprobs in _deltas(choice):
            choices = [
                {
                    "index": choice.get("index", 0),
                    "delta": delta,
                    "logprobs": logprobs,
                    "finish_reason": finish,
                }
            ]
            chars = len(delta.get("content") or "") + sum(
                len(call["function"]["arguments"]) for call in delta.get("tool_calls") or ()
            )
            chunks.append(
                StreamChunk(
                    data=orjson.dumps({**base, "choices": choices}), model=answer.model, content_chars=chars
                )
            )
    if include_usage:
        usage = completion.get("usage")
        data = orjson.dumps({**base, "choices": [], "usage": usage})
        chunks.append(StreamChunk(data=data, usage=answer.usage, usage_only=True, model=answer.model))
    return chunks


def _deltas(choice: JSON) -> list[tuple[JSON, str | None, Any]]:
    """(delta, finish_reason, logprobs) for one choice, in the order OpenAI streams them."""
    message = choice.get("message") or {}
    content = message.get("content")
    out: list[tuple[JSON, str | None, Any]] = [
        ({"role": "assistant", "content": None if content is None else ""}, None, None)
    ]
    logprobs = choice.get("logprobs")
    if content and logprobs:
        out.append(({"content": content}, None, logprobs))  # one delta keeps the logprobs whole
    elif content:
        out += [
            ({"content": content[i : i + DELTA_CHARS]}, None, None)
            for i in range(0, len(content), DELTA_CHARS)
        ]
    if message.get("refusal"):
        out.append(({"refusal": message["refusal"]}, None, None))
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        tool = {
            "index": index,
            "id": call.get("id") or "",
            "type": "function",
            "function": {"name": function.get("name") or "", "arguments": function.get("arguments") or ""},
        }
        out.append(({"tool_calls": [tool]}, None, None))
    out.append(({}, choice.get("finish_reason") or "stop", None))
    return out


def from_stream(chunks: list[bytes], *, usage: Usage | None = None) -> CachedAnswer | None:
    """A `chat.completion` reassembled from a streamed answer's chunks (bare JSON or SSE frames).

    Pass the adapter's canonical `usage` when there is one (`StreamChunk.usage`): it keeps what
    OpenAI's usage shape cannot hold (Anthropic's 1-hour cache writes, the raw provider object).
    None when the stream is not a whole answer worth storing: no chunk, an error event, a choice
    that never finished, or no usage at all (the pipeline always asks upstream for it).
    """
    objects = _chunk_objects(chunks)
    if not objects or any("error" in obj for obj in objects):
        return None
    choices: dict[int, _Choice] = {}
    reported: Any = None
    for obj in objects:
        reported = obj.get("usage") or reported
        for delta_choice in obj.get("choices") or ():
            index = int(delta_choice.get("index", 0))
            choices.setdefault(index, _Choice()).add(delta_choice)
    if reported is None and usage is not None:
        reported = to_openai_usage(usage)
    if not choices or reported is None or any(c.finish_reason is None for c in choices.values()):
        return None
    first = objects[0]
    body: JSON = {
        "id": first.get("id") or "",
        "object": "chat.completion",
        "created": int(first.get("created") or 0),
        "model": first.get("model") or "",
        "choices": [choices[index].to_choice(index) for index in sorted(choices)],
        "usage": reported,
    }
    for field in ("system_fingerprint", "service_tier"):
        if first.get(field) is not None:
            body[field] = first[field]
    canonical = usage if usage is not None else from_openai_usage(reported)
    return CachedAnswer(body=orjson.dumps(body), model=body["model"], usage=canonical)


def _chunk_objects(chunks: list[bytes]) -> list[JSON] | None:
    payloads: list[bytes] = []
    for chunk in chunks:
        if chunk.lstrip().startswith((b"data:", b"event:", b":")):
            decoder = SSEDecoder()
            payloads += [event.data for event in [*decoder.feed(chunk), *decoder.flush()]]
        else:
            payloads.append(chunk)
    objects: list[JSON] = []
    for payload in payloads:
        if payload.strip() == DONE:
            continue
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict):
            return None
        objects.append(obj)
    return objects


class _Choice:
    """One choice being reassembled from its deltas."""

    __slots__ = ("content", "finish_reason", "logprobs", "refusal", "role", "tool_calls")

    def __init__(self) -> None:
        self.role = "assistant"
        self.content: list[str] | None = None
        self.refusal: list[str] | None = None
        self.tool_calls: dict[int, JSON] = {}
        self.finish_reason: str | None = None
        self.logprobs: list[Any] | None = None

    def add(self, choice: JSON) -> None:
        delta = choice.get("delta") or {}
        self.role = delta.get("role") or self.role
        if delta.get("content"):
            self.content = [*(self.content or []), delta["content"]]
        elif "content" in delta and delta["content"] == "" and self.content is None:
            self.content = []
        if delta.get("refusal"):
            self.refusal = [*(self.refusal or []), delta["refusal"]]
        for call in delta.get("tool_calls") or ():
            self._add_tool_call(call)
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict) and logprobs.get("content"):
            self.logprobs = [*(self.logprobs or []), *logprobs["content"]]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def _add_tool_call(self, call: JSON) -> None:
        index = int(call.get("index", len(self.tool_calls)))
        function = call.get("function") or {}
        entry = self.tool_calls.setdefault(
            index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if call.get("id"):
            entry["id"] = call["id"]
        if function.get("name"):
            entry["function"]["name"] += function["name"]
        if function.get("arguments"):
            entry["function"]["arguments"] += function["arguments"]

    def to_choice(self, index: int) -> JSON:
        content = None if self.content is None else "".join(self.content)
        message: JSON = {
            "role": self.role,
            # A tool-calls-only answer has no content, whether or not the stream sent an empty one.
            "content": None if self.tool_calls and not content else content,
            "refusal": None if self.refusal is None else "".join(self.refusal),
        }
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        logprobs = None if self.logprobs is None else {"content": self.logprobs, "refusal": None}
        return {"index": index, "message": message, "finish_reason": self.finish_reason, "logprobs": logprobs}
