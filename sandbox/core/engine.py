"""The dialect-neutral core: admit a request, plan its output, pace it, and count it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from sandbox.core.latency import LatencyProfile
from sandbox.core.prefix_cache import CachePolicy, PrefixCache
from sandbox.core.stats import EngineStats, ModelStats
from sandbox.core.textgen import TextGenerator
from sandbox.core.tokens import Prompt, count_tokens, split_tokens

__all__ = ["Choice", "Engine", "GenerationRequest", "Plan", "Run", "ToolCallSpec"]

FinishReason = Literal["stop", "length", "tool_calls"]


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """A function the reply must call (``tool_choice`` required or named)."""

    name: str
    parameters: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """What any dialect asks the engine for, after translating its own request."""

    model: str
    prompt: Prompt
    n: int = 1
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    tool: ToolCallSpec | None = None
    # vLLM's `ignore_eos` sampling parameter: generate until `max_tokens`, past the natural end.
    ignore_eos: bool = False
    # Cached prompt tokens the dialect worked out itself (Anthropic's explicit
    # breakpoints); None looks the prompt up in the shared prefix cache.
    cached_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    """One planned choice: text pieces, or a tool call's argument pieces."""

    index: int
    pieces: tuple[str, ...]
    text: str
    finish_reason: FinishReason
    tool_name: str | None = None
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a dialect needs to answer: output, token counts and timing."""

    prompt_tokens: int
    hit_tokens: int
    cached_tokens: int
    choices: tuple[Choice, ...]
    ttft_s: float
    inter_token_s: float

    @property
    def completion_tokens(self) -> int:
        """Output tokens over all choices (each choice is billed)."""
        return sum(c.tokens for c in self.choices)

    @property
    def decode_s(self) -> float:
        """Seconds after the first token until the longest choice is done."""
        longest = max((len(c.pieces) for c in self.choices), default=0)
        return self.inter_token_s * max(longest - 1, 0)


class Run:
    """One admitted request: sleeps to its modelled deadlines and records its stats."""

    __slots__ = ("_stats", "admitted", "instant", "plan")

    def __init__(self, stats: ModelStats, plan: Plan, *, instant: bool) -> None:
        self._stats = stats
        self.plan = plan
        self.instant = instant
        self.admitted = time.monotonic()

    async def until_token(self, index: int) -> None:
        """Sleep until output token ``index`` (0 = the first) is due."""
        if self.instant:
            return
        due = self.admitted + self.plan.ttft_s + self.plan.inter_token_s * index
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def until_done(self) -> None:
        """Sleep until the whole output is due (non-streaming answers)."""
        if not self.instant:
            longest = max((len(c.pieces) for c in self.plan.choices), default=1)
            await self.until_token(max(longest - 1, 0))

    def finish(self, *, aborted: bool = False) -> None:
        """Count the request's tokens, latencies and finish reasons."""
        plan, stats = self.plan, self._stats
        stats.prompt_tokens += plan.prompt_tokens
        stats.generation_tokens += plan.completion_tokens
        stats.cache_queries += plan.prompt_tokens
        stats.cache_hits += plan.hit_tokens
        stats.ttft.observe(plan.ttft_s)
        for choice in plan.choices:
            stats.inter_token.observe(plan.inter_token_s, len(choice.pieces) - 1)
            stats.finish("abort" if aborted else _ENGINE_REASON[choice.finish_reason])
        stats.e2e.observe(time.monotonic() - self.admitted)


_ENGINE_REASON = {"stop": "stop", "length": "length", "tool_calls": "stop"}


class Engine:
    """Shared by every dialect: prefix cache, text generator, latency profile and stats."""

    def __init__(
        self,
        *,
        profile: LatencyProfile,
        policy: CachePolicy,
        cache: PrefixCache,
        generator: TextGenerator,
        stats: EngineStats,
        max_num_seqs: int | None = None,
    ) -> None:
        self.profile = profile
        self.policy = policy
        self.cache = cache
        self.generator = generator
        self.stats = stats
        self._slots = asyncio.Semaphore(max_num_seqs) if max_num_seqs else None

    def plan(self, request: GenerationRequest) -> Plan:
        """Look the prompt up in the prefix cache and decide every choice's output."""
        prompt = request.prompt
        n_prompt = len(prompt)
        if request.cached_tokens is not None:
            hit = cached = request.cached_tokens
        else:
            hit = self.cache.match(prompt.tokens) if self.policy.cacheable(n_prompt) else 0
            cached = self.policy.reported(hit)
        choices = tuple(self._choice(request, i) for i in range(request.n))
        return Plan(
            prompt_tokens=n_prompt,
            hit_tokens=hit,
            cached_tokens=cached,
            choices=choices,
            ttft_s=self.profile.time_to_first_token(n_prompt - cached),
            inter_token_s=self.profile.inter_token_s,
        )

    def _choice(self, request: GenerationRequest, index: int) -> Choice:
        digest = request.prompt.digest
        if request.tool is not None:
            arguments = self.generator.tool_arguments(
                digest, request.tool.parameters, index=index, request_seed=request.seed
            )
            pieces = tuple(split_tokens(arguments))
            tokens = len(pieces) + count_tokens(request.tool.name) + 1
            return Choice(index, pieces, arguments, "tool_calls", request.tool.name, tokens)
        done = self.generator.complete(
            digest,
            index=index,
            request_seed=request.seed,
            max_tokens=request.max_tokens,
            stop=request.stop,
            ignore_eos=request.ignore_eos,
        )
        return Choice(index, done.pieces, done.text, done.finish_reason, None, len(done.pieces))

    @asynccontextmanager
    async def run(self, request: GenerationRequest) -> AsyncIterator[Run]:
        """Admit ``request`` (queueing past ``max_num_seqs``), plan it and yield its Run."""
        stats = self.stats.model(request.model)
        queued = time.monotonic()
        if self._slots is not None:
            stats.waiting += 1
            try:
                await self._slots.acquire()
            finally:
                stats.waiting -= 1
        stats.running += 1
        held = 0
        try:
            stats.queue.observe(time.monotonic() - queued)
            plan = self.plan(request)
            # The KV cache a running request occupies: its prompt and every choice's output.
            held = self.cache.hold(plan.prompt_tokens + sum(c.tokens for c in plan.choices))
            yield Run(stats, plan, instant=self.profile.instant)
        finally:
            self.cache.release(held)
            stats.running -= 1
            if self._slots is not None:
                self._slots.release()
