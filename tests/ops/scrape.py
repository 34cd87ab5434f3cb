"""Reading a real gateway's metrics in tests: the runtime as a `MetricsSource`, the per-request hook,
and the parsed exposition."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gateway.accounting.record import RequestRecord
from gateway.accounting.writer import LedgerWriter
from gateway.config.schema import Config
from gateway.models import ModelRegistry
from gateway.runtime import Runtime
from gateway.state.store import StateStore
from tests.harness import GatewayServer

SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
}


@dataclass(frozen=True, slots=True)
class LedgerView:
    """The writer's gauges; `queue_depth` read from its queue until the writer has the property."""

    writer: LedgerWriter

    @property
    def database_down(self) -> bool:
        return self.writer.database_down

    @property
    def queue_depth(self) -> int:
        depth = getattr(type(self.writer), "queue_depth", None)
        return int(self.writer.queue_depth) if depth is not None else self.writer._queue.qsize()  # type: ignore[attr-defined]

    @property
    def written(self) -> int:
        return self.writer.written

    @property
    def spool_dir(self) -> Path:
        return self.writer.spool_dir

    @property
    def spooled(self) -> int:
        return self.writer.spooled


@dataclass(frozen=True, slots=True)
class RuntimeSource:
    runtime: Runtime

    @property
    def config(self) -> Config:
        return self.runtime.config

    @property
    def registry(self) -> ModelRegistry:
        return self.runtime.registry

    @property
    def store(self) -> StateStore:
        return self.runtime.store

    @property
    def ledger(self) -> LedgerView:
        return LedgerView(self.runtime.ledger)


class _Uncounted:
    def inc(self, amount: float = 1) -> None:
        pass


class _WithoutOldForm:
    """`metrics.requests` as `close_record` will use it once it calls `observe` instead of counting
    `requests.labels(endpoint, model, status)` itself: that old form counts nothing here."""

    def __init__(self, counter: Any) -> None:
        self._counter = counter

    def labels(self, *values: Any, **labels: Any) -> Any:
        return _Uncounted() if len(values) == 3 else self._counter.labels(*values, **labels)


def observe_records(server: GatewayServer) -> None:
    """Feed `metrics.observe` every finished record, exactly once, whether or not `close_record`
    calls it yet: each record the ledger receives is observed on the next loop turn unless
    `close_record` (one synchronous call) already observed it."""
    runtime = server.runtime
    metrics, ledger = runtime.metrics, runtime.ledger
    metrics.requests = _WithoutOldForm(metrics.requests)  # type: ignore[assignment]
    seen: set[str] = set()
    observe, record = metrics.observe, ledger.record

    def observing(rec: RequestRecord) -> None:
        seen.add(rec.id)
        observe(rec)

    def recording(rec: RequestRecord) -> None:
        record(rec)
        asyncio.get_running_loop().call_soon(lambda: None if rec.id in seen else observing(rec))

    metrics.observe = observing  # type: ignore[method-assign]
    ledger.record = recording  # type: ignore[method-assign]


def refresh(server: GatewayServer) -> None:
    server.call(server.runtime.metrics.refresh(RuntimeSource(server.runtime)))


def scrape(server: GatewayServer) -> str:
    """The exposition after the ledger caught up (its rows are observed as they are recorded)."""
    server.ledger_rows()
    server.call(asyncio.sleep(0.01))
    refresh(server)
    response = httpx.get(server.base_url + "/metrics")
    response.raise_for_status()
    return response.text


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)]."""
    found: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name].append((dict(sample.labels), sample.value))
    return found


def total(text: str, name: str, **labels: str) -> float:
    return sum(
        value
        for found, value in samples(text).get(name, [])
        if all(found.get(k) == v for k, v in labels.items())
    )


def exposed_names(text: str) -> set[str]:
    """Every series name the exposition can carry, samples or not (a labelled metric that has seen
    nothing yet still declares itself with HELP and TYPE)."""
    names = set()
    for family in text_string_to_metric_families(text):
        suffixes: Iterable[str] = SUFFIXES.get(family.type, ("",))
        names |= {family.name + suffix for suffix in suffixes}
    return names


def label_values(text: str, label: str) -> set[Any]:
    return {labels[label] for series in samples(text).values() for labels, _ in series if label in labels}
