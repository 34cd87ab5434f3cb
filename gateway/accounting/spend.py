"""Spend queries: totals grouped by team, key, model, provider, tier, tag, day or hour over a time
range. Day-level questions are answered from the rollups; hour-level ones from the raw rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import Date, case, cast, func, literal, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ColumnElement

from gateway.accounting.schema import requests, spend_daily, spend_daily_tags
from gateway.errors import InvalidRequest

GROUPS = ("team", "key", "model", "provider", "tier", "route", "tag", "day", "hour")
_COLUMN = {"key": "key_id"}
MEASURES = (
    "requests",
    "errors",
    "prompt_tokens",
    "completion_tokens",
    "cost_nano",
    "baseline_cost_nano",
    "cache_saving_nano",
    # What the context policy left out of prompts (`gateway.context`): tokens, and at the input price.
    "context_tokens_removed",
    "context_saving_nano",
)


@dataclass(frozen=True, slots=True)
class SpendQuery:
    group_by: tuple[str, ...]
    since: datetime
    until: datetime
    team: str | None = None  # restricts every figure to one team (a team key sees only its own)


# A filter value (team, model, tag) as a query parameter: PostgreSQL text cannot hold NUL, and a
# NUL in a filter would fail the query rather than match nothing.
FILTER_PATTERN = r"^[^\x00]*$"


def parse_group_by(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    groups = tuple(part.strip() for part in value.split(",") if part.strip())
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise InvalidRequest(
            f"cannot group by {', '.join(unknown)}; choose from {', '.join(GROUPS)}", param="group_by"
        )
    if "tag" in groups and set(groups) - {"tag", "team", "day"}:
        raise InvalidRequest("'tag' combines only with 'team' and 'day'", param="group_by")
    if "tag" in groups and "hour" in groups:
        raise InvalidRequest("'tag' is kept per day, not per hour", param="group_by")
    return groups


def parse_time(value: str | None, *, default: datetime, now: datetime) -> datetime:
    """An ISO date or timestamp, or a relative span back from now: `30m`, `12h`, `7d`."""
    if not value:
        return default
    units = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    # isdigit() alone takes '²' and other digits int() refuses; a span too long has no date.
    if value[-1:] in units and value[:-1].isascii() and value[:-1].isdigit():
        try:
            return now - timedelta(**{units[value[-1]]: int(value[:-1])})
        except OverflowError:
            raise InvalidRequest(f"'{value}' reaches back before the year 1") from None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidRequest(f"'{value}' is not a date, a timestamp or a span like 7d") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


async def query_spend(engine: AsyncEngine, query: SpendQuery) -> list[dict[str, Any]]:
    """One dict per group, with the measures, error rate and savings; sorted by cost, largest first."""
    if "hour" in query.group_by or "route" in query.group_by:  # the rollups keep neither
        rows = await _from_raw(engine, query)
    elif "tag" in query.group_by:
        rows = await _from_rollup(engine, query, spend_daily_tags)
    else:
        rows = await _from_rollup(engine, query, spend_daily)
    for row in rows:
        row["error_rate"] = round(row["errors"] / row["requests"], 6) if row["requests"] else 0.0
        row["savings_nano"] = savings(row["baseline_cost_nano"], row["cost_nano"])
    rows.sort(key=lambda r: (-r["cost_nano"], *(str(r.get(g)) for g in query.group_by)))
    return rows


def savings(baseline_nano: int, cost_nano: int) -> int | None:
    """Baseline minus cost; None (not configured) when nothing spent was priced on a baseline, so a
    gateway without `pricing.baseline_model` never reports its whole spend as a loss."""
    if baseline_nano == 0 and cost_nano > 0:
        return None
    return baseline_nano - cost_nano


def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {name: sum(int(r.get(name) or 0) for r in rows) for name in MEASURES}
    total["savings_nano"] = savings(total["baseline_cost_nano"], total["cost_nano"])
    total["error_rate"] = round(total["errors"] / total["requests"], 6) if total["requests"] else 0.0
    return total


async def _from_rollup(engine: AsyncEngine, query: SpendQuery, table: Any) -> list[dict[str, Any]]:
    dims = [table.c[_COLUMN.get(g, g)].label(g) for g in query.group_by]
    sums = [
        (func.coalesce(func.sum(table.c[m]), 0) if m in table.c else literal(0)).label(m) for m in MEASURES
    ]
    statement = select(*dims, *sums).where(
        table.c.day >= query.since.date(), table.c.day <= query.until.date()
    )
    if query.team is not None:
        statement = statement.where(table.c.team == query.team)
    if dims:
        statement = statement.group_by(*dims)
    async with engine.connect() as conn:
        result = await conn.execute(statement)
        return [_clean(dict(row._mapping)) for row in result if row._mapping["requests"]]


async def _from_raw(engine: AsyncEngine, query: SpendQuery) -> list[dict[str, Any]]:
    t = requests.c
    dims: list[ColumnElement[Any]] = []
    for group in query.group_by:
        if group == "hour":
            dims.append(_hour(engine).label("hour"))
        elif group == "day":
            dims.append(_day(engine).label("day"))
        else:
            dims.append(t[_COLUMN.get(group, group)].label(group))
    sums = [
        func.count().label("requests"),
        func.coalesce(func.sum(case((t.status >= 400, 1), else_=0)), 0).label("errors"),
        *(func.coalesce(func.sum(t[m]), 0).label(m) for m in MEASURES[2:]),
    ]
    statement = select(*dims, *sums).where(t.created_at >= query.since, t.created_at < query.until)
    if query.team is not None:
        statement = statement.where(t.team == query.team)
    statement = statement.group_by(*dims)
    async with engine.connect() as conn:
        result = await conn.execute(statement)
        return [_clean(dict(row._mapping)) for row in result]


def _day(engine: AsyncEngine) -> ColumnElement[Any]:
    if engine.dialect.name == "postgresql":
        return cast(requests.c.created_at, Date)
    return func.date(requests.c.created_at)


def _hour(engine: AsyncEngine) -> ColumnElement[Any]:
    if engine.dialect.name == "postgresql":
        return func.to_char(func.date_trunc("hour", requests.c.created_at), 'YYYY-MM-DD"T"HH24:00:00')
    return func.strftime("%Y-%m-%dT%H:00:00", requests.c.created_at)


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    for name, value in row.items():
        if isinstance(value, date):
            row[name] = value.isoformat()
        elif name in MEASURES:
            row[name] = int(value or 0)
        elif value == "":
            row[name] = None
    return row


async def period_spend(
    engine: AsyncEngine,
    *,
    first_day: date,
    last_day: date,
    team: str | None = None,
    key_id: str | None = None,
) -> int:
    """Nano-USD spent between two days (inclusive) by a team or a key, from the daily rollup."""
    statement = select(func.coalesce(func.sum(spend_daily.c.cost_nano), 0)).where(
        spend_daily.c.day >= first_day, spend_daily.c.day <= last_day
    )
    if team is not None:
        statement = statement.where(spend_daily.c.team == team)
    if key_id is not None:
        statement = statement.where(spend_daily.c.key_id == key_id)
    async with engine.connect() as conn:
        return int((await conn.execute(statement)).scalar_one())


def bucket_column(engine: AsyncEngine, bucket: str) -> ColumnElement[Any]:
    """A raw row's hour or day label, spelled as the spend query spells it (for charts beside it)."""
    return _hour(engine) if bucket == "hour" else _day(engine)
