"""`python -m benchmarks [--quick] ...`: run every scenario once, print the table, write the JSON.

Order of a default run: sandbox up; gateway on a SQLite ledger (start-up timed); c=1 latency, TTFT
and large-prompt pairs; c=64 throughput direct, then through the gateway; RSS and ledger check; then
a second gateway on a throwaway PostgreSQL database for the throughput row the target is about.
Everything started is stopped, and the database dropped, on the way out, Ctrl-C included.
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
    ledgers: str  # "both", "sqlite" or "postgresql"
    postgres_url: str
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
            "ledgers": self.ledgers,
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
    ledgers = parser.add_mutually_exclusive_group()
    ledgers.add_argument(
        "--no-postgres",
        action="store_true",
        help="SQLite ledger only (default: SQLite, plus PostgreSQL if reachable)",
    )
    ledgers.add_argument(
        "--postgres", action="store_true", help="every scenario on a PostgreSQL ledger, no SQLite run"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TOLLGATE_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_ADMIN_URL),
        help="admin DSN used to create and drop a throwaway database "
        "(default $TOLLGATE_BENCH_POSTGRES_URL or %(default)s)",
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
        ledgers="sqlite" if args.no_postgres else "postgresql" if args.postgres else "both",
        postgres_url=args.postgres_url,
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

    def say(self, message: str) -> None:
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    async def run(self) -> Results:
        s = self.s
        ledgers: list[tuple[str, bool]] = []  # (kind, full scenario set?)
        if s.ledgers in ("both", "sqlite"):
            ledgers.append(("sqlite", True))
        if s.ledgers in ("both", "postgresql"):
            why_not = await postgres_reachable(s.postgres_url)
            if why_not is None:
                ledgers.append(("postgresql", s.ledgers == "postgresql"))
            elif s.ledgers == "postgresql":
                raise SystemExit(f"--postgres: PostgreSQL is not reachable at {s.postgres_url}: {why_not}")
            else:
                self.results.notes.append(
                    f"PostgreSQL not reachable ({why_not}); its throughput row is skipped"
                )

        self.say("starting the sandbox (instant profile)")
        sandbox, port = await start_sandbox(self.workdir, self.pinning, HOST)
        self.processes.append(sandbox)
        self.stack.callback(sandbox.stop)
        self.sandbox = sandbox
        self.direct = Target("direct", HOST, port)

        for kind, full in ledgers:
            ledger = (
                sqlite_ledger(self.workdir) if kind == "sqlite" else await postgres_ledger(s.postgres_url)
            )
            if kind == "postgresql":
                self.stack.push_async_callback(ledger.drop)
            self.results.gateways.append(await self.gateway_run(ledger, full=full))
            await ledger.drop()
        return self.results

    def write_config(self, ledger: Ledger) -> Path:
        assert self.direct is not None
        config = {
            "database": {"url": ledger.url, "auto_migrate": True},
            "providers": {"up": {"type": "openai", "base_url": f"http://{HOST}:{self.direct.port}/v1"}},
            "models": {
                payloads.MODEL: {"provider": "up", "price": {"input_per_mtok": "3", "output_per_mtok": "15"}}
            },
        }
        path = self.workdir / f"tollgate-{ledger.kind}.yaml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML
        return path

    async def gateway_run(self, ledger: Ledger, *, full: bool) -> GatewayRun:
        s, direct, sandbox = self.s, self.direct, self.sandbox
        assert direct is not None and sandbox is not None
        self.say(f"starting the gateway, ledger on {ledger.label}")
        config = self.write_config(ledger)
        gw = await start_gateway(
            s.gateway_cmd, config, self.workdir, self.pinning, label=ledger.kind, host=HOST
        )
        self.processes.append(gw.process)
        self.stack.callback(gw.process.stop)
        run = GatewayRun(ledger=ledger.label, startup_s=gw.startup_s)
        target = Target(
            f"gateway[{ledger.label}]", HOST, gw.port, sent=gw.probe_answers, answered=gw.probe_answers
        )

        probe = LoadProbe(self.pinning.enabled, {"sandbox": sandbox.pid, "gateway": gw.process.pid})
        if full:
            probe.start()
            self.say(f"latency at c=1: {s.requests} requests per side")
            self.results.latency = await latency_pair(
                direct,
                target,
                payloads.small_body(),
                count=s.requests,
                warmup=s.warmup_requests,
                blocks=s.blocks,
            )
            await settle()
            self.say(f"time to first token at c=1: {s.stream_requests} streams per side")
            self.results.ttft = await latency_pair(
                direct,
                target,
                payloads.small_body(stream=True),
                count=s.stream_requests,
                warmup=s.warmup_requests,
                blocks=s.blocks,
                stream=True,
            )
            await settle()
            large = payloads.large_body()
            self.results.large_prompt_bytes = len(large)
            self.results.large_prompt_tokens = await prompt_tokens(direct, large)
            self.say(f"large prompt at c=1: {s.large_requests} requests per side")
            self.results.large = await latency_pair(
                direct, target, large, count=s.large_requests, warmup=5, blocks=s.blocks
            )
            self.results.c1_foreign = probe.stop()
            await settle()

        body = payloads.small_body()
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
        self.say(f"throughput via gateway ({ledger.label}): c={s.concurrency} for {s.duration_s:g} s")
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
                f"ledger on {ledger.label}: {run.ledger_rows} rows for {run.answered} answers "
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
    rows = build_rows(results)
    print(render(results, rows))
    write_json(results, rows, settings.json_path)
    print(f"\nJSON: {settings.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
