"""Fault rules (status codes, hangs, resets, stream drops and errors) and the book that hands them out.

A rule is a JSON object::

    {"kind": "status", "status": 429, "retry_after": 2, "retry_after_ms": 2000,
     "message": "...", "type": "...", "code": "...", "headers": {"x-should-retry": "true"}}
    {"kind": "timeout", "seconds": 5}          # sleep, then answer normally
    {"kind": "reset"}                          # close the connection, no response
    {"kind": "drop_after", "chunks": 3}        # streams only: 3 chunks, then close
    {"kind": "stream_error", "after_chunks": 2}  # streams only: 2 chunks, an error event
    {"kind": "answer", "content": "not json", "finish_reason": "length"}
                                               # answer 200 with this (bad) output instead
    {"kind": "answer", "tool_arguments": "{bad", "tool_name": "lookup"}
                                               # ... or with a tool call passing these arguments
    {"kind": "answer", "mean_logprob": -3.5}  # ... or the planned text, its logprobs' mean this

plus on every kind ``count`` (matching requests it applies to; default 1, -1 =
forever), ``model`` (only requests for that model) and ``path`` (only that path;
by default any API path: ``/v1/...``, or Gemini's ``/v1beta/...``). The
``x-sandbox-fault`` request header takes a JSON rule or the short form
``429``, ``status=503,retry_after=1``, ``reset``, ``timeout=2``,
``drop_after=3``, ``stream_error=1`` or ``mean_logprob=-3.5`` (an answer rule).

An ``answer`` rule changes what a 200 says, whole or streamed, so a test can hand the
gateway a verifiably bad answer: ``content`` replaces the text, ``tool_arguments`` a tool
call's arguments (on OpenAI and vLLM a request with ``tools`` but no forced choice then
calls its first tool), ``finish_reason`` is one of ``stop``, ``length`` or ``tool_calls``
(each dialect spells it its own way), and ``mean_logprob`` is the mean token log-probability
the logprobs report (OpenAI and vLLM).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, cast

import orjson

__all__ = ["FaultBook", "FaultRule", "parse_header", "parse_rule"]

FaultKind = Literal["status", "timeout", "reset", "drop_after", "stream_error", "answer"]
_KINDS = ("status", "timeout", "reset", "drop_after", "stream_error", "answer")
# An `answer` fault's finish reasons (what the engine can plan).
_ANSWER_FIELDS = frozenset({"content", "tool_arguments", "tool_name", "finish_reason", "mean_logprob"})
_FINISH_REASONS = ("stop", "length", "tool_calls")
_STREAM_KINDS = ("drop_after", "stream_error")
_API_PREFIXES = ("/v1/", "/v1beta/")


@dataclass(frozen=True, slots=True)
class FaultRule:
    """One fault to inject into matching requests."""

    kind: FaultKind
    status: int = 500
    retry_after: float | None = None
    retry_after_ms: int | None = None
    message: str | None = None
    type: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    chunks: int = 0
    after_chunks: int = 0
    count: int = 1
    model: str | None = None
    path: str | None = None
    # `answer`: the output that replaces the planned one (OpenAI dialects), for a test that needs a
    # verifiably bad answer: text content, or a tool call with these arguments; and why it stopped.
    content: str | None = None
    tool_arguments: str | None = None
    tool_name: str | None = None
    finish_reason: str | None = None
    # The mean token log-probability the answer's logprobs report (OpenAI and vLLM), e.g. -3.5.
    mean_logprob: float | None = None

    def matches(self, path: str, model: str | None, *, stream: bool) -> bool:
        """True when this rule applies to a request."""
        if self.kind in _STREAM_KINDS and not stream:
            return False
        if self.path is None:
            if not path.startswith(_API_PREFIXES):
                return False
        elif self.path != path:
            return False
        return self.model is None or self.model == model

    def response_headers(self) -> list[tuple[str, str]]:
        """Extra headers for a status fault: retry hints first, then the rule's own."""
        out: list[tuple[str, str]] = []
        if self.retry_after is not None:
            value = self.retry_after
            out.append(("retry-after", str(int(value)) if value == int(value) else str(value)))
        if self.retry_after_ms is not None:
            out.append(("retry-after-ms", str(self.retry_after_ms)))
        out.extend((k.lower(), str(v)) for k, v in self.headers.items())
        return out

    def to_json(self) -> dict[str, Any]:
        """The rule as the JSON object that would recreate it."""
        defaults = FaultRule(kind=self.kind)
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name == "kind" or getattr(self, f.name) != getattr(defaults, f.name)
        }


_NUMBERS: dict[str, type] = {
    "status": int,
    "retry_after": float,
    "retry_after_ms": int,
    "seconds": float,
    "chunks": int,
    "after_chunks": int,
    "count": int,
    "mean_logprob": float,
}
_STRINGS = (
    "message",
    "type",
    "code",
    "model",
    "path",
    "content",
    "tool_arguments",
    "tool_name",
    "finish_reason",
)


def parse_rule(raw: object) -> FaultRule:
    """Validate a JSON rule; raise ValueError naming the bad field."""
    if not isinstance(raw, Mapping):
        raise ValueError("a fault rule must be a JSON object")
    kind = raw.get("kind", "status" if "status" in raw else "answer" if _ANSWER_FIELDS & raw.keys() else None)
    if kind not in _KINDS:
        raise ValueError(f"fault 'kind' must be one of {', '.join(_KINDS)}")
    values: dict[str, Any] = {"kind": kind}
    for key, value in raw.items():
        if key == "kind":
            continue
        if key in _NUMBERS and value is None and key == "mean_logprob":
            continue
        if key in _NUMBERS:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"fault field '{key}' must be a number")
            values[key] = _NUMBERS[key](value)
        elif key in _STRINGS:
            if value is not None and not isinstance(value, str):
                raise ValueError(f"fault field '{key}' must be a string")
            values[key] = value
        elif key == "headers":
            if not isinstance(value, Mapping):
                raise ValueError("fault field 'headers' must be an object")
            values[key] = {str(k): str(v) for k, v in value.items()}
        else:
            raise ValueError(f"unknown fault field '{key}'")
    rule = FaultRule(**values)
    if not 100 <= rule.status <= 599:
        raise ValueError("fault field 'status' must be an HTTP status code")
    if rule.count == 0 or rule.count < -1:
        raise ValueError("fault field 'count' must be positive or -1")
    if rule.finish_reason is not None and rule.finish_reason not in _FINISH_REASONS:
        raise ValueError(f"fault field 'finish_reason' must be one of {', '.join(_FINISH_REASONS)}")
    if (
        rule.kind == "answer"
        and rule.content is None
        and rule.tool_arguments is None
        and rule.mean_logprob is None
    ):
        raise ValueError("an 'answer' fault needs 'content', 'tool_arguments' or 'mean_logprob'")
    if rule.mean_logprob is not None and not rule.mean_logprob <= 0:
        raise ValueError("fault field 'mean_logprob' must be 0 or below")
    return rule


_SHORT_KEYS = {"timeout": "seconds", "drop_after": "chunks", "stream_error": "after_chunks"}


def parse_header(value: str) -> FaultRule:
    """Parse an ``x-sandbox-fault`` header: a JSON rule or the ``key=value,...`` short form."""
    value = value.strip()
    if value.startswith("{"):
        try:
            return parse_rule(orjson.loads(value))
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"x-sandbox-fault is not valid JSON: {exc}") from exc
    raw: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        key, sep, text = part.partition("=")
        key = key.strip()
        if not sep:
            if key.isdigit():
                raw.update(kind="status", status=int(key))
            else:
                raw["kind"] = key
            continue
        if key in _SHORT_KEYS:
            raw.setdefault("kind", key)
            key = _SHORT_KEYS[key]
        elif key == "status":
            raw.setdefault("kind", "status")
        raw[key] = _scalar(text.strip()) if key not in _STRINGS else text.strip()
    return parse_rule(raw)


def _scalar(text: str) -> object:
    try:
        return cast(object, orjson.loads(text))
    except orjson.JSONDecodeError:
        return text


class FaultBook:
    """Pending fault rules in order, plus random overloads (503 by default) at a seeded rate."""

    def __init__(self, *, fault_rate: float = 0.0, seed: int = 0, random_status: int = 503) -> None:
        self._rules: list[FaultRule] = []
        self._rate = fault_rate
        self._random_status = random_status
        self._rng = random.Random(seed ^ 0xFA17)

    @property
    def rules(self) -> list[FaultRule]:
        """The pending rules, first-matching first."""
        return list(self._rules)

    def add(self, rules: list[FaultRule]) -> None:
        """Queue rules after the ones already pending."""
        self._rules.extend(rules)

    def clear(self) -> None:
        """Drop every pending rule."""
        self._rules.clear()

    def take(self, path: str, model: str | None, *, stream: bool) -> FaultRule | None:
        """Return the fault for one request (using up one of its count), or None."""
        for i, rule in enumerate(self._rules):
            if rule.matches(path, model, stream=stream):
                if rule.count == 1:
                    del self._rules[i]
                elif rule.count > 1:
                    self._rules[i] = replace(rule, count=rule.count - 1)
                return rule
        if self._rate > 0 and path.startswith(_API_PREFIXES) and self._rng.random() < self._rate:
            return FaultRule(kind="status", status=self._random_status)
        return None
