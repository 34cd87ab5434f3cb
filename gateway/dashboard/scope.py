"""What one dashboard request may see: the caller (admin, team key or open mode) and the filters it
asked for (time range, team, model, tag), checked the way the spend API checks them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from fastapi import Query, Request

from gateway.accounting.insights import Slice
from gateway.accounting.spend import FILTER_PATTERN, SpendQuery, parse_time
from gateway.errors import InvalidRequest
from gateway.policy.principal import Principal, authenticate, require_team
from gateway.runtime import Runtime

DEFAULT_DAYS = 30  # the spend API's default range


@dataclass(frozen=True, slots=True)
class Scope:
    principal: Principal
    since: datetime
    until: datetime
    team: str | None = None
    model: str | None = None
    tag: str | None = None

    def spend_query(self, group_by: tuple[str, ...]) -> SpendQuery:
        """The spend API's query for this range and team: every dollar shown starts here."""
        return SpendQuery(group_by=group_by, since=self.since, until=self.until, team=self.team)

    def raw_slice(self) -> Slice:
        return Slice(since=self.since, until=self.until, team=self.team, model=self.model, tag=self.tag)

    def unfiltered(self) -> Scope:
        """The same caller, range and team without the model and tag filters."""
        return replace(self, model=None, tag=None)


async def principal_of(request: Request) -> Principal:
    runtime: Runtime = request.app.state.runtime
    return await authenticate(
        request.headers, admin_key=runtime.admin_key, keys=runtime.keys, open_mode=runtime.open_mode
    )


async def dashboard_scope(
    request: Request,
    since: str | None = Query(None, description="ISO date/time or a span back from now: 12h, 7d"),
    until: str | None = Query(None, description="ISO date/time; default now"),
    team: str | None = Query(None, description="only this team", pattern=FILTER_PATTERN),
    model: str | None = Query(None, description="only this model", pattern=FILTER_PATTERN),
    tag: str | None = Query(None, description="only requests with this tag", pattern=FILTER_PATTERN),
) -> Scope:
    """FastAPI dependency: authenticates, then narrows a team key to its own team (403 otherwise)."""
    principal = await principal_of(request)
    team, model, tag = team or None, model or None, tag or None
    if principal.kind == "team_key":
        require_team(principal, team or principal.team)
        team = principal.team
    if model is not None and tag is not None:
        # The tag rollup has no model column; the spend API refuses the same combination.
        raise InvalidRequest("a tag filter combines only with a team filter, not a model", param="tag")
    now = datetime.now(UTC)
    start = parse_time(since, default=now - timedelta(days=DEFAULT_DAYS), now=now)
    end = parse_time(until, default=now, now=now)
    if start >= end:
        raise InvalidRequest("'since' must be before 'until'", param="since")
    return Scope(principal=principal, since=start, until=end, team=team, model=model, tag=tag)
