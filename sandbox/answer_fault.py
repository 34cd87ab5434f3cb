"""An `answer` fault (`sandbox.faults`): the planned output replaced by the rule's, so a test can make
one model answer badly (not JSON, broken tool arguments, cut at `length`, empty, unsure: its logprobs'
mean is the rule's `mean_logprob`) and deterministically."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from sandbox.core.engine import Choice, FinishReason, Plan
from sandbox.core.tokens import split_tokens
from sandbox.faults import FaultRule

__all__ = ["answered"]


def answered(plan: Plan, rule: FaultRule) -> Plan:
    """`plan` with every choice's output replaced by the rule's content or tool call."""
    return replace(plan, choices=tuple(_choice(c, rule) for c in plan.choices))


def _choice(choice: Choice, rule: FaultRule) -> Choice:
    if rule.content is None and rule.tool_arguments is None:  # mean_logprob alone: the text stands
        return replace(choice, finish_reason=cast(FinishReason, rule.finish_reason or choice.finish_reason))
    if rule.tool_arguments is not None:
        text, name, default = rule.tool_arguments, rule.tool_name or choice.tool_name or "tool", "tool_calls"
    else:
        text, name, default = rule.content or "", None, "stop"
    pieces = tuple(split_tokens(text))
    finish = cast(FinishReason, rule.finish_reason or default)
    return Choice(choice.index, pieces, text, finish, name, len(pieces) + (1 if name else 0))
