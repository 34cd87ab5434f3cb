"""`python -m benchmarks.soak`: 100k requests (configurable) of every kind a gateway meets in a day,
through one worker, printing its RSS every 10k and the growth between the 50k and 100k marks.

The mix (per 100 requests): 50 plain completions, 20 streams, 6 unknown models (404), 6 bad bodies
(400: invalid JSON, wrong shapes), 6 upstream 500s and 4 upstream streams cut after two chunks
(sandbox fault rules, so every error path reaches the upstream and back), and 8 clients that
disconnect mid-stream from a slow upstream (the sandbox's `local` profile, ~120 tokens/s) after the
first content chunk. A leak on any path shows as RSS that keeps climbing after the 50k mark; the
target is <= 150 MB at 100k and flat (growth under 5 MB) from 50k to 100k.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvloop

from benchmarks import payloads
from benchmarks.ledgers import DEFAULT_POSTGRES_ADMIN_URL, Ledger, postgres_ledger, sqlite_ledger
from benchmarks.loadgen import Connection, ProtocolError, build_request
from benchmarks.processes import (
    CLIENT_CORE,
    ManagedProcess,
    child_env,
    detect_pinning,
    free_port,
    pin_self,
    rss_bytes,
    start_gateway,
    start_sandbox,
    wait_for_chat,
)
from benchmarks.report import RESULTS_DIR
from benchmarks.shapes import git_head

HOST = "127.0.0.1"
PATH = "/v1/chat/completions"
TARGET_MB = 150
FLAT_MB = 5
MIX = {"ok": 50, "stream": 20, "unknown": 6, "bad": 6, "upstream_500": 6, "upstream_drop": 4, "disconnect": 8}
_BAD_BODIES = (
    b'{"model": "bench-model", "messages": ',  # truncated JSON
    b'{"model": "bench-model", "messages": "not a list"}',
    b'{"model": "bench-model"}',
    b"[1, 2, 3]",
)


@dataclass
class Soak:
    """What the run saw: answers by kind and status, and RSS at every mark."""

    total: int
    every: int
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    marks: list[tuple[int, int, float]] = field(default_factory=list)  # (requests, rss bytes, req/s)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(MIX, 0.0))  # time per kind

    def record(self, kind: str, outcome: str, expected: bool, seconds: float) -> None:
        self.done += 1
        self.seconds[kind] += seconds
        self.outcomes[f"{kind}: {outcome}"] += 1
        if not expected and len(self.unexpected) < 10:
            self.unexpected.append(f"{kind}: {outcome}")


def gateway_config(fast_port: int, slow_port: int, ledger: Ledger) -> dict[str, Any]:
    price = {"input_per_mtok": "3", "output_per_mtok": "15"}
    fast, slow = f"http://{HOST}:{fast_port}/v1", f"http://{HOST}:{slow_port}/v1"
    return {
        "database": {"url": ledger.url, "auto_migrate": True},
        # One attempt, and breakers that never open: every faulty request goes upstream and back.
        "resilience": {
            "retry": {"max_attempts": 1},
            "breaker": {"consecutive_failures": 10**9, "min_requests": 10**9},
        },
        "providers": {
            "fast": {"type": "openai", "base_url": fast},
            "slow": {"type": "openai", "base_url": slow},
        },
        "models": {
            payloads.MODEL: {"provider": "fast", "price": price},
            "soak-500": {"provider": "fast", "price": price},
            "soak-drop": {"provider": "fast", "price": price},
            "soak-slow": {"provider": "slow", "price": price},
        },
    }


def requests_by_kind() -> dict[str, bytes]:
    def body(model: str, *, stream: bool, max_tokens: int = payloads.MAX_TOKENS) -> bytes:
        raw = json.loads(
            payloads.chat_body("Summarise an LLM gateway.", stream=stream, max_tokens=max_tokens)
        )
        raw["model"] = model
        return json.dumps(raw).encode()

    return {
        "ok": payloads.small_body(),
        "stream": payloads.small_body(stream=True),
        "unknown": body("no-such-model", stream=False),
        "upstream_500": body("soak-500", stream=False),
        "upstream_drop": body("soak-drop", stream=True, max_tokens=32),
        "disconnect": body("soak-slow", stream=True, max_tokens=64),
    }


async def disconnect_mid_stream(request: bytes) -> str:
    """Read until the first content chunk, then abort (RST), as a killed client would."""
    reader, writer = await asyncio.open_connection(HOST, _port_of(request))
    seen = b""
    try:
        writer.write(request)
        while b'"content":"' not in seen.replace(b'"content":""', b""):
            chunk = await asyncio.wait_for(reader.read(65536), 30)
            if not chunk:
                return "closed by server"
            seen += chunk
        return "completed before disconnect" if b"[DONE]" in seen else "disconnected mid-stream"
    finally:
        writer.transport.abort()


def _port_of(request: bytes) -> int:
    host_line = request.split(b"\r\n", 2)[1]
    return int(host_line.rsplit(b":", 1)[1])


async def one(conn: Connection | None, kind: str, request: bytes) -> tuple[Connection | None, str, bool]:
    """Send one request of `kind` on a keep-alive connection (reopened when needed)."""
    if kind == "disconnect":
        outcome = await disconnect_mid_stream(request)
        # A stream that ends inside the first read (a stall on this side) is not a failure either.
        return conn, outcome, outcome in ("disconnected mid-stream", "completed before disconnect")
    reused = conn is not None and not conn.closed
    if conn is None or conn.closed:
        conn = await Connection.open(HOST, _port_of(request))
    stream = kind in ("stream", "upstream_drop")
    try:
        response = await asyncio.wait_for(conn.send(request, stream=stream), 30)
    except (OSError, ProtocolError, TimeoutError) as exc:
        conn.close()
        if reused and isinstance(exc, ConnectionError):
            # The server closed an idle keep-alive connection as this request went out: every HTTP
            # client retries that once on a new connection. Counted apart, so it stays visible.
            fresh, outcome, expected = await one(None, kind, request)
            return fresh, f"{outcome} after a keep-alive reconnect", expected
        return None, type(exc).__name__, False
    if not response.keep_alive:
        conn.close()
    status = response.status
    expected = {
        "ok": status == 200,
        "stream": status == 200 and response.stream_complete(),
        "unknown": status == 404,
        "bad": status == 400,
        "upstream_500": 500 <= status < 600,
        "upstream_drop": status == 200,  # the failure is the stream's final event
    }[kind]
    return conn, f"HTTP {status}", expected


async def drive(soak: Soak, port: int, concurrency: int, pid: int, kinds: list[str]) -> None:
    requests = {kind: build_request(HOST, port, PATH, body) for kind, body in requests_by_kind().items()}
    bad = [build_request(HOST, port, PATH, body) for body in _BAD_BODIES]
    schedule = [kind for kind, weight in MIX.items() if kind in kinds for _ in range(weight)]
    random.Random(7).shuffle(schedule)
    issued = 0
    window = (time.monotonic(), 0)

    async def worker() -> None:
        nonlocal issued, window
        conn: Connection | None = None
        while issued < soak.total:
            index = issued
            issued += 1
            kind = schedule[index % len(schedule)]
            request = bad[index % len(bad)] if kind == "bad" else requests[kind]
            start = time.perf_counter()
            conn, outcome, expected = await one(conn, kind, request)
            soak.record(kind, outcome, expected, time.perf_counter() - start)
            if soak.done % soak.every == 0:
                now = time.monotonic()
                rate = (soak.done - window[1]) / max(now - window[0], 1e-9)
                window = (now, soak.done)
                rss = rss_bytes(pid)
                soak.marks.append((soak.done, rss, rate))
                say(f"{soak.done:>8,} requests: RSS {rss / 2**20:6.1f} MB  ({rate:,.0f} req/s)")
        if conn is not None:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def start_slow_sandbox(workdir: Path, pinned: bool) -> tuple[ManagedProcess, int]:
    port = free_port(HOST)
    argv = [sys.executable, "-m", "sandbox", "--host", HOST, "--port", str(port), "--dialect", "openai"]
    prefix = ["taskset", "-c", str(CLIENT_CORE)] if pinned else []
    proc = ManagedProcess(
        "sandbox-slow", [*prefix, *argv, "--profile", "local"], workdir / "slow.log", child_env()
    )
    try:
        await wait_for_chat(HOST, port, proc, timeout_s=60)
    except BaseException:
        proc.stop()
        raise
    return proc, port


def install_faults(sandbox_port: int) -> None:
    rules = [
        {"kind": "status", "status": 500, "count": -1, "model": "soak-500"},
        {"kind": "drop_after", "chunks": 2, "count": -1, "model": "soak-drop"},
    ]
    httpx.post(f"http://{HOST}:{sandbox_port}/_sandbox/faults", json=rules, timeout=10).raise_for_status()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000, help="total requests (default 100000)")
    parser.add_argument(
        "--every", type=int, default=10_000, help="print RSS every N requests (default 10000)"
    )
    parser.add_argument("--concurrency", type=int, default=16, help="connections (default 16)")
    parser.add_argument(
        "--kinds", default=",".join(MIX), help="a subset of the mix, to find which kind grows (default: all)"
    )
    parser.add_argument("--postgres", action="store_true", help="ledger on a throwaway PostgreSQL database")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_ADMIN_URL)
    parser.add_argument(
        "--gateway-cmd", default="{tollgate} serve --config {config} --host {host} --port {port}"
    )
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "soak.json", help="where to save it")
    return parser.parse_args(argv)


def say(message: str) -> None:
    print(f"[bench.soak] {message}", file=sys.stderr, flush=True)


async def run(args: argparse.Namespace) -> tuple[Soak, int, int]:
    pinning = pin_self(detect_pinning())
    workdir = Path(tempfile.mkdtemp(prefix="tollgate-soak-"))
    soak = Soak(total=args.requests, every=args.every)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        fast, fast_port = await start_sandbox(workdir, pinning, HOST)
        stack.callback(fast.stop)
        slow, slow_port = await start_slow_sandbox(workdir, pinning.enabled)
        stack.callback(slow.stop)
        install_faults(fast_port)
        ledger = await postgres_ledger(args.postgres_url) if args.postgres else sqlite_ledger(workdir)
        stack.push_async_callback(ledger.drop)
        config = workdir / "tollgate.yaml"
        config.write_text(json.dumps(gateway_config(fast_port, slow_port, ledger)))
        gw = await start_gateway(args.gateway_cmd, config, workdir, pinning, label="soak", host=HOST)
        stack.callback(gw.process.stop)
        soak.marks.append((0, rss_bytes(gw.process.pid), 0.0))
        say(
            f"gateway up, RSS {soak.marks[0][1] / 2**20:.1f} MB; "
            f"{args.requests:,} requests at c={args.concurrency}"
        )
        await drive(soak, gw.port, args.concurrency, gw.process.pid, args.kinds.split(","))
        if not gw.process.alive():
            raise RuntimeError(f"the gateway died during the soak:\n{gw.process.log_tail()}")
        rows, _ = await ledger.wait_for_rows(soak.total + gw.probe_answers, timeout_s=30)
        return soak, rows, gw.probe_answers
    raise AssertionError("unreachable")


def render(soak: Soak, rows: int, probes: int) -> str:
    lines = [f"{'requests':>9}  {'RSS MB':>7}  {'req/s':>6}"]
    lines += [f"{n:>9,}  {rss / 2**20:>7.1f}  {rate:>6,.0f}" for n, rss, rate in soak.marks]
    by_count = {n: rss for n, rss, _ in soak.marks}
    half, end = soak.total // 2, soak.total
    if half in by_count and end in by_count:
        growth = (by_count[end] - by_count[half]) / 2**20
        final = by_count[end] / 2**20
        verdict = "MET" if final <= TARGET_MB and growth <= FLAT_MB else "MISSED"
        lines.append(
            f"RSS at {end:,}: {final:.1f} MB (target <= {TARGET_MB} MB); growth {half:,} -> {end:,}: "
            f"{growth:+.1f} MB (flat: <= {FLAT_MB} MB) -> {verdict}"
        )
    lines.append(f"ledger rows: {rows:,} for {soak.done + probes:,} requests (start-up probes included)")
    lines.append("outcomes: " + ", ".join(f"{k} x{v:,}" for k, v in sorted(soak.outcomes.items())))
    counts = Counter(k.split(":")[0] for k in soak.outcomes.elements())
    lines.append(
        "mean ms per kind: "
        + ", ".join(f"{k} {soak.seconds[k] / n * 1000:.1f}" for k, n in sorted(counts.items()) if n)
    )
    if soak.unexpected:
        lines.append("UNEXPECTED outcomes (first few): " + "; ".join(soak.unexpected))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.requests < 1 or args.every < 1:
        raise SystemExit("--requests and --every must be positive")
    if not args.kinds or not set(args.kinds.split(",")) <= set(MIX):
        raise SystemExit(f"--kinds: a comma-separated subset of {','.join(MIX)}")
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            soak, rows, probes = runner.run(run(args))
    except KeyboardInterrupt:
        return 130
    print(render(soak, rows, probes))
    save(soak, args.json)
    return 0


def save(soak: Soak, path: Path) -> None:
    """The figures `make bench` shows in its RSS-flat row (this run takes minutes)."""
    by_count = {n: rss for n, rss, _ in soak.marks}
    half, end = soak.total // 2, soak.total
    mid = min((n for n in by_count if n >= half), default=None)  # half-way, or the next mark after it
    growth = (by_count[end] - by_count[mid]) / 2**20 if mid is not None and end in by_count else None
    saved = {
        "git": git_head(),
        "requests": soak.total,
        "final_mb": by_count[end] / 2**20 if end in by_count else None,
        "growth_mb": growth,
        "marks": [{"requests": n, "rss_mb": rss / 2**20} for n, rss, _ in soak.marks],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved, indent=2))


if __name__ == "__main__":
    sys.exit(main())
