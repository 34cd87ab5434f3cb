"""Anthropic request options: sampling bounds, tool_choice, thinking, stop sequences, output format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox.anthropic.errors import invalid

__all__ = ["DOCS", "json_schema", "number_option", "stop_sequences", "thinking_option", "tool_choice"]

DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def number_option(body: Mapping[str, Any], name: str, low: float, high: float | None) -> float | None:
    """A numeric option within [low, high] (``high`` None: unbounded), or None when absent."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{name}: Input should be a valid number")
    if value < low:
        raise invalid(f"{name}: Input should be greater than or equal to {low:g}")
    if high is not None and value > high:
        raise invalid(f"{name}: Input should be less than or equal to {high:g}")
    return float(value)


def tool_choice(body: Mapping[str, Any]) -> tuple[str, str | None]:
    """``tool_choice`` as (type, tool name for ``tool``); ``auto`` when absent."""
    choice = body.get("tool_choice")
    if choice is None:
        return "auto", None
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind not in ("auto", "any", "tool", "none"):
        raise invalid(
            f"tool_choice: Input tag '{kind}' found using 'type' does not match any of the expected "
            "tags: 'auto', 'any', 'tool', 'none'"
        )
    name = choice.get("name")
    if kind == "tool" and not isinstance(name, str):
        raise invalid("tool_choice.tool.name: Field required")
    if kind in ("any", "tool") and not body.get("tools"):
        raise invalid("tool_choice may only be specified while providing tools.")
    return str(kind), name if kind == "tool" else None


def thinking_option(body: Mapping[str, Any], max_tokens: int) -> tuple[int | None, str]:
    """``thinking`` as (budget: None off, 0 adaptive, else budget_tokens; display)."""
    thinking = body.get("thinking")
    if thinking is None:
        return None, "summarized"
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind not in ("enabled", "disabled", "adaptive", "between_tools"):
        raise invalid(
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the expected "
            "tags: 'enabled', 'disabled', 'adaptive', 'between_tools'"
        )
    assert isinstance(thinking, Mapping)
    display = str(thinking.get("display") or "summarized")
    if kind != "enabled":
        return (0 if kind == "adaptive" else None), display
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise invalid("thinking.enabled.budget_tokens: Field required")
    if budget < 1024:
        raise invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if max_tokens <= budget:
        raise invalid(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {DOCS}#max-tokens-and-context-window-size"
        )
    return budget, display


def stop_sequences(value: object) -> tuple[str, ...]:
    """``stop_sequences`` as a tuple."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise invalid("stop_sequences: Input should be a valid list")
    if any(not s.strip() for s in value):
        raise invalid("stop_sequences: each stop sequence must contain non-whitespace")
    return tuple(value)


def json_schema(config: object) -> Mapping[str, Any] | None:
    """The JSON schema of ``output_config.format`` (structured outputs), or None."""
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    schema = fmt.get("schema")
    if not isinstance(schema, Mapping):
        raise invalid("output_config.format.schema: Field required")
    return schema
