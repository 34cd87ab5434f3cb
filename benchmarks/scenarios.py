"""The load shapes: sequential latency pairs (c=1) and closed-loop throughput (c=64).

Latency pairs interleave: the direct and gateway runs alternate in blocks, and the block order flips
each round, so drift on a noisy shared machine (another job waking up, a frequency change) lands on
both sides instead of biasing the difference the report is about.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import orjson

from benchmarks.loadgen import Connection, Tally, Target, Worker, build_request, closed_loop
from benchmarks.processes import LoadProbe, cpu_seconds

PATH = "/v1/chat/completions"
CLIENT = "load generator"


@contextmanager
def quiet_gc() -> Iterator[None]:
    """No collector pauses inside a timed window; collect between windows instead."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass
class Pair:
    """Direct and via-gateway tallies of the same requests.

    `blocks` holds, after each interleaved block, how many latencies and TTFTs each side had by
    then: (direct latencies, gateway latencies, direct TTFTs, gateway TTFTs). The report turns it
    into the spread of the added figure across blocks, the run's own repetitions.
    """

    direct: Tally
    gateway: Tally
    blocks: list[tuple[int, int, int, int]] = field(default_factory=list)


async def latency_pair(
    direct: Target,
    gateway: Target,
    body: bytes,
    *,
    count: int,
    warmup: int,
    blocks: int,
    stream: bool = False,
) -> Pair:
    """`count` sequential requests to each side on one keep-alive connection each, interleaved."""
    workers = [
        Worker(t, build_request(t.host, t.port, PATH, body, t.headers), stream=stream)
        for t in (direct, gateway)
    ]
    tallies = [Tally(), Tally()]
    bounds: list[tuple[int, int, int, int]] = []
    try:
        for worker, tally in zip(workers, tallies, strict=True):
            warm = Tally()
            await worker.run_count(warmup, warm)
            tally.absorb_errors(warm)
        blocks = max(1, min(blocks, count))
        with quiet_gc():
            for block in range(blocks):
                size = count // blocks + (1 if block < count % blocks else 0)
                order = (0, 1) if block % 2 == 0 else (1, 0)
                for side in order:
                    await workers[side].run_count(size, tallies[side])
                d, g = tallies
                bounds.append((len(d.latencies_ns), len(g.latencies_ns), len(d.ttfts_ns), len(g.ttfts_ns)))
    finally:
        for worker in workers:
            worker.close()
    return Pair(direct=tallies[0], gateway=tallies[1], blocks=bounds)


@dataclass
class Throughput:
    """A closed-loop run: how many answers per second, and the CPU the watched processes spent."""

    target: str
    concurrency: int
    tally: Tally
    cpu_s: dict[str, float] = field(default_factory=dict)
    foreign: dict[str, float] = field(default_factory=dict)  # other processes' share of a core

    @property
    def rps(self) -> float:
        return self.tally.answered / (self.tally.elapsed_ns / 1e9) if self.tally.elapsed_ns else 0.0

    def timeline(self) -> list[int]:
        """Answers in each whole second of the run: a falling line means the server degrades."""
        seconds = int(self.tally.elapsed_ns // 1_000_000_000)
        buckets = [0] * seconds
        for end in self.tally.finished_ns:
            index = (end - self.tally.started_ns) // 1_000_000_000
            if index < seconds:
                buckets[index] += 1
        return buckets

    def cpu_per_request_us(self, name: str) -> float | None:
        if name not in self.cpu_s or not self.tally.answered:
            return None
        return self.cpu_s[name] / self.tally.answered * 1e6

    def cpu_utilisation(self, name: str) -> float | None:
        if name not in self.cpu_s or not self.tally.elapsed_ns:
            return None
        return self.cpu_s[name] / (self.tally.elapsed_ns / 1e9)


async def throughput(
    target: Target,
    body: bytes,
    *,
    concurrency: int,
    duration_s: float,
    warmup_s: float,
    watch: dict[str, int] | None = None,
    pinned: bool = True,
) -> Throughput:
    """`concurrency` connections sending back to back for `duration_s` after a warm-up on the same
    connections; `watch` maps a name to a pid whose CPU time is sampled around the measured window."""
    request = build_request(target.host, target.port, PATH, body, target.headers)
    workers = [Worker(target, request, stream=False) for _ in range(concurrency)]
    watch = watch or {}
    try:
        # Connect everyone first so connection set-up is not part of any window.
        for worker in workers:
            await worker.connect()
        warm = await closed_loop(workers, warmup_s) if warmup_s > 0 else Tally()
        probe = LoadProbe(pinned, watch)
        with quiet_gc():
            probe.start()
            before = {name: cpu_seconds(pid) for name, pid in watch.items()}
            client_before = time.process_time()
            tally = await closed_loop(workers, duration_s)
            client_s = time.process_time() - client_before
            after = {name: cpu_seconds(pid) for name, pid in watch.items()}
            foreign = probe.stop()
    finally:
        for worker in workers:
            worker.close()
    tally.absorb_errors(warm)
    return Throughput(
        target=target.name,
        concurrency=concurrency,
        tally=tally,
        cpu_s={CLIENT: client_s} | {name: after[name] - before[name] for name in watch},
        foreign=foreign,
    )


async def prompt_tokens(target: Target, body: bytes) -> int | None:
    """What the upstream counted for a body (the large-prompt row states its real size)."""
    conn = await Connection.open(target.host, target.port)
    try:
        response = await asyncio.wait_for(
            conn.send(build_request(target.host, target.port, PATH, body, target.headers)), 30
        )
    finally:
        conn.close()
    target.sent += 1
    target.answered += 1
    if response.status != 200:
        return None
    usage = orjson.loads(bytes(response.body)).get("usage") or {}
    tokens = usage.get("prompt_tokens")
    return int(tokens) if isinstance(tokens, int) else None


async def settle(seconds: float = 0.2) -> None:
    """A pause between phases so one phase's tail (ledger flush, GC) does not land in the next."""
    gc.collect()
    await asyncio.sleep(seconds)
