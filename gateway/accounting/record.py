"""One ledger row per request, filled in as the request moves through the gateway."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from pricing.cost import Price, cost_nano
from providers.types import Usage

_MAX_ERROR_MESSAGE = 1000


@dataclass(slots=True)
class RequestRecord:
    """Everything the ledger keeps about one request; `finish` stamps the end and the cost."""

    id: str
    client_request_id: str | None
    created_at: datetime
    requested_model: str
    stream: bool
    started_ns: int
    finished_at: datetime | None = None
    model: str | None = None
    provider: str | None = None
    upstream_model: str | None = None
    tier: str | None = None
    status: int = 0
    error_type: str | None = None
    error_message: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    cost_nano: int = 0
    price_source: str | None = None
    attempts: int = 0
    deployments_tried: str | None = None
    fallback_used: bool = False
    usage_estimated: bool = False
    cache_status: str | None = None
    idempotency_key: str | None = None

    @classmethod
    def begin(cls, *, id: str, client_request_id: str | None, stream: bool) -> RequestRecord:
        return cls(
            id=id,
            client_request_id=client_request_id,
            created_at=datetime.now(UTC),
            requested_model="",
            stream=stream,
            started_ns=time.perf_counter_ns(),
        )

    def mark_first_byte(self) -> None:
        self.ttft_ms = (time.perf_counter_ns() - self.started_ns) / 1e6

    def set_usage(self, usage: Usage, price: Price | None) -> None:
        self.prompt_tokens = usage.prompt_tokens
        self.completion_tokens = usage.completion_tokens
        self.cached_tokens = usage.cached_tokens
        self.cache_write_tokens = usage.cache_write_tokens
        self.reasoning_tokens = usage.reasoning_tokens
        if price is not None:
            self.cost_nano = cost_nano(
                price,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cached_tokens=usage.cached_tokens,
                cache_write_tokens=usage.cache_write_tokens,
            )
            self.price_source = price.source

    def fail(self, *, status: int, error_type: str, message: str) -> None:
        self.status = status
        self.error_type = error_type
        self.error_message = message[:_MAX_ERROR_MESSAGE]

    def finish(self) -> None:
        self.finished_at = datetime.now(UTC)
        self.latency_ms = (time.perf_counter_ns() - self.started_ns) / 1e6

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        del row["started_ns"]
        return row
