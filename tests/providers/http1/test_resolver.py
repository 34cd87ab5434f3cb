"""Name resolution for upstream connections: a burst of new connections to one host shares one
lookup (on this machine's resolver a burst of identical queries lost some, each then waiting 5 s),
answers are reused briefly, failures are not, and every address is tried in turn."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from providers import resolver
from providers.http import Timeouts, post
from providers.http1 import Http1Client
from providers.resolver import AddressInfo, Resolver

FAST = Timeouts(connect=2.0, read=2.0)
OK = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'
Lookup = Callable[[str, int], Awaitable[list[AddressInfo]]]


def counted(monkeypatch: pytest.MonkeyPatch, answer: Lookup) -> list[str]:
    """Replace the real lookup with `answer`, after a pause so that callers overlap; returns the
    hosts looked up."""
    asked: list[str] = []

    async def lookup(host: str, port: int) -> list[AddressInfo]:
        asked.append(host)
        await asyncio.sleep(0.05)
        return await answer(host, port)

    monkeypatch.setattr(resolver, "_lookup", lookup)
    return asked


def at(*hosts: str) -> Lookup:
    async def answer(host: str, port: int) -> list[AddressInfo]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in hosts]

    return answer


@pytest.fixture
async def upstream() -> AsyncIterator[int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
            writer.write(OK)

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


async def test_a_burst_of_connections_to_one_host_shares_one_lookup(
    monkeypatch: pytest.MonkeyPatch, upstream: int
) -> None:
    asked = counted(monkeypatch, at("127.0.0.1"))
    http = Http1Client()
    try:
        answers = await asyncio.gather(
            *(
                post(
                    http, f"http://api.example.test:{upstream}/v1/x", content=b"{}", headers={}, timeouts=FAST
                )
                for _ in range(16)
            )
        )
        assert [a.status for a in answers] == [200] * 16
        assert asked == ["api.example.test"]
    finally:
        await http.aclose()


async def test_every_address_is_tried_in_turn(monkeypatch: pytest.MonkeyPatch, upstream: int) -> None:
    counted(monkeypatch, at("127.0.0.2", "127.0.0.1"))  # nothing listens on .2: refused, then .1
    http = Http1Client()
    try:
        answer = await post(
            http, f"http://api.example.test:{upstream}/", content=b"{}", headers={}, timeouts=FAST
        )
        assert answer.status == 200
    finally:
        await http.aclose()


async def test_an_answer_is_reused_for_its_ttl_and_then_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = counted(monkeypatch, at("10.0.0.1"))
    names = Resolver(ttl=0.2)
    first = await names.resolve("api.example.test", 443)
    assert await names.resolve("api.example.test", 443) == first and len(asked) == 1
    await asyncio.sleep(0.25)
    await names.resolve("api.example.test", 443)
    assert len(asked) == 2


async def test_a_failed_lookup_reaches_every_waiter_and_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    async def nowhere(host: str, port: int) -> list[AddressInfo]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    asked = counted(monkeypatch, nowhere)
    names = Resolver()
    outcomes = await asyncio.gather(
        *(names.resolve("gone.invalid", 443) for _ in range(8)), return_exceptions=True
    )
    assert all(isinstance(o, socket.gaierror) for o in outcomes) and len(asked) == 1
    with pytest.raises(socket.gaierror):
        await names.resolve("gone.invalid", 443)
    assert len(asked) == 2


async def test_a_caller_that_gives_up_leaves_the_lookup_to_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = counted(monkeypatch, at("10.0.0.1"))
    names = Resolver()
    impatient = asyncio.wait_for(names.resolve("api.example.test", 443), timeout=0.01)
    patient = names.resolve("api.example.test", 443)
    gave_up, answered = await asyncio.gather(impatient, patient, return_exceptions=True)
    assert isinstance(gave_up, TimeoutError)
    assert answered == [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", 443))] and len(asked) == 1
