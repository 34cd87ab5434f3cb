"""What every answer from the gateway must look like, however hostile the request: a success or an
error in the caller's dialect, never a 5xx and never a traceback."""

from __future__ import annotations

from typing import Any

import orjson

# Text that only ever appears in a Python traceback or a repr of one.
_TRACEBACK_MARKS = ("Traceback (most recent call last)", 'File "/', "site-packages", '.py", line ')


def assert_no_traceback(text: str) -> None:
    for mark in _TRACEBACK_MARKS:
        assert mark not in text, f"traceback text {mark!r} in a response: {text[:500]}"


def media_type(headers: Any) -> str:
    value = headers.get("content-type") or ""
    if isinstance(value, list):  # schemathesis keeps every header as a list of values
        value = value[0] if len(value) == 1 else ",".join(value)
    return str(value).split(";")[0].strip().lower()


def assert_openai_error(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    """`{"error": {"message", "type", "code", "param"?}}` with JSON content type."""
    assert media_type(headers) == "application/json", f"{status} answered as {headers.get('content-type')!r}"
    document = orjson.loads(body)
    assert isinstance(document, dict) and set(document) == {"error"}, document
    error = document["error"]
    assert isinstance(error, dict), document
    assert {"message", "type", "code"} <= set(error), error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["type"], str) and error["type"], error
    assert error["code"] is None or isinstance(error["code"], str), error
    assert_no_traceback(body.decode("utf-8", "replace"))
    return error


def assert_anthropic_error(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}}` with JSON content type."""
    assert media_type(headers) == "application/json", f"{status} answered as {headers.get('content-type')!r}"
    document = orjson.loads(body)
    assert isinstance(document, dict) and document.get("type") == "error", document
    error = document["error"]
    assert isinstance(error, dict), document
    assert isinstance(error.get("type"), str) and error["type"], error
    assert isinstance(error.get("message"), str) and error["message"], error
    assert_no_traceback(body.decode("utf-8", "replace"))
    return error
