"""Recomputing costs from stored usage — after a price fix, say — and keeping the rollups in step.

Every row keeps its token counts, so its cost can be derived again from today's prices: each row
whose cost changes is updated, and the difference is added to its daily rollups.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Table, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.accounting.schema import ROLLUP_DIMENSIONS, requests, spend_daily, spend_daily_tags
from gateway.models import ModelRegistry
from pricing.cost import cost_breakdown, cost_nano
from pricing.price import Price
from usage import Usage

_BATCH = 2000
_COSTS = ("input_cost_nano", "output_cost_nano", "cost_nano", "baseline_cost_nano")


@dataclass(slots=True)
class RepriceReport:
    rows: int = 0
    changed: int = 0
    before_nano: int = 0
    after_nano: int = 0
    still_unknown: int = 0


async def reprice(
    engine: AsyncEngine, registry: ModelRegistry, *, since: datetime, version: str, dry_run: bool = False
) -> RepriceReport:
    report = RepriceReport()
    prices = _deployment_prices(registry)
    last: tuple[datetime, str] | None = None
    while True:
        statement = (
            select(requests)
            .where(requests.c.created_at >= since)
            .order_by(requests.c.created_at, requests.c.id)
        )
        if last is not None:
            statement = statement.where((requests.c.created_at, requests.c.id) > last)  # type: ignore[operator]
        async with engine.begin() as conn:
            rows = [dict(r._mapping) for r in (await conn.execute(statement.limit(_BATCH)))]
            if not rows:
                return report
            last = (rows[-1]["created_at"], rows[-1]["id"])
            deltas: dict[tuple[Any, ...], dict[str, int]] = defaultdict(lambda: dict.fromkeys(_COSTS, 0))
            tag_deltas: dict[tuple[Any, ...], dict[str, int]] = defaultdict(lambda: dict.fromkeys(_COSTS, 0))
            for row in rows:
                report.rows += 1
                report.before_nano += row["cost_nano"]
                new = _costs(row, prices.get((row["provider"], row["upstream_model"])), registry.baseline)
                report.after_nano += new["cost_nano"]
                if new["price_unknown"]:
                    report.still_unknown += 1
                changed = {k: v for k, v in new.items() if row[k] != v}
                if not changed:
                    continue
                report.changed += 1
                if dry_run:
                    continue
                await conn.execute(
                    update(requests)
                    .where(requests.c.id == row["id"], requests.c.created_at == row["created_at"])
                    .values(**changed, price_version=version)
                )
                day = row["created_at"].date()
                key = (day, *(row[d] or "" for d in ROLLUP_DIMENSIONS))
                for name in _COSTS:
                    difference = (new[name] or 0) - (row[name] or 0)
                    deltas[key][name] += difference
                    for tag in orjson.loads(row["tags"]) if row["tags"] else ():
                        tag_deltas[(day, str(tag), row["team"] or "")][name] += difference
            if not dry_run:
                await _shift(conn, spend_daily, ("day", *ROLLUP_DIMENSIONS), _COSTS, deltas)
                await _shift(
                    conn,
                    spend_daily_tags,
                    ("day", "tag", "team"),
                    ("cost_nano", "baseline_cost_nano"),
                    tag_deltas,
                )


async def _shift(
    conn: AsyncConnection,
    table: Table,
    keys: tuple[str, ...],
    measures: tuple[str, ...],
    deltas: dict[tuple[Any, ...], dict[str, int]],
) -> None:
    """Move existing rollup rows by the differences (the writer created every row a request has)."""
    for key, delta in deltas.items():
        where = [table.c[name] == value for name, value in zip(keys, key, strict=True)]
        values = {name: table.c[name] + delta[name] for name in measures if delta[name]}
        if values:
            await conn.execute(update(table).where(*where).values(**values))


def _deployment_prices(registry: ModelRegistry) -> dict[tuple[str, str], Price | None]:
    return {
        (d.target.provider, d.target.upstream_model): d.price
        for _, model in registry.public_names()
        for d in model.deployments
    }


def _costs(row: dict[str, Any], price: Price | None, baseline: Price | None) -> dict[str, Any]:
    usage = Usage(
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        cached_tokens=row["cached_tokens"],
        cache_write_tokens=row["cache_write_tokens"],
        cache_write_1h_tokens=row["cache_write_1h_tokens"],
        reasoning_tokens=row["reasoning_tokens"],
    )
    if row["cache_status"] == "idempotent_replay" or price is None:
        # A replay is never charged; an unknown price stays flagged rather than turning into zero.
        costs: dict[str, Any] = {"input_cost_nano": 0, "output_cost_nano": 0, "cost_nano": 0}
        costs["price_unknown"] = price is None and row["cache_status"] != "idempotent_replay"
    else:
        cost = cost_breakdown(usage, price)
        costs = {
            "input_cost_nano": cost.input_nano,
            "output_cost_nano": cost.output_nano,
            # An escalated row also paid for its discarded first attempt, kept at its price then.
            "cost_nano": cost.total_nano + (row.get("escalation_cost_nano") or 0),
            "price_unknown": False,
            "price_source": price.source,
        }
    if baseline is not None and row["cache_status"] != "idempotent_replay":
        costs["baseline_cost_nano"] = cost_nano(Usage(usage.prompt_tokens, usage.completion_tokens), baseline)
    else:
        costs["baseline_cost_nano"] = row["baseline_cost_nano"]
    return costs
