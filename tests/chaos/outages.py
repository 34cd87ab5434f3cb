"""Real outages of the real services on this machine: PostgreSQL restarted with pg_ctlcluster, Redis
shut down and started again. Other tests share these servers, so every outage is short, always
undone in `finally`, and over only once the server answers again."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

REDIS_START = ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", "6379"]
REDIS_START += ["--save", "", "--appendonly", "no", "--dir", "/var/lib/redis"]


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def postgres_cluster() -> str:
    """The local cluster's version, or skip: the server must be this machine's, and ours to restart."""
    versions = (
        sorted(p.name for p in Path("/etc/postgresql").glob("*")) if Path("/etc/postgresql").exists() else []
    )
    if not versions or shutil.which("pg_ctlcluster") is None or os.geteuid() != 0:
        pytest.skip("restarting PostgreSQL needs a local cluster, pg_ctlcluster and root")
    return versions[-1]


def wait_for_postgres(within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while _run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("PostgreSQL did not come back")
        time.sleep(0.1)


def restart_postgres(version: str) -> float:
    """Restart the cluster (fast shutdown: open connections are cut); returns the seconds it took."""
    started = time.monotonic()
    try:
        done = _run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", "fast"])
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctlcluster restart failed: {done.stderr.strip()}")
    finally:
        if _run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]).returncode != 0:
            _run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"])
        wait_for_postgres()
    return time.monotonic() - started


def redis_client() -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=1, socket_timeout=2)


def redis_answers() -> bool:
    client = redis_client()
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@contextmanager
def redis_stopped() -> Iterator[None]:
    """Redis is down inside the block (its data gone, as with `save ""`), and up again after it."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("restarting Redis needs redis-server and redis-cli on this machine")
    _run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "shutdown", "nosave"])
    deadline = time.monotonic() + 10
    while redis_answers():
        if time.monotonic() > deadline:
            raise RuntimeError("Redis did not stop")
        time.sleep(0.05)
    try:
        yield
    finally:
        _run(REDIS_START)
        deadline = time.monotonic() + 30
        while not redis_answers():
            if time.monotonic() > deadline:
                raise RuntimeError("Redis did not come back")
            time.sleep(0.05)
