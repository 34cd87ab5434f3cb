"""The access log (`tollgate serve --access-log`): one line per request, written from its ledger row
when the row closes, so it says what the ledger says (team, model, status, tokens, cost) rather
than what the HTTP layer saw.

Off, a request pays one cached `isEnabledFor` check; the line is built only when it is on. The line
carries ids, labels and numbers only: never the prompt, the answer, the user field or the upstream's
error message (which can quote the prompt), and never a key.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from gateway.observability.logs import ACCESS_LOGGER

if TYPE_CHECKING:
    from gateway.accounting.record import RequestRecord
    from gateway.observability.tracing import Tracing

log = logging.getLogger(ACCESS_LOGGER)


def log_request(record: RequestRecord, tracing: Tracing) -> None:
    """Write `record`'s access line if the access log is on (call before `tracing.finish`)."""
    if not log.isEnabledFor(logging.INFO):
        return
    fields = access_fields(record, trace_id=tracing.trace_id(record))
    log.info(
        "%s %s -> %d in %.1f ms",
        record.endpoint,
        record.model or record.requested_model or "-",
        record.status,
        record.latency_ms,
        extra={"fields": fields},
    )


def access_fields(record: RequestRecord, *, trace_id: str | None) -> dict[str, Any]:
    return {
        "request_id": record.id,
        "trace_id": trace_id,
        "endpoint": record.endpoint,
        "team": record.team,
        "requested_model": record.requested_model or None,
        "model": record.model,
        "provider": record.provider,
        "tier": record.tier,
        "stream": record.stream,
        "status": record.status,
        "error_type": record.error_type,
        "latency_ms": round(record.latency_ms, 2),
        "ttft_ms": None if record.ttft_ms is None else round(record.ttft_ms, 2),
        "input_tokens": record.prompt_tokens,
        "output_tokens": record.completion_tokens,
        "cost_usd": record.cost_nano / 1e9,
        "cache": record.cache_status,
        "attempts": record.attempts,
    }
