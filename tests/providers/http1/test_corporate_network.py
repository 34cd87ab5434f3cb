"""The upstream client on a corporate network: through a real forward proxy (tinyproxy) to TLS
upstreams signed by a private CA, with client certificates, proxy refusals and idle expiry, on
both event loops (conftest.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from providers.http import ConnectFailed, ConnectionBroke, ConnectTimedOut, Timeouts, post
from providers.http1 import Http1Client
from providers.proxy import ProxyRefused, ProxyRules
from providers.tls import TLSSettings, tls_context
from tests.providers.http1.network_rig import BlockingTLSUpstream, PrivateCA, Tinyproxy, Upstream

FAST = Timeouts(connect=3.0, read=3.0)


@pytest.fixture
def ca(tmp_path: Path) -> PrivateCA:
    return PrivateCA(tmp_path)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Tinyproxy]:
    started = Tinyproxy(tmp_path)
    yield started
    started.stop()


@pytest.fixture
async def upstream(ca: PrivateCA) -> AsyncIterator[Upstream]:
    server = await Upstream(ca.server_context()).start()
    yield server
    server.close()


def client(ca: PrivateCA | None, **kwargs: object) -> Http1Client:
    tls = tls_context(TLSSettings(ca_file=str(ca.ca_file))) if ca is not None else None
    return Http1Client(tls=tls, **kwargs)  # type: ignore[arg-type]


async def call(http: Http1Client, url: str) -> bytes:
    try:
        answer = await post(
            http, url, content=b"{}", headers={"content-type": "application/json"}, timeouts=FAST
        )
    finally:
        await http.aclose()
    assert answer.status == 200
    return answer.body


async def test_https_proxy_from_the_environment_tunnels_to_the_upstream_with_its_name_as_sni(
    ca: PrivateCA, proxy: Tinyproxy, upstream: Upstream
) -> None:
    rules = ProxyRules.from_environ({"HTTPS_PROXY": proxy.url})
    assert await call(client(ca, proxies=rules), upstream.url()) == b'{"ok":true}'
    assert proxy.requests() == [f"CONNECT localhost:{upstream.port} HTTP/1.1"]
    assert upstream.server_names == ["localhost"]  # TLS inside the tunnel is with the upstream


async def test_no_proxy_sends_matching_hosts_direct(
    ca: PrivateCA, proxy: Tinyproxy, upstream: Upstream
) -> None:
    rules = ProxyRules.from_environ(
        {"https_proxy": proxy.url, "NO_PROXY": f"example.com, localhost:{upstream.port}"}
    )
    assert await call(client(ca, proxies=rules), upstream.url()) == b'{"ok":true}'
    assert proxy.requests() == []
    assert upstream.connections == 1


async def test_plain_http_through_the_proxy_is_sent_in_absolute_form(proxy: Tinyproxy) -> None:
    upstream = await Upstream().start()
    try:
        rules = ProxyRules.from_environ({"http_proxy": proxy.url})
        assert await call(Http1Client(proxies=rules), upstream.url("127.0.0.1")) == b'{"ok":true}'
    finally:
        upstream.close()
    assert proxy.requests() == [f"POST http://127.0.0.1:{upstream.port}/v1/chat/completions HTTP/1.1"]


async def test_without_the_private_ca_the_upstream_is_refused_with_the_tls_reason(
    proxy: Tinyproxy, upstream: Upstream
) -> None:
    rules = ProxyRules.fixed(proxy.url, source="test")
    with pytest.raises(
        ConnectFailed, match=r"localhost:\d+ through proxy http://127.0.0.1:\d+: .*CERTIFICATE_VERIFY_FAILED"
    ):
        await call(client(None, proxies=rules), upstream.url())


async def test_ca_mode_replace_trusts_only_the_given_ca(
    tmp_path: Path, upstream: Upstream, ca: PrivateCA
) -> None:
    other = PrivateCA(tmp_path, name="Another Root")
    only_other = Http1Client(tls=tls_context(TLSSettings(ca_file=str(other.ca_file), ca_mode="replace")))
    with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
        await call(only_other, upstream.url())
    assert (
        tls_context(TLSSettings(ca_file=str(other.ca_file), ca_mode="replace")).cert_store_stats()["x509_ca"]
        == 1
    )


async def test_an_upstream_requiring_a_client_certificate_takes_only_one_it_trusts(
    ca: PrivateCA, proxy: Tinyproxy
) -> None:
    cert, key = ca.issue("gateway", client=True)
    rules = ProxyRules.fixed(proxy.url, source="test")
    with BlockingTLSUpstream(ca.server_context(require_client_cert=True)) as upstream:
        # TLS 1.3 tells the refusal after the handshake: the first read meets the alert.
        with pytest.raises(ConnectionBroke, match=r"before answering: .*CERTIFICATE_REQUIRED"):
            await call(client(ca, proxies=rules), upstream.url())
        identified = tls_context(TLSSettings(ca_file=str(ca.ca_file), cert_file=str(cert), key_file=str(key)))
        assert await call(Http1Client(tls=identified, proxies=rules), upstream.url()) == b'{"ok":true}'


async def test_a_proxy_refusing_connect_fails_at_once_naming_the_proxy(
    tmp_path: Path, ca: PrivateCA, upstream: Upstream
) -> None:
    guarded = Tinyproxy(tmp_path, basic_auth=("alice", "s3cret"))
    try:
        with pytest.raises(
            ProxyRefused, match=rf"proxy {guarded.url} refused CONNECT to localhost:{upstream.port}: 407"
        ) as refused:
            await call(client(ca, proxies=ProxyRules.fixed(guarded.url, source="test")), upstream.url())
        assert refused.value.status == 407
        with_auth = ProxyRules.fixed(f"http://alice:s3cret@127.0.0.1:{guarded.port}", source="test")
        assert await call(client(ca, proxies=with_auth), upstream.url()) == b'{"ok":true}'
    finally:
        guarded.stop()
    assert "s3cret" not in str(refused.value)


async def test_a_proxy_forbidding_the_port_is_a_403_refusal(
    tmp_path: Path, ca: PrivateCA, upstream: Upstream
) -> None:
    strict = Tinyproxy(tmp_path, connect_ports=(443,))
    try:
        with pytest.raises(ProxyRefused, match="403") as refused:
            await call(client(ca, proxies=ProxyRules.fixed(strict.url, source="test")), upstream.url())
    finally:
        strict.stop()
    assert refused.value.status == 403


async def test_plain_http_through_a_proxy_wanting_auth_is_a_refusal_not_the_upstreams_answer(
    tmp_path: Path,
) -> None:
    guarded = Tinyproxy(tmp_path, basic_auth=("alice", "s3cret"))
    upstream = await Upstream().start()
    try:
        with pytest.raises(ProxyRefused, match="407"):
            await call(
                Http1Client(proxies=ProxyRules.fixed(guarded.url, source="test")), upstream.url("127.0.0.1")
            )
        with_auth = ProxyRules.fixed(f"http://alice:s3cret@127.0.0.1:{guarded.port}", source="test")
        assert await call(Http1Client(proxies=with_auth), upstream.url("127.0.0.1")) == b'{"ok":true}'
    finally:
        guarded.stop()
        upstream.close()


async def test_a_proxy_that_never_answers_connect_times_out_within_the_connect_timeout(
    ca: PrivateCA, upstream: Upstream
) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    mute = await Upstream(handler=silent).start()
    http = client(ca, proxies=ProxyRules.fixed(f"http://127.0.0.1:{mute.port}", source="test"))
    try:
        with pytest.raises(
            ConnectTimedOut, match=rf"through proxy http://127.0.0.1:{mute.port} took over 0.3 s"
        ):
            await post(
                http, upstream.url(), content=b"{}", headers={}, timeouts=Timeouts(connect=0.3, read=3.0)
            )
    finally:
        await http.aclose()
        mute.close()


async def test_an_idle_connection_past_keepalive_expiry_is_closed_and_not_reused(
    ca: PrivateCA, upstream: Upstream
) -> None:
    http = client(ca, keepalive_expiry=0.2)
    try:
        for _ in range(2):  # back to back: one connection
            await post(http, upstream.url(), content=b"{}", headers={}, timeouts=FAST)
        assert (upstream.connections, upstream.closed) == (1, 0)
        for _ in range(100):  # the pool closes it by itself, with no request to prompt it
            if upstream.closed:
                break
            await asyncio.sleep(0.02)
        assert upstream.closed == 1
        await post(http, upstream.url(), content=b"{}", headers={}, timeouts=FAST)
        assert upstream.connections == 2
    finally:
        await http.aclose()
