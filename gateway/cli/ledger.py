"""`tollgate spend`, `tollgate reprice` and `tollgate ledger export`: the ledger from the command
line, straight from the database (no running gateway needed)."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from gateway.accounting.catalogs import catalog_for
from gateway.accounting.database import create_engine, resolve_database_url
from gateway.accounting.export import FORMATS, export_ledger, require_format
from gateway.accounting.reprice import reprice
from gateway.accounting.spend import GROUPS, SpendQuery, parse_group_by, parse_time, query_spend, totals
from gateway.cli.ledger_access import require_ledger
from gateway.config.schema import Config
from gateway.models import ModelRegistry, price_book
from gateway.routes.spend import present, to_csv
from pricing.money import format_usd


def add_commands(commands: Any) -> None:
    spend = commands.add_parser("spend", help="spend grouped and totalled, from the ledger")
    spend.add_argument("--by", default="", help=f"comma-separated: {', '.join(GROUPS)}")
    spend.add_argument("--since", default="30d", help="ISO date/time or a span back from now (30m, 12h, 7d)")
    spend.add_argument("--until", default=None)
    spend.add_argument("--team", default=None)
    spend.add_argument("--format", choices=["table", "csv", "json"], default="table")
    spend.add_argument("--config", help="YAML config whose database to read")

    again = commands.add_parser("reprice", help="recompute costs from stored usage with today's prices")
    again.add_argument("--since", default="30d")
    again.add_argument("--dry-run", action="store_true", help="report the difference, change nothing")
    again.add_argument("--config", help="YAML config with the prices to apply")
    again.add_argument(
        "--catalog",
        metavar="VERSION",
        help="the price catalog to apply: latest, shipped or a stored version (default: pricing.catalog)",
    )

    # --- tollgate ledger export -------------------------------------------------------------
    ledger = commands.add_parser("ledger", help="the raw ledger rows")
    actions = ledger.add_subparsers(dest="ledger_command", required=True)
    export = actions.add_parser("export", help="rows created in a time range, to CSV or Parquet")
    export.add_argument("--since", required=True, help="ISO date/time or a span back from now (30m, 12h, 7d)")
    export.add_argument("--until", default=None, help="exclusive end (default: now)")
    export.add_argument("--format", choices=FORMATS, default="csv", help="parquet needs tollgate[export]")
    export.add_argument("--out", required=True, type=Path, help="the file to write")
    export.add_argument("--config", help="YAML config whose database to read")


def run(args: argparse.Namespace, *, load: Callable[[str | None], Config]) -> int:
    config = load(args.config)
    url = resolve_database_url(config.database.url, os.environ)
    require_ledger(url)
    if args.command == "spend":
        return asyncio.run(_spend(args, url))
    if args.command == "ledger":
        return asyncio.run(_export(args, url))
    return asyncio.run(_reprice(args, url, config))


async def _spend(args: argparse.Namespace, url: str) -> int:
    now = datetime.now(UTC)
    query = SpendQuery(
        group_by=parse_group_by(args.by),
        since=parse_time(args.since, default=now - timedelta(days=30), now=now),
        until=parse_time(args.until, default=now, now=now),
        team=args.team,
    )
    engine = create_engine(url)
    try:
        rows = [present(r) for r in await query_spend(engine, query)]
    finally:
        await engine.dispose()
    if args.format == "csv":
        print(to_csv(query.group_by, rows), end="")
    elif args.format == "json":
        print(
            orjson.dumps({"data": rows, "totals": present(totals(rows))}, option=orjson.OPT_INDENT_2).decode()
        )
    else:
        print(render_table(query.group_by, rows))
    return 0


def render_table(group_by: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    headers = [*group_by, "requests", "errors", "tokens in", "tokens out", "cost $", "baseline $", "saved $"]
    summary = present(totals(rows))
    body = [_cells(group_by, r) for r in rows] + [
        ["TOTAL", *[""] * (len(group_by) - 1), *_cells((), summary)]
    ]
    if not group_by:
        body = [_cells((), summary)]
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *body, strict=True)]
    lines = [
        "  ".join(str(c).rjust(w) for c, w in zip(line, widths, strict=True)) for line in [headers, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cells(group_by: tuple[str, ...], row: dict[str, Any]) -> list[str]:
    return [
        *(str(row.get(g) or "-") for g in group_by),
        str(row["requests"]),
        str(row["errors"]),
        str(row["prompt_tokens"]),
        str(row["completion_tokens"]),
        row["cost_usd"],
        row["baseline_cost_usd"],
        "not configured" if row["savings_usd"] is None else row["savings_usd"],
    ]


async def _reprice(args: argparse.Namespace, url: str, config: Config) -> int:
    now = datetime.now(UTC)
    since = parse_time(args.since, default=now - timedelta(days=30), now=now)
    engine = create_engine(url)
    try:
        # The catalog a replica would price with now (a version stored by `tollgate prices update`).
        catalog = await catalog_for(engine, args.catalog or config.pricing.catalog)
        book = price_book(config, catalog=catalog)
        report = await reprice(
            engine,
            ModelRegistry(config, prices=book),
            since=since,
            version=book.version,
            dry_run=args.dry_run,
        )
    finally:
        await engine.dispose()
    verb = "would change" if args.dry_run else "changed"
    print(
        f"repriced {report.rows} rows since {since:%Y-%m-%d %H:%M} UTC with {book.version}: "
        f"{verb} {report.changed}; "
        f"total ${format_usd(report.before_nano)} -> ${format_usd(report.after_nano)} "
        f"(difference ${format_usd(report.after_nano - report.before_nano)}); "
        f"{report.still_unknown} rows still without a price"
    )
    return 0


async def _export(args: argparse.Namespace, url: str) -> int:
    now = datetime.now(UTC)
    since = parse_time(args.since, default=now, now=now)
    until = parse_time(args.until, default=now, now=now)
    require_format(args.format)  # before the database: a missing extra is the user's to fix
    engine = create_engine(url)
    try:
        rows = await export_ledger(engine, since, until, fmt=args.format, out=args.out)
    finally:
        await engine.dispose()
    print(f"exported {rows} rows created {since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M} UTC to {args.out}")
    return 0
