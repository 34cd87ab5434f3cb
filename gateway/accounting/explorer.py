"""The request explorer's ledger reads: rows matching a filter (newest first, a page at a time) and
one request in full, with its stored bodies, the cost split by token class and the latency split.

The team filter is the caller's scope: a team key's query always carries its team, so another
team's row is never matched, listed or opened (it is "not found", exactly like a missing id).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ColumnElement

from gateway.accounting.insights import Slice, filters_of
from gateway.accounting.schema import request_bodies, requests
from gateway.errors import InvalidRequest
from pricing.money import TOKENS_PER_MTOK
from pricing.price import Price

# Filters that are one column equal to one value; a new ledger column is one line here.
EQUALS: dict[str, ColumnElement[Any]] = {
    "key": requests.c.key_id,
    "provider": requests.c.provider,
    "tier": requests.c.tier,
    "route": requests.c.route,
    "error_type": requests.c.error_type,
    "cache_status": requests.c.cache_status,
}
STATUS_CLASSES = ("ok", "error", "2xx", "4xx", "5xx")
MAX_PAGE = 500

# What a listed row carries; the full row is `find_request`'s.
_LISTED = (
    "id",
    "created_at",
    "team",
    "key_id",
    "requested_model",
    "model",
    "provider",
    "tier",
    "route_reason",
    "status",
    "error_type",
    "stream",
    "attempts",
    "fallback_used",
    "cache_status",
    "prompt_tokens",
    "completion_tokens",
    "cost_nano",
    "latency_ms",
    "ttft_ms",
    "tags",
)


@dataclass(frozen=True, slots=True)
class RequestFilter:
    """Which rows the explorer lists: a slice (range, team, model, tag) and the explorer's own."""

    where: Slice
    equals: tuple[tuple[str, str], ...] = ()  # (name in EQUALS, value)
    status: str | None = None  # a code ("429") or a class in STATUS_CLASSES
    min_cost_nano: int | None = None  # cost strictly above this
    before: str | None = None  # the page cursor `find_requests` returned


def parse_status(value: str | None) -> str | None:
    if not value:
        return None
    if value in STATUS_CLASSES or (value.isascii() and value.isdigit() and len(value) == 3):
        return value
    raise InvalidRequest(
        f"status '{value}' is neither a code like 429 nor one of {', '.join(STATUS_CLASSES)}", param="status"
    )


async def find_requests(engine: AsyncEngine, query: RequestFilter, *, limit: int) -> dict[str, Any]:
    """One page of matching rows, newest first; `matched` and the money totals cover every match."""
    t = requests.c
    clauses = _clauses(query)
    page = select(*(t[name] for name in _LISTED)).where(*clauses, *_cursor(query.before))
    page = page.order_by(t.created_at.desc(), t.id.desc()).limit(min(limit, MAX_PAGE) + 1)
    summary = select(
        func.count().label("matched"),
        func.coalesce(func.sum(t.cost_nano), 0).label("cost_nano"),
        func.coalesce(func.sum(t.prompt_tokens), 0).label("prompt_tokens"),
        func.coalesce(func.sum(t.completion_tokens), 0).label("completion_tokens"),
    ).where(*clauses)
    async with engine.connect() as conn:
        rows = [plain_row(row) for row in await conn.execute(page)]
        total = (await conn.execute(summary)).one()._mapping
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "data": [_listed(row) for row in rows],
        "matched": int(total["matched"]),
        "cost_nano": int(total["cost_nano"]),
        "prompt_tokens": int(total["prompt_tokens"]),
        "completion_tokens": int(total["completion_tokens"]),
        "next_before": _cursor_of(rows[-1]) if more and rows else None,
    }


async def find_request(engine: AsyncEngine, request_id: str, *, team: str | None) -> dict[str, Any] | None:
    """The whole row and its bodies (if kept), or None when missing or another team's."""
    t = requests.c
    statement = select(requests).where(t.id == request_id)
    if team is not None:
        statement = statement.where(t.team == team)
    b = request_bodies.c
    bodies = select(b.request_body, b.response_body, b.truncated).where(b.id == request_id)
    async with engine.connect() as conn:
        found = (await conn.execute(statement.limit(1))).first()
        if found is None:
            return None
        kept = (await conn.execute(bodies.limit(1))).first()
    row = plain_row(found)
    row["created_at"] = _iso(row["created_at"])
    row["finished_at"] = _iso(row["finished_at"])
    row["tags"] = _tags(row["tags"])
    row["raw_usage"] = orjson.loads(row["raw_usage"]) if row["raw_usage"] else None
    row["deployments_tried"] = row["deployments_tried"].split(",") if row["deployments_tried"] else []
    row["flags"] = row["flags"].split(",") if row["flags"] else []
    row["bodies"] = (
        None
        if kept is None
        else {"request": kept.request_body, "response": kept.response_body, "truncated": bool(kept.truncated)}
    )
    row["latency_split"] = latency_split(row)
    return row


def latency_split(row: dict[str, Any]) -> dict[str, float | None]:
    """Where the end-to-end time went: the gateway's own overhead, upstream (waiting and backing
    off), and for a stream the wait for the first token and the generation after it."""
    total = float(row["latency_ms"])
    overhead = row["overhead_ms"]
    ttft = row["ttft_ms"]
    return {
        "total_ms": total,
        "gateway_ms": overhead,
        "upstream_ms": None if overhead is None else max(0.0, total - overhead),
        "first_token_ms": ttft,
        "generation_ms": None if ttft is None else max(0.0, total - ttft),
    }


def cost_split(row: dict[str, Any], price: Price | None) -> dict[str, Any]:
    """The billed input and output split into token classes at the deployment's price.

    The ledger keeps input and output totals only; the classes are recomputed from the row's tokens.
    When today's price reproduces the billed totals, each class is a share of them that adds up
    exactly (largest remainder); otherwise the price changed since and the classes are today's.
    """
    billed = {
        "input_nano": int(row["input_cost_nano"]),
        "output_nano": int(row["output_cost_nano"]),
        "escalation_nano": int(row["escalation_cost_nano"] or 0),
        "total_nano": int(row["cost_nano"]),
    }
    if price is None or row["price_source"] == "response_cache":
        return {"billed": billed, "classes": None, "priced": "unknown" if price is None else "cache_hit"}
    prompt, completion = int(row["prompt_tokens"]), int(row["completion_tokens"])
    cached = min(int(row["cached_tokens"]), prompt)
    written = min(int(row["cache_write_tokens"]), prompt - cached)
    written_1h = min(int(row["cache_write_1h_tokens"]), written)
    reasoning = min(int(row["reasoning_tokens"]), completion)
    rates = price.rates_for(prompt)
    inputs = {
        "input": (prompt - cached - written, (prompt - cached - written) * rates.input),
        "cached": (cached, cached * rates.cached_input),
        "cache_write": (
            written,
            (written - written_1h) * rates.cache_write + written_1h * rates.cache_write_1h,
        ),
    }
    outputs = {
        "output": (completion - reasoning, (completion - reasoning) * rates.output),
        "reasoning": (reasoning, reasoning * rates.reasoning),
    }
    same = (
        _rounded(sum(v for _, v in inputs.values())) == billed["input_nano"]
        and _rounded(sum(v for _, v in inputs.values()) + sum(v for _, v in outputs.values()))
        == billed["input_nano"] + billed["output_nano"]
    )
    if same:
        shares = _shares(inputs, billed["input_nano"]) | _shares(outputs, billed["output_nano"])
    else:
        shares = {name: _rounded(exact) for name, (_, exact) in (inputs | outputs).items()}
    classes = [
        {"class": name, "tokens": tokens, "cost_nano": shares[name]}
        for name, (tokens, _) in (inputs | outputs).items()
    ]
    return {"billed": billed, "classes": classes, "priced": "as_billed" if same else "current_price"}


def _shares(parts: dict[str, tuple[int, int]], total: int) -> dict[str, int]:
    """Split `total` nano-USD in proportion to the exact parts, whole numbers that add up to it."""
    exact = {name: value for name, (_, value) in parts.items()}
    whole = sum(exact.values())
    if whole == 0:
        return dict.fromkeys(exact, 0) | ({next(iter(exact)): total} if total else {})
    floors = {name: value * total // whole for name, value in exact.items()}
    left = total - sum(floors.values())
    by_remainder = sorted(exact, key=lambda name: -(exact[name] * total % whole))
    for name in by_remainder[:left]:
        floors[name] += 1
    return floors


def _rounded(nano_tokens_per_mtok: int) -> int:
    return (nano_tokens_per_mtok + TOKENS_PER_MTOK // 2) // TOKENS_PER_MTOK


def _clauses(query: RequestFilter) -> list[ColumnElement[bool]]:
    t = requests.c
    clauses = filters_of(query.where)
    for name, value in query.equals:
        clauses.append(EQUALS[name] == value)
    if query.status is not None:
        clauses.append(_status(query.status))
    if query.min_cost_nano is not None:
        clauses.append(t.cost_nano > query.min_cost_nano)
    return clauses


def _status(value: str) -> ColumnElement[bool]:
    status = requests.c.status
    if value == "ok":
        return status < 400
    if value == "error":
        return status >= 400
    if value.endswith("xx"):
        low = int(value[0]) * 100
        return and_(status >= low, status < low + 100)
    return status == int(value)


def _cursor(before: str | None) -> list[ColumnElement[bool]]:
    if not before:
        return []
    try:
        at, _, request_id = base64.urlsafe_b64decode(before.encode()).decode().partition("|")
        when = datetime.fromisoformat(at)
    except ValueError:
        raise InvalidRequest("'before' is not a cursor this endpoint returned", param="before") from None
    t = requests.c
    return [or_(t.created_at < when, and_(t.created_at == when, t.id < request_id))]


def _cursor_of(row: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(f"{row['created_at'].isoformat()}|{row['id']}".encode()).decode()


def plain_row(row: Any) -> dict[str, Any]:
    """A result row as a dict with plain `str` keys (column names are `quoted_name`, which orjson
    refuses as keys)."""
    return {str(name): value for name, value in row._mapping.items()}


def _listed(row: dict[str, Any]) -> dict[str, Any]:
    return row | {"created_at": _iso(row["created_at"]), "tags": _tags(row["tags"])}


def _tags(value: str | None) -> list[str]:
    return [str(tag) for tag in orjson.loads(value)] if value else []


def _iso(value: datetime) -> str:
    # SQLite hands back naive datetimes; every ledger time is UTC.
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
