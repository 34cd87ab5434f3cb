"""How `auto` routing holds up, per route, from the ledger: the share of requests answered below the
top tier, what routing saved against the baseline, how many answers were escalated and what the
discarded attempts cost, and what the shadow checks found (agreement rate, their cost).

Read from the raw rows (escalations and shadow verdicts are not in the rollups), so it survives
restarts and counts every replica. Shadow rows are joined to the request they shadowed
(`shadow_of`), so agreement is grouped by the route of the cheap answer, not of the shadow's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, false, func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ColumnElement

from gateway.accounting.schema import requests
from gateway.config.schema import RoutingConfig

JUDGE_TAG = "shadow_judge"


@dataclass(frozen=True, slots=True)
class RouteChecks:
    route: str  # the matched task route; the tier of a request routed by score alone
    requests: int
    answered_low: int
    savings_nano: int
    escalated: int
    escalation_cost_nano: int
    shadow_checks: int
    shadow_verdicts: int  # checks that reached a verdict (not failed, the judge not undecided)
    shadow_agreed: int
    shadow_cost_nano: int  # shadow calls and their judge's

    @property
    def share_low(self) -> float | None:
        return self.answered_low / self.requests if self.requests else None

    @property
    def agreement(self) -> float | None:
        return self.shadow_agreed / self.shadow_verdicts if self.shadow_verdicts else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "share_low": self.share_low, "agreement": self.agreement}


def _route(table: Any) -> ColumnElement[Any]:
    """What the figures are grouped by: the task route the request matched (`routing.routes`), or
    its tier for a request routed by score alone (`routes: []`, a team's own thresholds)."""
    return func.coalesce(table.c.route, table.c.tier)


async def routing_checks(
    engine: AsyncEngine,
    *,
    since: datetime,
    until: datetime,
    routing: RoutingConfig,
    team: str | None = None,
) -> list[RouteChecks]:
    """One row per route (or tier) of the `auto` requests created in [since, until); "answered low"
    is below the top configured tier."""
    auto_model = routing.auto_model
    top_tier = routing.tiers[-1].name if routing.tiers else None
    t = requests
    asked = [
        t.c.created_at >= since,
        t.c.created_at < until,
        t.c.requested_model == auto_model,
        t.c.shadow_of.is_(None),
        t.c.status == 200,
    ]
    if team is not None:
        asked.append(t.c.team == team)
    route = _route(t)
    low = case((t.c.tier != top_tier, 1), else_=0) if top_tier is not None else case((false(), 1), else_=0)
    saved = case((t.c.baseline_cost_nano.is_(None), 0), else_=t.c.baseline_cost_nano - t.c.cost_nano)
    main = (
        select(
            route.label("route"),
            func.count().label("requests"),
            func.coalesce(func.sum(low), 0).label("answered_low"),
            func.coalesce(func.sum(saved), 0).label("savings_nano"),
            func.count(t.c.escalation_reason).label("escalated"),
            func.coalesce(func.sum(t.c.escalation_cost_nano), 0).label("escalation_cost_nano"),
        )
        .where(*asked)
        .group_by(route)
    )
    shadow, original = t.alias("shadow"), t.alias("original")
    judged = shadow.c.tags.like(f'%"{JUDGE_TAG}"%')
    checked = and_(~judged, shadow.c.status == 200)
    verdict = shadow.c.shadow_agreement.is_not(None)
    agreed = shadow.c.shadow_agreement.is_(True)
    joined = shadow.join(original, original.c.id == shadow.c.shadow_of)
    where = [shadow.c.created_at >= since, shadow.c.created_at < until, shadow.c.shadow_of.is_not(None)]
    if team is not None:
        where.append(original.c.team == team)
    shadow_route = _route(original)
    shadows = (
        select(
            shadow_route.label("route"),
            func.coalesce(func.sum(case((~judged, 1), else_=0)), 0).label("checks"),
            func.coalesce(func.sum(case((and_(checked, verdict), 1), else_=0)), 0).label("verdicts"),
            func.coalesce(func.sum(case((and_(checked, agreed), 1), else_=0)), 0).label("agreed"),
            func.coalesce(func.sum(shadow.c.cost_nano), 0).label("cost"),
        )
        .select_from(joined)
        .where(*where)
        .group_by(shadow_route)
    )
    async with engine.connect() as conn:
        figures = {r.route: r for r in await conn.execute(main)}
        checks = {r.route: r for r in await conn.execute(shadows)}
    out = []
    for name in sorted(set(figures) | set(checks), key=lambda n: (n is None, str(n))):
        f, s = figures.get(name), checks.get(name)
        out.append(
            RouteChecks(
                route=str(name) if name is not None else "",
                requests=int(f.requests) if f else 0,
                answered_low=int(f.answered_low) if f else 0,
                savings_nano=int(f.savings_nano) if f else 0,
                escalated=int(f.escalated) if f else 0,
                escalation_cost_nano=int(f.escalation_cost_nano) if f else 0,
                shadow_checks=int(s.checks) if s else 0,
                shadow_verdicts=int(s.verdicts) if s else 0,
                shadow_agreed=int(s.agreed) if s else 0,
                shadow_cost_nano=int(s.cost) if s else 0,
            )
        )
    return out
