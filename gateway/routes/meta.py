"""`GET /v1/models`, `/healthz` (the process is alive) and `/readyz` (it can serve; a degraded
dependency such as an unreachable database shows in the body, not the status)."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request, Response

from gateway.errors import error_body
from gateway.observability import readiness
from gateway.observability.metrics_access import metrics_refusal
from gateway.policy import KeyStoreUnavailable
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


@router.get(
    "/v1/models/{model_id:path}", summary="One model or alias clients may ask for (OpenAI model shape)"
)
async def retrieve_model(request: Request, model_id: str) -> Response:
    runtime: Runtime = request.app.state.runtime
    owner = None
    if runtime.config.routing.tiers and model_id == runtime.config.routing.auto_model:
        owner = "tollgate"
    elif (model := runtime.registry.resolve(model_id)) is not None:
        owner = model.owned_by
    if owner is None:
        body = error_body(
            f"The model '{model_id}' does not exist",
            type="invalid_request_error",
            code="model_not_found",
            param="model",
        )
        return Response(body, status_code=404, media_type=_JSON)
    return Response(
        orjson.dumps({"id": model_id, "object": "model", "created": 0, "owned_by": owner}), media_type=_JSON
    )


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    if (refused := await metrics_refusal(runtime, request.headers)) is not None:
        return refused
    checks = await readiness.check_all(runtime)
    runtime.metrics.dependency_up = {name: check.up for name, check in checks.items()}
    body = await runtime.metrics.scrape(runtime)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> Response:
    return Response(b'{"status":"ok"}', media_type=_JSON)


@router.get("/readyz", summary="Readiness: can this replica serve (degraded dependencies in the body)")
async def readyz(request: Request) -> Response:
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:
        return _not_ready("config not loaded")
    checks = await readiness.check_all(runtime)
    runtime.metrics.dependency_up = {name: check.up for name, check in checks.items()}
    status = readiness.overall(checks)
    state = runtime.store.describe() if isinstance(runtime.store, FallbackStateStore) else "in-memory"
    try:
        # Open mode is loud on purpose: with no keys configured, anyone who can reach the port can spend.
        auth = (
            "open (no keys configured: anyone can call)"
            if runtime.open_mode and not await runtime.keys.any_exist()
            else "keys required"
        )
    except KeyStoreUnavailable:
        # Open mode that never reached the database cannot tell whether keys exist: every request
        # is refused (auth_unavailable) until it can, so this replica cannot serve.
        auth, status = "unknown: the key store is unreachable, requests are refused", readiness.NOT_READY
    body = {
        "status": status,
        "checks": {name: check.detail for name, check in checks.items()},
        "auth": auth,
        "state": state,
        "ledger": "spooling (database unavailable)"
        if runtime.ledger.database_down or not checks["database"].up
        else "writing",
        # Still ready: the last good policy keeps serving. The reason (which can quote the file)
        # goes to the log only, since this route needs no key.
        "config": "stale: the config file could not be reloaded, the previous policy is serving (see the log)"
        if getattr(getattr(request.app.state, "config_watcher", None), "last_error", None)
        else "current",
    }
    code = 503 if status == readiness.NOT_READY else 200
    return Response(orjson.dumps(body), status_code=code, media_type=_JSON)


def _not_ready(reason: str) -> Response:
    return Response(
        orjson.dumps({"status": "not_ready", "reason": reason}), status_code=503, media_type=_JSON
    )
