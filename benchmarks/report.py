"""The report: one plain-text table (figure | direct | via gateway | added | target | result) and the
same rows as JSON in benchmarks/results/latest.json, so runs can be diffed and compared later.

Targets come from the project's performance issue. Missing one is reported, never fatal: the bench
exits 0 whatever the numbers say, because on a shared 2-core box numbers are evidence, not verdicts.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.loadgen import Tally
from benchmarks.report_rows import INFO, Row, verdict
from benchmarks.report_saved import saved_bench_rows
from benchmarks.scenarios import CLIENT, Pair, Throughput
from benchmarks.stats import Summary, summarize

MB = 1024 * 1024
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# Targets (issue 26, perf-2: the production shape, one worker pinned to one core).
ADDED_P50_MS = 0.3
ADDED_P99_MS = 1.0
THROUGHPUT_RPS = 5000.0
ADDED_TTFT_P50_MS = 0.5
LARGE_ADDED_P50_MS = 3.0
CPU_US_PER_REQUEST = 200.0
RSS_MB = 150.0
STARTUP_S = 1.0


@dataclass
class GatewayRun:
    """One gateway process and its ledger: what it cost and whether the ledger kept up."""

    ledger: str  # "SQLite" or "PostgreSQL"
    startup_s: float
    shape: str = "production"  # benchmarks.shapes: "production" or "embedded"
    latency: Pair | None = None
    ttft: Pair | None = None
    large: Pair | None = None
    c1_foreign: dict[str, float] = field(default_factory=dict)
    rss_bytes: int = 0
    throughput: Throughput | None = None
    answered: int = 0
    sent: int = 0
    ledger_rows: int = -1
    ledger_wait_s: float = 0.0


@dataclass
class Results:
    """Everything one bench run measured, plus how it was run."""

    environment: dict[str, Any]
    settings: dict[str, Any]
    large_prompt_tokens: int | None = None
    large_prompt_bytes: int = 0
    c1_foreign: dict[str, float] = field(default_factory=dict)
    direct_throughput: Throughput | None = None
    gateways: list[GatewayRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _signed_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def _added_rows(
    label: str,
    pair: Pair | None,
    pick: Callable[[Summary], float],
    limit: float,
    key: str,
    *,
    ttft: bool = False,
) -> Row:
    if pair is None:
        return Row(label, "-", "-", "-", f"added <= {limit} ms", "not run")
    direct = summarize(_samples(pair.direct, ttft))
    gateway = summarize(_samples(pair.gateway, ttft))
    per_block = block_added(pair, pick, ttft=ttft)
    d = pick(direct) if direct else None
    g = pick(gateway) if gateway else None
    added = g - d if d is not None and g is not None else None
    errors = pair.direct.errors + pair.gateway.errors
    ok = None if added is None else added <= limit and errors == 0
    return Row(
        label,
        _ms(d),
        _ms(g),
        _signed_ms(added),
        f"added <= {limit:g} ms",
        verdict(ok) if added is not None else "no data",
        {
            "metric": key,
            "direct_ms": d,
            "gateway_ms": g,
            "added_ms": added,
            "limit_ms": limit,
            "errors": errors,
            "direct": direct.as_dict() if direct else None,
            "gateway": gateway.as_dict() if gateway else None,
            "added_per_block_ms": per_block,
        },
        spread=_spread(per_block),
    )


def _samples(tally: Tally, ttft: bool) -> list[int]:
    return tally.ttfts_ns if ttft else tally.latencies_ns


def block_added(pair: Pair, pick: Callable[[Summary], float], *, ttft: bool) -> list[float]:
    """The added figure in each interleaved block: gateway block minus the direct block beside it."""
    direct_ns, gateway_ns = _samples(pair.direct, ttft), _samples(pair.gateway, ttft)
    added: list[float] = []
    d_start = g_start = 0
    for bound in pair.blocks:
        d_end, g_end = (bound[2], bound[3]) if ttft else (bound[0], bound[1])
        d, g = summarize(direct_ns[d_start:d_end]), summarize(gateway_ns[g_start:g_end])
        if d is not None and g is not None:
            added.append(round(pick(g) - pick(d), 4))
        d_start, g_start = d_end, g_end
    return added


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return ""
    return f"{statistics.median(values):+.3f} [{min(values):+.3f}, {max(values):+.3f}]"


def _errors_row(label: str, direct: Tally | None, gateway: Tally | None) -> Row:
    d = direct.errors if direct else None
    g = gateway.errors if gateway else None
    ok = (d or 0) == 0 and (g or 0) == 0
    samples = (direct.error_samples if direct else []) + (gateway.error_samples if gateway else [])
    return Row(
        label,
        "-" if d is None else str(d),
        "-" if g is None else str(g),
        "",
        "0",
        verdict(ok),
        {"metric": "errors", "direct": d, "gateway": g, "samples": samples},
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def build_rows(results: Results, extras: dict[str, Any] | None = None) -> list[Row]:
    """The first gateway run's rows with their targets; a second run (the embedded default) fills
    the last column. `extras` are the other benches' saved results (soak, workers) for their rows."""
    runs = results.gateways
    if not runs:
        return []
    rows = _run_rows(results, runs[0], primary=True)
    if len(runs) > 1:
        by_metric: dict[str, list[Row]] = {}
        for row in _run_rows(results, runs[1], primary=False):
            by_metric.setdefault(_row_key(row), []).append(row)
        for row in rows:
            twins = by_metric.get(_row_key(row))
            if twins:
                twin = twins.pop(0)
                row.second = twin.added if twin.added not in ("", "-") else twin.gateway
                row.second_values = twin.values
    rows += saved_bench_rows(extras or {})
    return rows


def _row_key(row: Row) -> str:
    return str(row.values.get("metric", row.figure))


def _run_rows(results: Results, run: GatewayRun, *, primary: bool) -> list[Row]:
    rows = [
        _added_rows("latency p50, c=1 (ms)", run.latency, lambda s: s.p50, ADDED_P50_MS, "latency_p50"),
        _added_rows("latency p99, c=1 (ms)", run.latency, lambda s: s.p99, ADDED_P99_MS, "latency_p99"),
        _added_rows(
            "TTFT p50, stream c=1 (ms)",
            run.ttft,
            lambda s: s.p50,
            ADDED_TTFT_P50_MS,
            "ttft_p50",
            ttft=True,
        ),
    ]
    tokens = f"{results.large_prompt_tokens:,}" if results.large_prompt_tokens else "?"
    kb = results.large_prompt_bytes // 1000
    rows.append(
        _added_rows(
            f"prompt {tokens} tok/{kb} KB p50 (ms)",
            run.large,
            lambda s: s.p50,
            LARGE_ADDED_P50_MS,
            "large_prompt_p50",
        )
    )
    c1_errors = [p for p in (run.latency, run.ttft, run.large) if p is not None]
    if c1_errors:
        direct, gateway = Tally(), Tally()
        for pair in c1_errors:
            direct.merge(pair.direct)
            gateway.merge(pair.gateway)
        rows.append(_errors_row("errors, c=1 scenarios", direct, gateway))
        rows.append(
            Row(
                "other processes' CPU, c=1 phase",
                "",
                foreign_share(run.c1_foreign),
                "",
                "~0% (else noisy)",
                INFO,
                {"metric": "foreign_cpu_c1", "share_of_core": run.c1_foreign},
            )
        )
    rows.extend(_gateway_rows(run, results.direct_throughput))
    if not primary:
        for row in rows:
            row.result = INFO
    return rows


def _gateway_rows(run: GatewayRun, direct_tp: Throughput | None) -> list[Row]:
    rows: list[Row] = []
    tp = run.throughput
    if tp is not None:
        d_rps = direct_tp.rps if direct_tp else None
        ratio = tp.rps / d_rps if d_rps else None
        ok = tp.rps >= THROUGHPUT_RPS and tp.tally.errors == 0
        rows.append(
            Row(
                f"throughput c={tp.concurrency} (req/s)",
                "-" if d_rps is None else f"{d_rps:,.0f}",
                f"{tp.rps:,.0f}",
                "-" if ratio is None else f"x{ratio:.2f}",
                f">= {THROUGHPUT_RPS:,.0f} req/s",
                verdict(ok),
                {
                    "metric": "throughput_rps",
                    "ledger": run.ledger,
                    "direct_rps": d_rps,
                    "gateway_rps": tp.rps,
                    "ratio": ratio,
                    "limit_rps": THROUGHPUT_RPS,
                    "gateway_answered": tp.tally.answered,
                    "gateway_elapsed_s": tp.tally.elapsed_ns / 1e9,
                    "direct_timeline_rps": direct_tp.timeline() if direct_tp else None,
                    "gateway_timeline_rps": tp.timeline(),
                },
            )
        )
        d_lat = summarize(direct_tp.tally.latencies_ns) if direct_tp else None
        g_lat = summarize(tp.tally.latencies_ns)
        rows.append(
            Row(
                f"latency p50/p99 at c={tp.concurrency} (ms)",
                "-" if d_lat is None else f"{d_lat.p50:.2f}/{d_lat.p99:.2f}",
                "-" if g_lat is None else f"{g_lat.p50:.2f}/{g_lat.p99:.2f}",
                "",
                "",
                INFO,
                {
                    "metric": "loaded_latency",
                    "ledger": run.ledger,
                    "direct": d_lat.as_dict() if d_lat else None,
                    "gateway": g_lat.as_dict() if g_lat else None,
                },
            )
        )
        rows.append(
            _errors_row(f"errors at c={tp.concurrency}", direct_tp.tally if direct_tp else None, tp.tally)
        )
        gw_us = tp.cpu_per_request_us("gateway")
        gw_busy = tp.cpu_utilisation("gateway")
        rows.append(
            Row(
                "gateway CPU per request (us)",
                "",
                f"{_us(gw_us)} ({_pct(gw_busy)} of a core)",
                "",
                f"<= {CPU_US_PER_REQUEST:g} us",
                verdict(gw_us <= CPU_US_PER_REQUEST) if gw_us is not None else "no data",
                {"metric": "gateway_cpu_us_per_request", "ledger": run.ledger, "us": gw_us, "busy": gw_busy},
            )
        )
        d_client = direct_tp.cpu_per_request_us(CLIENT) if direct_tp else None
        g_client = tp.cpu_per_request_us(CLIENT)
        rows.append(
            Row(
                "load generator CPU per request (us)",
                _us(d_client),
                _us(g_client),
                "",
                "",
                INFO,
                {
                    "metric": "client_cpu_us_per_request",
                    "ledger": run.ledger,
                    "direct": d_client,
                    "gateway": g_client,
                },
            )
        )
        d_core1 = core1_busy(direct_tp) if direct_tp else None
        g_core1 = core1_busy(tp)
        rows.append(
            Row(
                "core 1 busy (sandbox + load gen)",
                _pct(d_core1),
                _pct(g_core1),
                "",
                "< ~95% (else rig-bound)",
                INFO,
                {"metric": "client_core_busy", "ledger": run.ledger, "direct": d_core1, "gateway": g_core1},
            )
        )
        rows.append(
            Row(
                "other processes' CPU",
                foreign_share(direct_tp.foreign) if direct_tp else "-",
                foreign_share(tp.foreign),
                "",
                "~0% (else noisy)",
                INFO,
                {
                    "metric": "foreign_cpu",
                    "ledger": run.ledger,
                    "direct": direct_tp.foreign if direct_tp else None,
                    "gateway": tp.foreign,
                },
            )
        )
    rss_mb = run.rss_bytes / MB
    rows.append(
        Row(
            "gateway RSS after run (MB)",
            "",
            f"{rss_mb:.1f}",
            "",
            f"<= {RSS_MB:g} MB",
            verdict(rss_mb <= RSS_MB) if run.rss_bytes else "no data",
            {"metric": "rss_mb", "ledger": run.ledger, "value": rss_mb},
        )
    )
    rows.append(
        Row(
            "gateway start-up (s)",
            "",
            f"{run.startup_s:.2f}",
            "",
            f"<= {STARTUP_S:g} s",
            verdict(run.startup_s <= STARTUP_S),
            {"metric": "startup_s", "ledger": run.ledger, "value": run.startup_s},
        )
    )
    rows.append(
        Row(
            "ledger rows / answered",
            "",
            f"{run.ledger_rows:,} / {run.answered:,}",
            "",
            "equal",
            verdict(run.ledger_rows == run.answered),
            {
                "metric": "ledger_rows",
                "ledger": run.ledger,
                "rows": run.ledger_rows,
                "answered": run.answered,
                "sent": run.sent,
                "waited_s": run.ledger_wait_s,
            },
        )
    )
    return rows


def foreign_share(shares: dict[str, float]) -> str:
    """`core0 3% / core1 41%`: how much of each core other processes took during the window."""
    if not shares:
        return "-"
    return " / ".join(f"{name} {share * 100:.0f}%" for name, share in sorted(shares.items()))


def core1_busy(tp: Throughput) -> float | None:
    sandbox = tp.cpu_utilisation("sandbox")
    client = tp.cpu_utilisation(CLIENT)
    if sandbox is None or client is None:
        return None
    return sandbox + client
