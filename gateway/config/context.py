"""The context policy (`context:` on a team or on a route in `routing.routes`): what a conversation
may cost in prompt tokens before it goes upstream. Opt in; every field unset changes nothing.

Which block applies is in `gateway.context.policy` (the team's fields over the route's; of two caps,
the lower). Applying it is `gateway.context.apply`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from gateway.config.base import Strict


class ContextConfig(Strict):
    """`max_input_tokens` refuses (400) a prompt above it, or, with `trim: middle-out`, trims it to
    fit; `trim: middle-out` drops the oldest middle turns of a conversation that does not fit the
    answering model's context window or the cap; `on_overflow: trim` makes `auto` keep the model its
    route chose and trim, where `larger_model` (the default) lets it pick a model whose window holds
    the conversation and trims only when none does; `dedupe_tool_outputs` replaces a tool result that
    repeats an earlier one verbatim with a short reference to it."""

    max_input_tokens: int | None = Field(default=None, gt=0)
    trim: Literal["off", "middle-out"] = "off"
    on_overflow: Literal["larger_model", "trim"] = "larger_model"
    dedupe_tool_outputs: bool = False

    @field_validator("trim", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare `off` (and `false`, `no`) as the boolean False.
        return "off" if value is False else value

    @model_validator(mode="after")
    def _overflow_needs_trim(self) -> ContextConfig:
        if self.on_overflow == "trim" and self.trim == "off":
            raise ValueError("on_overflow: trim needs trim: middle-out in the same block")
        return self
