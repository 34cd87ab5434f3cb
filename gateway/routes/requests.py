"""`GET /v1/spend/requests` and `GET /v1/spend/requests/{id}`: the ledger's rows behind the spend
figures, filtered, and one request in full. Scoped exactly like `GET /v1/spend`: the admin key and
open mode see every team, a team key its own team only (another team's filter is 403, another
team's request id is 404, as if it did not exist)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import orjson
from fastapi import APIRouter, Query, Request, Response

from gateway.accounting.explorer import (
    EQUALS,
    MAX_PAGE,
    RequestFilter,
    cost_split,
    find_request,
    find_requests,
    parse_status,
)
from gateway.accounting.insights import Slice
from gateway.accounting.spend import FILTER_PATTERN
from gateway.errors import GatewayError, InvalidRequest
from gateway.models import ModelRegistry
from gateway.routes.reading import caller, readable_team, window
from gateway.runtime import Runtime
from pricing.money import format_usd, usd_to_nano
from pricing.price import Price

router = APIRouter()


class RequestNotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "request_not_found"


@router.get("/v1/spend/requests", summary="Ledger rows matching a filter, newest first")
async def list_requests(
    request: Request,
    since: str | None = Query(None, description="ISO date/time or a span back from now: 30m, 12h, 7d"),
    until: str | None = Query(None, description="ISO date/time; default now"),
    team: str | None = Query(None, pattern=FILTER_PATTERN),
    key: str | None = Query(None, pattern=FILTER_PATTERN, description="virtual key id"),
    model: str | None = Query(None, pattern=FILTER_PATTERN),
    provider: str | None = Query(None, pattern=FILTER_PATTERN),
    tier: str | None = Query(None, pattern=FILTER_PATTERN),
    error_type: str | None = Query(None, pattern=FILTER_PATTERN),
    cache_status: str | None = Query(None, pattern=FILTER_PATTERN),
    tag: str | None = Query(None, pattern=FILTER_PATTERN),
    status: str | None = Query(None, description="a status code, or ok, error, 2xx, 4xx, 5xx"),
    min_cost_usd: str | None = Query(None, description="only requests that cost more than this"),
    before: str | None = Query(None, description="the next_before cursor of the previous page"),
    limit: int = Query(100, ge=1, le=MAX_PAGE),
) -> Response:
    runtime: Runtime = request.app.state.runtime
    principal = await caller(request, runtime)
    start, end = window(since, until)
    declared = {
        "key": key,
        "provider": provider,
        "tier": tier,
        "error_type": error_type,
        "cache_status": cache_status,
    }
    # Any other EQUALS filter (a new ledger column) works from the query string as it is added there.
    given = {name: declared.get(name) or request.query_params.get(name) for name in EQUALS}
    for name, value in given.items():
        if value and "\x00" in value:  # what FILTER_PATTERN refuses for the declared ones
            raise InvalidRequest(f"'{name}' cannot hold a NUL character", param=name)
    query = RequestFilter(
        where=Slice(
            since=start, until=end, team=readable_team(principal, team), model=model or None, tag=tag or None
        ),
        equals=tuple((name, value) for name, value in given.items() if value),
        status=parse_status(status),
        min_cost_nano=_nano(min_cost_usd),
        before=before,
    )
    page = await find_requests(runtime.engine, query, limit=limit)
    for row in page["data"]:
        row["cost_usd"] = format_usd(row["cost_nano"])
    body = {
        "object": "list",
        "since": start.isoformat(),
        "until": end.isoformat(),
        **page,
        "cost_usd": format_usd(page["cost_nano"]),
    }
    return Response(orjson.dumps(body), media_type="application/json", headers={"cache-control": "no-store"})


@router.get("/v1/spend/requests/{request_id}", summary="One request: route, attempts, tokens, cost, latency")
async def show_request(request: Request, request_id: str) -> Response:
    runtime: Runtime = request.app.state.runtime
    team = readable_team(await caller(request, runtime), None)
    row = await find_request(runtime.engine, request_id, team=team)
    if row is None:
        raise RequestNotFound(f"no request '{request_id}' in the ledger", param="request_id")
    row["cost"] = cost_split(row, _price(runtime.registry, row))
    row["cost_usd"] = format_usd(row["cost_nano"])
    return Response(orjson.dumps(row), media_type="application/json", headers={"cache-control": "no-store"})


def _nano(usd: str | None) -> int | None:
    if not usd:
        return None
    try:
        amount = Decimal(usd)
    except InvalidOperation:
        amount = Decimal("NaN")
    if not amount.is_finite() or amount < 0 or amount > 10**9:
        raise InvalidRequest(f"min_cost_usd '{usd}' is not an amount of dollars", param="min_cost_usd")
    return usd_to_nano(amount)


def _price(registry: ModelRegistry, row: dict[str, object]) -> Price | None:
    """The price of the deployment that answered, as configured now."""
    model = registry.resolve(str(row["model"])) if row["model"] else None
    for deployment in model.deployments if model is not None else ():
        if (deployment.target.provider, deployment.target.upstream_model) == (
            row["provider"],
            row["upstream_model"],
        ):
            return deployment.price
    return None
