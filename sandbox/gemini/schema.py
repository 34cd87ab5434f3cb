"""Gemini's ``generationConfig`` and ``tools``/``toolConfig``: validation, and the function to call.

Function calling: ``functionCallingConfig.mode`` ``ANY`` calls the first
allowed (or declared) function; ``AUTO`` (the default) and ``VALIDATED`` call
one only when the last user turn names it verbatim; ``NONE`` never does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.core.engine import ToolCallSpec
from sandbox.gemini.errors import invalid

__all__ = ["GenerationOptions", "function_tool", "generation_options", "lower_schema"]

_CONFIG = {"temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences",
           "responseMimeType", "responseSchema", "responseJsonSchema", "thinkingConfig", "presencePenalty",
           "frequencyPenalty", "seed", "responseLogprobs", "logprobs", "responseModalities", "speechConfig",
           "mediaResolution", "enableEnhancedCivicAnswers", "imageConfig"}  # fmt: skip
_MODES = ("MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
_MAX_OUTPUT = 65_536
_WHERE = "GenerateContentRequest.generation_config"


@dataclass(frozen=True, slots=True)
class GenerationOptions:
    """The parts of ``generationConfig`` the sandbox acts on."""

    candidates: int = 1
    max_output_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    json_schema: Mapping[str, Any] | None = None
    thinking_budget: int | None = None
    include_thoughts: bool = False


def lower_schema(schema: Any) -> Any:
    """An OpenAPI-style schema (``"type": "OBJECT"``) with JSON-Schema type names (``"object"``)."""
    if isinstance(schema, Mapping):
        return {
            k: (v.lower() if k == "type" and isinstance(v, str) else lower_schema(v))
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [lower_schema(v) for v in schema]
    return schema


def _get(obj: Mapping[str, Any], name: str) -> Any:
    value = obj.get(name)
    return obj.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)) if value is None else value


def _bounded(config: Mapping[str, Any], name: str, low: float, high: float, *, integer: bool = False) -> Any:
    value = _get(config, name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        raise invalid(
            f"Invalid value at 'generation_config.{name}' ({'TYPE_INT32' if integer else 'TYPE_FLOAT'})"
        )
    if not low <= value <= high:
        raise invalid(f"* {_WHERE}.{name}: must be in the range [{low:g}, {high:g}]\n")
    return value


def generation_options(config: object) -> GenerationOptions:
    """Validate ``generationConfig``."""
    if config is None:
        return GenerationOptions()
    if not isinstance(config, Mapping):
        raise invalid('Invalid JSON payload received. Unknown name "generationConfig": expected an object.')
    allowed = _CONFIG | {re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k) for k in _CONFIG}
    for key in config:
        if key not in allowed:
            raise invalid(
                f'Invalid JSON payload received. Unknown name "{key}" at '
                "'generation_config': Cannot find field."
            )
    _bounded(config, "temperature", 0, 2)
    _bounded(config, "topP", 0, 1)
    max_output = _get(config, "maxOutputTokens")
    if max_output is not None and (isinstance(max_output, bool) or not isinstance(max_output, int)
                                   or not 1 <= max_output <= _MAX_OUTPUT):  # fmt: skip
        raise invalid(
            f"Unable to submit request because it has a maxOutputTokens value of {max_output} but the "
            f"supported range is from 1 (inclusive) to {_MAX_OUTPUT + 1} (exclusive). Update the value "
            "and try again."
        )
    stop = _get(config, "stopSequences") or []
    if not isinstance(stop, list) or len(stop) > 5 or not all(isinstance(s, str) for s in stop):
        raise invalid(f"* {_WHERE}.stop_sequences: at most 5 stop sequences are supported\n")
    schema = None
    if _get(config, "responseMimeType") == "application/json":
        schema = _get(config, "responseJsonSchema") or lower_schema(_get(config, "responseSchema"))
        schema = schema or {"type": "object"}
    thinking = _get(config, "thinkingConfig") or {}
    budget = _get(thinking, "thinkingBudget")
    if budget is None and _get(thinking, "thinkingLevel") is not None:
        budget = -1
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < -1):
        raise invalid(f"* {_WHERE}.thinking_config.thinking_budget: must be -1, 0 or a positive number\n")
    seed = _get(config, "seed")
    return GenerationOptions(
        candidates=_bounded(config, "candidateCount", 1, 8, integer=True) or 1,
        max_output_tokens=max_output,
        stop=tuple(stop),
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        json_schema=schema,
        thinking_budget=budget,
        include_thoughts=bool(_get(thinking, "includeThoughts")),
    )


def _declarations(tools: object) -> dict[str, Any]:
    if tools is None:
        return {}
    if not isinstance(tools, list):
        raise invalid(
            'Invalid JSON payload received. Unknown name "tools": Proto field is not repeating, '
            "cannot start list."
        )
    functions: dict[str, Any] = {}
    for i, tool in enumerate(tools):
        declared = _get(tool, "functionDeclarations") if isinstance(tool, Mapping) else None
        for j, declaration in enumerate(declared or ()):
            name = declaration.get("name") if isinstance(declaration, Mapping) else None
            if not isinstance(name, str) or not _NAME.match(name):
                raise invalid(
                    f"* GenerateContentRequest.tools[{i}].function_declarations[{j}].name: Invalid function "
                    "name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contains "
                    "underscores, dots and dashes, with a maximum length of 64.\n"
                )
            schema = _get(declaration, "parametersJsonSchema") or lower_schema(
                _get(declaration, "parameters")
            )
            functions[name] = schema
    return functions


def function_tool(body: Mapping[str, Any], last_user_text: str) -> ToolCallSpec | None:
    """The function the reply must call, if any (see the module docstring)."""
    functions = _declarations(_get(body, "tools"))
    config = _get(_get(body, "toolConfig") or {}, "functionCallingConfig") or {}
    mode = config.get("mode") or "AUTO"
    if mode not in _MODES:
        raise invalid(
            "Invalid value at 'tool_config.function_calling_config.mode' "
            f'(type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), "{mode}"'
        )
    allowed = [n for n in _get(config, "allowedFunctionNames") or functions if n in functions]
    if not functions or mode == "NONE":
        return None
    if mode == "ANY":
        name = allowed[0] if allowed else None
    else:
        name = next((n for n in allowed if n in last_user_text), None)
    return None if name is None else ToolCallSpec(name=name, parameters=functions[name])
