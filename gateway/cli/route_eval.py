"""`tollgate route-eval --routes`, `--from-ledger` and `--loso`: how the task routes (the router
`auto` uses) split a set of requests, beside prompt length, on a file of chat logs or on the
gateway's own ledger.

A request is routed as the gateway would route it: matched to a route of `--config`'s
`routing.routes` (or the shipped default set), moved a tier by its difficulty. Without `--config`
the default set lands on three tiers named cheap, middle and strong. With labels, difficulty is
ranked against them (AUROC) beside prompt length; without, the distribution of routes and tiers is
what there is to see.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import orjson
import yaml
from pydantic import ValidationError
from sqlalchemy import select

from gateway.accounting.database import create_engine, resolve_database_url
from gateway.accounting.schema import request_bodies, requests
from gateway.config.schema import RoutingConfig
from gateway.routing import evaluation
from gateway.routing.features import FEATURE_NAMES, extract_features
from gateway.routing.routes import RouteTable

_LENGTH = FEATURE_NAMES.index("prompt_tokens")
_DEFAULT_TIERS = ("cheap", "middle", "strong")
_TRAIN_HINT = "pip install 'tollgate[train]'"


class EvalError(ValueError):
    """Something route-eval cannot use: the config, the database, a missing extra."""


@dataclass(frozen=True)
class Request:
    """One request to route: its body and whatever the log says about it."""

    id: str
    body: dict[str, Any]
    label: bool | None = None  # True = complex
    source: str | None = None
    recorded_route: str | None = None  # what the gateway decided when it served it (ledger only)


@dataclass(frozen=True)
class Routed:
    request: Request
    route: str
    tier: str
    cheap: bool
    difficulty: float
    length: float


def routing_config(path: Path | None) -> RoutingConfig:
    """`--config`'s routing section (nothing else is read, so no secret need be set), or three
    tiers that the default routes' strengths name."""
    if path is None:
        return RoutingConfig.model_validate({"tiers": [{"name": t, "models": [t]} for t in _DEFAULT_TIERS]})
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        routing = RoutingConfig.model_validate(raw.get("routing") or {})
    except (OSError, yaml.YAMLError, ValidationError, AttributeError) as exc:
        raise EvalError(f"{path}: not a usable gateway config: {exc}") from exc
    if not routing.tiers:
        raise EvalError(f"{path}: routing.tiers is empty: there is nothing to route to")
    if routing.routes == ():
        raise EvalError(f"{path}: routing.routes is [] (score-only routing): run route-eval without --routes")
    return routing


def route_all(requests_: Sequence[Request], routing: RoutingConfig) -> list[Routed]:
    """Route every request as the gateway would; the route table is built once."""
    table = RouteTable.from_config(routing)
    assert table is not None  # routing_config refuses `routes: []` and no tiers
    tiers = [t.name for t in routing.tiers]
    out = []
    for request in requests_:
        decision = table.decide(request.body)
        tier = "models" if decision.tier is None else tiers[decision.tier]
        out.append(
            Routed(
                request,
                decision.route.name,
                tier,
                decision.tier == 0,
                decision.match.difficulty,
                extract_features(request.body)[_LENGTH],
            )
        )
    return out


def report(items: Sequence[Routed], tiers: Sequence[str], out: TextIO) -> None:
    """Routes and tiers, AUROC of difficulty beside length where there are labels, per source."""
    labelled = [i for i in items if i.request.label is not None]
    complex_ = sum(1 for i in labelled if i.request.label)
    cheap = sum(i.cheap for i in items)
    out.write(
        f"items: {len(items)} routed, {len(labelled)} labelled ({complex_} complex, "
        f"{len(labelled) - complex_} simple)\n"
    )
    out.write(
        f"answered on the cheapest tier ({tiers[0]}): {cheap / len(items):.1%} ({cheap} of {len(items)})\n"
    )
    if 0 < complex_ < len(labelled):
        labels = [bool(i.request.label) for i in labelled]
        auroc = evaluation.auroc(labels, [i.difficulty for i in labelled])
        base = evaluation.auroc(labels, [i.length for i in labelled])
        out.write(f"AUROC of difficulty: {auroc:.3f} (prompt length alone: {base:.3f})\n")
    elif labelled:
        out.write("AUROC: n/a (needs both simple and complex items)\n")
    else:
        out.write("AUROC: n/a (no labels: routes and tiers only)\n")
    tier_counts = Counter(i.tier for i in items)
    out.write("tiers: " + ", ".join(f"{t} {tier_counts[t] / len(items):.1%}" for t in tier_counts) + "\n")
    out.write(f"  {'route':20} {'items':>6} {'share':>6} {'cheap':>6}  tiers\n")
    for route, count in Counter(i.route for i in items).most_common():
        group = [i for i in items if i.route == route]
        spread = Counter(i.tier for i in group)
        cheap_share = sum(i.cheap for i in group) / count
        tiers_text = ", ".join(f"{t} {n}" for t, n in spread.most_common())
        out.write(f"  {route:20} {count:6} {count / len(items):6.1%} {cheap_share:6.1%}  {tiers_text}\n")
    _per_source(items, out)
    recorded = [i for i in items if i.request.recorded_route is not None]
    if recorded:
        same = sum(i.route == i.request.recorded_route for i in recorded)
        out.write(
            f"same route as when served: {same / len(recorded):.1%} ({same} of {len(recorded)} "
            "rows that recorded one)\n"
        )


def _per_source(items: Sequence[Routed], out: TextIO) -> None:
    sources = sorted({i.request.source for i in items if i.request.source is not None})
    if len(sources) < 2:
        return
    out.write(f"  {'source':20} {'items':>6} {'complex':>7} {'AUROC':>6} {'length':>6} {'cheap':>6}\n")
    for source in sources:
        group = [i for i in items if i.request.source == source]
        marked = [i for i in group if i.request.label is not None]
        positives = sum(1 for i in marked if i.request.label)
        auc = base = "-"
        if 0 < positives < len(marked):
            labels = [bool(i.request.label) for i in marked]
            auc = f"{evaluation.auroc(labels, [i.difficulty for i in marked]):.3f}"
            base = f"{evaluation.auroc(labels, [i.length for i in marked]):.3f}"
        share = sum(i.cheap for i in group) / len(group)
        out.write(f"  {source:20} {len(group):6} {positives:7} {auc:>6} {base:>6} {share:6.1%}\n")


def parse_since(text: str | None, *, now: datetime) -> datetime:
    """An ISO date or time (UTC unless it says), or a span back from now: 30m, 12h, 7d. Default 30d."""
    text = text or "30d"
    units = {"m": "minutes", "h": "hours", "d": "days"}
    if text[-1:] in units and text[:-1].isdigit():
        return now - timedelta(**{units[text[-1]]: int(text[:-1])})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise EvalError(f"--since: '{text}' is neither an ISO date nor a span like 7d") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def read_ledger(url: str, *, since: datetime) -> tuple[list[Request], int]:
    """The stored bodies of chat requests since `since`, oldest first, and how many could not be
    read back (cut at `ledger.body_max_bytes`, or not a chat request)."""
    query = (
        select(request_bodies.c.id, request_bodies.c.request_body, requests.c.team, requests.c.route)
        .join(
            requests,
            (requests.c.id == request_bodies.c.id) & (requests.c.created_at == request_bodies.c.created_at),
        )
        .where(request_bodies.c.created_at >= since)
        .order_by(request_bodies.c.created_at)
    )
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(query)).all()
    except Exception as exc:  # any driver's error: report it in one line
        raise EvalError(f"cannot read the ledger at {url}: {exc}") from exc
    finally:
        await engine.dispose()
    found, unreadable = [], 0
    for id_, text, team, route in rows:
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            unreadable += 1
            continue
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            unreadable += 1
            continue
        found.append(Request(id_, body, source=team, recorded_route=route))
    return found, unreadable


def from_ledger(args: argparse.Namespace, routing: RoutingConfig, out: TextIO) -> list[Request]:
    url = args.database_url or _configured_database(getattr(args, "config", None))
    url = resolve_database_url(url, os.environ)
    since = parse_since(args.since, now=datetime.now(UTC))
    found, unreadable = asyncio.run(read_ledger(url, since=since))
    out.write(
        f"route-eval --from-ledger: {len(found)} requests with stored bodies since {since:%Y-%m-%d %H:%M} UTC"
        + (f" ({unreadable} cut short or not chat requests, left out)" if unreadable else "")
        + "; per source = per team\n"
    )
    out.write("'scores' unavailable in the ledger: no quality figures; 'label' unavailable: no AUROC\n")
    return found


def _configured_database(path: Path | None) -> str:
    if path is None:
        return os.environ.get("TOLLGATE_DATABASE_URL", "sqlite+aiosqlite:///./tollgate.db")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EvalError(f"{path}: {exc}") from exc
    url = (raw.get("database") or {}).get("url")
    return str(url) if url else "sqlite+aiosqlite:///./tollgate.db"


def loso(path: Path, out: TextIO) -> None:
    """Leave-one-source-out figures per source beside length, from the training library (a checkout's
    `training/`, with the `train` extra)."""
    try:
        library = importlib.import_module("training.router.loso")
    except ImportError as exc:
        raise EvalError(f"--loso needs the optional 'train' extra ({_TRAIN_HINT}): {exc}") from exc
    try:
        library.loso_file(path, out)
    except (ValueError, KeyError) as exc:
        raise EvalError(str(exc)) from exc
