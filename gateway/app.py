"""The FastAPI app factory: routes, the error handlers that keep every failure OpenAI-shaped, and a
lifespan that owns the runtime (HTTP pool, database engine, ledger writer)."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from gateway import dashboard
from gateway.accounting.database import resolve_database_url
from gateway.config.reload import ConfigWatcher
from gateway.config.schema import Config
from gateway.errors import GatewayError, describe, error_body
from gateway.http.hot_path import TollgateApp
from gateway.http.request_id import RequestIdMiddleware
from gateway.http.security_headers import CorsTollgateApp, SecurityHeadersMiddleware
from gateway.observability.redaction import install_access_log_filter
from gateway.policy import auth_mode
from gateway.policy.key_store import KeyStoreUnavailable
from gateway.routes import admin, chat, count_tokens, docs, embeddings, meta, responses, spend
from gateway.routes import requests as spend_requests  # issue 25: the request explorer
from gateway.routes.openapi_bodies import with_hot_routes
from gateway.runtime import Runtime

log = logging.getLogger("tollgate")

_GC_THRESHOLDS = (5_000, 20, 20)


async def _say_auth_mode(runtime: Runtime) -> None:
    """Which way requests are authenticated, why, and how to change it: loud when open."""
    try:
        keys_exist = runtime.open_mode and await runtime.keys.any_exist()
    except KeyStoreUnavailable:
        log.warning("cannot tell whether virtual keys exist (the database is unreachable): keys required")
        return
    is_open, sentence = auth_mode.describe(runtime.config, keys_exist=keys_exist)
    log.log(logging.WARNING if is_open else logging.INFO, sentence)


def create_app(
    config: Config,
    *,
    environ: Mapping[str, str] | None = None,
    config_path: Path | None = None,
    spool_dir: Path | None = None,
) -> FastAPI:
    """`spool_dir` overrides `ledger.spool_dir` for this process alone (a worker's own slot), leaving
    the config as the file says, so a reload compares like with like."""
    env = os.environ if environ is None else environ
    database_url = resolve_database_url(config.database.url, env)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime.start(config, database_url=database_url, environ=env, spool_dir=spool_dir)
        await runtime.begin()
        app.state.runtime = runtime
        # Everything built so far (the price table alone is ~100k objects) lives as long as the
        # process: keep it out of the garbage collector's scans, which otherwise stall a request
        # now and then for tens of milliseconds.
        gc.freeze()
        # CPython's default thresholds (700, 10, 10) keep collecting while requests are in flight:
        # over one `make bench` run, ~2,000 young collections (~100 µs each), ~180 middle ones
        # (~0.5 ms) and ~15 full ones (5-7 ms). At (5000, 20, 20) young collections almost never
        # trigger while serving (a request's objects die by refcount before 5,000 accumulate), no
        # full one ran, and the gateway's CPU per request at c=64 fell 241-265 -> 210-217 µs in
        # alternating A/B runs; the c=1 latencies moved within their run-to-run noise. A larger
        # young threshold (20,000) lets the cyclic garbage of failed requests pile up: soak RSS
        # +6 MB, against +0 MB at 5,000.
        gc.set_threshold(*_GC_THRESHOLDS)
        await _say_auth_mode(runtime)
        watcher = ConfigWatcher(config_path, runtime) if config_path is not None else None
        app.state.config_watcher = watcher
        if watcher is not None:
            watcher.start()
        try:
            yield
        finally:
            if watcher is not None:
                await watcher.stop()
            await runtime.stop()

    origins = config.server.cors_allow_origins
    # docs_url/redoc_url off: gateway.routes.docs serves both pages with their assets, no CDN.
    settings = {"title": "Tollgate", "version": "0.1.0", "docs_url": None, "redoc_url": None}
    app = (
        CorsTollgateApp(cors_allow_origins=origins, lifespan=lifespan, **settings)
        if origins
        else TollgateApp(lifespan=lifespan, **settings)
    )
    app.add_hot_route("/v1/chat/completions", chat.chat_completions)
    app.add_hot_route("/v1/messages", chat.messages)
    app.add_hot_route("/v1/embeddings", embeddings.embeddings)
    app.add_hot_route("/v1/completions", chat.completions)  # [api-2]
    app.add_hot_route("/v1/messages/count_tokens", count_tokens.count_message_tokens)  # [api-2]
    app.add_hot_route("/v1/responses", responses.create)  # issue 27: the Responses API
    # [reliability-2] the fast-lane routes in /openapi.json, for clients and the schemathesis run.
    app.openapi = with_hot_routes(app.openapi)  # type: ignore[method-assign]
    app.include_router(meta.router)
    app.include_router(spend.router)
    app.include_router(spend_requests.router)  # issue 25: the request explorer
    app.include_router(admin.router)
    app.include_router(responses.router)  # issue 27: stored responses
    app.include_router(dashboard.router)
    app.include_router(docs.router)
    app.add_exception_handler(GatewayError, _gateway_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _internal_error)
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(RequestIdMiddleware)
    install_access_log_filter()
    return app


async def _gateway_error(_request: Request, exc: Exception) -> Response:
    status, body, _ = describe(exc)
    return Response(body, status_code=status, media_type="application/json")


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    body = error_body(str(exc.detail), type="invalid_request_error", code=code)
    return Response(body, status_code=exc.status_code, media_type="application/json", headers=exc.headers)


async def _validation_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    param = ".".join(str(p) for p in first["loc"][1:]) or None
    body = error_body(str(first["msg"]), type="invalid_request_error", code="invalid_request", param=param)
    return Response(body, status_code=400, media_type="application/json")


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    body = error_body("internal error in the gateway", type="gateway_error", code="internal_error")
    return Response(body, status_code=500, media_type="application/json")
