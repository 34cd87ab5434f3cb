"""The upstream HTTP/1.1 client against real sockets: servers written out byte by byte here, so each
test says exactly what the upstream put on the wire and what the gateway must make of it. Each test
runs on asyncio's loop and on uvloop (the gateway's), by the hook in conftest.py."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from providers import http1
from providers.http import (
    AnswerTooLarge,
    ConnectFailed,
    ConnectionBroke,
    ConnectTimedOut,
    ReadTimedOut,
    Timeouts,
    post,
)
from providers.http1 import Http1Client

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
FAST = Timeouts(connect=2.0, read=2.0)
OK = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'


class Upstream:
    """A TCP server that runs `handler` per connection and remembers what it saw."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.closed = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self.closed.set()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    def url(self, path: str = "/v1/chat/completions") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Upstream]]]:
    started: list[Upstream] = []

    async def start(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> Upstream:
        upstream = Upstream(handler)
        upstream.server = await asyncio.start_server(upstream._serve, "127.0.0.1", 0, ssl=ssl_context)
        started.append(upstream)
        return upstream

    yield start
    for upstream in started:
        assert upstream.server is not None
        upstream.server.close()


@pytest.fixture
async def client() -> AsyncIterator[Http1Client]:
    http = Http1Client()
    yield http
    await http.aclose()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    return head, await reader.readexactly(length)


async def test_the_request_on_the_wire_is_exactly_what_the_adapter_asked_for(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    seen: list[tuple[bytes, bytes]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(OK)
        await writer.drain()

    upstream = await serve(handler)
    body = b'{"model":"m","messages":[]}'
    answer = await post(
        client,
        upstream.url("/v1beta/models/x:streamGenerateContent?alt=sse"),
        content=body,
        headers={"content-type": "application/json", "authorization": "Bearer sk-1"},
        timeouts=FAST,
    )
    assert (answer.status, answer.body, answer.headers["content-type"]) == (
        200,
        b'{"ok":true}',
        "application/json",
    )
    head, sent = seen[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1beta/models/x:streamGenerateContent?alt=sse HTTP/1.1"
    assert f"host: 127.0.0.1:{upstream.port}" in lines
    assert "authorization: Bearer sk-1" in lines
    assert f"content-length: {len(body)}" in lines
    assert sent == body


async def test_keep_alive_reuses_one_connection(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(OK)
            await writer.drain()

    upstream = await serve(handler)
    for _ in range(5):
        answer = await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)
        assert answer.body == b'{"ok":true}'
    assert upstream.connections == 1


async def test_a_chunked_stream_arrives_chunk_by_chunk(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    go_on = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await go_on.wait()  # the second chunk only once the client has the first
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await writer.drain()
        await reader.read()  # kept alive until the client goes

    upstream = await serve(handler)
    response = await client.send(upstream.url(), content=b"{}", headers={}, timeouts=FAST)
    received = []
    async for chunk in response.chunks():
        received.append(chunk)
        go_on.set()
    await response.aclose()
    assert received == [b"first", b"second"]


async def test_a_body_that_ends_with_the_connection_is_read_whole(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nall of ")
        await writer.drain()
        writer.write(b"it")
        await writer.drain()

    upstream = await serve(handler)
    answer = await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)
    assert answer.body == b"all of it"


async def test_an_idle_connection_the_upstream_closed_is_replaced_without_an_error(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)  # says nothing of closing, then closes: keep-alive expired upstream
        await writer.drain()

    upstream = await serve(handler)
    assert (await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)).status == 200
    await upstream.closed.wait()
    await asyncio.sleep(0.05)
    assert (await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)).status == 200
    assert upstream.connections == 2


async def test_a_connection_closed_before_answering_is_an_error_the_executor_can_retry(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)
        await writer.drain()
        if upstream.connections == 1:
            await read_request(reader)  # the race: the request arrives as the server closes

    upstream = await serve(handler)
    assert (await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)).status == 200
    # Not retried here: the upstream may have acted on it, so the executor decides and counts it.
    with pytest.raises(ConnectionBroke, match="before answering"):
        await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)
    assert upstream.connections == 1
    assert (await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)).status == 200
    assert upstream.connections == 2


async def test_a_connection_closed_mid_answer_is_an_error_not_a_short_body(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part")
        await writer.drain()

    upstream = await serve(handler)
    with pytest.raises(ConnectionBroke, match="mid-answer"):
        await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)


async def test_something_that_is_not_http_is_an_error(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()
        await reader.read()

    upstream = await serve(handler)
    with pytest.raises(ConnectionBroke, match=r"not HTTP/1\.1"):
        await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)


async def test_an_upstream_that_never_answers_times_out(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    upstream = await serve(handler)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ReadTimedOut):
        await post(client, upstream.url(), content=b"{}", headers={}, timeouts=Timeouts(connect=1, read=0.2))
    assert loop.time() - started < 2


async def test_refused_and_unresolvable_hosts_fail_to_connect(client: Http1Client) -> None:
    with pytest.raises(ConnectFailed):
        await post(client, "http://127.0.0.1:9/v1/x", content=b"{}", headers={}, timeouts=FAST)
    with pytest.raises(ConnectFailed):
        await post(client, "http://no-such-host.invalid/v1/x", content=b"{}", headers={}, timeouts=FAST)
    with pytest.raises(ConnectFailed, match="not an http"):
        await post(client, "ftp://127.0.0.1/x", content=b"{}", headers={}, timeouts=FAST)


async def test_leaving_early_closes_the_connection_so_the_upstream_stops(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await reader.read()  # returns when the client closes

    upstream = await serve(handler)
    response = await client.send(upstream.url(), content=b"{}", headers={}, timeouts=FAST)
    async for _ in response.chunks():
        break
    await response.aclose()
    await asyncio.wait_for(upstream.closed.wait(), 2)


STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
DONE_CHUNK = b"e\r\ndata: [DONE]\n\n\r\n"


@pytest.mark.parametrize("terminator_later", [False, True], ids=["same-read", "later"])
async def test_a_finished_stream_keeps_its_connection_for_the_next_request(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client, terminator_later: bool
) -> None:
    """After a stream's `[DONE]` the caller calls finish(); the body's end (`0\r\n\r\n`) may come
    in the same read or after, and either way the next request goes on the same connection."""
    requests = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        while True:
            await read_request(reader)
            requests += 1
            if terminator_later:
                writer.write(STREAM_HEAD + DONE_CHUNK)
                await writer.drain()
                await asyncio.sleep(0.05)
                writer.write(b"0\r\n\r\n")
            else:
                writer.write(STREAM_HEAD + DONE_CHUNK + b"0\r\n\r\n")
            await writer.drain()

    upstream = await serve(handler)
    for _ in range(3):
        response = await client.send(upstream.url(), content=b"{}", headers={}, timeouts=FAST)
        async for chunk in response.chunks():
            assert b"[DONE]" in chunk
            await response.finish()
            break
        await response.aclose()  # what the adapter's `finally` does: a no-op after finish()
        if terminator_later:
            await asyncio.sleep(0.1)  # the end arrives; the connection returns to the pool
    assert (requests, upstream.connections) == (3, 1)


async def test_a_finished_stream_whose_body_never_ends_is_closed(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("providers.http1._FINISH_WITHIN", 0.1)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(STREAM_HEAD + DONE_CHUNK)  # and never the end of the body
        await writer.drain()
        await reader.read()  # returns when the client closes

    upstream = await serve(handler)
    response = await client.send(upstream.url(), content=b"{}", headers={}, timeouts=FAST)
    async for _ in response.chunks():
        await response.finish()
        break
    await asyncio.wait_for(upstream.closed.wait(), 2)  # closed after _FINISH_WITHIN, not kept


async def test_a_cancelled_caller_closes_the_connection(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()

    upstream = await serve(handler)
    task = asyncio.create_task(post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(upstream.closed.wait(), 2)


async def test_the_pool_limit_queues_callers_then_gives_up(serve: Callable[..., Awaitable[Upstream]]) -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            await release.wait()
            writer.write(OK)
            await writer.drain()

    upstream = await serve(handler)
    http = Http1Client(max_connections=1, pool_timeout=0.2)
    try:
        first = asyncio.create_task(post(http, upstream.url(), content=b"{}", headers={}, timeouts=FAST))
        await asyncio.sleep(0.05)
        with pytest.raises(ConnectTimedOut, match="busy"):
            await post(http, upstream.url(), content=b"{}", headers={}, timeouts=FAST)
        second = asyncio.create_task(post(http, upstream.url(), content=b"{}", headers={}, timeouts=FAST))
        await asyncio.sleep(0.05)
        release.set()
        assert [(await first).status, (await second).status] == [200, 200]
        assert upstream.connections == 1
    finally:
        await http.aclose()


async def test_a_large_answer_read_slowly_arrives_whole(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client
) -> None:
    payload = bytes(range(256)) * 20_000  # 5 MB, past the point where reading pauses

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(payload) + payload)
        await writer.drain()
        await reader.read()

    upstream = await serve(handler)
    response = await client.send(upstream.url(), content=b"{}", headers={}, timeouts=FAST)
    parts = []
    async for chunk in response.chunks():
        parts.append(chunk)
        await asyncio.sleep(0.001)
    assert b"".join(parts) == payload


async def test_a_header_with_a_line_break_is_refused_before_sending(client: Http1Client) -> None:
    with pytest.raises(ValueError, match="line break"):
        await post(client, "http://127.0.0.1:9/x", content=b"", headers={"x-a": "1\r\nx-b: 2"}, timeouts=FAST)


async def test_tls_with_the_servers_certificate_checked(
    serve: Callable[..., Awaitable[Upstream]], tmp_path: Path
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subject = ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"]
    await asyncio.to_thread(
        subprocess.run,
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject,
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)
        await writer.drain()

    upstream = await serve(handler, server_tls)
    url = f"https://localhost:{upstream.port}/v1/chat/completions"
    with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
        await post(Http1Client(), url, content=b"{}", headers={}, timeouts=FAST)  # not a public CA
    trusting = ssl.create_default_context(cafile=str(cert))
    http = Http1Client(tls=trusting)
    try:
        assert (await post(http, url, content=b"{}", headers={}, timeouts=FAST)).body == b'{"ok":true}'
    finally:
        await http.aclose()


async def test_an_answer_too_large_to_hold_is_refused_and_its_connection_closed(
    serve: Callable[..., Awaitable[Upstream]], client: Http1Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http1, "MAX_ANSWER_BYTES", 1 << 20)

    async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % (4 << 20))
        for _ in range(4):
            writer.write(b" " * (1 << 20))
            await writer.drain()
        await reader.read()  # until the client hangs up

    upstream = await serve(huge)
    with pytest.raises(AnswerTooLarge, match="over 1 MiB"):
        await post(client, upstream.url(), content=b"{}", headers={}, timeouts=FAST)
    await asyncio.wait_for(upstream.closed.wait(), 2)
