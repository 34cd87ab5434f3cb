"""The report's presentation: the plain-text table, the notes on machine noise and on throughput
that drifts over a run, and the same rows as JSON for later comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.report import Results, foreign_share
from benchmarks.report_rows import MET, MISSED, Row

NOISY_SHARE = 0.10


def _noise_notes(results: Results) -> list[str]:
    windows = [(f"c=1 phase [{r.shape}]", r.c1_foreign) for r in results.gateways if r.c1_foreign]
    if results.direct_throughput:
        # Direct runs only use core 1 (sandbox and load generator): noise on core 0 does not matter.
        shares = {k: v for k, v in results.direct_throughput.foreign.items() if k != "core0"}
        windows.append(("direct throughput", shares))
    windows += [(f"throughput [{r.shape}]", r.throughput.foreign) for r in results.gateways if r.throughput]
    noisy = [
        f"{name} ({foreign_share(shares)})"
        for name, shares in windows
        if max(shares.values(), default=0) > NOISY_SHARE
    ]
    if not noisy:
        return []
    return [
        "the machine was busy with other work during: "
        + "; ".join(noisy)
        + " -- those figures are pessimistic"
    ]


def _timeline_notes(results: Results) -> list[str]:
    """Per-second answers of each throughput run, flagged when the last second fell well behind."""
    runs = [("direct", results.direct_throughput)]
    runs += [(f"via gateway [{run.shape}]", run.throughput) for run in results.gateways]
    lines = []
    for name, tp in runs:
        timeline = tp.timeline() if tp else []
        if len(timeline) < 2:
            continue
        line = f"req/s per second, {name}: " + " ".join(str(n) for n in timeline)
        if timeline[-1] < 0.7 * max(timeline[:2]):
            line += f"  <- DEGRADES: {max(timeline[:2])} -> {timeline[-1]}"
        lines.append(line)
    return lines


HEADERS = (
    "figure",
    "direct",
    "via gateway",
    "added",
    "per block: median [min, max]",
    "target",
    "result",
    "embedded default",
)


def render(results: Results, rows: list[Row]) -> str:
    table = [
        HEADERS,
        *((r.figure, r.direct, r.gateway, r.added, r.spread, r.target, r.result, r.second) for r in rows),
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADERS))]
    right = {1, 2, 3, 4, 7}

    def fmt(line: tuple[str, ...]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        return " | ".join(cells).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    env = results.environment
    lines = [
        f"Tollgate benchmark  {env.get('timestamp', '')}  git {env.get('git', '?')}  "
        f"{env.get('cpus', '?')} CPUs  python {env.get('python', '?')}",
        f"pinning: {env.get('pinning', '?')}",
        f"gateway: {env.get('gateway_cmd', '?')}",
        "settings: " + ", ".join(f"{k}={v}" for k, v in results.settings.items()),
        *(f"{'columns' if i == 0 else 'last column'}: {shape}" for i, shape in enumerate(_shapes(results))),
        "",
        fmt(HEADERS),
        rule,
        *(fmt(line) for line in table[1:]),
    ]
    missed = [r.figure for r in rows if r.result == MISSED]
    lines += ["", f"targets: {sum(r.result == MET for r in rows)} met, {len(missed)} missed"]
    lines += [f"note: {note}" for note in results.notes]
    lines += _timeline_notes(results)
    lines += [f"note: {note}" for note in _noise_notes(results)]
    for row in rows:
        for sample in row.values.get("samples") or ():
            lines.append(f"error sample ({row.figure}): {sample}")
    return "\n".join(lines)


def _shapes(results: Results) -> list[str]:
    described = {
        "production": "direct / via gateway / added: the production shape (team virtual key, daily "
        "budget and rpm limit, budgets and limits in Redis, ledger on PostgreSQL, model `auto` "
        "through the router) beside the same run's direct-to-sandbox requests",
        "embedded": "embedded default (SQLite ledger, open mode, in-memory state, a named model): "
        "its added figure, or its value where there is none",
    }
    return [described.get(r.shape, r.shape) for r in results.gateways]


def to_json(results: Results, rows: list[Row]) -> dict[str, Any]:
    return {
        "environment": results.environment,
        "settings": results.settings,
        "large_prompt": {"tokens": results.large_prompt_tokens, "bytes": results.large_prompt_bytes},
        "rows": [
            {
                "figure": r.figure,
                "cells": {
                    "direct": r.direct,
                    "via_gateway": r.gateway,
                    "added": r.added,
                    "target": r.target,
                    "embedded_default": r.second,
                },
                "result": r.result or "info",
                "data": r.values,
                "embedded_default": r.second_values,
            }
            for r in rows
        ],
        "notes": results.notes,
    }


def write_json(results: Results, rows: list[Row], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(results, rows), indent=2, default=str) + "\n")
