"""`python -m benchmarks.workers`: throughput at c=64 through `tollgate serve --workers 1`, then
`--workers 2`, in one run against the same sandbox, and the ratio.

Placement on a 2-core machine: one worker is pinned to core 0 with the sandbox and the load
generator on core 1, as in `make bench`. Two workers get both cores (`taskset -c 0,1`), so the
second worker competes with the sandbox and the load generator for core 1: the ratio then
understates what a second dedicated core gives. The CPU each answer costs the gateway is printed
beside req/s because it does not depend on the placement: if it stays flat from 1 to 2 workers,
throughput scales with the cores given to the workers. Budgets and rate limits live in Redis in
both runs (the state `--workers N` requires), the ledger in a throwaway PostgreSQL database
(SQLite when PostgreSQL is not reachable).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from benchmarks import payloads
from benchmarks.ledgers import (
    DEFAULT_POSTGRES_ADMIN_URL,
    postgres_ledger,
    postgres_reachable,
    sqlite_ledger,
)
from benchmarks.loadgen import Target
from benchmarks.processes import (
    CLIENT_CORE,
    GATEWAY_CORE,
    ManagedProcess,
    Pinning,
    detect_pinning,
    pin_self,
    process_tree,
    rss_bytes,
    start_gateway,
    start_sandbox,
)
from benchmarks.report import RESULTS_DIR, foreign_share
from benchmarks.scenarios import Throughput, settle, throughput
from benchmarks.shapes import (
    DEFAULT_REDIS_URL,
    PRODUCTION,
    auth_headers,
    create_key,
    drop_redis_prefix,
    gateway_config,
    git_head,
    redis_prefix,
    redis_reachable,
    write_config,
)

HOST = "127.0.0.1"
SERVE = "{tollgate} serve --config {config} --host {host} --port {port}"


@dataclass
class WorkersRun:
    workers: int
    placement: str
    result: Throughput
    rss_bytes: int
    rss_each: list[int]
    answered: int
    ledger_rows: int
    startup_s: float

    def as_dict(self) -> dict[str, Any]:
        tp = self.result
        return {
            "workers": self.workers,
            "placement": self.placement,
            "rps": round(tp.rps, 1),
            "gateway_cpu_us_per_request": tp.cpu_per_request_us("gateway"),
            "gateway_cores_busy": tp.cpu_utilisation("gateway"),
            "errors": tp.tally.errors,
            "error_samples": tp.tally.error_samples,
            "timeline": tp.timeline(),
            "foreign_cpu": tp.foreign,
            "rss_bytes": self.rss_bytes,
            "rss_each_bytes": self.rss_each,
            "answered": self.answered,
            "ledger_rows": self.ledger_rows,
            "startup_s": round(self.startup_s, 2),
        }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workers", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts to compare (default 1,2)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measured run (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per run (default 2)")
    parser.add_argument("--concurrency", type=int, default=64, help="connections (default 64)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite ledger even if PostgreSQL is up")
    parser.add_argument(
        "--postgres-url", default=os.environ.get("TOLLGATE_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_ADMIN_URL)
    )
    parser.add_argument("--redis-url", default=os.environ.get("TOLLGATE_BENCH_REDIS_URL", DEFAULT_REDIS_URL))
    parser.add_argument("--json", type=Path, default=RESULTS_DIR / "workers.json")
    return parser.parse_args(argv)


def say(message: str) -> None:
    print(f"[bench.workers] {message}", file=sys.stderr, flush=True)


def placement(workers: int, pinning: Pinning) -> tuple[list[str], str]:
    """The taskset prefix for the gateway and a line saying where everything runs."""
    if not pinning.enabled:
        return [], f"unpinned ({pinning.reason})"
    if workers == 1:
        return ["taskset", "-c", str(GATEWAY_CORE)], f"gateway core {GATEWAY_CORE}; rig core {CLIENT_CORE}"
    cores = sorted(os.sched_getaffinity(0) | {GATEWAY_CORE, CLIENT_CORE})
    spec = ",".join(str(c) for c in cores)
    return ["taskset", "-c", spec], f"gateway cores {spec} (shared with the rig on core {CLIENT_CORE})"


def own_rss(pid: int) -> int:
    """VmRSS of one process, without its children (0 once it is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def wait_for_workers(process: ManagedProcess, workers: int, timeout_s: float = 120.0) -> None:
    """The first answer proves one worker is up; the measured run needs all of them."""
    deadline = time.monotonic() + timeout_s
    while process.log_path.read_text(errors="replace").count("Application startup complete") < workers:
        if not process.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"{workers} workers did not all start:\n{process.log_tail()}")
        await asyncio.sleep(0.05)


async def run(args: argparse.Namespace) -> tuple[list[WorkersRun], list[str]]:
    counts = [int(n) for n in args.workers.split(",")]
    notes: list[str] = []
    pinning = pin_self(detect_pinning())
    redis_url: str | None = args.redis_url
    why_not = redis_reachable(args.redis_url)
    if why_not:
        notes.append(f"Redis not reachable ({why_not}): in-memory state, --allow-per-process-state")
        redis_url = None
    prefix = redis_prefix()
    workdir = Path(tempfile.mkdtemp(prefix="tollgate-bench-workers-"))
    runs: list[WorkersRun] = []
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        if redis_url:
            stack.callback(drop_redis_prefix, redis_url, prefix)
        sandbox, port = await start_sandbox(workdir, pinning, HOST)
        stack.callback(sandbox.stop)
        use_postgres = not args.no_postgres and await postgres_reachable(args.postgres_url) is None
        for workers in counts:
            own = workdir / f"ledger-{workers}"
            own.mkdir()
            ledger = await postgres_ledger(args.postgres_url) if use_postgres else sqlite_ledger(own)
            stack.push_async_callback(ledger.drop)
            upstream = f"http://{HOST}:{port}/v1"
            config = write_config(
                workdir / f"tollgate-{workers}.yaml",
                gateway_config(PRODUCTION, ledger, upstream, redis_url=redis_url, prefix=prefix),
            )
            headers = auth_headers(await asyncio.to_thread(create_key, config, own))
            prefix_argv, where = placement(workers, pinning)
            template = " ".join([*prefix_argv, SERVE, f"--workers {workers}"])
            if redis_url is None and workers > 1:
                template += " --allow-per-process-state"
            say(f"--workers {workers}: starting ({where}; ledger on {ledger.label})")
            unpinned = Pinning(False, "placed by the template")
            gw = await start_gateway(
                template,
                config,
                workdir,
                unpinned,
                label=f"w{workers}",
                host=HOST,
                headers=headers,
                model=PRODUCTION.model,
            )
            stack.callback(gw.process.stop)
            await wait_for_workers(gw.process, workers)
            target = Target(
                f"workers={workers}",
                HOST,
                gw.port,
                sent=gw.probe_answers,
                answered=gw.probe_answers,
                headers=headers,
            )
            say(f"--workers {workers}: c={args.concurrency} for {args.duration:g} s")
            result = await throughput(
                target,
                payloads.small_body(model=PRODUCTION.model),
                concurrency=args.concurrency,
                duration_s=args.duration,
                warmup_s=args.warmup,
                watch={"sandbox": sandbox.pid, "gateway": gw.process.pid},
                pinned=pinning.enabled and workers == 1,
            )
            rss, each = rss_bytes(gw.process.pid), [own_rss(pid) for pid in process_tree(gw.process.pid)]
            rows, _ = await ledger.wait_for_rows(target.answered)
            gw.process.stop()
            runs.append(WorkersRun(workers, where, result, rss, each, target.answered, rows, gw.startup_s))
            await ledger.drop()
            await settle()
    return runs, notes


def render(runs: list[WorkersRun], notes: list[str]) -> str:
    lines = [
        f"{'workers':>7}  {'req/s':>8}  {'gateway CPU/req':>15}  {'gateway cores':>13}  "
        f"{'errors':>6}  {'RSS':>8}  {'ledger rows/answered':>20}  placement"
    ]
    for r in runs:
        tp = r.result
        cpu = tp.cpu_per_request_us("gateway")
        cores = tp.cpu_utilisation("gateway")
        lines.append(
            f"{r.workers:>7}  {tp.rps:>8,.0f}  {cpu or 0:>12,.0f} µs  {cores or 0:>13.2f}  "
            f"{tp.tally.errors:>6}  {r.rss_bytes / 2**20:>5.0f} MB  {r.ledger_rows:>9} / {r.answered:<9}  "
            f"{r.placement}"
        )
    base = next((r for r in runs if r.workers == 1), None)
    for r in runs:
        if base is not None and r is not base and base.result.rps:
            cpu, base_cpu = r.result.cpu_per_request_us("gateway"), base.result.cpu_per_request_us("gateway")
            cpu_ratio = f", x{cpu / base_cpu:.2f} gateway CPU per request" if cpu and base_cpu else ""
            lines.append(
                f"ratio workers={r.workers} / workers=1: x{r.result.rps / base.result.rps:.2f} req/s"
                f"{cpu_ratio} (same run)"
            )
    for r in runs:
        lines.append(f"req/s per second, workers={r.workers}: " + " ".join(map(str, r.result.timeline())))
        for sample in r.result.tally.error_samples:
            lines.append(f"  error sample (workers={r.workers}): {sample}")
        each = ", ".join(f"{b / 2**20:.0f}" for b in r.rss_each)
        lines.append(f"RSS per process, workers={r.workers} (MB; supervisor first): {each}")
        if r.result.foreign:
            lines.append(f"other processes' CPU, workers={r.workers}: {foreign_share(r.result.foreign)}")
        if r.ledger_rows != r.answered:
            lines.append(
                f"  LEDGER MISMATCH (workers={r.workers}): {r.ledger_rows} rows, {r.answered} answers"
            )
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runs, notes = runner.run(run(args))
    except KeyboardInterrupt:
        return 130
    print(render(runs, notes))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    saved = {"git": git_head(), "runs": [r.as_dict() for r in runs], "notes": notes}
    args.json.write_text(json.dumps(saved, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
