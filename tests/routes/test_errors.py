"""Bad input and failing upstreams: an OpenAI-shaped error with the right status, and still a ledger row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from sandbox.server import SandboxServer
from tests.harness import GatewayServer

HELLO = [{"role": "user", "content": "hello"}]


def post(gateway: GatewayServer, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(
        gateway.base_url + "/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json", **headers},
        timeout=10,
    )


def assert_openai_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code", "param"}
    assert isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in response.text
    if code is not None:
        assert error["code"] == code
    return dict(error)


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        (b'{"model": "gpt-4o-mini", "messages": [', "invalid_json", None),
        (b"[1, 2, 3]", "invalid_json", None),
        (b'{"model": "gpt-4o-mini"}', "missing_required_parameter", "messages"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', "missing_required_parameter", "model"),
        (b'{"model": 5, "messages": [{"role": "user", "content": "x"}]}', "invalid_type", "model"),
        (b'{"model": "gpt-4o-mini", "messages": "hello"}', "invalid_type", "messages"),
        (b'{"model": "gpt-4o-mini", "messages": []}', "invalid_request", "messages"),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "robot", "content": "x"}]}',
            "invalid_value",
            "messages[0].role",
        ),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": 7}]}',
            "invalid_type",
            "messages[0].content",
        ),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}',
            "invalid_type",
            "temperature",
        ),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "temperature": 3}',
            "invalid_value",
            "temperature",
        ),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5}',
            "invalid_type",
            "max_tokens",
        ),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
            "invalid_type",
            "stream",
        ),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "n": true}',
            "invalid_type",
            "n",
        ),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}',
            "invalid_json",
            None,
        ),
    ],
)
def test_bad_request_bodies_get_400_with_param_and_a_ledger_row(
    gateway: GatewayServer, body: bytes, code: str, param: str | None
) -> None:
    response = post(gateway, body)
    error = assert_openai_error(response, 400, code)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    row = gateway.ledger_row(response.headers["x-request-id"])
    assert row["status"] == 400 and row["error_type"] == "invalid_request_error"
    assert row["cost_nano"] == 0 and row["prompt_tokens"] == 0


def test_unknown_model_is_404_like_openai(client: openai.OpenAI, gateway: GatewayServer) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-9000", messages=HELLO)
    assert caught.value.code == "model_not_found"
    assert caught.value.response.headers["x-tollgate-model"] == "none"
    row = gateway.ledger_row(caught.value.response.headers["x-request-id"])
    assert (row["status"], row["requested_model"], row["model"]) == (404, "gpt-9000", None)


def test_oversized_body_with_content_length_is_413(gateway: GatewayServer) -> None:
    big = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "' + b"a" * 300_000 + b'"}]}'
    response = post(gateway, big)
    assert_openai_error(response, 413, "request_too_large")
    assert gateway.ledger_row(response.headers["x-request-id"])["status"] == 413


def test_oversized_body_without_content_length_is_413(gateway: GatewayServer) -> None:
    def chunked() -> Iterator[bytes]:
        yield b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "'
        for _ in range(40):
            yield b"a" * 10_000
        yield b'"}]}'

    response = httpx.post(
        gateway.base_url + "/v1/chat/completions",
        content=chunked(),
        headers={"content-type": "application/json"},
    )
    assert "content-length" not in response.request.headers
    assert_openai_error(response, 413, "request_too_large")


def test_upstream_unreachable_is_502_and_recorded(client: openai.OpenAI, gateway: GatewayServer) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="ghost", messages=HELLO)
    assert caught.value.status_code == 502
    row = gateway.ledger_row(caught.value.response.headers["x-request-id"])
    assert (row["status"], row["error_type"], row["provider"]) == (502, "upstream_unreachable", "dead")


def fault(upstream: SandboxServer, *rules: dict[str, object]) -> None:
    httpx.post(upstream.base_url + "/_sandbox/faults", json=list(rules)).raise_for_status()


def test_upstream_hang_is_504_after_every_attempt_timed_out(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "timeout", "seconds": 5, "count": -1})
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="sluggish", messages=HELLO)
    assert caught.value.status_code == 504
    assert caught.value.response.headers["x-tollgate-attempts"] == "3"
    row = gateway.ledger_row(caught.value.response.headers["x-request-id"])
    assert (row["error_type"], row["attempts"]) == ("upstream_timeout", 3)
    assert 1500 <= row["latency_ms"] < 3500  # three 0.5 s attempts and two short backoffs


def test_upstream_rate_limit_beyond_what_we_wait_passes_retry_after(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 429, "retry_after": 90})
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="gpt-4o-mini", messages=HELLO)
    assert caught.value.response.headers["retry-after"] == "90"
    row = gateway.ledger_row(caught.value.response.headers["x-request-id"])
    assert (row["status"], row["attempts"]) == (429, 1)


def test_upstream_5xx_before_stream_starts_is_an_http_error(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 503, "count": -1})
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="gpt-4o-mini", messages=HELLO, stream=True)
    assert caught.value.status_code == 502
    row = gateway.ledger_row(caught.value.response.headers["x-request-id"])
    assert (row["status"], row["stream"], row["error_type"], row["attempts"]) == (
        502,
        True,
        "upstream_unavailable",
        3,
    )


def test_mid_stream_drop_ends_with_an_error_event_and_a_row(
    gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "drop_after", "chunks": 2})
    body = b'{"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user", "content": "hello"}]}'
    with httpx.stream(
        "POST",
        gateway.base_url + "/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    ) as response:
        assert response.status_code == 200
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
        request_id = response.headers["x-request-id"]
    assert '"error"' in events[-1] and "[DONE]" not in events[-1]
    row = gateway.ledger_row(request_id)
    assert row["status"] == 502 and row["error_type"] in ("upstream_unreachable", "upstream_bad_response")
    # The upstream never sent usage: the row bills an estimate of what was generated, and says so.
    assert row["usage_estimated"] is True
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["cost_nano"] > 0
    assert row["attempts"] == 1


def test_unknown_route_is_openai_shaped_404(gateway: GatewayServer) -> None:
    response = httpx.get(gateway.base_url + "/v1/nothing-here")
    assert_openai_error(response, 404, "not_found")
    assert response.headers["x-request-id"]
