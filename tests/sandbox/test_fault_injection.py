"""Every fault kind, seen from the client side (official SDK with retries off, or httpx)."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from sandbox.server import SandboxServer
from tests.sandbox.clients import sdk, user

USER = user("Hello.")
# A dropped stream surfaces as the HTTP client's RemoteProtocolError ("incomplete
# chunked read"); newer SDKs wrap it in APIConnectionError (and use httpx2).
DROPPED = (httpx.RemoteProtocolError, openai.APIConnectionError)


def assert_dropped(error: BaseException) -> None:
    cause = error if isinstance(error, httpx.HTTPError) else error.__cause__
    assert type(cause).__name__ == "RemoteProtocolError"


def add_faults(server: SandboxServer, *rules: dict[str, object]) -> None:
    httpx.post(server.base_url + "/_sandbox/faults", json=list(rules)).raise_for_status()


def test_429_with_retry_after(client: openai.OpenAI, openai_sb: SandboxServer) -> None:
    add_faults(openai_sb, {"kind": "status", "status": 429, "retry_after": 2, "retry_after_ms": 1500})
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=USER)
    response = caught.value.response
    assert response.headers["retry-after"] == "2"
    assert response.headers["retry-after-ms"] == "1500"
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    assert "gpt-4o" in error["message"]
    # count defaults to 1: the next request succeeds.
    client.chat.completions.create(model="gpt-4o", messages=USER)


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(500, openai.InternalServerError), (503, openai.InternalServerError),
     (529, openai.InternalServerError), (401, openai.AuthenticationError),
     (400, openai.BadRequestError)],
)  # fmt: skip
def test_status_faults(
    client: openai.OpenAI, openai_sb: SandboxServer, status: int, error_class: type[Exception]
) -> None:
    add_faults(openai_sb, {"kind": "status", "status": status, "message": "injected"})
    with pytest.raises(error_class) as caught:
        client.chat.completions.create(model="m", messages=USER)
    assert isinstance(caught.value, openai.APIStatusError)
    assert caught.value.status_code == status
    assert caught.value.response.json()["error"]["message"] == "injected"


def test_reset_aborts_the_connection(client: openai.OpenAI, openai_sb: SandboxServer) -> None:
    add_faults(openai_sb, {"kind": "reset"})
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=USER)
    add_faults(openai_sb, {"kind": "reset"})
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        httpx.post(openai_sb.base_url + "/v1/chat/completions", json={})
    client.chat.completions.create(model="m", messages=USER)


def test_drop_after_truncates_the_stream(client: openai.OpenAI, openai_sb: SandboxServer) -> None:
    add_faults(openai_sb, {"kind": "drop_after", "chunks": 3})
    received = []
    stream = client.chat.completions.create(model="m", messages=USER, stream=True)
    with pytest.raises(DROPPED) as caught:
        for chunk in stream:
            received.append(chunk)
    assert_dropped(caught.value)
    assert len(received) == 3


def test_drop_after_only_hits_streams(client: openai.OpenAI, openai_sb: SandboxServer) -> None:
    add_faults(openai_sb, {"kind": "drop_after", "chunks": 0})
    client.chat.completions.create(model="m", messages=USER)
    stream = client.chat.completions.create(model="m", messages=USER, stream=True)
    with pytest.raises(DROPPED) as caught:
        list(stream)
    assert_dropped(caught.value)


def test_stream_error_event(client: openai.OpenAI, openai_sb: SandboxServer) -> None:
    add_faults(openai_sb, {"kind": "stream_error", "after_chunks": 2, "message": "boom"})
    received = []
    stream = client.chat.completions.create(model="m", messages=USER, stream=True)
    with pytest.raises(openai.APIError, match="boom"):
        for chunk in stream:
            received.append(chunk)
    assert len(received) == 2
    raw = httpx.post(
        openai_sb.base_url + "/v1/chat/completions",
        json={"model": "m", "messages": USER, "stream": True},
        headers={"x-sandbox-fault": "stream_error=1"},
    ).text
    assert raw.count("data: ") == 2 and '"error":{' in raw and "[DONE]" not in raw


def test_timeout_hangs_past_the_client_deadline(openai_sb: SandboxServer) -> None:
    add_faults(openai_sb, {"kind": "timeout", "seconds": 1.5})
    started = time.monotonic()
    with sdk(openai_sb, timeout=0.3) as client, pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=USER)
    assert time.monotonic() - started < 1.2


def test_header_fault_and_filters(client: openai.OpenAI, openai_sb: SandboxServer) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(
            model="m",
            messages=USER,
            extra_headers={"x-sandbox-fault": "status=502"},
        )
    assert caught.value.status_code == 502
    add_faults(
        openai_sb,
        {"kind": "status", "status": 503, "model": "b", "count": -1},
        {"kind": "status", "status": 500, "path": "/v1/embeddings"},
    )
    client.chat.completions.create(model="a", messages=USER)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="b", messages=USER)
    with pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="a", input="x")
    pending = httpx.get(openai_sb.base_url + "/_sandbox/faults").json()["pending"]
    assert pending == [{"kind": "status", "status": 503, "count": -1, "model": "b"}]
    httpx.delete(openai_sb.base_url + "/_sandbox/faults").raise_for_status()
    client.chat.completions.create(model="b", messages=USER)


def test_bad_rules_are_rejected(openai_sb: SandboxServer) -> None:
    response = httpx.post(openai_sb.base_url + "/_sandbox/faults", json={"kind": "meteor"})
    assert response.status_code == 400


def test_fault_rate() -> None:
    with SandboxServer(profile="instant", fault_rate=0.5, seed=3) as sb:
        url = sb.base_url + "/v1/chat/completions"
        codes = [httpx.post(url, json={"model": "m", "messages": USER}).status_code for _ in range(30)]
    assert set(codes) == {200, 503}


def test_vllm_fault_bodies_use_its_shape(vllm_sb: SandboxServer) -> None:
    add_faults(vllm_sb, {"kind": "status", "status": 503}, {"kind": "status", "status": 401})
    url = vllm_sb.base_url + "/v1/chat/completions"
    body = {"model": "m", "messages": USER}
    unavailable = httpx.post(url, json=body)
    assert unavailable.status_code == 503
    assert unavailable.json()["error"]["code"] == 503
    assert unavailable.json()["error"]["type"] == "ServiceUnavailableError"
    assert httpx.post(url, json=body).json() == {"error": "Unauthorized"}
