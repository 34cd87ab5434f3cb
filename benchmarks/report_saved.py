"""Rows for the figures that take minutes to measure (RSS over 100k requests, 1 vs 2 workers):
their own make targets save JSON, and `make bench` shows the last saved figures beside its own."""

from __future__ import annotations

from typing import Any

from benchmarks.report_rows import Row, verdict

RSS_FLAT_MB = 5.0
WORKERS_RATIO = 1.6  # "near-linear" on 2 cores that the rig shares: see benchmarks/README.md


def saved_bench_rows(extras: dict[str, Any]) -> list[Row]:
    """RSS over 100k requests and 1 vs 2 workers take minutes each: their own make targets write
    JSON, and the table shows the last saved figures (or says how to get them)."""
    rows: list[Row] = []
    soak = extras.get("soak")
    if soak and soak.get("growth_mb") is not None:
        growth, requests = soak["growth_mb"], soak.get("requests", 0)
        rows.append(
            Row(
                f"RSS growth, 2nd half of {requests:,} requests (MB)",
                "",
                f"{growth:+.1f} (end {soak.get('final_mb', 0):.0f} MB)",
                "",
                f"flat: <= {RSS_FLAT_MB:g} MB",
                verdict(growth <= RSS_FLAT_MB),
                {"metric": "soak_rss_growth_mb", **soak},
                spread=f"make bench-soak, git {soak.get('git', '?')}",
            )
        )
    else:
        rows.append(
            Row(
                "RSS growth over 100k requests (MB)",
                "",
                "-",
                "",
                f"flat: <= {RSS_FLAT_MB:g} MB",
                "run make bench-soak",
                {"metric": "soak_rss_growth_mb"},
            )
        )
    workers = extras.get("workers")
    by_count = {r["workers"]: r for r in (workers or {}).get("runs", [])}
    if 1 in by_count and 2 in by_count and by_count[1]["rps"]:
        one, two = by_count[1], by_count[2]
        ratio = two["rps"] / one["rps"]
        rows.append(
            Row(
                "req/s, --workers 2 / --workers 1",
                "",
                f"x{ratio:.2f} ({one['rps']:,.0f} -> {two['rps']:,.0f})",
                "",
                f">= x{WORKERS_RATIO:g} (near-linear)",
                verdict(ratio >= WORKERS_RATIO),
                {"metric": "workers_ratio", "ratio": ratio, **(workers or {})},
                spread=f"make bench-workers, git {workers.get('git', '?') if workers else '?'}",
            )
        )
    else:
        rows.append(
            Row(
                "req/s, --workers 2 / --workers 1",
                "",
                "-",
                "",
                f">= x{WORKERS_RATIO:g} (near-linear)",
                "run make bench-workers",
                {"metric": "workers_ratio"},
            )
        )
    return rows
