"""`GET /v1/models`, `/healthz` (the process is alive) and `/readyz` (config loaded, database up)."""

from __future__ import annotations

import asyncio

import orjson
from fastapi import APIRouter, Request, Response

from gateway.accounting.database import ping
from gateway.runtime import Runtime
from gateway.state.failover import FallbackStateStore

router = APIRouter()

_JSON = "application/json"


@router.get("/v1/models", summary="Models and aliases clients may ask for (OpenAI list shape)")
async def list_models(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": model.owned_by}
        for name, model in runtime.registry.public_names()
    ]
    if runtime.config.routing.tiers:
        data.insert(
            0,
            {
                "id": runtime.config.routing.auto_model,
                "object": "model",
                "created": 0,
                "owned_by": "tollgate",
            },
        )
    return Response(orjson.dumps({"object": "list", "data": data}), media_type=_JSON)


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    body = await runtime.metrics.scrape(runtime)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> Response:
    return Response(b'{"status":"ok"}', media_type=_JSON)


@router.get("/readyz", summary="Readiness: config loaded and the database reachable")
async def readyz(request: Request) -> Response:
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:
        return _not_ready("config not loaded")
    try:
        await asyncio.wait_for(ping(runtime.engine), timeout=2.0)
    except Exception as exc:
        return _not_ready(f"database unreachable: {type(exc).__name__}")
    state = await runtime.store.current() if isinstance(runtime.store, FallbackStateStore) else "in-memory"
    body = {
        "status": "ready",
        # Open mode is loud on purpose: with no keys configured, anyone who can reach the port can spend.
        "auth": "open (no keys configured: anyone can call)"
        if runtime.open_mode and not await runtime.keys.any_exist()
        else "keys required",
        "state": state,
        "ledger": "spooling (database unavailable)" if runtime.ledger.database_down else "writing",
        # Still ready: the last good policy keeps serving. The reason (which can quote the file)
        # goes to the log only, since this route needs no key.
        "config": "stale: the config file could not be reloaded, the previous policy is serving (see the log)"
        if getattr(getattr(request.app.state, "config_watcher", None), "last_error", None)
        else "current",
    }
    if (
        isinstance(runtime.store, FallbackStateStore)
        and runtime.store.degraded
        and state.startswith("unavailable")
    ):
        return Response(orjson.dumps({**body, "status": "not_ready"}), status_code=503, media_type=_JSON)
    return Response(orjson.dumps(body), media_type=_JSON)


def _not_ready(reason: str) -> Response:
    return Response(
        orjson.dumps({"status": "not_ready", "reason": reason}), status_code=503, media_type=_JSON
    )
