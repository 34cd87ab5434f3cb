"""`GET /v1/spend`: what was spent, grouped and totalled, as JSON or (with `Accept: text/csv`) CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

import orjson
from fastapi import APIRouter, Query, Request, Response

from gateway.accounting.route_spend import route_spend
from gateway.accounting.routing_checks import routing_checks
from gateway.accounting.spend import (
    FILTER_PATTERN,
    GROUPS,
    SpendQuery,
    parse_group_by,
    query_spend,
    savings,
    totals,
)
from gateway.http.headers import request_headers
from gateway.routes.reading import caller, readable_team, window
from gateway.runtime import Runtime
from pricing.money import format_usd

router = APIRouter()

_MONEY = ("cost", "baseline_cost", "savings", "cache_saving", "context_saving")
SAVINGS_NOT_CONFIGURED = (
    "not configured: set pricing.baseline_model to the model teams would call without Tollgate"
)


def present(row: dict[str, Any]) -> dict[str, Any]:
    """Nano-USD stay exact integers; a decimal dollar string rides along for people."""
    shown = dict(row)
    for name in _MONEY:
        if f"{name}_nano" not in row:
            continue  # a figure this row's source does not keep
        nano = row[f"{name}_nano"]
        shown[f"{name}_usd"] = None if nano is None else format_usd(int(nano))
    if row.get("savings_nano", 0) is None:
        shown["savings_note"] = SAVINGS_NOT_CONFIGURED
    return shown


@router.get("/v1/spend", summary="Spend grouped by team, key, model, provider, tier, tag, day or hour")
async def spend(
    request: Request,
    group_by: str | None = Query(None, description=f"comma-separated: {', '.join(GROUPS)}"),
    since: str | None = Query(None, description="ISO date/time or a span back from now: 30m, 12h, 7d"),
    until: str | None = Query(None, description="ISO date/time; default now"),
    team: str | None = Query(None, description="only this team", pattern=FILTER_PATTERN),
) -> Response:
    runtime: Runtime = request.app.state.runtime
    team = readable_team(await caller(request, runtime), team)
    start, end = window(since, until)
    query = SpendQuery(group_by=parse_group_by(group_by), since=start, until=end, team=team)
    rows = [present(r) for r in await query_spend(runtime.engine, query)]
    summary = present(totals(rows))
    if "text/csv" in request_headers(request).get("accept", ""):
        return Response(to_csv(query.group_by, rows), media_type="text/csv; charset=utf-8")
    body = {
        "object": "spend",
        "since": query.since.isoformat(),
        "until": query.until.isoformat(),
        "group_by": list(query.group_by),
        "data": rows,
        "totals": summary,
    }
    return Response(orjson.dumps(body), media_type="application/json")


@router.get("/v1/spend/routing", summary="Per route: share answered low, savings, escalations, agreement")
async def routing(
    request: Request,
    since: str | None = Query(None, description="ISO date/time or a span back from now: 30m, 12h, 7d"),
    until: str | None = Query(None, description="ISO date/time; default now"),
) -> Response:
    """How `auto` routing holds up on this gateway's own traffic (`gateway.accounting.routing_checks`);
    a team key sees its own team's requests."""
    runtime: Runtime = request.app.state.runtime
    team = readable_team(await caller(request, runtime), None)
    start, end = window(since, until)
    rows = await routing_checks(
        runtime.engine, since=start, until=end, routing=runtime.config.routing, team=team
    )
    body = {
        "object": "routing_checks",
        "since": start.isoformat(),
        "until": end.isoformat(),
        "data": [row.to_json() for row in rows],
    }
    return Response(orjson.dumps(body), media_type="application/json")


@router.get("/v1/spend/routes", summary="Requests, cost and share answered cheapest per task route")
async def spend_by_route(
    request: Request,
    since: str | None = Query(None, description="ISO date/time or a span back from now: 30m, 12h, 7d"),
    until: str | None = Query(None, description="ISO date/time; default now"),
    team: str | None = Query(None, description="only this team", pattern=FILTER_PATTERN),
) -> Response:
    runtime: Runtime = request.app.state.runtime
    team = readable_team(await caller(request, runtime), team)
    start, end = window(since, until)
    tiers = runtime.config.routing.tiers
    rows = await route_spend(
        runtime.engine, since=start, until=end, cheapest=tiers[0].name if tiers else None, team=team
    )
    for row in rows:
        row["cost_usd"] = format_usd(row["cost_nano"])
        saved = savings(row["baseline_cost_nano"], row["cost_nano"])
        row["savings_nano"] = saved
        row["savings_usd"] = None if saved is None else format_usd(saved)
    body = {"object": "spend.routes", "since": start.isoformat(), "until": end.isoformat(), "data": rows}
    return Response(orjson.dumps(body), media_type="application/json")


def to_csv(group_by: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    columns = [
        *group_by,
        "requests",
        "errors",
        "error_rate",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "baseline_cost_usd",
        "savings_usd",
        "cache_saving_usd",
        "context_saving_usd",
        "context_tokens_removed",
        "cost_nano",
        "baseline_cost_nano",
        "savings_nano",
    ]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
