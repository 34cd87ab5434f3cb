"""How every endpoint that reads the ledger opens: who is calling, which team they may read, and
the time window (`since`/`until`, the last 30 days by default). A team key reads its own team only;
naming another is refused (403); the admin and open mode read any team, or all of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from starlette.requests import Request

from gateway.accounting.spend import parse_time
from gateway.http.headers import request_headers
from gateway.policy.principal import Principal, authenticate, require_team
from gateway.runtime import Runtime

DEFAULT_WINDOW = timedelta(days=30)


async def caller(request: Request, runtime: Runtime) -> Principal:
    return await authenticate(
        request_headers(request), admin_key=runtime.admin_key, keys=runtime.keys, open_mode=runtime.open_mode
    )


def readable_team(principal: Principal, team: str | None) -> str | None:
    """The team this caller's query is narrowed to: its own for a team key, else `team` (None: all)."""
    if principal.kind == "team_key":
        require_team(principal, team or principal.team)
        return principal.team
    return team or None


def window(since: str | None, until: str | None) -> tuple[datetime, datetime]:
    now = datetime.now(UTC)
    return parse_time(since, default=now - DEFAULT_WINDOW, now=now), parse_time(until, default=now, now=now)
