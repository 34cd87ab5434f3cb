"""`python -m benchmarks [--quick] ...`: run every scenario once, print the table, write the JSON.

Order of a default run: sandbox up; the production-shape gateway (benchmarks/shapes.py: team key,
budget, rpm, Redis state, a throwaway PostgreSQL ledger, model `auto`; start-up timed); c=1
latency, TTFT and large-prompt pairs; c=64 throughput direct, then through the gateway; RSS and
ledger check; then the same scenarios through the embedded default (SQLite, open mode) for the
table's last column. Everything started is stopped, the database dropped and the Redis keys
deleted on the way out, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from benchmarks import payloads
from benchmarks.ledgers import (
    DEFAULT_POSTGRES_ADMIN_URL,
    Ledger,
    postgres_ledger,
    postgres_reachable,
    sqlite_ledger,
)
from benchmarks.loadgen import Target
from benchmarks.processes import (
    DEFAULT_GATEWAY_CMD,
    LoadProbe,
    ManagedProcess,
    Pinning,
    detect_pinning,
    pin_self,
    rss_bytes,
    start_gateway,
    start_sandbox,
)
from benchmarks.report import RESULTS_DIR, GatewayRun, Results, build_rows
from benchmarks.report_text import render, write_json
from benchmarks.scenarios import latency_pair, prompt_tokens, settle, throughput
from benchmarks.shapes import (
    DEFAULT_REDIS_URL,
    EMBEDDED,
    PRODUCTION,
    Shape,
    auth_headers,
    create_key,
    drop_redis_prefix,
    gateway_config,
    redis_prefix,
    redis_reachable,
    write_config,
)

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Settings:
    requests: int
    warmup_requests: int
    stream_requests: int
    large_requests: int
    duration_s: float
    warmup_s: float
    concurrency: int
    blocks: int
    shapes: str  # "both", "production" or "embedded"
    postgres_url: str
    redis_url: str
    gateway_cmd: str
    json_path: Path

    def public(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "stream_requests": self.stream_requests,
            "large_requests": self.large_requests,
            "duration_s": self.duration_s,
            "warmup_s": self.warmup_s,
            "concurrency": self.concurrency,
            "shapes": self.shapes,
        }


def parse_args(argv: list[str] | None) -> Settings:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Tollgate vs the sandbox upstream, direct and through the gateway, in one run.",
    )
    parser.add_argument("--quick", action="store_true", help="small counts: a ~20 s smoke run")
    parser.add_argument("--requests", type=int, help="c=1 requests per side (default 2000, quick 200)")
    parser.add_argument("--duration", type=float, help="seconds per throughput run (default 10, quick 2)")
    parser.add_argument("--concurrency", type=int, default=64, help="connections for throughput (default 64)")
    shapes = parser.add_mutually_exclusive_group()
    shapes.add_argument(
        "--embedded-only",
        "--no-postgres",
        action="store_true",
        help="only the embedded default (SQLite, open mode); no PostgreSQL or Redis needed",
    )
    shapes.add_argument(
        "--production-only", action="store_true", help="only the production shape, no embedded column"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TOLLGATE_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_ADMIN_URL),
        help="admin DSN used to create and drop a throwaway database "
        "(default $TOLLGATE_BENCH_POSTGRES_URL or %(default)s)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("TOLLGATE_BENCH_REDIS_URL", DEFAULT_REDIS_URL),
        help="Redis for the production shape's state; its keys go under a random prefix, deleted "
        "after the run (default $TOLLGATE_BENCH_REDIS_URL or %(default)s)",
    )
    parser.add_argument(
        "--gateway-cmd",
        default=DEFAULT_GATEWAY_CMD,
        help="command that serves the gateway; placeholders {tollgate} {python} {config} {host} {port} "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--json", type=Path, default=RESULTS_DIR / "latest.json", help="where to write the JSON results"
    )
    args = parser.parse_args(argv)

    quick = args.quick
    requests = args.requests or (200 if quick else 2000)
    if requests < 1 or args.concurrency < 1 or (args.duration is not None and args.duration <= 0):
        parser.error("--requests, --concurrency and --duration must be positive")
    return Settings(
        requests=requests,
        warmup_requests=max(20, min(200, requests // 10)),
        stream_requests=max(20, requests // 2),
        large_requests=max(10, requests // 20),
        duration_s=args.duration or (2.0 if quick else 10.0),
        warmup_s=0.5 if quick else 2.0,
        concurrency=args.concurrency,
        blocks=10,
        shapes="embedded" if args.embedded_only else "production" if args.production_only else "both",
        postgres_url=args.postgres_url,
        redis_url=args.redis_url,
        gateway_cmd=args.gateway_cmd,
        json_path=args.json,
    )


class Bench:
    """One run: owns the temp directory, the processes and the databases it creates."""

    def __init__(
        self, settings: Settings, pinning: Pinning, workdir: Path, stack: contextlib.AsyncExitStack
    ) -> None:
        self.s = settings
        self.pinning = pinning
        self.workdir = workdir
        self.stack = stack
        self.processes: list[ManagedProcess] = []
        self.results = Results(environment={}, settings=settings.public())
        self.sandbox: ManagedProcess | None = None
        self.direct: Target | None = None
        self.prefix = redis_prefix()

    def say(self, message: str) -> None:
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    async def run(self) -> Results:
        s = self.s
        shapes: list[Shape] = []
        if s.shapes in ("both", "production"):
            why_not = await postgres_reachable(s.postgres_url)
            if why_not is None:
                shapes.append(PRODUCTION)
            elif s.shapes == "production":
                raise SystemExit(
                    f"--production-only: PostgreSQL is not reachable at {s.postgres_url}: {why_not}"
                )
            else:
                self.results.notes.append(
                    f"PostgreSQL not reachable ({why_not}): the production shape is skipped, "
                    "the embedded default's figures are the main columns"
                )
        if s.shapes in ("both", "embedded"):
            shapes.append(EMBEDDED)
        self.redis_url: str | None = None
        if PRODUCTION in shapes:
            why_not = redis_reachable(s.redis_url)
            if why_not is None:
                self.redis_url = s.redis_url
                self.stack.callback(drop_redis_prefix, s.redis_url, self.prefix)
            else:
                self.results.notes.append(
                    f"Redis not reachable at {s.redis_url} ({why_not}): the production shape keeps its "
                    "budgets and limits in memory"
                )

        self.say("starting the sandbox (instant profile)")
        sandbox, port = await start_sandbox(self.workdir, self.pinning, HOST)
        self.processes.append(sandbox)
        self.stack.callback(sandbox.stop)
        self.sandbox = sandbox
        self.direct = Target("direct", HOST, port)

        for shape in shapes:
            if shape.ledger_kind == "sqlite":
                ledger = sqlite_ledger(self.workdir)
            else:
                ledger = await postgres_ledger(s.postgres_url)
                self.stack.push_async_callback(ledger.drop)
            self.results.gateways.append(await self.gateway_run(shape, ledger))
            await ledger.drop()
        return self.results

    async def gateway_run(self, shape: Shape, ledger: Ledger) -> GatewayRun:
        s, sandbox = self.s, self.sandbox
        assert self.direct is not None and sandbox is not None
        upstream = f"http://{HOST}:{self.direct.port}/v1"
        config = write_config(
            self.workdir / f"tollgate-{shape.name}.yaml",
            gateway_config(shape, ledger, upstream, redis_url=self.redis_url, prefix=self.prefix),
        )
        key = None
        if shape.keys:
            self.say(f"{shape.label}: creating the team's virtual key")
            key = await asyncio.to_thread(create_key, config, self.workdir)
        headers = auth_headers(key)
        # The same request bytes both ways: the sandbox ignores the key and answers any model.
        direct = Target("direct", HOST, self.direct.port, headers=headers)
        self.say(f"{shape.label}: starting the gateway, ledger on {ledger.label}")
        gw = await start_gateway(
            s.gateway_cmd,
            config,
            self.workdir,
            self.pinning,
            label=shape.name,
            host=HOST,
            headers=headers,
            model=shape.model,
        )
        self.processes.append(gw.process)
        self.stack.callback(gw.process.stop)
        run = GatewayRun(ledger=ledger.label, startup_s=gw.startup_s, shape=shape.name)
        target = Target(
            f"gateway[{shape.name}]",
            HOST,
            gw.port,
            sent=gw.probe_answers,
            answered=gw.probe_answers,
            headers=headers,
        )

        probe = LoadProbe(self.pinning.enabled, {"sandbox": sandbox.pid, "gateway": gw.process.pid})
        probe.start()
        self.say(f"{shape.label}: latency at c=1, {s.requests} requests per side")
        run.latency = await latency_pair(
            direct,
            target,
            payloads.small_body(model=shape.model),
            count=s.requests,
            warmup=s.warmup_requests,
            blocks=s.blocks,
        )
        await settle()
        self.say(f"{shape.label}: time to first token at c=1, {s.stream_requests} streams per side")
        run.ttft = await latency_pair(
            direct,
            target,
            payloads.small_body(stream=True, model=shape.model),
            count=s.stream_requests,
            warmup=s.warmup_requests,
            blocks=s.blocks,
            stream=True,
        )
        await settle()
        large = payloads.large_body(model=shape.model)
        self.results.large_prompt_bytes = len(large)
        if self.results.large_prompt_tokens is None:
            self.results.large_prompt_tokens = await prompt_tokens(direct, large)
        self.say(f"{shape.label}: large prompt at c=1, {s.large_requests} requests per side")
        run.large = await latency_pair(
            direct, target, large, count=s.large_requests, warmup=5, blocks=s.blocks
        )
        run.c1_foreign = probe.stop()
        await settle()

        body = payloads.small_body(model=shape.model)
        if self.results.direct_throughput is None:
            self.say(f"throughput direct: c={s.concurrency} for {s.duration_s:g} s")
            self.results.direct_throughput = await throughput(
                direct,
                body,
                concurrency=s.concurrency,
                duration_s=s.duration_s,
                warmup_s=s.warmup_s,
                watch={"sandbox": sandbox.pid},
                pinned=self.pinning.enabled,
            )
            await settle()
        self.say(f"{shape.label}: throughput via the gateway, c={s.concurrency} for {s.duration_s:g} s")
        run.throughput = await throughput(
            target,
            body,
            concurrency=s.concurrency,
            duration_s=s.duration_s,
            warmup_s=s.warmup_s,
            watch={"sandbox": sandbox.pid, "gateway": gw.process.pid},
            pinned=self.pinning.enabled,
        )
        run.rss_bytes = rss_bytes(gw.process.pid)
        run.sent, run.answered = target.sent, target.answered
        self.say(f"waiting for the ledger: {run.answered} rows expected")
        run.ledger_rows, run.ledger_wait_s = await ledger.wait_for_rows(run.answered)
        if not gw.process.alive():
            raise RuntimeError(f"the gateway died during the run:\n{gw.process.log_tail()}")
        gw.process.stop()
        if run.ledger_rows != run.answered:
            self.results.notes.append(
                f"{shape.label} ({ledger.label}): {run.ledger_rows} rows for {run.answered} answers "
                f"after waiting {run.ledger_wait_s:.1f} s; gateway log says:"
            )
            self.results.notes += [f"  {line}" for line in gw.process.log_problems()]
        return run


def environment(settings: Settings, pinning: Pinning) -> dict[str, Any]:
    git = "?"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        git = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
    return {
        "timestamp": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git": git,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pinning": pinning.reason if pinning.enabled else f"UNPINNED ({pinning.reason})",
        "pinned": pinning.enabled,
        "gateway_cmd": settings.gateway_cmd,
    }


async def amain(settings: Settings) -> Results:
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, main_task.cancel)

    pinning = pin_self(detect_pinning())
    workdir = Path(tempfile.mkdtemp(prefix="tollgate-bench-"))
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        bench = Bench(settings, pinning, workdir, stack)
        bench.results.environment = environment(settings, pinning)
        if not pinning.enabled:
            bench.results.notes.append(f"processes are NOT pinned: {pinning.reason}")
        try:
            return await bench.run()
        except Exception:
            for proc in bench.processes:
                tail = proc.log_tail(15)
                if tail:
                    print(
                        f"--- last lines of {proc.name} ({proc.log_path.name}) ---\n{tail}", file=sys.stderr
                    )
            raise
    raise AssertionError("unreachable")


def saved_results(directory: Path) -> dict[str, Any]:
    """What `make bench-soak` and `make bench-workers` last wrote (they take minutes each)."""
    saved: dict[str, Any] = {}
    for name in ("soak", "workers"):
        with contextlib.suppress(OSError, ValueError):
            saved[name] = json.loads((directory / f"{name}.json").read_text())
    return saved


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            results = runner.run(amain(settings))
    except KeyboardInterrupt:
        print("[bench] interrupted; every process stopped and temp database dropped", file=sys.stderr)
        return 130
    except asyncio.CancelledError:
        print("[bench] terminated; every process stopped and temp database dropped", file=sys.stderr)
        return 143
    rows = build_rows(results, saved_results(RESULTS_DIR))
    print(render(results, rows))
    write_json(results, rows, settings.json_path)
    print(f"\nJSON: {settings.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
