"""`tollgate serve --workers N`: the checks and preparations the supervisor makes once, before it
starts N worker processes on one port, and the app factory each worker calls.

What runs once, in the supervisor: config validation, the state-store check, migrations, the
embedded default's sandbox emulators, folding spool directories no worker will own. What runs in
every worker: the app (price table, adapters, ledger writer, Redis and database clients). Workers
are spawned, not forked (uvicorn's choice), so they learn what the supervisor decided from one
environment variable, `TOLLGATE_WORKER_SPEC`.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI

from gateway.config.schema import Config

SPEC_ENV = "TOLLGATE_WORKER_SPEC"
APP_FACTORY = "gateway.workers:create_worker_app"
# Spool files, as gateway/accounting/spool.py documents them: appends go to `ledger.spool`, a
# replay renames it to `ledger.spool.<ns>.replay`, rows the database refused end in `.rejected`.
_ACTIVE_SPOOL = "ledger.spool"
_MAX_SLOTS = 1024
_HEALTHCHECK_SECONDS = 30
# gateway.runtime's variable, not imported from there: the supervisor never needs the app's modules
# (about 45 MB) in its own memory.
REDIS_URL_ENV = "TOLLGATE_REDIS_URL"

log = logging.getLogger("tollgate")


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What the supervisor tells every worker: where the config is (None: the embedded default,
    whose sandbox emulators the supervisor already started) and how to log."""

    config_path: str | None
    workers: int
    log_level: str = "info"
    sandbox_urls: dict[str, str] = field(default_factory=dict)
    metrics_dir: str | None = None
    log_format: str = "text"
    access_log: bool = False

    def to_env(self) -> str:
        return orjson.dumps(
            {
                "config_path": self.config_path,
                "workers": self.workers,
                "log_level": self.log_level,
                "sandbox_urls": self.sandbox_urls,
                "metrics_dir": self.metrics_dir,
                "log_format": self.log_format,
                "access_log": self.access_log,
            }
        ).decode()

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> WorkerSpec:
        raw = environ.get(SPEC_ENV)
        if not raw:
            raise RuntimeError(
                f"{APP_FACTORY} is started by `tollgate serve --workers N` ({SPEC_ENV} is unset)"
            )
        data = orjson.loads(raw)
        return cls(
            config_path=data["config_path"],
            workers=int(data["workers"]),
            log_level=str(data["log_level"]),
            sandbox_urls=dict(data["sandbox_urls"]),
            metrics_dir=data["metrics_dir"],
            log_format=str(data.get("log_format", "text")),
            access_log=bool(data.get("access_log", False)),
        )


def state_is_shared(config: Config, environ: Mapping[str, str]) -> bool:
    """Whether budgets, limits and the rest live in Redis (the same rule as `create_state_store`)."""
    return bool(environ.get(REDIS_URL_ENV)) or config.state.backend == "redis"


def refusal(
    config: Config, environ: Mapping[str, str], *, workers: int, per_process_state: bool
) -> str | None:
    """Why N workers must not start on this config, or None. In-memory state would give each worker
    its own budgets and rate limits: N times the configured spend and RPM, silently."""
    if workers <= 1 or per_process_state or state_is_shared(config, environ):
        return None
    return (
        f"--workers {workers} needs shared state: with the in-memory state store every worker keeps its "
        "own budgets, rate limits, idempotency keys, circuit breakers and response cache, so limits "
        f"would be {workers}x looser than configured. Set `state: {{backend: redis, redis_url: ...}}` in "
        f"the config (or {REDIS_URL_ENV}), or pass --allow-per-process-state to accept per-process limits."
    )


def spool_slot_dir(base: Path, slot: int) -> Path:
    """Worker slot 0 spools where a single process would; the others get a directory each, because
    a spool is replayed and deleted by its owner and must never be shared between writers."""
    return base if slot == 0 else base / f"worker-{slot}"


def fold_orphan_spools(base: Path, *, workers: int) -> int:
    """Move rows left in the spools of slots no worker will claim (a previous run with more
    workers) into slot 0's directory as replay files, so they are written, never stranded.
    Call before any worker starts; returns how many files moved."""
    moved = 0
    if not base.is_dir():
        return 0
    for directory in sorted(base.glob("worker-*")):
        suffix = directory.name.removeprefix("worker-")
        if not directory.is_dir() or not suffix.isdigit() or int(suffix) < workers:
            continue
        for path in sorted(directory.iterdir()):
            if path.name == _ACTIVE_SPOOL:
                target = base / f"{_ACTIVE_SPOOL}.{time.time_ns()}.replay"
            else:
                target = base / path.name
                if target.exists():
                    target = base / f"{directory.name}-{path.name}"
            path.rename(target)
            moved += 1
        directory.rmdir()
    return moved


@dataclass(slots=True)
class SpoolSlot:
    """A worker's claim on one spool directory: an flock held for the life of the process, so a
    worker that replaces a dead one takes over (and replays) exactly the spool the dead one left."""

    slot: int
    directory: Path
    fd: int


def claim_spool_slot(base: Path) -> SpoolSlot:
    base.mkdir(parents=True, exist_ok=True)
    for slot in range(_MAX_SLOTS):
        fd = os.open(base / f".worker-{slot}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return SpoolSlot(slot, spool_slot_dir(base, slot), fd)
    raise RuntimeError(f"no free ledger spool slot under {base}")


def serve_workers(spec: WorkerSpec, options: dict[str, Any], *, shared_state: bool) -> int:
    """Bind the port once, start `spec.workers` processes on it and supervise them (a dead worker
    is replaced; SIGHUP replaces them all, one at a time). Non-zero when a worker failed to start."""
    from uvicorn import Config as ServerConfig
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    from gateway.observability.worker_metrics import MULTIPROC_ENV, metrics_directory

    with metrics_directory(os.environ) as directory:
        # Spawned workers inherit this environment: prometheus-client reads its variable at import.
        os.environ[MULTIPROC_ENV] = directory
        os.environ[SPEC_ENV] = replace(spec, metrics_dir=directory).to_env()
        # A spawned worker imports the whole gateway before it answers the supervisor's first ping;
        # on a busy host that takes longer than uvicorn's 5 s, and it would kill healthy workers.
        server = ServerConfig(
            APP_FACTORY,
            factory=True,
            workers=spec.workers,
            timeout_worker_healthcheck=_HEALTHCHECK_SECONDS,
            **options,
        )
        if not shared_state:
            log.warning(
                "Tollgate: %d workers with in-memory state: budgets, rate limits and the response cache "
                "are per worker (--allow-per-process-state)",
                spec.workers,
            )
        log.info(
            "Tollgate: %d workers on %s:%s; /metrics merges every worker's counters",
            spec.workers,
            options["host"],
            options["port"],
        )
        supervisor = Multiprocess(server, sockets=[server.bind_socket()])
        supervisor.run()
    failed = [p.pid for p in supervisor.processes if p.exitcode == STARTUP_FAILURE]
    if failed:
        log.error("Tollgate: worker processes %s failed to start; see their lines above", failed)
        return 1
    return 0


def create_worker_app() -> FastAPI:
    """The uvicorn factory each worker process calls (`factory=True`)."""
    from gateway.app import create_app
    from gateway.config.defaults import embedded_config
    from gateway.config.loader import load_config
    from gateway.observability.logs import configure_logging
    from gateway.observability.worker_metrics import serve_shared_metrics

    spec = WorkerSpec.from_env(os.environ)
    configure_logging(
        spec.log_level, "json" if spec.log_format == "json" else "text", access_log=spec.access_log
    )
    config = (
        load_config(spec.config_path) if spec.config_path else embedded_config(os.environ, spec.sandbox_urls)
    )
    claim = claim_spool_slot(Path(config.ledger.spool_dir))
    app = create_app(
        config,
        config_path=Path(spec.config_path) if spec.config_path else None,
        spool_dir=claim.directory,
    )
    app.state.spool_slot = claim  # the lock lives as long as the app
    if spec.metrics_dir:
        serve_shared_metrics(app, spec.metrics_dir)
    log.info("Tollgate worker %d: spool slot %d (%s)", os.getpid(), claim.slot, claim.directory)
    return app
