"""One ledger row per request, filled in as the request moves through the gateway."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import String

from gateway.accounting.schema import requests
from pricing.cost import cost_breakdown, cost_nano
from pricing.price import Price
from usage import Usage

_MAX_ERROR_MESSAGE = 1000
# Rides along in a row dict (and the spool) for `request_bodies`; never a `requests` column.
BODY_KEY = "_body"
# The ledger's text columns and how many characters each holds (None: unlimited).
_TEXT_COLUMNS = tuple((c.name, c.type.length) for c in requests.columns if isinstance(c.type, String))


@dataclass(slots=True)
class RequestRecord:
    """Everything the ledger keeps about one request; `finish` stamps the end."""

    id: str
    client_request_id: str | None
    created_at: datetime
    started_ns: int
    endpoint: str = "chat.completions"
    requested_model: str = ""
    stream: bool = False
    finished_at: datetime | None = None
    team: str | None = None
    key_id: str | None = None
    user: str | None = None
    tags: tuple[str, ...] = ()
    model: str | None = None
    provider: str | None = None
    upstream_model: str | None = None
    tier: str | None = None
    route_reason: str | None = None
    route_score: float | None = None
    route: str | None = None  # the task route an `auto` request matched
    status: int = 0
    error_type: str | None = None
    error_message: str | None = None
    attempts: int = 0
    deployments_tried: str | None = None
    fallback_used: bool = False
    cache_status: str | None = None
    idempotency_key: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    usage_estimated: bool = False
    raw_usage: Any = None
    input_cost_nano: int = 0
    output_cost_nano: int = 0
    cost_nano: int = 0
    baseline_cost_nano: int | None = None
    cache_saving_nano: int = 0
    # What the context policy left out of the prompt (`gateway.context`), and that at the input price.
    context_tokens_removed: int = 0
    context_saving_nano: int = 0
    # The `x-tollgate-context` header that says so to the client; not a column (the flags are).
    context_note: str | None = None
    price_unknown: bool = False
    price_source: str | None = None
    price_version: str | None = None
    latency_ms: float = 0.0
    ttft_ms: float | None = None
    upstream_ms: float = 0.0
    output_tokens_per_second: float | None = None
    overhead_ms: float | None = None
    flags: list[str] = field(default_factory=list)
    escalated_from: str | None = None
    escalation_reason: str | None = None
    # What the discarded first attempt cost: `set_usage` adds it to the total.
    escalation_cost_nano: int = 0
    shadow_of: str | None = None
    shadow_agreement: bool | None = None
    # (request, response) text, only for teams that opted in; capped, see `keep_bodies`.
    bodies: tuple[str, str | None, bool] | None = None

    @classmethod
    def begin(
        cls, *, id: str, client_request_id: str | None, endpoint: str = "chat.completions"
    ) -> RequestRecord:
        return cls(
            id=id,
            client_request_id=client_request_id,
            created_at=datetime.now(UTC),
            started_ns=time.perf_counter_ns(),
            endpoint=endpoint,
        )

    def mark_first_byte(self) -> None:
        self.ttft_ms = (time.perf_counter_ns() - self.started_ns) / 1e6

    def set_usage(
        self, usage: Usage, price: Price | None, *, baseline: Price | None = None, version: str | None = None
    ) -> None:
        """Record the tokens and what they cost; an unknown price is flagged, never silently zero.

        The baseline is what the same tokens would have cost on the reference model with no
        caching at all, so savings from routing and caching are `baseline - cost`.
        """
        self.prompt_tokens = usage.prompt_tokens
        self.completion_tokens = usage.completion_tokens
        self.cached_tokens = usage.cached_tokens
        self.cache_write_tokens = usage.cache_write_tokens
        self.cache_write_1h_tokens = usage.cache_write_1h_tokens
        self.reasoning_tokens = usage.reasoning_tokens
        self.raw_usage = usage.raw
        self.usage_estimated = self.usage_estimated or usage.estimated
        self.price_version = version
        if price is None:
            self.price_unknown = True
            self.cost_nano = self.escalation_cost_nano
        else:
            cost = cost_breakdown(usage, price)
            self.input_cost_nano, self.output_cost_nano, self.cost_nano = (
                cost.input_nano,
                cost.output_nano,
                cost.total_nano + self.escalation_cost_nano,
            )
            self.price_source = price.source
            if usage.cached_tokens or usage.cache_write_tokens:
                uncached = cost_nano(
                    Usage(
                        usage.prompt_tokens, usage.completion_tokens, reasoning_tokens=usage.reasoning_tokens
                    ),
                    price,
                )
                # Negative on a request that only wrote the cache: writes cost more than plain input.
                self.cache_saving_nano = uncached - cost.total_nano
        if baseline is not None:
            self.baseline_cost_nano = cost_nano(Usage(usage.prompt_tokens, usage.completion_tokens), baseline)

    def bill_cache_hit(
        self, usage: Usage, *, price: Price | None, baseline: Price | None, version: str | None
    ) -> None:
        """An answer served from the response cache: nothing went upstream, so no tokens and no
        cost; what it would have cost there is the saving, and the baseline is priced as usual."""
        self.raw_usage = usage.raw
        self.price_version = version
        self.price_source = "response_cache"
        if price is not None:
            self.cache_saving_nano = cost_nano(Usage(usage.prompt_tokens, usage.completion_tokens), price)
        if baseline is not None:
            self.baseline_cost_nano = cost_nano(Usage(usage.prompt_tokens, usage.completion_tokens), baseline)

    def fail(self, *, status: int, error_type: str, message: str) -> None:
        self.status = status
        self.error_type = error_type
        self.error_message = message[:_MAX_ERROR_MESSAGE]

    def finish(self) -> None:
        self.finished_at = datetime.now(UTC)
        self.latency_ms = (time.perf_counter_ns() - self.started_ns) / 1e6
        if self.upstream_ms:
            # Time spent in the gateway itself: everything that was not waiting on an upstream.
            self.overhead_ms = max(0.0, self.latency_ms - self.upstream_ms)
        if self.completion_tokens and self.status == 200:
            generating = self.latency_ms - (self.ttft_ms or 0.0)
            if generating > 0:
                self.output_tokens_per_second = round(self.completion_tokens / (generating / 1000), 2)

    def keep_bodies(self, request: bytes, response: bytes | None, *, limit: int) -> None:
        truncated = len(request) > limit or (response is not None and len(response) > limit)
        self.bodies = (
            request[:limit].decode("utf-8", "replace"),
            None if response is None else response[:limit].decode("utf-8", "replace"),
            truncated,
        )

    def to_row(self) -> dict[str, Any]:
        row = self._columns()
        # PostgreSQL refuses a row with a NUL in a text column or a string longer than its column
        # (SQLite keeps both); a client's model name or `user` can be either. Store what fits.
        for name, limit in _TEXT_COLUMNS:
            value = row[name]
            if value is not None and ("\x00" in value or (limit is not None and len(value) > limit)):
                row[name] = value.replace("\x00", "\ufffd")[:limit]
        if self.bodies is not None:
            request, response, truncated = self.bodies
            row[BODY_KEY] = {"request_body": request, "response_body": response, "truncated": truncated}
        return row

    def _columns(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "finished_at": self.finished_at or self.created_at,
            "client_request_id": self.client_request_id,
            "team": self.team,
            "key_id": self.key_id,
            "user": self.user,
            "tags": orjson.dumps(list(self.tags)).decode() if self.tags else None,
            "endpoint": self.endpoint,
            "requested_model": self.requested_model,
            "model": self.model,
            "provider": self.provider,
            "upstream_model": self.upstream_model,
            "tier": self.tier,
            "route_reason": self.route_reason,
            "route_score": self.route_score,
            "route": self.route,
            "stream": self.stream,
            "status": self.status,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "attempts": self.attempts,
            "deployments_tried": self.deployments_tried,
            "fallback_used": self.fallback_used,
            "cache_status": self.cache_status,
            "idempotency_key": self.idempotency_key,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "usage_estimated": self.usage_estimated,
            "raw_usage": orjson.dumps(self.raw_usage).decode() if self.raw_usage is not None else None,
            "input_cost_nano": self.input_cost_nano,
            "output_cost_nano": self.output_cost_nano,
            "cost_nano": self.cost_nano,
            "baseline_cost_nano": self.baseline_cost_nano,
            "cache_saving_nano": self.cache_saving_nano,
            "context_tokens_removed": self.context_tokens_removed,
            "context_saving_nano": self.context_saving_nano,
            "price_unknown": self.price_unknown,
            "price_source": self.price_source,
            "price_version": self.price_version,
            "latency_ms": self.latency_ms,
            "ttft_ms": self.ttft_ms,
            "output_tokens_per_second": self.output_tokens_per_second,
            "overhead_ms": self.overhead_ms,
            "flags": ",".join(self.flags) or None,
            "escalated_from": self.escalated_from,
            "escalation_reason": self.escalation_reason,
            "escalation_cost_nano": self.escalation_cost_nano,
            "shadow_of": self.shadow_of,
            "shadow_agreement": self.shadow_agreement,
        }
