"""The dashboard's money figures, every one built from the spend API's own query (`query_spend`), so
a total on the page is the total `GET /v1/spend` returns for the same range and team.

A model or tag filter is applied by grouping the spend query by that dimension too and keeping its
row: the figure then equals the matching row of `GET /v1/spend?group_by=model` (or `tag`).
"""

from __future__ import annotations

import calendar
from collections import defaultdict
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.insights import key_labels, request_rates
from gateway.accounting.performance import latency_by
from gateway.accounting.spend import parse_group_by, query_spend, savings, totals
from gateway.config.schema import TeamConfig
from gateway.dashboard.scope import Scope
from gateway.errors import InvalidRequest
from gateway.routes.spend import present
from pricing.money import usd_to_nano

STACKS = ("team", "model", "provider")
MAX_SERIES = 8  # more stacked series than this and the rest are summed as "other"
HOURLY_UP_TO = timedelta(days=2)
# One label per day is drawn whether or not anything was spent: a range of centuries would build
# millions of them and hold the event loop for seconds.
CHARTED_UP_TO = timedelta(days=3660)
NONE_LABEL = "(none)"
_MONEY = ("cost_nano", "baseline_cost_nano", "cache_saving_nano")


async def spend_rows(engine: AsyncEngine, scope: Scope, dims: tuple[str, ...]) -> list[dict[str, Any]]:
    """`GET /v1/spend?group_by=<dims>` for the scope, narrowed to its model or tag when it has one."""
    narrow = "model" if scope.model is not None else "tag" if scope.tag is not None else None
    group_by = parse_group_by(",".join(dict.fromkeys((*([narrow] if narrow else []), *dims))))
    rows = await query_spend(engine, scope.spend_query(group_by))
    if narrow is None:
        return rows
    wanted = scope.model if narrow == "model" else scope.tag
    kept = [row for row in rows if row[narrow] == wanted]
    if narrow not in dims:
        for row in kept:
            del row[narrow]
    return kept


async def summary(engine: AsyncEngine, scope: Scope) -> dict[str, Any]:
    """The KPI tiles: the spend API's totals, savings split by cause, request rates and latency
    (end to end for every request; TTFT for the streamed ones)."""
    total = totals(await spend_rows(engine, scope, ()))
    rates = await request_rates(engine, scope.raw_slice())
    overall, per_model = await latency_by(engine, scope.raw_slice(), by="model")
    return {
        "since": scope.since.isoformat(),
        "until": scope.until.isoformat(),
        "totals": present(total),
        "savings": {
            # savings_nano is baseline - cost; what caching saved is part of it.
            # None: no baseline configured, so there is no saving to split (never shown as a loss).
            "routing_nano": None
            if total["savings_nano"] is None
            else total["savings_nano"] - total["cache_saving_nano"],
            "caching_nano": total["cache_saving_nano"],
            # The tag rollup does not keep cache savings: under a tag filter they stay in routing.
            "caching_tracked": scope.tag is None,
            # Prompt tokens the context policy left out (trim, dedupe), apart from the baseline:
            # the baseline is priced on the tokens that were sent. Not kept per tag either.
            "context_nano": total["context_saving_nano"],
            "context_tokens": total["context_tokens_removed"],
            "context_tracked": scope.tag is None,
        },
        "rates": {
            "requests": rates.requests,
            "fallbacks": rates.fallbacks,
            "fallback_rate": _ratio(rates.fallbacks, rates.requests),
            "cache_hits": rates.cache_hits,
            "cacheable": rates.cacheable,
            "cache_hit_rate": _ratio(rates.cache_hits, rates.cacheable),
            "prompt_cache_read_share": _ratio(rates.cached_tokens, rates.prompt_tokens),
        },
        "latency": {
            "overall": asdict(overall),
            "models": [asdict(item) for item in per_model],
        },
    }


async def spend_over_time(engine: AsyncEngine, scope: Scope, *, stack: str) -> dict[str, Any]:
    """Cost per hour (ranges up to two days) or per day, stacked by team, model or provider, and
    per bucket the baseline split into cost, routing savings and caching savings."""
    if scope.until - scope.since > CHARTED_UP_TO:
        raise InvalidRequest(
            f"the chart spans at most {CHARTED_UP_TO.days} days; move 'since' or 'until'", param="since"
        )
    bucket = "hour" if scope.until - scope.since <= HOURLY_UP_TO and scope.tag is None else "day"
    rows = await spend_rows(engine, scope, (bucket, stack))
    labels = sorted(set(bucket_labels(bucket, scope.since, scope.until)) | {str(row[bucket]) for row in rows})
    index = {label: i for i, label in enumerate(labels)}
    by_name: dict[str, list[int]] = defaultdict(lambda: [0] * len(labels))
    money = {name: [0] * len(labels) for name in _MONEY}
    counts = [0] * len(labels)  # a bucket with no requests has no baseline to draw, not a zero one
    for row in rows:
        at = index[str(row[bucket])]
        by_name[row[stack] or NONE_LABEL][at] += row["cost_nano"]
        counts[at] += row["requests"]
        for name in _MONEY:
            money[name][at] += row[name]
    return {
        "bucket": bucket,
        "stack": stack,
        "labels": labels,
        "series": top_series(by_name),
        "requests": counts,
        "cost_nano": money["cost_nano"],
        "baseline_cost_nano": money["baseline_cost_nano"],
        "cache_saving_nano": money["cache_saving_nano"],
        # None in a bucket where nothing was priced on a baseline (not configured, never a loss).
        "routing_saving_nano": [
            None if (saved := savings(baseline, cost)) is None else saved - cache
            for baseline, cost, cache in zip(
                money["baseline_cost_nano"], money["cost_nano"], money["cache_saving_nano"], strict=True
            )
        ],
        "totals": present(totals(rows)),
    }


async def budgets(
    engine: AsyncEngine, scope: Scope, *, teams: dict[str, TeamConfig], now: datetime
) -> dict[str, Any]:
    """Month-to-date spend per team, day by day, against its monthly budget, with a linear
    projection of the month-end. Range, model and tag filters do not apply: budgets are monthly."""
    month_start = datetime(now.year, now.month, 1, tzinfo=UTC)
    days = calendar.monthrange(now.year, now.month)[1]
    month = replace(scope.unfiltered(), since=month_start, until=now)
    daily: dict[str, list[int]] = defaultdict(lambda: [0] * days)
    for row in await spend_rows(engine, month, ("day", "team")):
        if row["team"] is not None:
            daily[row["team"]][datetime.fromisoformat(row["day"]).day - 1] += row["cost_nano"]
    names = [scope.team] if scope.team is not None else sorted(set(teams) | set(daily))
    # At least an hour elapsed, so a few cents in the first minutes do not project to millions.
    elapsed = Fraction(max(int((now - month_start).total_seconds()), 3600))
    rows = []
    for team in names:
        spent_by_day = daily.get(team, [0] * days)[: now.day]
        cumulative = [sum(spent_by_day[: i + 1]) for i in range(len(spent_by_day))]
        spent = cumulative[-1] if cumulative else 0
        config = teams.get(team)
        limit = config.budget_monthly_usd if config is not None else None
        rows.append(
            {
                "team": team,
                "budget_nano": None if limit is None else usd_to_nano(limit),
                "spent_nano": spent,
                "projected_nano": _round(spent * Fraction(days * 86_400) / elapsed),
                "cumulative_nano": cumulative,
            }
        )
    return {"month": f"{now:%Y-%m}", "days": days, "today": now.day, "teams": rows}


async def top_spenders(engine: AsyncEngine, scope: Scope, *, limit: int) -> dict[str, Any]:
    """The keys and tags that spent most; None where the rollups cannot answer under the filter."""
    keys = None
    if scope.tag is None:
        rows = (await spend_rows(engine, scope, ("key",)))[:limit]
        labels = await key_labels(engine, [row["key"] for row in rows if row["key"] is not None])
        keys = []
        for row in rows:
            label = labels.get(row["key"]) if row["key"] is not None else None
            keys.append(
                present(row)
                | {
                    "prefix": label.prefix if label else None,
                    "name": label.name if label else None,
                    "team": label.team if label else None,
                }
            )
    tags = None if scope.model is not None else await spend_rows(engine, scope, ("tag",))
    return {
        "keys": keys,
        "tags": None if tags is None else [present(row) for row in tags[:limit]],
        # A request with several tags counts under each: tags may add up past the total.
        "tags_cost_nano": None if tags is None else sum(row["cost_nano"] for row in tags),
    }


def top_series(by_name: dict[str, list[int]], measure: str = "cost_nano") -> list[dict[str, Any]]:
    """The largest series by their sum, the rest summed as "other"; empty series dropped (a series
    that spent nothing, failed requests only, would be a legend entry with no bar)."""
    ranked = sorted(
        ((name, values) for name, values in by_name.items() if any(values)),
        key=lambda item: (-sum(item[1]), item[0]),
    )
    if len(ranked) <= MAX_SERIES:
        return [{"name": name, measure: values} for name, values in ranked]
    kept, rest = ranked[: MAX_SERIES - 1], ranked[MAX_SERIES - 1 :]
    other = [sum(column) for column in zip(*(values for _, values in rest), strict=True)]
    return [{"name": name, measure: values} for name, values in kept] + [{"name": "other", measure: other}]


def bucket_labels(bucket: str, since: datetime, until: datetime) -> list[str]:
    """Every hour or day of the range, spelled as the spend query spells them."""
    if bucket == "day":
        first, last = since.date(), until.date()
        return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
    hour = since.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    labels = []
    while hour < until:
        labels.append(f"{hour:%Y-%m-%dT%H}:00:00")
        hour += timedelta(hours=1)
    return labels


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def _round(value: Fraction) -> int:
    return int(value + Fraction(1, 2)) if value >= 0 else -int(-value + Fraction(1, 2))
