"""`/dashboard`: the spend dashboard's page, its built static assets, and the JSON it draws from.

The page itself needs no key; every `/dashboard/api/...` call authenticates like the spend API
(admin key: everything; team key: its own team only, 403 for another; open mode: no key).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import FileResponse, RedirectResponse

from gateway.accounting.insights import tags_seen, teams_seen
from gateway.accounting.routing_checks import routing_checks
from gateway.dashboard import breakdown, figures
from gateway.dashboard.fleet import fleet
from gateway.dashboard.scope import Scope, dashboard_scope, principal_of
from gateway.errors import InvalidRequest
from gateway.policy.principal import Principal
from gateway.runtime import Runtime

ASSETS = Path(__file__).resolve().parent / "assets"
_ASSET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TYPES = {".js": "text/javascript", ".css": "text/css", ".map": "application/json", ".txt": "text/plain"}
# Everything the page loads comes from this origin: no CDN, no inline script.
_PAGE_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}
_NAMES_SINCE = timedelta(days=400)  # how far back the filter lists look for teams and tags

Caller = Annotated[Principal, Depends(principal_of)]
Filters = Annotated[Scope, Depends(dashboard_scope)]

router = APIRouter(prefix="/dashboard", tags=["dashboard"])


@router.get("", include_in_schema=False)
async def page() -> Response:
    return FileResponse(ASSETS / "index.html", media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)


@router.get("/", include_in_schema=False)
async def page_with_slash() -> Response:
    return RedirectResponse("/dashboard", status_code=308)


@router.get("/assets/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    path = ASSETS / name
    if not _ASSET_NAME.match(name) or path.suffix not in _TYPES or not path.is_file():
        return _json(
            {"error": {"message": "no such asset", "type": "invalid_request_error", "code": "not_found"}}, 404
        )
    return FileResponse(
        path,
        media_type=_TYPES[path.suffix],
        headers={"cache-control": "no-cache", "x-content-type-options": "nosniff"},
    )


@router.get("/api/me", summary="Who the dashboard is signed in as, and the filter choices it may offer")
async def me(request: Request, principal: Caller) -> Response:
    runtime: Runtime = request.app.state.runtime
    today = datetime.now(UTC).date()
    team = principal.team if principal.kind == "team_key" else None
    if team is not None:
        teams = [team]
    else:
        teams = sorted(
            set(runtime.config.teams) | set(await teams_seen(runtime.engine, since=today - _NAMES_SINCE))
        )
    body = {
        "kind": principal.kind,
        "team": team,
        "teams": teams,
        "models": [name for name, model in runtime.registry.public_names() if name == model.name],
        "tags": await tags_seen(runtime.engine, since=today - _NAMES_SINCE, team=team),
        "baseline_model": runtime.config.pricing.baseline_model,
        "providers": sorted(runtime.config.providers),
        # What the views may group by: the page draws its choices from these.
        "groupings": {
            "table": list(breakdown.TABLE_BY),
            "latency": list(breakdown.LATENCY_BY),
            "errors": list(breakdown.ERRORS_BY),
        },
    }
    return _json(body)


@router.get("/api/summary", summary="KPI totals (the spend API's), savings by cause, rates and latency")
async def summary(request: Request, scope: Filters) -> Response:
    return _json(await figures.summary(_runtime(request).engine, scope))


@router.get("/api/spend-over-time", summary="Cost per hour or day, stacked by team, model or provider")
async def spend_over_time(
    request: Request,
    scope: Filters,
    stack: str = Query("team", description="team, model or provider"),
) -> Response:
    if stack not in figures.STACKS:
        raise InvalidRequest(
            f"cannot stack by '{stack}'; choose from {', '.join(figures.STACKS)}", param="stack"
        )
    return _json(await figures.spend_over_time(_runtime(request).engine, scope, stack=stack))


@router.get("/api/budgets", summary="Month-to-date spend per team against its budget, projected")
async def budgets(request: Request, scope: Filters) -> Response:
    runtime = _runtime(request)
    body = await figures.budgets(runtime.engine, scope, teams=runtime.config.teams, now=datetime.now(UTC))
    return _json(body)


@router.get("/api/top", summary="Keys and tags that spent most")
async def top(request: Request, scope: Filters, limit: int = Query(10, ge=1, le=100)) -> Response:
    return _json(await figures.top_spenders(_runtime(request).engine, scope, limit=limit))


@router.get("/api/fleet", summary="Effective $/MTok of self-hosted and managed deployments")
async def fleet_prices(request: Request, scope: Filters) -> Response:
    runtime = _runtime(request)
    return _json(await fleet(runtime.engine, scope, registry=runtime.registry, config=runtime.config))


@router.get("/api/table", summary="Spend, requests, tokens, savings and errors by one dimension")
async def table(
    request: Request, scope: Filters, by: str = Query("team", description=", ".join(breakdown.TABLE_BY))
) -> Response:
    _choice(by, breakdown.TABLE_BY, "by")
    return _json(await breakdown.table(_runtime(request).engine, scope, by=by))


@router.get("/api/latency", summary="End-to-end latency, TTFT and output speed per model or provider")
async def latency(
    request: Request, scope: Filters, by: str = Query("model", description=", ".join(breakdown.LATENCY_BY))
) -> Response:
    _choice(by, breakdown.LATENCY_BY, "by")
    return _json(await breakdown.latency(_runtime(request).engine, scope, by=by))


@router.get("/api/errors", summary="Errors over time by status, type, provider or model; retries")
async def errors(
    request: Request, scope: Filters, by: str = Query("status", description=", ".join(breakdown.ERRORS_BY))
) -> Response:
    _choice(by, breakdown.ERRORS_BY, "by")
    return _json(await breakdown.errors(_runtime(request).engine, scope, by=by))


def _choice(value: str, choices: tuple[str, ...], param: str) -> None:
    if value not in choices:
        raise InvalidRequest(f"cannot group by '{value}'; choose from {', '.join(choices)}", param=param)


@router.get("/api/routing", summary="Per route: share answered low, savings, escalations, shadow agreement")
async def routing(request: Request, scope: Filters) -> Response:
    """The spend API's `/v1/spend/routing` figures for the dashboard's range and team."""
    runtime = _runtime(request)
    rows = await routing_checks(
        runtime.engine, since=scope.since, until=scope.until, routing=runtime.config.routing, team=scope.team
    )
    return _json({"routes": [row.to_json() for row in rows]})


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def _json(body: Any, status: int = 200) -> Response:
    return Response(
        orjson.dumps(body),
        status_code=status,
        media_type="application/json",
        headers={"cache-control": "no-store"},
    )
