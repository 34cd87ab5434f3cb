"""The dashboard's tables and ops figures: spend, requests, tokens, savings and errors by one
dimension (the spend API's own rows, so a table's row is `GET /v1/spend?group_by=<by>`'s), latency
per model or provider for every request, and errors and retries from the raw rows."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.insights import key_labels
from gateway.accounting.performance import deployments, error_kinds, errors_over_time, latency_by
from gateway.dashboard.figures import HOURLY_UP_TO, NONE_LABEL, bucket_labels, spend_rows, top_series
from gateway.dashboard.scope import Scope
from gateway.routes.spend import present

# Dimensions a table can group by: each must be a `GROUPS` entry of the spend API. Once the ledger
# has a `route` column in the spend query, `"route"` here is the whole change.
TABLE_BY = ("team", "model", "provider", "route", "key")
LATENCY_BY = ("model", "provider", "route")
ERRORS_BY = ("status", "error_type", "provider", "model")


async def table(engine: AsyncEngine, scope: Scope, *, by: str) -> dict[str, Any]:
    """One row per value of `by` with the spend API's measures; None rows when the rollups cannot
    answer under the filter (keys, models and providers are not kept per tag)."""
    if scope.tag is not None and by != "team":
        return {"by": by, "rows": None, "reason": f"spend by {by} is not kept per tag: clear the tag filter"}
    rows = [present(row) for row in await spend_rows(engine, scope, (by,))]
    if by == "key":
        labels = await key_labels(engine, [row["key"] for row in rows if row["key"] is not None])
        for row in rows:
            label = labels.get(row["key"]) if row["key"] is not None else None
            row["prefix"] = label.prefix if label else None
            row["name"] = label.name if label else None
            row["key_team"] = label.team if label else None
    return {"by": by, "rows": rows, "reason": None}


async def latency(engine: AsyncEngine, scope: Scope, *, by: str) -> dict[str, Any]:
    overall, groups = await latency_by(engine, scope.raw_slice(), by=by)
    return {"by": by, "overall": asdict(overall), "groups": [asdict(group) for group in groups]}


async def errors(engine: AsyncEngine, scope: Scope, *, by: str) -> dict[str, Any]:
    """Errors per bucket stacked by `by`, the kinds of error together, and retries per deployment."""
    where = scope.raw_slice()
    bucket = "hour" if scope.until - scope.since <= HOURLY_UP_TO else "day"
    counted = await errors_over_time(engine, where, by=by, bucket=bucket)
    labels = sorted(
        set(bucket_labels(bucket, scope.since, scope.until)) | {str(row["bucket"]) for row in counted}
    )
    index = {label: i for i, label in enumerate(labels)}
    by_name: dict[str, list[int]] = {}
    for row in counted:
        name = NONE_LABEL if row["name"] is None else str(row["name"])
        by_name.setdefault(name, [0] * len(labels))[index[str(row["bucket"])]] += row["errors"]
    series = top_series(by_name, "errors")
    return {
        "bucket": bucket,
        "by": by,
        "labels": labels,
        "series": series,
        "total": sum(row["errors"] for row in counted),
        "kinds": await error_kinds(engine, where),
        "deployments": await deployments(engine, where),
    }
