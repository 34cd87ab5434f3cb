"""`tollgate keys create|list|revoke`: virtual keys straight in the database (no running gateway
needed; every replica sees the change within its key cache's TTL)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from gateway.accounting.database import create_engine, resolve_database_url, run_migrations
from gateway.config.schema import Config
from gateway.errors import InvalidRequest
from gateway.policy import auth_mode
from gateway.policy.key_store import KeyRecord, KeyStore
from gateway.routes.admin import present_key
from pricing.money import usd_to_nano

COMMANDS = ("keys",)


def add_commands(commands: Any) -> None:
    keys = commands.add_parser("keys", help="virtual keys: create, list, revoke, delete")
    actions = keys.add_subparsers(dest="keys_command", required=True)

    create = actions.add_parser("create", help="create a key (its plaintext is printed only once)")
    create.add_argument("--team", required=True)
    create.add_argument("--name", required=True)
    create.add_argument("--expires-in-days", type=_positive_days, default=None)
    create.add_argument("--models", type=_model_list, default=None, help="comma-separated allow-list")
    create.add_argument("--budget-daily-usd", type=_usd_nano, default=None, metavar="USD")
    create.add_argument("--budget-monthly-usd", type=_usd_nano, default=None, metavar="USD")
    create.add_argument("--rpm", type=_positive_int, default=None, help="requests per minute")
    create.add_argument("--tpm", type=_positive_int, default=None, help="tokens per minute")
    create.add_argument("--format", choices=["text", "json"], default="text")
    create.add_argument("--config", help="YAML config whose database to use")

    listing = actions.add_parser("list", help="list keys (never their plaintext)")
    listing.add_argument("--team", default=None)
    listing.add_argument("--format", choices=["table", "json"], default="table")
    listing.add_argument("--config", help="YAML config whose database to use")

    revoke = actions.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id")
    revoke.add_argument("--config", help="YAML config whose database to use")

    remove = actions.add_parser(
        "delete", help="delete every key (--all): with no admin key and no teams, open mode returns"
    )
    remove.add_argument("--all", action="store_true", required=True, help="every key, revoked ones too")
    remove.add_argument("--config", help="YAML config whose database to use")


def run(args: argparse.Namespace, *, load: Callable[[str | None], Config]) -> int:
    config = load(args.config)
    url = resolve_database_url(config.database.url, os.environ)
    if config.database.auto_migrate:
        run_migrations(url)
    try:
        return asyncio.run(_run(args, url, config, cache_ttl=0.0))
    except InvalidRequest as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace, url: str, config: Config, *, cache_ttl: float) -> int:
    engine = create_engine(url)
    try:
        keys = KeyStore(engine, cache_ttl=cache_ttl)
        if args.keys_command == "create":
            return await _create(args, keys, config)
        if args.keys_command == "list":
            return await _list(args, keys)
        if args.keys_command == "delete":
            return await _delete_all(keys, config)
        return await _revoke(args, keys)
    finally:
        await engine.dispose()


async def _create(args: argparse.Namespace, keys: KeyStore, config: Config) -> int:
    first = not await keys.any_exist()
    days = args.expires_in_days
    plaintext, record = await keys.create(
        args.team,
        args.name,
        expires_at=None if days is None else datetime.now(UTC) + timedelta(days=days),
        allowed_models=args.models,
        budget_daily_nano=args.budget_daily_usd,
        budget_monthly_nano=args.budget_monthly_usd,
        rpm=args.rpm,
        tpm=args.tpm,
    )
    if args.format == "json":
        print(orjson.dumps({**present_key(record), "key": plaintext}, option=orjson.OPT_INDENT_2).decode())
        return 0
    print(f"created {record.id} ({record.prefix}) for team '{record.team}': {record.name}")
    print(plaintext)
    print("This is the only time the key is shown; it is stored as a hash.", file=sys.stderr)
    notice = auth_mode.after_first_key(config) if first else None
    if notice is not None:
        print(notice, file=sys.stderr)
    return 0


async def _delete_all(keys: KeyStore, config: Config) -> int:
    deleted = await keys.delete_all()
    print(f"deleted {deleted} key{'' if deleted == 1 else 's'}")
    if auth_mode.open_eligible(config):
        print(
            "With no admin key and no teams configured, the gateway is in open mode from its next start: "
            "requests need no key.",
            file=sys.stderr,
        )
    return 0


async def _list(args: argparse.Namespace, keys: KeyStore) -> int:
    records = await keys.list(args.team)
    if args.format == "json":
        data = [present_key(r) for r in records]
        print(orjson.dumps({"data": data}, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render_table(records, now=datetime.now(UTC)))
    return 0


async def _revoke(args: argparse.Namespace, keys: KeyStore) -> int:
    if not await keys.revoke(args.key_id):
        print(f"error: no key with id '{args.key_id}'", file=sys.stderr)
        return 1
    print(f"revoked {args.key_id}")
    return 0


def render_table(records: list[KeyRecord], *, now: datetime) -> str:
    if not records:
        return "no keys"
    headers = [
        "id",
        "prefix",
        "team",
        "name",
        "status",
        "created",
        "expires",
        "models",
        "daily $",
        "rpm",
        "tpm",
    ]
    rows = [
        [
            shown["id"],
            shown["prefix"],
            shown["team"],
            shown["name"],
            shown["status"],
            f"{r.created_at:%Y-%m-%d %H:%M}",
            "-" if r.expires_at is None else f"{r.expires_at:%Y-%m-%d %H:%M}",
            "(team's)" if r.allowed_models is None else ",".join(r.allowed_models),
            shown["budget_daily_usd"] or "-",
            "-" if r.rpm is None else str(r.rpm),
            "-" if r.tpm is None else str(r.tpm),
        ]
        for r in records
        for shown in [present_key(r, now=now)]
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in [headers, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _usd_nano(text: str) -> int:
    try:
        usd = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"'{text}' is not an amount of dollars") from None
    if not usd.is_finite() or usd < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a non-negative amount of dollars")
    return usd_to_nano(usd)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _positive_days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of days") from None
    if not 0 < days <= 36_500:
        raise argparse.ArgumentTypeError("must be between 0 and 36500 days")
    return days


def _model_list(text: str) -> list[str]:
    models = [m.strip() for m in text.split(",") if m.strip()]
    if not models:
        raise argparse.ArgumentTypeError("name at least one model")
    return models
