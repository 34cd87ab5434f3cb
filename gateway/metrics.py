"""Prometheus metrics, one registry per app (never the process-global one, so several gateways can
live in one process, as they do in tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "tollgate_requests",
            "Requests answered, by endpoint, model and HTTP status.",
            ["endpoint", "model", "status"],
            registry=self.registry,
        )
        self.price_unknown = Counter(
            "tollgate_price_unknown",
            "Requests whose model has no known price: their ledger rows carry price_unknown.",
            ["model"],
            registry=self.registry,
        )
        self.ledger_spooled = Counter(
            "tollgate_ledger_spooled_rows",
            "Ledger rows written to the local spool because the database was unavailable.",
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
