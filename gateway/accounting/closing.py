"""Closing a request's ledger row: who answered it (from the executor's trace), what it cost at that
deployment's price, and the row handed to the writer with its metrics and span. Shared by every
endpoint and by the stages that spend on a request's behalf (the semantic cache's embedding)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

from gateway.accounting.record import RequestRecord
from gateway.execution.executor import Trace
from gateway.observability.access import log_request
from usage import Usage

if TYPE_CHECKING:
    from gateway.accounting.writer import LedgerWriter
    from gateway.models import ModelRegistry
    from gateway.observability.metrics import Metrics
    from gateway.observability.tracing import Tracing
    from pricing.book import PriceBook

CLIENT_CLOSED = 499


class Books(Protocol):
    """What costing and closing a row needs (the running gateway's `Runtime` is one): the prices and
    the baseline, the ledger writer, and the metrics and span the row also ends."""

    registry: ModelRegistry
    prices: PriceBook
    metrics: Metrics
    ledger: LedgerWriter
    tracing: Tracing


def bill(runtime: Books, record: RequestRecord, usage: Usage, trace: Trace) -> None:
    price = trace.deployment.price if trace.deployment else None
    record.set_usage(usage, price, baseline=runtime.registry.baseline, version=runtime.prices.version)
    if price is None:
        runtime.metrics.price_unknown.labels(record.model or record.requested_model).inc()


def attribute(record: RequestRecord, trace: Trace) -> None:
    record.attempts = trace.attempts
    record.fallback_used = trace.fallback_used
    record.deployments_tried = ",".join(trace.tried) or None
    if trace.model is not None and trace.deployment is not None:
        record.model = trace.model.name
        record.tier = trace.model.tier
        record.provider = trace.deployment.target.provider
        record.upstream_model = trace.deployment.target.upstream_model


def close_record(runtime: Books, record: RequestRecord) -> Awaitable[None] | None:
    """Final: the row journaled (it survives the process from here on), metrics, log line, span.
    Under `ledger.durability: power`, returns what the answer must await (the journal's fsync)."""
    if record.status == 0:
        record.fail(status=CLIENT_CLOSED, error_type="client_closed", message="client went away")
    record.finish()
    synced = runtime.ledger.record(record)
    runtime.metrics.observe(record)
    log_request(record, runtime.tracing)  # the access line, when on; before the span ends
    runtime.tracing.finish(record)
    return synced
