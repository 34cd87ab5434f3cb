"""Spend per task route (`routing.routes`): how many `auto` requests each route took, what they
cost, and how many of them were answered on the cheapest tier, which is where routing saves.

Read from the raw `requests` rows over the asked range (the route is not a rollup dimension), in
one grouped aggregate, so the cost is one indexed range scan whatever the number of routes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.schema import requests


async def route_spend(
    engine: AsyncEngine,
    *,
    since: datetime,
    until: datetime,
    cheapest: str | None,
    team: str | None = None,
) -> list[dict[str, Any]]:
    """One dict per route: requests, errors, cost and baseline in nano-USD, and the share answered
    on `cheapest` (the first routing tier); largest cost first."""
    t = requests.c
    statement = (
        select(
            t.route,
            func.count().label("requests"),
            func.coalesce(func.sum(case((t.status >= 400, 1), else_=0)), 0).label("errors"),
            func.coalesce(func.sum(case((t.tier == cheapest, 1), else_=0)), 0).label("cheapest"),
            func.coalesce(func.sum(t.cost_nano), 0).label("cost_nano"),
            func.coalesce(func.sum(t.baseline_cost_nano), 0).label("baseline_cost_nano"),
        )
        .where(t.created_at >= since, t.created_at < until, t.route.is_not(None))
        .group_by(t.route)
    )
    if team is not None:
        statement = statement.where(t.team == team)
    async with engine.connect() as conn:
        rows = [dict(row._mapping) for row in await conn.execute(statement)]
    out = []
    for row in rows:
        count = int(row["requests"])
        out.append(
            {
                "route": row["route"],
                "requests": count,
                "errors": int(row["errors"]),
                "cost_nano": int(row["cost_nano"]),
                "baseline_cost_nano": int(row["baseline_cost_nano"]),
                "cheapest_tier": cheapest,
                "cheapest_share": round(int(row["cheapest"]) / count, 6) if count else 0.0,
            }
        )
    out.sort(key=lambda r: (-r["cost_nano"], r["route"]))
    return out
