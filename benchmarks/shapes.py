"""The two gateway set-ups the bench measures, as config files and the key a client sends.

`production` is what an operator runs: a team with a daily budget and an rpm limit, a virtual key
for it (every request authenticated, its budget reserved and settled, its rate limit checked),
budgets and limits in Redis, the ledger on PostgreSQL and the router on for `auto` (requests ask
for `auto` and the shipped default routes pick the tier). `embedded` is the zero-config default: a
SQLite ledger, open mode, in-memory state, a named model. Both front the same sandbox.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from benchmarks import payloads
from benchmarks.ledgers import Ledger
from benchmarks.processes import child_env

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
TEAM = "bench"
# Far above what a run spends or sends (5,000 req/s is 300,000 a minute): every request is checked
# against both, none is refused.
TEAM_BUDGET_DAILY_USD = "1000000"
TEAM_RPM = 100_000_000
STRONG_MODEL = "bench-model-strong"


@dataclass(frozen=True)
class Shape:
    name: str  # "production" or "embedded"
    ledger_kind: str  # "postgresql" or "sqlite"
    model: str  # what requests ask for
    redis: bool
    keys: bool

    @property
    def label(self) -> str:
        return "production" if self.name == "production" else "embedded default"


PRODUCTION = Shape("production", "postgresql", "auto", redis=True, keys=True)
EMBEDDED = Shape("embedded", "sqlite", payloads.MODEL, redis=False, keys=False)


def redis_prefix() -> str:
    return f"tollgate-bench-{secrets.token_hex(4)}:"


def gateway_config(
    shape: Shape, ledger: Ledger, upstream: str, *, redis_url: str | None, prefix: str
) -> dict[str, Any]:
    price = {"input_per_mtok": "3", "output_per_mtok": "15"}
    config: dict[str, Any] = {
        "database": {"url": ledger.url, "auto_migrate": True},
        "providers": {"up": {"type": "openai", "base_url": upstream}},
        "models": {payloads.MODEL: {"provider": "up", "price": price}},
    }
    if shape.redis and redis_url:
        config["state"] = {"backend": "redis", "redis_url": redis_url, "prefix": prefix}
    if shape.name == "production":
        config["models"][STRONG_MODEL] = {
            "provider": "up",
            "price": {"input_per_mtok": "10", "output_per_mtok": "40"},
        }
        config["teams"] = {TEAM: {"budget_daily_usd": TEAM_BUDGET_DAILY_USD, "rpm": TEAM_RPM}}
        config["routing"] = {
            "tiers": [
                {"name": "standard", "models": [payloads.MODEL]},
                {"name": "frontier", "models": [STRONG_MODEL]},
            ]
        }
    return config


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    return path


def create_key(config: Path, cwd: Path) -> str:
    """`tollgate keys create` for the bench team (it migrates the ledger first, as `serve` would)."""
    tollgate = Path(sys.executable).with_name("tollgate")
    argv = [str(tollgate), "keys", "create", "--config", str(config), "--team", TEAM, "--name", "bench"]
    done = subprocess.run(
        [*argv, "--format", "json"],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=cwd,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"tollgate keys create failed ({done.returncode}):\n{done.stderr[-2000:]}")
    key: str = json.loads(done.stdout)["key"]
    return key


def redis_reachable(url: str) -> str | None:
    """None when Redis answers, else why not."""
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


def drop_redis_prefix(url: str, prefix: str) -> None:
    """The run's keys go with it, whatever TTLs they had."""
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.RedisError as exc:  # a clean-up never costs the run its table
        print(f"[bench] could not delete the Redis keys {prefix}*: {exc}", file=sys.stderr)
    finally:
        client.close()


def auth_headers(key: str | None) -> tuple[str, ...]:
    return () if key is None else (f"Authorization: Bearer {key}",)


def git_head() -> str:
    """The short commit the run measured (saved with results other runs' tables show)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
        return done.stdout.strip()
    return "?"
