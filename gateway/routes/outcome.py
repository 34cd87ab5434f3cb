"""What every served request ends with, whatever its endpoint: the deadline it runs under, the
headers that tell the client, and its error answer (the row itself is closed in
`gateway.accounting.closing`)."""

from __future__ import annotations

import logging
import time

from starlette.requests import Request
from starlette.responses import Response

from gateway.accounting.record import RequestRecord
from gateway.context.policy import HEADER as CONTEXT_HEADER
from gateway.errors import InvalidRequest
from gateway.execution.executor import Trace
from gateway.http.headers import request_headers
from gateway.models import Model
from gateway.routes.dialects import Dialect
from gateway.routing.escalation import HEADER as ESCALATED_HEADER
from gateway.runtime import Runtime
from providers.errors import ProviderError
from providers.reasoning_params import dropped_names

log = logging.getLogger("tollgate.requests")

ROUTE_HEADER = "x-tollgate-route"
TIMEOUT_HEADER = "x-tollgate-timeout-ms"
# Parameters the answering model refuses, left out of what it was sent (`providers.reasoning_params`).
DROPPED_HEADER = "x-tollgate-dropped-params"
TAGS_HEADER = "x-tollgate-tags"
_MAX_TAGS = 10
_MAX_TAG_LENGTH = 64


def parse_tags(value: str | None) -> tuple[str, ...]:
    """`x-tollgate-tags: checkout, search` -> ("checkout", "search"): at most ten, each short."""
    if not value:
        return ()
    tags = [tag.strip() for tag in value.split(",") if tag.strip()]
    if len(tags) > _MAX_TAGS or any(len(tag) > _MAX_TAG_LENGTH for tag in tags):
        raise InvalidRequest(
            f"{TAGS_HEADER} takes at most {_MAX_TAGS} tags of at most {_MAX_TAG_LENGTH} characters",
            param=TAGS_HEADER,
        )
    return tuple(dict.fromkeys(tags))


def request_deadline(request: Request, runtime: Runtime, model: Model) -> float:
    """One deadline for the whole request, monotonic: the model's or the gateway's, and shorter if
    the client asks (it may never ask for longer)."""
    seconds = model.deadline_seconds or runtime.config.resilience.deadline_seconds
    asked = request_headers(request).get(TIMEOUT_HEADER)
    if asked is not None:
        try:
            client_seconds = int(asked) / 1000
        except ValueError:
            raise InvalidRequest(
                f"{TIMEOUT_HEADER} must be whole milliseconds", param=TIMEOUT_HEADER
            ) from None
        if client_seconds <= 0:
            raise InvalidRequest(f"{TIMEOUT_HEADER} must be positive", param=TIMEOUT_HEADER)
        seconds = min(seconds, client_seconds)
    return time.monotonic() + seconds


def response_headers(record: RequestRecord, trace: Trace) -> dict[str, str]:
    headers = {
        "x-tollgate-attempts": str(trace.attempts),
        "x-tollgate-cache": record.cache_status or "bypass",
    }
    if trace.model is not None:
        headers["x-tollgate-model"] = trace.model.name
        headers["x-tollgate-tier"] = trace.model.tier
    if record.escalation_reason is not None:
        headers[ESCALATED_HEADER] = record.escalation_reason
    if record.route is not None:
        headers[ROUTE_HEADER] = record.route
    if record.context_note:
        headers[CONTEXT_HEADER] = record.context_note
    if dropped := dropped_names(record.flags):
        headers[DROPPED_HEADER] = ",".join(dropped)
    return headers


def error_response(record: RequestRecord, trace: Trace, exc: Exception, dialect: Dialect) -> Response:
    status, body, error_type = dialect.error(exc)
    if status == 500:
        log.exception("request %s failed inside the gateway", record.id)
    record.fail(status=status, error_type=error_type, message=str(exc))
    headers = response_headers(record, trace)
    headers.update(getattr(exc, "headers", None) or {})
    if isinstance(exc, ProviderError) and exc.retry_after is not None:
        headers["retry-after"] = str(max(1, round(exc.retry_after)))
    return Response(body, status_code=status, media_type="application/json", headers=headers)
