"""The client cannot choose where the gateway connects: every field, header or model name that could
name an upstream URL is tried against every provider family (LiteLLM's included, whose SDK takes a
`base_url` keyword), while a listener records any connection. It must record none."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sandbox.server import SandboxServer
from tests.harness import GatewayServer
from tests.security.conftest import Tripwire, bearer, create_key, sandbox_requests, security_config

MODELS = ("gpt-4o-mini", "claude", "gemini", "tail")


@pytest.fixture(scope="module")
def tripwire() -> Iterator[Tripwire]:
    wire = Tripwire()
    yield wire
    wire.close()


@pytest.fixture(scope="module")
def gateway(upstreams: dict[str, SandboxServer], fresh_sqlite_url: str) -> Iterator[GatewayServer]:
    with GatewayServer(security_config(upstreams, fresh_sqlite_url)) as server:
        yield server


@pytest.fixture(scope="module")
def key(gateway: GatewayServer) -> str:
    created: str = create_key(gateway.base_url, "alpha")["key"]
    return created


def hostile_fields(evil: str) -> dict[str, Any]:
    """Body fields that SDKs (OpenAI's, LiteLLM's, Anthropic's) read as "where and how to connect"."""
    return {
        "base_url": evil + "/v1",
        "api_base": evil + "/v1",
        "api_key": "sk-attacker",
        "extra_headers": {"Host": evil.removeprefix("http://")},
        "extra_body": {"base_url": evil},
        "custom_llm_provider": "openai",
        "litellm_params": {"api_base": evil},
        "proxy": evil,
        "azure_endpoint": evil,
        "aws_bedrock_runtime_endpoint": evil,
        "vertex_ai_location": evil,
        "organization": evil,
        "api_version": evil,
        "mock_response": "answered without any upstream",
    }


def hostile_headers(evil: str) -> dict[str, str]:
    host = evil.removeprefix("http://")
    return {
        "x-tollgate-base-url": evil,
        "x-tollgate-upstream": evil,
        "x-tollgate-provider": evil,
        "x-tollgate-deployment": evil,
        "x-forwarded-host": host,
        "x-forwarded-proto": "http",
        "forwarded": f"host={host}",
        "x-original-url": evil,
        "x-sandbox-fault": "reset",
    }


def image_message(evil: str) -> list[dict[str, Any]]:
    """An image by URL: the upstream may fetch it (that is the provider's business); the gateway must not."""
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": evil + "/cat.png"}},
            ],
        }
    ]


def post(gateway: GatewayServer, path: str, key: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(gateway.base_url + path, json=body, headers={**bearer(key), **headers}, timeout=30)


# LiteLLM's stream types warn on import under pytest's warnings-as-errors; that is not what is tested.
@pytest.mark.filterwarnings("ignore:.*is using the `ReadOnly` qualifier")
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_body_fields_and_headers_cannot_redirect_the_upstream_call(
    gateway: GatewayServer,
    upstreams: dict[str, SandboxServer],
    tripwire: Tripwire,
    key: str,
    model: str,
    stream: bool,
) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 8,
        "stream": stream,
        **hostile_fields(tripwire.url),
    }
    response = post(gateway, "/v1/chat/completions", key, body, **hostile_headers(tripwire.url))
    assert response.status_code < 500, response.text
    assert "answered without any upstream" not in response.text
    assert tripwire.connections == []
    # It went where the config says, and the client's would-be credentials did not go with it.
    upstream = {"gpt-4o-mini": "openai", "claude": "anthropic", "gemini": "gemini", "tail": "openai"}[model]
    seen = sandbox_requests(upstreams[upstream])
    assert seen, "the request should have reached its configured upstream"
    assert all("sk-attacker" not in str(entry["headers"]) for entry in seen)


@pytest.mark.parametrize("field", sorted(hostile_fields("http://x")))
def test_each_connection_field_alone_is_ignored_by_the_litellm_path(
    gateway: GatewayServer, upstreams: dict[str, SandboxServer], tripwire: Tripwire, key: str, field: str
) -> None:
    """One at a time, so no field hides another (a mock answer would hide a redirect, say)."""
    body = {
        "model": "tail",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 8,
        field: hostile_fields(tripwire.url)[field],
    }
    response = post(gateway, "/v1/chat/completions", key, body)
    assert response.status_code == 200, response.text
    assert "answered without any upstream" not in response.text
    assert tripwire.connections == []
    assert sandbox_requests(upstreams["openai"]), "answered by the configured upstream"


@pytest.mark.parametrize("model", MODELS)
def test_an_image_url_is_never_fetched_by_the_gateway(
    gateway: GatewayServer, tripwire: Tripwire, key: str, model: str
) -> None:
    body = {"model": model, "messages": image_message(tripwire.url), "max_tokens": 8}
    response = post(gateway, "/v1/chat/completions", key, body)
    assert response.status_code < 500, response.text
    assert tripwire.connections == []


@pytest.mark.parametrize(
    "name",
    [
        "{evil}",
        "{evil}/v1/chat/completions",
        "openai/{evil}",
        "openai/gpt-4o-mini?api_base={evil}",
        "litellm_proxy/{evil}",
        "hosted_vllm/{evil}",
        "//{host}/v1",
        "gpt-4o-mini@{host}",
    ],
)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/embeddings"])
def test_a_model_name_that_is_a_url_is_an_unknown_model(
    gateway: GatewayServer, tripwire: Tripwire, key: str, name: str, path: str
) -> None:
    model = name.format(evil=tripwire.url, host=tripwire.url.removeprefix("http://"))
    if path == "/v1/embeddings":
        body: dict[str, Any] = {"model": model, "input": "hello", "api_base": tripwire.url}
    else:
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    response = post(gateway, path, key, body)
    assert response.status_code == 404, response.text
    assert tripwire.connections == []


def test_embeddings_through_litellm_ignore_connection_fields(
    gateway: GatewayServer, tripwire: Tripwire, key: str
) -> None:
    body = {"model": "tail-embedding", "input": "hello", **hostile_fields(tripwire.url)}
    assert post(gateway, "/v1/embeddings", key, body, **hostile_headers(tripwire.url)).status_code == 200
    assert tripwire.connections == []


def test_the_tripwire_does_record_a_connection(tripwire: Tripwire) -> None:
    """The listener the tests above rely on really notices a connection (then forgets it)."""
    with contextlib.suppress(httpx.HTTPError):
        httpx.get(tripwire.url + "/probe", timeout=2)
    deadline = time.monotonic() + 2
    while not tripwire.connections and time.monotonic() < deadline:
        time.sleep(0.02)
    assert tripwire.connections and b"/probe" in tripwire.connections[0]
    tripwire.connections.clear()
