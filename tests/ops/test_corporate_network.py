"""The gateway on a corporate network, end to end: a client's request goes through the gateway,
then a real forward proxy (tinyproxy), to the OpenAI emulator serving TLS with a certificate from
a private CA made in the test; a proxy that refuses gives the client an OpenAI-style error naming
the proxy, at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from gateway.config.loader import build_config
from sandbox.app import create_app
from sandbox.config import SandboxConfig
from sandbox.server import bind_socket
from tests.harness import GatewayServer
from tests.providers.http1.network_rig import PrivateCA, Tinyproxy

PRICE = {"input_per_mtok": "3", "output_per_mtok": "15"}
CHAT = {"model": "corp-model", "messages": [{"role": "user", "content": "hello"}]}


class TLSSandbox:
    """The OpenAI emulator behind uvicorn with TLS, on a free port, in a thread."""

    def __init__(self, cert: Path, key: Path) -> None:
        sock = bind_socket("127.0.0.1", 0)
        self.port: int = sock.getsockname()[1]
        self.app = create_app(SandboxConfig(dialect="openai", profile="instant"))
        config = uvicorn.Config(
            self.app, ssl_certfile=str(cert), ssl_keyfile=str(key), loop="asyncio", log_level="warning"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert self._thread.is_alive() and time.monotonic() < deadline, "TLS sandbox did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    return PrivateCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def upstream(ca: PrivateCA) -> Iterator[TLSSandbox]:
    server = TLSSandbox(*ca.issue("localhost"))
    yield server
    server.stop()


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Tinyproxy]:
    started = Tinyproxy(tmp_path)
    yield started
    started.stop()


def settings(sqlite_url: str, upstream: TLSSandbox, ca: PrivateCA, **provider: Any) -> dict[str, Any]:
    return {
        "database": {"url": sqlite_url, "auto_migrate": False},
        "upstream": {"tls": {"ca_file": str(ca.ca_file)}},
        "providers": {
            "corp": {
                "type": "openai",
                "base_url": f"https://localhost:{upstream.port}/v1",
                "api_key": "sk-upstream",
                **provider,
            }
        },
        "models": {"corp-model": {"provider": "corp", "price": PRICE}},
    }


def gateway(raw: dict[str, Any], environ: dict[str, str]) -> GatewayServer:
    return GatewayServer(build_config(raw, source="test", environ=environ), environ=environ)


def test_a_request_reaches_a_tls_upstream_with_a_private_ca_through_the_environments_proxy(
    sqlite_url: str, upstream: TLSSandbox, ca: PrivateCA, proxy: Tinyproxy
) -> None:
    environ = {"HTTPS_PROXY": proxy.url}
    with gateway(settings(sqlite_url, upstream, ca), environ) as server:
        answer = httpx.post(f"{server.base_url}/v1/chat/completions", json=CHAT, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"]
    assert proxy.requests() == [f"CONNECT localhost:{upstream.port} HTTP/1.1"]


def test_a_providers_own_proxy_wins_over_the_environment_and_none_goes_direct(
    sqlite_url: str, upstream: TLSSandbox, ca: PrivateCA, proxy: Tinyproxy
) -> None:
    nowhere = {"HTTPS_PROXY": "http://127.0.0.1:9"}  # nothing listens there
    with gateway(settings(sqlite_url, upstream, ca, proxy=proxy.url), nowhere) as server:
        assert httpx.post(f"{server.base_url}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
    assert len(proxy.requests()) == 1
    with gateway(settings(sqlite_url, upstream, ca, proxy="none"), nowhere) as server:
        assert httpx.post(f"{server.base_url}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
    assert len(proxy.requests()) == 1  # straight to the upstream


def test_without_the_private_ca_the_client_gets_the_tls_reason(
    sqlite_url: str, upstream: TLSSandbox, ca: PrivateCA
) -> None:
    raw = settings(sqlite_url, upstream, ca)
    del raw["upstream"]
    with gateway(raw, {}) as server:
        answer = httpx.post(f"{server.base_url}/v1/chat/completions", json=CHAT, timeout=20)
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["type"] == "upstream_unreachable"
    assert "CERTIFICATE_VERIFY_FAILED" in error["message"]


def test_a_proxy_refusing_connect_is_an_openai_style_error_naming_it_and_not_retried(
    sqlite_url: str, upstream: TLSSandbox, ca: PrivateCA, tmp_path: Path
) -> None:
    guarded = Tinyproxy(tmp_path, basic_auth=("alice", "s3cret"))
    try:
        with gateway(settings(sqlite_url, upstream, ca, proxy=guarded.url), {}) as server:
            answer = httpx.post(f"{server.base_url}/v1/chat/completions", json=CHAT, timeout=10)
        requests = guarded.requests()
    finally:
        guarded.stop()
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("upstream_unreachable", "proxy_refused")
    assert f"proxy {guarded.url} refused CONNECT to localhost:{upstream.port}: 407" in error["message"]
    assert answer.headers["x-tollgate-attempts"] == "1"
    assert requests == [f"CONNECT localhost:{upstream.port} HTTP/1.1"]
