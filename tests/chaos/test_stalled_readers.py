"""Clients that stop reading an answer but keep the connection open. Without a bound each one
held its relay, its upstream connection (the pool to an upstream is a fixed size, so enough of
them lock every other client out of that model) and its budget reservation for as long as it
liked. Once the client has left the gateway's writes unread for `send_timeout_seconds`, the
gateway closes the connection: the upstream call is aborted, the row says 499 with the usage so
far, and a polite client is served as usual throughout."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from gateway.cli.sandbox_launcher import SandboxFleet
from tests.chaos.conftest import SERVER, ChaosConfig
from tests.chaos.scenario import (
    Answer,
    ChaosGateway,
    Tally,
    WellBehaved,
    chat_head,
    scaled,
    wait_until,
)
from tests.chaos.test_mid_stream import upstream_sockets
from tests.chaos.test_slow_clients import settle_and_check

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

SEND_TIMEOUT = 1.5


async def stall(port: int, i: int, release: asyncio.Event) -> Answer:
    """Ask for a long stream, read its head, then read nothing more until `release`."""
    # Backpressure reaches the gateway soon: the socket holds 4 KiB (set before connecting, so the
    # window is small from the start) and the stream reader stops taking from it at 2 KiB.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
    messages = [{"role": "user", "content": f"saga {i}"}]
    # ~7 MB of stream: more than the socket buffers between the two hold (~2.5 MB here).
    body = orjson.dumps(
        {"model": "llama", "stream": True, "max_tokens": 120_000, "ignore_eos": True, "messages": messages}
    )
    writer.write(chat_head(length=len(body)) + body)
    head = await reader.readuntil(b"\r\n\r\n")
    found = re.search(rb"\r\nx-request-id: *([^\r]+)", head, re.I)
    status = int(head.split(b" ", 2)[1])
    await release.wait()
    writer.close()
    return Answer(status, found.group(1).decode() if found else None, status == 200)


@pytest.fixture(scope="module")
def long_vllm() -> Iterator[str]:
    """A vLLM emulator whose model takes a million tokens, so an answer can outgrow every buffer. In
    its own process, as a real upstream would be: generating megabytes of answer in the test's
    process would take the GIL from the gateway and make the polite client's figure meaningless."""
    with SandboxFleet(["vllm"], profile="instant", args=["--max-model-len", "1000000"]) as fleet:
        yield fleet.urls["vllm"]


def test_clients_that_stop_reading_are_cut_and_their_upstream_released(
    chaos_config: ChaosConfig, long_vllm: str
) -> None:
    tally = Tally("clients that stop reading a stream")
    streams = scaled(6)
    config = chaos_config(vllm_url=long_vllm, server={**SERVER, "send_timeout_seconds": SEND_TIMEOUT})
    with ChaosGateway(config) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        tasks = gateway.tasks()

        def cut() -> list[dict[str, Any]]:
            return [r for r in gateway.ledger_rows() if r["id"] not in before and r["model"] == "llama"]

        async def run() -> tuple[list[Answer], float]:
            release = asyncio.Event()
            pending = asyncio.gather(*(stall(gateway.port, i, release) for i in range(streams)))
            started = time.monotonic()
            # The clients hold on; the gateway must let go of them (each then has its row).
            await asyncio.to_thread(lambda: wait_until(lambda: len(cut()) >= streams, within=30))
            took = time.monotonic() - started
            release.set()
            return list(await pending), took

        with WellBehaved(gateway.base_url) as probe:
            tally.answers, took = asyncio.run(run())
        tally.probe = probe.answers
        rows = {r["id"]: r for r in cut()}
        left_open = upstream_sockets(int(long_vllm.rsplit(":", 1)[1]))
        settle_and_check(gateway, tally, before=before, tasks=tasks, same_status=False)
    tally.note = (
        f"{streams} streams left unread, all cut within {took:.1f} s; {left_open} upstream sockets left"
    )
    tally.report()
    assert all(a.status == 200 for a in tally.answers)
    assert len(rows) == streams, f"{streams - len(rows)} unread streams were still held after 30 s"
    for answer in tally.answers:
        row = rows[answer.request_id]
        assert row["status"] == 499 and row["prompt_tokens"] > 0 and row["completion_tokens"] > 0, row
    assert left_open == 0, "upstream connections of stalled streams stayed open"
