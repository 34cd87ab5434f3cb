"""What caching saves on a realistic workload: `python -m benchmarks.caching`, or `measure()`.

The workload is replayed three times against the sandbox's Anthropic dialect (instant profile, its
prompt cache emptied before each run):

1. no caching: the OpenAI request translated as it is;
2. prompt caching: `place_cache_breakpoints` marks each translated request;
3. prompt caching plus the response cache: a deterministic request already answered is served from
   a `ResponseCache` (in memory) and never reaches the upstream.

The workload: a few applications, each with its own long system prompt. Each application has chat
sessions (several turns, temperature 0.7, every question new) and FAQ traffic (one turn,
temperature 0, questions drawn with a skew from a small pool, so popular ones repeat). Requests are
interleaved and seeded, so every run sees the same sequence. Each answer's usage is priced at Claude
Sonnet's rates ($3 input, $3.75 5-minute cache write, $0.30 cache read, $15 output per million
tokens) with `pricing.cost.cost_nano`. A response-cache hit costs nothing.

Standalone: no gateway, no database. The lead may later route the same workload through the gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from gateway.caching.keys import is_cacheable, response_cache_key
from gateway.caching.response_cache import CachedAnswer, ResponseCache
from gateway.state.memory import MemoryStateStore
from pricing.cost import cost_nano
from pricing.money import NANO_PER_USD
from pricing.price import Price
from providers.anthropic import from_anthropic_response, from_anthropic_usage, to_anthropic_request
from providers.anthropic.caching import min_cache_tokens, place_cache_breakpoints
from sandbox.server import SandboxServer
from usage import Usage

MODEL = "claude-sonnet-4-6"
SONNET = Price.per_mtok(input="3", cache_write="3.75", cached_input="0.30", output="15", source="bench")
HEADERS = {"x-api-key": "bench", "anthropic-version": "2023-06-01"}
RUNS = ("no caching", "prompt caching", "prompt + response cache")
_WORDS = (
    "policy refund invoice account billing customer support agent escalate verify identity order "
    "shipping return warranty credit charge dispute region tax receipt plan upgrade cancel notice "
    "period balance payment method card bank transfer limit review approve deny record audit"
).split()


@dataclass(frozen=True, slots=True)
class Step:
    """One request of the workload: the OpenAI body and, for chats, the session it continues."""

    app: str
    body: dict[str, Any]
    session: int | None = None


@dataclass(slots=True)
class Tally:
    requests: int = 0
    upstream: int = 0
    cacheable: int = 0
    response_hits: int = 0
    with_cache_read: int = 0
    prompt_tokens: int = 0
    uncached_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    cost_nano: int = 0
    # What the response-cache hits would have cost had they gone upstream.
    avoided_nano: int = 0

    def add(self, usage: Usage) -> int:
        self.upstream += 1
        self.with_cache_read += usage.cached_tokens > 0
        self.prompt_tokens += usage.prompt_tokens
        self.cache_read_tokens += usage.cached_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        self.uncached_tokens += usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens
        self.output_tokens += usage.completion_tokens
        cost = price(usage)
        self.cost_nano += cost
        return cost


def price(usage: Usage) -> int:
    return cost_nano(usage, SONNET)


@dataclass(frozen=True, slots=True)
class Workload:
    """The interleaved request sequence. A chat turn is an `int`, its session's index, resolved at
    run time because its history holds the replies; an FAQ request is a ready `Step`."""

    events: list[Step | int]
    # Per chat session: its app, that app's system prompt, and the seed of its questions.
    sessions: list[tuple[str, str, int]]


def workload(*, seed: int, apps: int, sessions: int, faq: int) -> Workload:
    rng = random.Random(seed)
    systems = {f"app-{a}": _words(rng, 1200 + 1500 * a) for a in range(apps)}
    pool = {app: [_words(rng, 12) + "?" for _ in range(25)] for app in systems}
    weights = [1 / (rank + 1) ** 1.1 for rank in range(25)]  # Zipf-like: a few questions dominate
    events: list[Step | int] = []
    for _ in range(faq):
        app = rng.choice(list(systems))
        question = rng.choices(pool[app], weights)[0]
        messages = [{"role": "system", "content": systems[app]}, {"role": "user", "content": question}]
        events.append(Step(app, {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": 120}))
    plans = []
    for session in range(sessions):
        app = rng.choice(list(systems))
        plans.append((app, systems[app], rng.randrange(2**32)))
        events += [session] * rng.randint(3, 6)
    rng.shuffle(events)
    return Workload(events, plans)


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(count))


async def replay(
    http: httpx.AsyncClient, work: Workload, *, prompt_cache: bool, response_cache: bool
) -> Tally:
    tally = Tally()
    cache = ResponseCache(MemoryStateStore(), ttl_seconds=3600, max_body_bytes=1 << 20)
    histories: dict[int, list[dict[str, Any]]] = {}
    questions = [random.Random(seed) for _, _, seed in work.sessions]
    minimum = min_cache_tokens(MODEL)
    for event in work.events:
        if isinstance(event, int):
            app, system, _ = work.sessions[event]
            history = histories.setdefault(event, [{"role": "system", "content": system}])
            history.append({"role": "user", "content": _words(questions[event], 15) + "?"})
            step = Step(
                app, {"model": MODEL, "messages": list(history), "temperature": 0.7, "max_tokens": 160}
            )
        else:
            step = event
        answer = await _answer(http, step, tally, cache if response_cache else None, prompt_cache, minimum)
        if isinstance(event, int):
            histories[event].append({"role": "assistant", "content": answer})
    return tally


async def _answer(
    http: httpx.AsyncClient,
    step: Step,
    tally: Tally,
    cache: ResponseCache | None,
    prompt_cache: bool,
    minimum: int,
) -> str:
    """One request: from the response cache when it can be, else upstream; the reply's text."""
    tally.requests += 1
    key = response_cache_key(step.app, step.body)
    cacheable = cache is not None and is_cacheable(step.body, opt_in=False)
    tally.cacheable += cacheable
    hit = await cache.get(key) if cache is not None and cacheable else None
    if hit is not None:
        tally.response_hits += 1
        tally.avoided_nano += price(hit.usage)
        return str(orjson.loads(hit.body)["choices"][0]["message"]["content"])
    request = to_anthropic_request(step.body, model=MODEL, default_max_tokens=256)
    if prompt_cache:
        request = place_cache_breakpoints(request, min_tokens=minimum)
    response = await http.post("/v1/messages", json=request)
    response.raise_for_status()
    message = response.json()
    usage = from_anthropic_usage(message.get("usage"))
    tally.add(usage)
    completion = from_anthropic_response(message, created=0)
    if cache is not None and cacheable:
        await cache.put(key, CachedAnswer(body=orjson.dumps(completion), model=MODEL, usage=usage))
    return str(completion["choices"][0]["message"]["content"])


async def _measure(*, seed: int, apps: int, sessions: int, faq: int) -> dict[str, Any]:
    work = workload(seed=seed, apps=apps, sessions=sessions, faq=faq)
    runs: dict[str, Tally] = {}
    async with SandboxServer(dialect="anthropic", profile="instant") as sandbox:
        async with httpx.AsyncClient(base_url=sandbox.base_url, headers=HEADERS, timeout=30) as http:
            for name, prompt, response in zip(RUNS, (False, True, True), (False, False, True), strict=True):
                (await http.post("/_sandbox/reset")).raise_for_status()
                runs[name] = await replay(http, work, prompt_cache=prompt, response_cache=response)
    baseline = runs[RUNS[0]].cost_nano
    return {
        "model": MODEL,
        "requests": len(work.events),
        "chat_turns": sum(isinstance(e, int) for e in work.events),
        "faq_requests": sum(isinstance(e, Step) for e in work.events),
        "runs": {name: _figures(tally, baseline) for name, tally in runs.items()},
    }


def _figures(tally: Tally, baseline_nano: int) -> dict[str, Any]:
    return {
        "requests": tally.requests,
        "upstream_calls": tally.upstream,
        "prompt_tokens": tally.prompt_tokens,
        "uncached_input_tokens": tally.uncached_tokens,
        "cache_write_tokens": tally.cache_write_tokens,
        "cache_read_tokens": tally.cache_read_tokens,
        "output_tokens": tally.output_tokens,
        "cost_usd": tally.cost_nano / NANO_PER_USD,
        "saving_usd": (baseline_nano - tally.cost_nano) / NANO_PER_USD,
        "saving_pct": 100 * (baseline_nano - tally.cost_nano) / baseline_nano if baseline_nano else 0.0,
        "prompt_cache_token_hit_rate": tally.cache_read_tokens / tally.prompt_tokens
        if tally.prompt_tokens
        else 0,
        "prompt_cache_request_hit_rate": tally.with_cache_read / tally.upstream if tally.upstream else 0,
        "response_cache_hit_rate": tally.response_hits / tally.requests if tally.requests else 0,
        "response_cache_hit_rate_cacheable": tally.response_hits / tally.cacheable if tally.cacheable else 0,
        "response_cache_avoided_usd": tally.avoided_nano / NANO_PER_USD,
    }


def measure(*, seed: int = 7, apps: int = 3, sessions: int = 40, faq: int = 200) -> dict[str, Any]:
    """Run the three replays and return their figures (costs in USD, rates as fractions)."""
    return asyncio.run(_measure(seed=seed, apps=apps, sessions=sessions, faq=faq))


def render(result: dict[str, Any]) -> str:
    runs = result["runs"]
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("upstream calls", lambda r: f"{r['upstream_calls']:,}"),
        ("input tokens, uncached", lambda r: f"{r['uncached_input_tokens']:,}"),
        ("input tokens, cache write", lambda r: f"{r['cache_write_tokens']:,}"),
        ("input tokens, cache read", lambda r: f"{r['cache_read_tokens']:,}"),
        ("output tokens", lambda r: f"{r['output_tokens']:,}"),
        ("cost (USD)", lambda r: f"${r['cost_usd']:.4f}"),
        ("saving vs no caching", lambda r: f"${r['saving_usd']:.4f} ({r['saving_pct']:.1f}%)"),
        ("prompt cache: input tokens read", lambda r: f"{100 * r['prompt_cache_token_hit_rate']:.1f}%"),
        ("prompt cache: calls with a read", lambda r: f"{100 * r['prompt_cache_request_hit_rate']:.1f}%"),
        ("response cache: hits / requests", lambda r: f"{100 * r['response_cache_hit_rate']:.1f}%"),
        (
            "response cache: hits / cacheable",
            lambda r: f"{100 * r['response_cache_hit_rate_cacheable']:.1f}%",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    cells = [[cell(run) for run in runs.values()] for _, cell in rows]
    columns = [max(len(name), *(len(row[i]) for row in cells)) for i, name in enumerate(runs)]
    lines = [
        f"\ncaching ({result['requests']} requests to {result['model']}: {result['chat_turns']} chat turns, "
        f"{result['faq_requests']} FAQ at temperature 0; Sonnet prices $3 / $3.75 / $0.30 / $15 per MTok)",
        " " * width + " | " + " | ".join(name.rjust(w) for name, w in zip(runs, columns, strict=True)),
    ]
    for (name, _), row in zip(rows, cells, strict=True):
        lines.append(
            name.ljust(width) + " | " + " | ".join(v.rjust(w) for v, w in zip(row, columns, strict=True))
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--apps", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--faq", type=int, default=200)
    args = parser.parse_args()
    print(render(measure(seed=args.seed, apps=args.apps, sessions=args.sessions, faq=args.faq)))


if __name__ == "__main__":
    main()
