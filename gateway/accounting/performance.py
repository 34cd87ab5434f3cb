"""How requests went, read from the raw ledger rows: end-to-end latency beside TTFT and output speed
per model or provider, errors by status, type, provider and model over time, and retries and
fallbacks per deployment. Money is not here (that is `gateway.accounting.spend`).

Latency covers every successful request the upstream answered, streamed or not; TTFT exists only
for streams, so its sample count is given apart. Percentiles are PostgreSQL's `percentile_cont`
(linear, `insights.percentile`), computed here on both databases over the newest `LATENCY_SAMPLE`
rows: one bounded fetch serves every group and every measure.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ColumnElement

from gateway.accounting.explorer import plain_row
from gateway.accounting.insights import LATENCY_SAMPLE, Slice, filters_of, percentile
from gateway.accounting.schema import requests
from gateway.accounting.spend import bucket_column

# Dimensions a performance figure can be split by; a new ledger column (`route`) is one line here.
DIMENSIONS: dict[str, ColumnElement[Any]] = {
    "model": requests.c.model,
    "provider": requests.c.provider,
    "team": requests.c.team,
    "key": requests.c.key_id,
    "tier": requests.c.tier,
    "route": requests.c.route,
    "status": requests.c.status,
    "error_type": requests.c.error_type,
}


@dataclass(frozen=True, slots=True)
class GroupLatency:
    name: str | None
    requests: int  # successful, upstream-answered requests measured end to end
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    streamed: int  # of those, the streams: the only ones with a time to first token
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    tokens_per_second_p50: float | None
    overhead_p50_ms: float | None  # the gateway's own share of the end-to-end time


async def latency_by(
    engine: AsyncEngine, where: Slice, *, by: str, sample: int = LATENCY_SAMPLE
) -> tuple[GroupLatency, list[GroupLatency]]:
    """Every group together, then one entry per group, largest first."""
    t = requests.c
    rows = (
        select(
            DIMENSIONS[by].label("name"), t.latency_ms, t.ttft_ms, t.output_tokens_per_second, t.overhead_ms
        )
        .where(*filters_of(where), t.status < 400, t.model.is_not(None))
        .where(or_(t.cache_status.is_(None), t.cache_status != "hit"))
        .order_by(t.created_at.desc())
        .limit(sample)
    )
    async with engine.connect() as conn:
        fetched = (await conn.execute(rows)).all()
    groups: dict[str | None, list[Any]] = defaultdict(list)
    for row in fetched:
        groups[row.name].append(row)
    overall = _latency(None, list(fetched))
    per_group = [_latency(name, values) for name, values in groups.items()]
    per_group.sort(key=lambda g: (-g.requests, str(g.name)))
    return overall, per_group


def _latency(name: str | None, rows: list[Any]) -> GroupLatency:
    total = [float(r.latency_ms) for r in rows]
    ttfts = [float(r.ttft_ms) for r in rows if r.ttft_ms is not None]
    speeds = [float(r.output_tokens_per_second) for r in rows if r.output_tokens_per_second is not None]
    overheads = [float(r.overhead_ms) for r in rows if r.overhead_ms is not None]
    return GroupLatency(
        name=name,
        requests=len(total),
        latency_p50_ms=percentile(total, 0.5),
        latency_p95_ms=percentile(total, 0.95),
        streamed=len(ttfts),
        ttft_p50_ms=percentile(ttfts, 0.5),
        ttft_p95_ms=percentile(ttfts, 0.95),
        tokens_per_second_p50=percentile(speeds, 0.5),
        overhead_p50_ms=percentile(overheads, 0.5),
    )


async def errors_over_time(
    engine: AsyncEngine, where: Slice, *, by: str, bucket: str
) -> list[dict[str, Any]]:
    """Failed requests (status >= 400) per hour or day and per value of `by`."""
    t = requests.c
    label = bucket_column(engine, bucket).label("bucket")
    name = DIMENSIONS[by].label("name")
    statement = (
        select(label, name, func.count().label("errors"))
        .where(*filters_of(where), t.status >= 400)
        .group_by(label, name)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(statement)).all()
    return [{"bucket": _text(row.bucket), "name": row.name, "errors": int(row.errors)} for row in rows]


async def error_kinds(engine: AsyncEngine, where: Slice) -> list[dict[str, Any]]:
    """Failed requests per status, error type, provider and model together, most frequent first."""
    t = requests.c
    dims = (t.status, t.error_type, t.provider, t.model)
    statement = (
        select(*dims, func.count().label("errors"), func.max(t.created_at).label("last_at"))
        .where(*filters_of(where), t.status >= 400)
        .group_by(*dims)
    )
    async with engine.connect() as conn:
        rows = [plain_row(row) for row in await conn.execute(statement)]
    for row in rows:
        row["last_at"] = _text(row["last_at"])
    rows.sort(
        key=lambda r: (-r["errors"], r["status"], str(r["error_type"]), str(r["provider"]), str(r["model"]))
    )
    return rows


async def deployments(engine: AsyncEngine, where: Slice) -> list[dict[str, Any]]:
    """Per deployment (`provider/upstream-model`): requests it ended, the retries those took
    (attempts beyond one per deployment tried), how often it answered as a fallback, and how often
    the gateway gave up on it and moved to the next one."""
    t = requests.c
    dims = (t.deployments_tried, t.fallback_used, t.status < 400)
    statement = (
        select(*dims, func.count().label("requests"), func.sum(t.attempts).label("attempts"))
        .where(*filters_of(where), t.deployments_tried.is_not(None))
        .group_by(*dims)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(statement)).all()
    table: dict[str, dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(
            ("requests", "answered", "errors", "retries", "fallback_answers", "failed_over"), 0
        )
    )
    for tried_text, fallback, ok, count, attempts in rows:
        tried = str(tried_text).split(",")
        count, attempts = int(count), int(attempts or 0)
        last = table[tried[-1]]
        last["requests"] += count
        last["answered" if ok else "errors"] += count
        last["retries"] += attempts - count * len(tried)
        if fallback and ok:
            last["fallback_answers"] += count
        for earlier in tried[:-1]:
            table[earlier]["failed_over"] += count
    return [
        {"deployment": name, **values}
        for name, values in sorted(table.items(), key=lambda item: (-item[1]["requests"], item[0]))
    ]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)
