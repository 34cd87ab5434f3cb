"""Read-only ledger queries the dashboard needs beyond the spend API: request-level rates from the
raw rows, the percentile the latency figures use (`gateway.accounting.performance`), and the names
behind keys, teams and tags.

Money never comes from here: every spend figure on the dashboard is the spend API's own query
(`gateway.accounting.spend.query_spend`). These queries read the raw `requests` rows, so they are
bounded: rates are one aggregate over the range, percentiles a sample of the newest rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import orjson
from sqlalchemy import Select, and_, case, func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ColumnElement

from gateway.accounting.keys_schema import virtual_keys
from gateway.accounting.schema import requests, spend_daily, spend_daily_tags

# Newest rows a latency figure is computed from: enough for a stable p95, cheap on any range.
LATENCY_SAMPLE = 20_000


@dataclass(frozen=True, slots=True)
class Slice:
    """Which raw rows a figure covers: created in [since, until), optionally one team, model, tag."""

    since: datetime
    until: datetime
    team: str | None = None
    model: str | None = None
    tag: str | None = None


@dataclass(frozen=True, slots=True)
class Rates:
    requests: int
    fallbacks: int
    cache_hits: int  # answered from the response cache
    cacheable: int  # looked up in the response cache (hits and misses)
    prompt_tokens: int
    cached_tokens: int  # prompt tokens read from a provider's prompt cache


@dataclass(frozen=True, slots=True)
class KeyLabel:
    prefix: str
    name: str
    team: str


async def request_rates(engine: AsyncEngine, where: Slice) -> Rates:
    t = requests.c
    statement = select(
        func.count().label("requests"),
        _count_if(t.fallback_used.is_(True)).label("fallbacks"),
        _count_if(t.cache_status == "hit").label("cache_hits"),
        _count_if(t.cache_status.in_(("hit", "miss"))).label("cacheable"),
        func.coalesce(func.sum(t.prompt_tokens), 0).label("prompt_tokens"),
        func.coalesce(func.sum(t.cached_tokens), 0).label("cached_tokens"),
    ).where(*filters_of(where))
    async with engine.connect() as conn:
        row = (await conn.execute(statement)).one()._mapping
    return Rates(**{name: int(row[name] or 0) for name in Rates.__dataclass_fields__})


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """PostgreSQL's `percentile_cont`: linear interpolation between the closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


async def key_labels(engine: AsyncEngine, key_ids: Sequence[str]) -> dict[str, KeyLabel]:
    """What people call the keys the ledger names by id (revoked ones included)."""
    if not key_ids:
        return {}
    k = virtual_keys.c
    statement = select(k.id, k.prefix, k.name, k.team).where(k.id.in_(list(key_ids)))
    async with engine.connect() as conn:
        rows = (await conn.execute(statement)).all()
    return {row.id: KeyLabel(prefix=row.prefix, name=row.name, team=row.team) for row in rows}


async def teams_seen(engine: AsyncEngine, *, since: date) -> list[str]:
    """Teams with spend rows since a day, from the rollup (never the raw table)."""
    statement = (
        select(spend_daily.c.team).where(spend_daily.c.day >= since, spend_daily.c.team != "").distinct()
    )
    async with engine.connect() as conn:
        return sorted(str(team) for team in (await conn.execute(statement)).scalars())


async def tags_seen(engine: AsyncEngine, *, since: date, team: str | None = None) -> list[str]:
    """Tags used since a day (by one team, or by all), from the tag rollup."""
    t = spend_daily_tags.c
    statement: Select[Any] = select(t.tag).where(t.day >= since).distinct()
    if team is not None:
        statement = statement.where(t.team == team)
    async with engine.connect() as conn:
        return sorted(str(tag) for tag in (await conn.execute(statement)).scalars())


def filters_of(where: Slice) -> list[ColumnElement[bool]]:
    """The WHERE clauses that select a slice's raw rows."""
    t = requests.c
    clauses = [t.created_at >= where.since, t.created_at < where.until]
    if where.team is not None:
        clauses.append(t.team == where.team)
    if where.model is not None:
        clauses.append(t.model == where.model)
    if where.tag is not None:
        # `tags` is a JSON array written by orjson, so the tag appears exactly as its JSON string.
        quoted = orjson.dumps(where.tag).decode()
        escaped = quoted.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        clauses.append(and_(t.tags.is_not(None), t.tags.like(f"%{escaped}%", escape="\\")))
    return clauses


def _count_if(condition: ColumnElement[bool]) -> ColumnElement[Any]:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
