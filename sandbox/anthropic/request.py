"""Validate an Anthropic Messages (or count_tokens) request body into MessagesParams.

Unknown top-level fields are rejected (``x: Extra inputs are not permitted``)
as the API does, so an adapter that leaks OpenAI-only fields fails here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.anthropic.errors import invalid
from sandbox.anthropic.options import (
    DOCS,
    json_schema,
    number_option,
    stop_sequences,
    thinking_option,
    tool_choice,
)
from sandbox.anthropic.prompt import RenderedPrompt, render_prompt
from sandbox.core.engine import ToolCallSpec
from sandbox.core.tokens import Tokenizer

__all__ = ["MAX_OUTPUT_TOKENS", "MessagesParams", "parse_messages"]

MAX_OUTPUT_TOKENS = 64_000
_COUNT_FIELDS = {"model", "messages", "system", "tools", "tool_choice", "thinking", "cache_control",
                 "context_management", "mcp_servers", "output_config", "output_format", "speed"}  # fmt: skip
_FIELDS = _COUNT_FIELDS | {"max_tokens", "stop_sequences", "temperature", "top_p", "top_k", "metadata",
                           "stream", "container", "diagnostics", "inference_geo", "service_tier",
                           "user_profile_id", "workspace_id"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class MessagesParams:
    """A validated Messages request."""

    model: str
    rendered: RenderedPrompt
    max_tokens: int
    stop: tuple[str, ...] = ()
    stream: bool = False
    tool: ToolCallSpec | None = None
    tool_mode: str = "auto"
    # None: no thinking; 0: adaptive (the model decides); >0: the budget_tokens.
    thinking_budget: int | None = None
    thinking_display: str = "summarized"
    json_schema: Mapping[str, Any] | None = None


def _select_tool(
    body: Mapping[str, Any], rendered: RenderedPrompt, mode: str, named: str | None
) -> ToolCallSpec | None:
    tools = [t for t in body.get("tools") or () if t.get("type") in (None, "custom")]
    schemas = {str(t["name"]): t.get("input_schema") for t in tools}
    if mode == "tool":
        if named not in schemas:
            raise invalid(f"tool_choice.name: Tool '{named}' not found in provided tools")
        name: str | None = named
    elif mode == "any":
        name = next(iter(schemas), None)
    elif mode == "auto" and rendered.last_role == "user" and not rendered.answers_tools:
        # The sandbox's trigger: the last user turn names a tool verbatim.
        name = next((n for n in schemas if n in rendered.last_user_text), None)
    else:
        name = None
    return None if name is None else ToolCallSpec(name=name, parameters=schemas[name])


def _check_thinking_turn(rendered: RenderedPrompt) -> None:
    last = rendered.last_assistant
    if last is None or not rendered.answers_tools or last[1] in ("thinking", "redacted_thinking"):
        return
    raise invalid(
        f"messages.{last[0]}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        f"`{last[1]}`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
        "recommend you include thinking blocks from previous turns. To avoid this requirement, "
        f"disable `thinking`. Please consult our documentation at {DOCS}"
    )


def parse_messages(
    body: object,
    *,
    tokenizer: Tokenizer,
    max_model_len: int,
    signature_ok: Callable[[str, str], bool] | None = None,
    count_only: bool = False,
) -> MessagesParams:
    """Validate a request body (already parsed JSON); ``count_only`` for count_tokens."""
    if not isinstance(body, Mapping):
        raise invalid("Input should be a valid dictionary or object to extract fields from")
    for key in body:
        if key not in (_COUNT_FIELDS if count_only else _FIELDS):
            raise invalid(f"{key}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model: Field required")
    max_tokens = body.get("max_tokens", 0 if count_only else None)
    if max_tokens is None:
        raise invalid("max_tokens: Field required")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise invalid("max_tokens: Input should be a valid integer")
    if max_tokens < 0:
        raise invalid("max_tokens: Input should be greater than or equal to 0")
    if max_tokens > MAX_OUTPUT_TOKENS:
        raise invalid(
            f"max_tokens: {max_tokens} > {MAX_OUTPUT_TOKENS}, which is the maximum allowed number "
            f"of output tokens for {model}"
        )
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise invalid("metadata: Input should be a valid dictionary")
        for key in metadata:
            if key != "user_id":
                raise invalid(f"metadata.{key}: Extra inputs are not permitted")
    temperature = number_option(body, "temperature", 0, 1)
    number_option(body, "top_p", 0, 1)
    number_option(body, "top_k", 0, None)
    mode, named = tool_choice(body)
    budget, display = thinking_option(body, max_tokens) if not count_only else (None, "summarized")
    rendered, _ = render_prompt(body, tokenizer=tokenizer, tool_choice=mode, signature_ok=signature_ok)
    if budget is not None:
        if temperature is not None and temperature != 1:
            raise invalid(
                "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
                f"documentation at {DOCS}#feature-compatibility"
            )
        if mode in ("any", "tool"):
            raise invalid("Thinking may not be enabled when tool_choice forces tool use.")
        _check_thinking_turn(rendered)
    n_prompt = len(rendered.prompt)
    if n_prompt > max_model_len:
        raise invalid(f"prompt is too long: {n_prompt} tokens > {max_model_len} maximum")
    if n_prompt + max_tokens > max_model_len:
        raise invalid(
            f"input length and `max_tokens` exceed context limit: {n_prompt} + {max_tokens} > "
            f"{max_model_len}, decrease input length or `max_tokens` and try again"
        )
    return MessagesParams(
        model=model,
        rendered=rendered,
        max_tokens=max_tokens,
        stop=stop_sequences(body.get("stop_sequences")),
        stream=bool(body.get("stream")),
        tool=_select_tool(body, rendered, mode, named),
        tool_mode=mode,
        thinking_budget=budget,
        thinking_display=display,
        json_schema=json_schema(body.get("output_config")),
    )
