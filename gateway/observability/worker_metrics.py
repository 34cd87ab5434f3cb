"""`/metrics` when several worker processes share one port: any worker answers for all of them.

Workers share a listening socket, so a scrape lands on whichever worker the kernel picks; a
per-process registry would make every counter jump between workers' values. With
`PROMETHEUS_MULTIPROC_DIR` set before the workers start, prometheus-client keeps each process's
counters and histograms in memory-mapped files there, and a scrape merges all of them (dead
workers' files included, so totals never go backwards when a worker is replaced). The state
gauges (circuits and budgets from Redis, the same for every worker; ledger queue and spool) come
from the worker that answers.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from gateway.observability.metrics_access import metrics_refusal

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@contextmanager
def metrics_directory(environ: Mapping[str, str]) -> Iterator[str]:
    """The directory the workers' metric files go to: the operator's `PROMETHEUS_MULTIPROC_DIR`
    (emptied first, as prometheus-client requires between runs), else a temporary one removed on
    exit. The caller exports it to the workers' environment before they start."""
    configured = environ.get(MULTIPROC_ENV)
    if configured:
        directory = Path(configured)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        yield str(directory)
        return
    created = tempfile.mkdtemp(prefix="tollgate-metrics-")
    try:
        yield created
    finally:
        shutil.rmtree(created, ignore_errors=True)


def serve_shared_metrics(app: FastAPI, directory: str) -> None:
    """Put a merged `/metrics` ahead of the app's own per-process one."""

    async def metrics(request: Request) -> Response:
        runtime = request.app.state.runtime
        if (refused := await metrics_refusal(runtime, request.headers)) is not None:
            return refused
        await runtime.metrics.refresh(runtime)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        registry.register(_Gauges(runtime.metrics.registry))
        body = await asyncio.to_thread(generate_latest, registry)
        return Response(body, media_type=_CONTENT_TYPE)

    route = APIRoute("/metrics", metrics, methods=["GET"], include_in_schema=False)
    app.router.routes.insert(0, route)


# Families the merged files do not hold: the answering worker's process, GC and platform figures.
_OWN = ("process_", "python_")


class _Gauges(Collector):
    """This worker's gauges and process figures only: its counters and histograms are already in
    the merged files."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Any]:
        return [
            family
            for family in self._registry.collect()
            if family.type == "gauge" or family.name.startswith(_OWN)
        ]
