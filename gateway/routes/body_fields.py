"""The checks every OpenAI-shaped completion body shares (chat and legacy completions): the model,
the scalar sampling fields, `stop` and `stream_options`, each refused the way OpenAI words it.

Each endpoint declares its own field table; the checking is written once here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import InvalidRequest


@dataclass(frozen=True, slots=True)
class FieldRules:
    numbers: Mapping[str, tuple[float, float]]
    ints: Mapping[str, tuple[int, int]]
    bools: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    strings: tuple[str, ...] = ()


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def required_model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if model is None:
        raise InvalidRequest(
            "you must provide a model parameter", param="model", code="missing_required_parameter"
        )
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string", param="model", code="invalid_type")
    return model


def check_fields(body: dict[str, Any], rules: FieldRules) -> None:
    for name, (low, high) in rules.numbers.items():
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidRequest(f"'{name}' must be a number", param=name, code="invalid_type")
        if not low <= value <= high:
            raise InvalidRequest(
                f"'{name}' must be between {low:g} and {high:g}; got {value}",
                param=name,
                code="invalid_value",
            )
    for name, (ilow, ihigh) in rules.ints.items():
        value = body.get(name)
        if value is None:
            continue
        if not is_int(value):
            raise InvalidRequest(f"'{name}' must be an integer", param=name, code="invalid_type")
        if not ilow <= value <= ihigh:
            raise InvalidRequest(
                f"'{name}' must be between {ilow} and {ihigh}; got {value}",
                param=name,
                code="invalid_value",
            )
    for names, kind, article in ((rules.bools, bool, "a boolean"), (rules.objects, dict, "an object")):
        for name in names:
            value = body.get(name)
            if value is not None and not isinstance(value, kind):
                raise InvalidRequest(f"'{name}' must be {article}", param=name, code="invalid_type")
    for name in rules.strings:
        value = body.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(f"'{name}' must be a string", param=name, code="invalid_type")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str):
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 4:
            raise InvalidRequest(
                "'stop' must be a string or an array of up to 4 strings", param="stop", code="invalid_type"
            )


def stream_flags(body: dict[str, Any]) -> tuple[bool, bool]:
    """Whether the body streams, and whether it asked for the usage chunk."""
    stream = body.get("stream") is True
    options = body.get("stream_options")
    if options is None:
        return stream, False
    if not isinstance(options, dict):
        raise InvalidRequest(
            "'stream_options' must be an object", param="stream_options", code="invalid_type"
        )
    if not stream:
        raise InvalidRequest("'stream_options' is only allowed when 'stream' is true", param="stream_options")
    if "include_usage" in options and not isinstance(options["include_usage"], bool):
        raise InvalidRequest(
            "'stream_options.include_usage' must be a boolean",
            param="stream_options.include_usage",
            code="invalid_type",
        )
    return stream, options.get("include_usage") is True
