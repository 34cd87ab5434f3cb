"""Fault injection in the anthropic and gemini dialects: each fault in the API's own error shape."""

from __future__ import annotations

import time

import anthropic
import httpx
import orjson
import pytest
from anthropic.types import MessageParam

from sandbox.server import SandboxServer
from tests.sandbox.clients import anthropic_sdk

MODEL = "claude-sonnet-4-6"
USER: list[MessageParam] = [{"role": "user", "content": "Hello."}]
GEMINI = "/v1beta/models/gemini-2.5-flash"
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "Hello."}]}]}
KEY = {"x-goog-api-key": "k"}


def add_faults(http: httpx.Client, server: SandboxServer, *rules: dict[str, object]) -> None:
    http.post(server.base_url + "/_sandbox/faults", json=list(rules)).raise_for_status()


def test_anthropic_429_with_retry_after(
    http: httpx.Client, claude: anthropic.Anthropic, anthropic_sb: SandboxServer
) -> None:
    add_faults(http, anthropic_sb, {"kind": "status", "status": 429, "retry_after": 3})
    with pytest.raises(anthropic.RateLimitError) as caught:
        claude.messages.create(model=MODEL, max_tokens=9, messages=USER)
    response = caught.value.response
    assert response.headers["retry-after"] == "3"
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert body["request_id"] == response.headers["request-id"] == caught.value.request_id
    claude.messages.create(model=MODEL, max_tokens=9, messages=USER)


@pytest.mark.parametrize(
    ("status", "error_type", "error_class"),
    [(529, "overloaded_error", anthropic.InternalServerError), (500, "api_error", anthropic.InternalServerError),
     (401, "authentication_error", anthropic.AuthenticationError),
     (403, "permission_error", anthropic.PermissionDeniedError), (404, "not_found_error", anthropic.NotFoundError),
     (413, "request_too_large", anthropic.APIStatusError), (400, "invalid_request_error", anthropic.BadRequestError)],
)  # fmt: skip
def test_anthropic_status_faults(
    http: httpx.Client,
    claude: anthropic.Anthropic,
    anthropic_sb: SandboxServer,
    status: int,
    error_type: str,
    error_class: type[anthropic.APIStatusError],
) -> None:
    add_faults(http, anthropic_sb, {"kind": "status", "status": status, "retry_after": 1})
    with pytest.raises(error_class) as caught:
        claude.messages.create(model=MODEL, max_tokens=9, messages=USER)
    assert caught.value.status_code == status and caught.value.type == error_type
    assert caught.value.response.headers["retry-after"] == "1"


def test_anthropic_stream_error_event_after_200(
    http: httpx.Client, claude: anthropic.Anthropic, anthropic_sb: SandboxServer
) -> None:
    add_faults(http, anthropic_sb, {"kind": "stream_error", "after_chunks": 4})
    received = []
    stream = claude.messages.create(model=MODEL, max_tokens=200, messages=USER, stream=True)
    with pytest.raises(anthropic.APIStatusError) as caught:
        for event in stream:
            received.append(event.type)
    assert received == ["message_start", "content_block_start", "content_block_delta"]  # the ping is skipped
    assert caught.value.status_code == 200 and caught.value.type == "overloaded_error"
    raw = http.post(
        anthropic_sb.base_url + "/v1/messages",
        json={"model": MODEL, "max_tokens": 50, "messages": USER, "stream": True},
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01", "x-sandbox-fault": "stream_error=1"},
    )
    assert raw.status_code == 200
    last = raw.text.strip().split("\n\n")[-1].split("\n")
    assert last[0] == "event: error"
    error = orjson.loads(last[1].removeprefix("data: "))
    assert error["type"] == "error" and error["error"]["type"] == "overloaded_error"


def test_anthropic_drop_reset_and_timeout(
    http: httpx.Client, claude: anthropic.Anthropic, anthropic_sb: SandboxServer
) -> None:
    add_faults(http, anthropic_sb, {"kind": "drop_after", "chunks": 3})
    # The SDK's own HTTP client (httpx2) raises its RemoteProtocolError ("incomplete chunked read").
    with pytest.raises(Exception) as dropped:
        with claude.messages.stream(model=MODEL, max_tokens=200, messages=USER) as stream:
            stream.until_done()
    cause = (
        dropped.value.__cause__ if isinstance(dropped.value, anthropic.APIConnectionError) else dropped.value
    )
    assert type(cause).__name__ == "RemoteProtocolError"
    add_faults(http, anthropic_sb, {"kind": "reset"})
    with pytest.raises(anthropic.APIConnectionError):
        claude.messages.create(model=MODEL, max_tokens=9, messages=USER)
    add_faults(http, anthropic_sb, {"kind": "timeout", "seconds": 1.0})
    started = time.monotonic()
    with anthropic_sdk(anthropic_sb, timeout=0.2) as quick, pytest.raises(anthropic.APITimeoutError):
        quick.messages.create(model=MODEL, max_tokens=9, messages=USER)
    assert time.monotonic() - started < 0.9


def test_anthropic_fault_rate_is_overloaded(http: httpx.Client) -> None:
    with SandboxServer(dialect="anthropic", profile="instant", fault_rate=0.5, seed=3) as sb:
        url, headers = sb.base_url + "/v1/messages", {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        body = {"model": MODEL, "max_tokens": 5, "messages": USER}
        codes = {http.post(url, json=body, headers=headers).status_code for _ in range(20)}
    assert codes == {200, 529}


def test_gemini_429_carries_retry_info(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    add_faults(http, gemini_sb, {"kind": "status", "status": 429, "retry_after": 7})
    response = http.post(gemini_sb.base_url + GEMINI + ":generateContent", json=GEMINI_BODY, headers=KEY)
    assert response.status_code == 429
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    retry = [d for d in error["details"] if d["@type"].endswith("RetryInfo")]
    assert retry == [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]


@pytest.mark.parametrize(
    ("status", "name"),
    [(400, "INVALID_ARGUMENT"), (403, "PERMISSION_DENIED"), (404, "NOT_FOUND"), (500, "INTERNAL"),
     (503, "UNAVAILABLE"), (504, "DEADLINE_EXCEEDED")],
)  # fmt: skip
def test_gemini_status_faults(http: httpx.Client, gemini_sb: SandboxServer, status: int, name: str) -> None:
    url = gemini_sb.base_url + GEMINI + ":generateContent"
    response = http.post(url, json=GEMINI_BODY, headers={**KEY, "x-sandbox-fault": str(status)})
    assert response.status_code == status
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (status, name) and error["message"]


def test_gemini_stream_error_in_sse_and_json_array(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    url = gemini_sb.base_url + GEMINI + ":streamGenerateContent"
    headers = {**KEY, "x-sandbox-fault": "stream_error=2"}
    sse = http.post(url + "?alt=sse", json=GEMINI_BODY, headers=headers)
    frames = [orjson.loads(f.removeprefix("data: ")) for f in sse.text.split("\r\n\r\n") if f]
    assert len(frames) == 3 and "candidates" in frames[0]
    assert frames[-1]["error"]["status"] == "INTERNAL"
    array = orjson.loads(http.post(url, json=GEMINI_BODY, headers=headers).content)
    assert len(array) == 3 and array[-1]["error"]["code"] == 500


def test_gemini_drop_and_path_filter(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    add_faults(http, gemini_sb, {"kind": "drop_after", "chunks": 1})
    with pytest.raises(httpx.RemoteProtocolError):
        http.post(
            gemini_sb.base_url + GEMINI + ":streamGenerateContent?alt=sse", json=GEMINI_BODY, headers=KEY
        )
    add_faults(http, gemini_sb, {"kind": "status", "status": 503, "path": GEMINI + ":embedContent"})
    ok = http.post(gemini_sb.base_url + GEMINI + ":generateContent", json=GEMINI_BODY, headers=KEY)
    assert ok.status_code == 200
    embed = {"content": {"parts": [{"text": "hi"}]}}
    failed = http.post(gemini_sb.base_url + GEMINI + ":embedContent", json=embed, headers=KEY)
    assert failed.status_code == 503 and failed.json()["error"]["status"] == "UNAVAILABLE"


def test_gemini_reset_and_timeout(http: httpx.Client, gemini_sb: SandboxServer) -> None:
    url = gemini_sb.base_url + GEMINI + ":generateContent"
    add_faults(http, gemini_sb, {"kind": "reset"})
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        http.post(url, json=GEMINI_BODY, headers=KEY)
    add_faults(http, gemini_sb, {"kind": "timeout", "seconds": 1.0})
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        http.post(url, json=GEMINI_BODY, headers=KEY, timeout=0.2)
    assert time.monotonic() - started < 0.9
    assert http.post(url, json=GEMINI_BODY, headers=KEY).status_code == 200
