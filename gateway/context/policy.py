"""The context policy on the request path: which block applies to a request (its team's, its
route's, or both combined), the limit it must fit, and the one step that applies it to the body
after the model is chosen and before anything goes upstream.

A team's block overrides its route's field by field (a field the team leaves unset is the route's);
of two `max_input_tokens`, the lower applies: a cap is a limit, and the stricter wins. Token counts
are the shipped o200k_base tokenizer's (`gateway.accounting.estimate`), counted in a worker thread;
a request whose bytes already prove it fits (a token is at least one byte) is never counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Final

import anyio

from gateway.accounting.estimate import count_tokens
from gateway.config.context import ContextConfig
from gateway.config.schema import RoutingConfig
from gateway.context.conversation import request_overhead
from gateway.context.plan import Plan, shrink
from gateway.errors import InvalidRequest
from gateway.models import Model
from pricing.price import Price
from providers.facts import DEFAULT_MAX_OUTPUT
from providers.types import ChatRequest

HEADER: Final = "x-tollgate-context"
# The share of a model's window trimming fills: counts are o200k_base's, and other models'
# tokenizers (Claude's, Llama's) turn the same text into up to ~10% more tokens.
WINDOW_SHARE: Final = 0.9


class ContextRefused(InvalidRequest):
    """A prompt over its context policy's limit, refused before anything went upstream."""

    code = "context_length_exceeded"


def route_context(routing: RoutingConfig, route: str | None) -> ContextConfig | None:
    """The context block of the task route an `auto` request matched, if it has one."""
    if route is None:
        return None
    return next((r.context for r in routing.routes or () if r.name == route), None)


def combine(team: ContextConfig | None, route: ContextConfig | None) -> ContextConfig | None:
    """The block that applies: the team's fields over the route's, the lower of two caps."""
    if team is None or route is None:
        return team or route
    merged = {**route.model_dump(), **team.model_dump(include=team.model_fields_set)}
    caps = [c for c in (team.max_input_tokens, route.max_input_tokens) if c is not None]
    merged["max_input_tokens"] = min(caps) if caps else None
    if merged["trim"] == "off":
        merged["on_overflow"] = "larger_model"  # a route's `trim` switched off by the team
    return ContextConfig.model_validate(merged)


def prefers_trim(policy: ContextConfig | None) -> bool:
    """Whether `auto` keeps the routed model and trims rather than choosing a larger window."""
    return policy is not None and policy.trim == "middle-out" and policy.on_overflow == "trim"


def limit_for(policy: ContextConfig, model: Model, max_output: int | None) -> int | None:
    """The most prompt tokens this request may send: the cap, and with trimming on, what the model's
    window holds beside the answer (what was asked, else a quarter of the window up to 4,096)."""
    limits = [] if policy.max_input_tokens is None else [policy.max_input_tokens]
    if policy.trim == "middle-out":
        window = model.context_window
        answer = max_output if max_output is not None else min(DEFAULT_MAX_OUTPUT, window // 4)
        limits.append(max(0, int(window * WINDOW_SHARE) - answer))
    return min(limits) if limits else None


@dataclass(frozen=True, slots=True)
class ContextChange:
    """What the policy did to one request, for its ledger row and its response header."""

    plan: Plan
    saving_nano: int

    @property
    def flags(self) -> list[str]:
        flags = []
        if self.plan.trimmed_messages:
            flags.append(f"context_trimmed:{self.plan.trimmed_tokens}")
        if self.plan.deduped:
            flags.append(f"context_deduped:{self.plan.deduped}")
        return flags

    @property
    def header(self) -> str:
        """`trimmed=1834 tokens (6 messages); deduped=2 (410 tokens)`."""
        plan, parts = self.plan, []
        if plan.trimmed_messages:
            parts.append(f"trimmed={plan.trimmed_tokens} tokens ({plan.trimmed_messages} messages)")
        if plan.deduped:
            parts.append(f"deduped={plan.deduped} ({plan.deduped_tokens} tokens)")
        return "; ".join(parts)


async def apply_context_policy(
    chat: ChatRequest, policy: ContextConfig | None, model: Model
) -> ContextChange | None:
    """Refuse, trim or dedupe `chat` as its policy says, rewriting its body (the bytes upstream are
    then rebuilt from it); None when nothing changed. Raises `ContextRefused` over the limit."""
    if policy is None:
        return None
    facts = chat.facts
    limit = limit_for(policy, model, facts.max_output)
    over = limit is not None and facts.prompt_bytes > limit
    repeats = policy.dedupe_tool_outputs and _repeats(chat)
    if not over and not repeats:
        return None
    body = chat.body
    plan = await anyio.to_thread.run_sync(
        partial(
            shrink,
            chat.messages,
            count=count_tokens,
            overhead=request_overhead(body, count_tokens),
            limit=limit,
            trim=policy.trim == "middle-out",
            dedupe=policy.dedupe_tool_outputs,
        )
    )
    if limit is not None and plan.after > limit:
        raise ContextRefused(_refusal(policy, plan, limit), param="messages")
    if not plan.changed:
        return None
    chat.body = {**body, "messages": plan.messages}
    chat.raw = b""
    return ContextChange(plan, saving_nano(plan, model.deployments[0].price))


def saving_nano(plan: Plan, price: Price | None) -> int:
    """The tokens left out at the model's input price (its first deployment's), rounded down."""
    if price is None or plan.removed <= 0:
        return 0
    return plan.removed * price.rates_for(plan.before).input // 1_000_000


def _repeats(chat: ChatRequest) -> bool:
    """Whether any tool result repeats an earlier one verbatim (cheap: no tokens are counted)."""
    seen: set[str] = set()
    for message in chat.messages:
        if message.get("role") in ("tool", "function"):
            content = message.get("content")
            key = content if isinstance(content, str) else repr(content)
            if key in seen:
                return True
            seen.add(key)
    return False


def _refusal(policy: ContextConfig, plan: Plan, limit: int) -> str:
    cap = policy.max_input_tokens
    why = (
        f"its context policy's max_input_tokens of {cap}"
        if cap == limit
        else f"the {limit} the model's context window leaves room for"
    )
    if policy.trim == "middle-out":
        return (
            f"this conversation is about {plan.after} prompt tokens even with its middle turns "
            f"trimmed (the system prompt, the first and the latest turns are kept), over {why}"
        )
    return f"this request's prompt is about {plan.after} tokens, over {why}"
