"""Prefix affinity vs round robin on three sandbox vLLM replicas: `python -m benchmarks.affinity`.

A multi-tenant workload (8 tenants, each with its own ~1,500-token system prompt, 400 requests in a
seeded random interleaving, 8 at a time) is routed three ways over the same three replicas: round
robin, least loaded (`choose(..., affinity=False)`), and prefix affinity with bounded load
(`choose(..., affinity=True)`). Each replica's prefix cache holds 512 blocks of 16 tokens (~8,200
tokens, about five tenants' prompts), so a replica that sees every tenant evicts them. The hit rate
is vLLM's own: the deltas of `vllm:prefix_cache_hits_total` over `vllm:prefix_cache_queries_total`
summed over the replicas' `/metrics`, taken before and after each run.

The sandboxes run the `instant` profile (no modelled latency), so the loads that bounded load sees
are the gateway's own in-flight requests against 4 batch slots a replica, and the production load
weights apply (the sandbox's `kv_cache_usage_perc`, like vLLM's, counts the blocks running requests
hold).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

from local_backend.affinity import preference, prefix_key
from local_backend.choice import choose
from local_backend.fleet import Fleet, Replica
from local_backend.metrics import Snapshot, scrape
from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer

MODEL = "llama-3.1-8b-instruct"
REPLICAS = 3
SLOTS = 4
CACHE_BLOCKS = 512
_WORDS = (
    "policy invoice refund account order shipping return warranty billing support contract "
    "customer product service delivery payment credit access report team schedule holiday office "
    "travel expense approval manager review security password device network laptop printer"
).split()

Pick = Callable[[Fleet, str, int], Replica]


def system_prompt(tenant: int, *, tokens: int = 1500) -> str:
    rng = random.Random(tenant)
    words = " ".join(rng.choice(_WORDS) for _ in range(tokens - 20))
    return f"You are the assistant of tenant {tenant}. Follow its handbook below exactly.\n{words}"


def workload(*, tenants: int, requests: int, seed: int = 7) -> list[tuple[str, str]]:
    """(system prompt, user message) pairs; tenants interleaved at random."""
    rng = random.Random(seed)
    systems = [system_prompt(t) for t in range(tenants)]
    return [
        (systems[rng.randrange(tenants)], f"Question {n}: " + " ".join(rng.choices(_WORDS, k=25)))
        for n in range(requests)
    ]


def round_robin() -> Pick:
    counter = itertools.count()
    return lambda fleet, _prefix, _n: fleet.replicas[next(counter) % len(fleet.replicas)]


def chosen(*, affinity: bool) -> Pick:
    def pick(fleet: Fleet, prefix: str, _n: int) -> Replica:
        replica = choose(fleet, prefix, affinity=affinity)
        assert replica is not None, "no healthy replica"
        return replica

    return pick


async def run_policy(
    name: str, pick: Pick, servers: list[SandboxServer], requests: list[tuple[str, str]], concurrency: int
) -> dict[str, Any]:
    replicas = [Replica(f"r{i}", s.base_url, capacity=SLOTS) for i, s in enumerate(servers)]
    fleet = Fleet(MODEL, replicas)
    names = [r.name for r in replicas]
    sent: Counter[str] = Counter()
    off_home = 0
    async with httpx.AsyncClient(timeout=30) as client:
        for server in servers:
            (await client.post(f"{server.base_url}/_sandbox/reset")).raise_for_status()
        before = [await scrape(client, f"{r.base_url}/metrics") for r in replicas]
        await fleet.start(client, interval_s=0.05)
        queue = list(enumerate(requests))
        queue.reverse()

        async def worker() -> None:
            nonlocal off_home
            while queue:
                n, (system, user) = queue.pop()
                prefix = f"{system}\n{user}"
                replica = pick(fleet, prefix, n)
                sent[replica.name] += 1
                key = prefix_key(prefix)
                off_home += key is not None and replica.name != preference(key, names)[0]
                body = {
                    "model": MODEL,
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                    "max_tokens": 16,
                }
                # Non-streamed, as the gateway's own: counted in flight, no TTFT to observe.
                with replica.lease():
                    response = await client.post(f"{replica.base_url}/v1/chat/completions", json=body)
                    response.raise_for_status()

        started = time.perf_counter()
        try:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        finally:
            await fleet.stop()
        elapsed = time.perf_counter() - started
        after = [await scrape(client, f"{r.base_url}/metrics") for r in replicas]
    hits, queries = _cache_deltas(before, after)
    return {
        "policy": name,
        "requests": len(requests),
        "prefix_cache_hit_rate": hits / queries if queries else 0.0,
        "cached_tokens": int(hits),
        "prompt_tokens": int(queries),
        "per_replica": {n: sent[n] for n in names},
        "off_home": off_home,
        "seconds": elapsed,
    }


def _cache_deltas(before: list[Snapshot], after: list[Snapshot]) -> tuple[float, float]:
    hits = sum(
        a.stats().prefix_cache_hits - b.stats().prefix_cache_hits for b, a in zip(before, after, strict=True)
    )
    queries = sum(
        a.stats().prefix_cache_queries - b.stats().prefix_cache_queries
        for b, a in zip(before, after, strict=True)
    )
    return hits, queries


async def _measure(*, tenants: int, requests: int, concurrency: int, cache_blocks: int) -> dict[str, Any]:
    work = workload(tenants=tenants, requests=requests)
    configs = [
        SandboxConfig(
            dialect="vllm", profile="instant", seed=i, max_num_seqs=SLOTS, cache_blocks=cache_blocks
        )
        for i in range(REPLICAS)
    ]
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(SandboxServer(config)) for config in configs]
        runs = [
            await run_policy(name, pick, servers, work, concurrency)
            for name, pick in (
                ("round robin", round_robin()),
                ("least loaded", chosen(affinity=False)),
                ("prefix affinity + bounded load", chosen(affinity=True)),
            )
        ]
    return {
        "tenants": tenants,
        "requests": requests,
        "concurrency": concurrency,
        "replicas": REPLICAS,
        "cache_blocks_per_replica": cache_blocks,
        "runs": runs,
    }


def measure(
    *, tenants: int = 8, requests: int = 400, concurrency: int = 8, cache_blocks: int = CACHE_BLOCKS
) -> dict[str, Any]:
    """Run the three policies on fresh sandboxes; one dict per run under "runs"."""
    return asyncio.run(
        _measure(tenants=tenants, requests=requests, concurrency=concurrency, cache_blocks=cache_blocks)
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--cache-blocks", type=int, default=CACHE_BLOCKS)
    args = parser.parse_args()
    result = measure(
        tenants=args.tenants,
        requests=args.requests,
        concurrency=args.concurrency,
        cache_blocks=args.cache_blocks,
    )
    print(
        f"\nprefix affinity ({result['tenants']} tenants x ~1,500-token system prompts, "
        f"{result['requests']} requests, {result['concurrency']} at a time; {result['replicas']} sandbox "
        f"vLLM replicas, {result['cache_blocks_per_replica']} cache blocks each)"
    )
    width = max(len(run["policy"]) for run in result["runs"])
    for run in result["runs"]:
        spread = " / ".join(str(count) for count in run["per_replica"].values())
        print(
            f"{run['policy'].ljust(width)} | prefix-cache hit rate {run['prefix_cache_hit_rate']:6.1%} "
            f"({run['cached_tokens']:,} of {run['prompt_tokens']:,} prompt tokens) | per replica {spread} "
            f"| off their prefix's home {run['off_home']}"
        )


if __name__ == "__main__":
    main()
