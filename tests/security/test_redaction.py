"""The scrubber behind the leak test, case by case: what it removes and what it leaves alone."""

from __future__ import annotations

import logging

from gateway.observability.redaction import REDACTED, AccessLogFilter, Redactor, redact_request_target
from providers.errors import UpstreamRejected

KEY = "sk-live-0123456789abcdef"
VIRTUAL = "tg-ab12cd34_" + "Z" * 43


def test_known_secrets_and_virtual_keys_are_removed() -> None:
    redactor = Redactor([KEY, "short"])
    text = redactor.text(f"bad key {KEY}; caller {VIRTUAL}; a short word")
    assert text == f"bad key {REDACTED}; caller tg-ab12cd34_…; a short word"


def test_a_provider_error_loses_the_secret_and_a_chain_that_quotes_it() -> None:
    try:
        try:
            raise RuntimeError(f"SDK said: Authorization: Bearer {KEY}")
        except RuntimeError as inner:
            raise UpstreamRejected(f"openai returned 401: {KEY}", status=502) from inner
    except UpstreamRejected as caught:
        exc = Redactor([KEY]).provider_error(caught)
    assert KEY not in exc.message and KEY not in str(exc)
    assert exc.__cause__ is None and exc.__suppress_context__


def test_a_clean_error_keeps_its_chain() -> None:
    try:
        try:
            raise RuntimeError("connection refused")
        except RuntimeError as inner:
            raise UpstreamRejected("openai returned 400: bad request") from inner
    except UpstreamRejected as caught:
        exc = Redactor([KEY]).provider_error(caught)
    assert isinstance(exc.__cause__, RuntimeError)


def test_access_log_lines_lose_credential_query_values_only() -> None:
    assert redact_request_target("/v1/chat?key=abc&model=x") == f"/v1/chat?key={REDACTED}&model=x"
    assert redact_request_target("/v1/spend?group_by=key%2Cteam") == "/v1/spend?group_by=key%2Cteam"
    assert redact_request_target(f"/x?API_KEY={KEY}&t=1") == f"/x?API_KEY={REDACTED}&t=1"
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s"', ("1.2.3.4", "GET", f"/a?token={VIRTUAL}"), None
    )
    assert AccessLogFilter().filter(record)
    assert VIRTUAL not in record.getMessage() and REDACTED in record.getMessage()
