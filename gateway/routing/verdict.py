"""Whether an answer is verifiably bad, judged from the request and the answer alone (no I/O).

Only what the gateway can check without a second opinion counts: the content is not JSON, or breaks
the `response_format` schema, when one was asked; a tool call names a tool not offered or passes
arguments that do not parse or break the tool's `parameters` schema; the answer stopped at `length`
with nothing usable; it is empty; or (opt-in) its mean token log-probability is under a floor. A
refusal is an answer, and so is plain text cut at `length` when no JSON was asked.

The reason codes are what `x-tollgate-escalated`, the ledger and the metrics say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal

import orjson
from jsonschema import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

Reason = Literal["json_schema", "json", "tool_arguments", "truncated", "empty", "low_confidence"]
REASONS: Final[tuple[Reason, ...]] = (
    "json_schema",
    "json",
    "tool_arguments",
    "truncated",
    "empty",
    "low_confidence",
)
MISSING: Final = object()


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: Reason
    detail: str


def judge(
    request: Mapping[str, Any], answer: Mapping[str, Any], *, logprob_floor: float | None = None
) -> Verdict | None:
    """The first problem with any choice of an OpenAI-shaped answer, or None when it holds up."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices:
        return Verdict("empty", "no choices")
    wanted = _wanted_json(request)
    tools = _offered_tools(request)
    for choice in choices:
        if not isinstance(choice, Mapping):
            return Verdict("empty", "a choice that is not an object")
        verdict = _judge_choice(choice, wanted, tools, logprob_floor)
        if verdict is not None:
            return verdict
    return None


def mean_logprob(choice: Mapping[str, Any]) -> float | None:
    """The mean log-probability of a choice's content tokens, when the answer carries them."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list):
        return None
    values = [
        float(v)
        for token in content
        if isinstance(token, Mapping)
        and isinstance(v := token.get("logprob"), int | float)
        and not isinstance(v, bool)
    ]
    return sum(values) / len(values) if values else None


def _judge_choice(
    choice: Mapping[str, Any],
    wanted: tuple[str, Mapping[str, Any] | None] | None,
    tools: dict[str, Mapping[str, Any] | None] | None,
    logprob_floor: float | None,
) -> Verdict | None:
    message = choice.get("message")
    message = message if isinstance(message, Mapping) else {}
    finish = choice.get("finish_reason")
    content = _text(message.get("content"))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        calls = []
    if message.get("refusal"):
        return None  # an answer, though not the one asked for: a larger model would not be checked either
    if not content.strip() and not calls:
        if finish == "length":
            return Verdict("truncated", "stopped at length before any content")
        return Verdict("empty", "no content and no tool calls")
    for call in calls:
        verdict = _judge_call(call, tools, truncated=finish == "length")
        if verdict is not None:
            return verdict
    if wanted is not None and content.strip():
        kind, schema = wanted
        parsed = parse_json(content)
        if parsed is MISSING:
            if finish == "length":
                return Verdict("truncated", "stopped at length inside the JSON")
            return Verdict("json_schema" if kind == "json_schema" else "json", "content is not JSON")
        if schema is not None:
            problem = _violation(schema, parsed)
            if problem is not None:
                return Verdict("json_schema", problem)
    if logprob_floor is not None:
        mean = mean_logprob(choice)
        if mean is not None and mean < logprob_floor:
            return Verdict("low_confidence", f"mean logprob {mean:.2f} < {logprob_floor:g}")
    return None


def _judge_call(
    call: object, tools: dict[str, Mapping[str, Any] | None] | None, *, truncated: bool
) -> Verdict | None:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return Verdict("tool_arguments", "a tool call without a function")
    name = function.get("name")
    if tools is not None and name not in tools:
        return Verdict("tool_arguments", f"calls '{name}', which was not offered")
    arguments = function.get("arguments")
    parsed = parse_json(arguments) if isinstance(arguments, str) else MISSING
    if parsed is MISSING:
        if truncated:
            return Verdict("truncated", f"stopped at length inside the arguments of '{name}'")
        return Verdict("tool_arguments", f"the arguments of '{name}' are not JSON")
    schema = tools.get(str(name)) if tools is not None else None
    if schema is not None:
        problem = _violation(schema, parsed)
        if problem is not None:
            return Verdict("tool_arguments", f"'{name}': {problem}")
    return None


def _wanted_json(request: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None] | None:
    """("json_schema", schema) or ("json_object", None) when the request asks for JSON."""
    response_format = request.get("response_format")
    if not isinstance(response_format, Mapping):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return "json_object", None
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        return "json_schema", schema if isinstance(schema, Mapping) else None
    return None


def _offered_tools(request: Mapping[str, Any]) -> dict[str, Mapping[str, Any] | None] | None:
    """Offered function names and their parameter schemas; None when the request lists none (a
    tool call then cannot be judged by name)."""
    offered: dict[str, Mapping[str, Any] | None] = {}
    for tool in request.get("tools") or ():
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            offered[function["name"]] = parameters if isinstance(parameters, Mapping) else None
    for function in request.get("functions") or ():
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            offered[function["name"]] = parameters if isinstance(parameters, Mapping) else None
    return offered or None


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def parse_json(text: str | bytes) -> Any:
    """The JSON value `text` holds, or `MISSING` (JSON's own `null` is a value, so None cannot say it)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return MISSING


def parse_object(raw: bytes) -> dict[str, Any] | None:
    """A response body as a JSON object, or None when it is not one."""
    body = parse_json(raw)
    return body if isinstance(body, dict) else None


def _violation(schema: Mapping[str, Any], instance: Any) -> str | None:
    """The first way `instance` breaks `schema`; None when it fits or the schema itself is broken
    (that is the client's mistake, and a larger model would not fix it)."""
    validator = _validator(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    if validator is None:
        return None
    error = next(iter(validator.iter_errors(instance)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    return f"schema: {error.message[:120]} at {where}"


@lru_cache(maxsize=256)
def _validator(schema_json: bytes) -> Validator | None:
    """A compiled validator per distinct schema: checking the schema costs more than using it."""
    schema = orjson.loads(schema_json)
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    validator: Validator = cls(schema)
    return validator
