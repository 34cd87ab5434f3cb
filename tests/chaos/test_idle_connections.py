"""Thousands of idle connections: some made one request and stayed (keep-alive), some never sent a
byte. A polite client is served as usual meanwhile, and the gateway closes every one of them on its
own once its keep-alive or header deadline passes (file descriptors come back)."""

from __future__ import annotations

import asyncio
import resource
import time

import pytest

from tests.chaos.conftest import ChaosConfig
from tests.chaos.scenario import ChaosGateway, Tally, WellBehaved, scaled
from tests.chaos.test_slow_clients import settle_and_check

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

KEEP_ALIVE = 3.0


def room_for(connections: int) -> None:
    """Both ends of every connection live in this process: raise the soft descriptor limit if needed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * connections + 1024
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"needs {wanted} file descriptors; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def test_thousands_of_idle_connections_starve_nobody_and_are_closed(chaos_config: ChaosConfig) -> None:
    total = scaled(2500)
    room_for(total)
    tally = Tally("idle keep-alive connections")
    server = {"keep_alive_seconds": KEEP_ALIVE, "header_timeout_seconds": 4.0, "body_timeout_seconds": 2.0}
    with ChaosGateway(chaos_config(server=server)) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        tasks = gateway.tasks()

        async def hold() -> tuple[int, int, float]:
            async def connect(polite: bool) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
                reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
                if polite:  # one request, then idle on a kept-alive connection
                    writer.write(b"GET /healthz HTTP/1.1\r\nhost: tollgate\r\n\r\n")
                    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
                    await reader.readexactly(15)  # {"status":"ok"}
                return reader, writer

            held, opened = [], 0
            for start in range(0, total, 250):
                held += await asyncio.gather(
                    *(connect(i % 2 == 0) for i in range(start, min(start + 250, total)))
                )
                opened = max(opened, gateway.connections())
            await asyncio.sleep(1.0)  # the polite client runs with all of them open
            started = time.monotonic()
            closed = 0
            for reader, writer in held:
                try:
                    async with asyncio.timeout(max(0.1, started + 8 - time.monotonic())):
                        while await reader.read(4096):
                            pass
                    closed += 1
                except TimeoutError:
                    pass
                writer.close()
            return opened, closed, time.monotonic() - started

        with WellBehaved(gateway.base_url) as probe:
            opened, closed, waited = asyncio.run(hold())
        tally.probe = probe.answers
        assert not probe.failures, probe.failures[:3]
        settle_and_check(gateway, tally, before=before, tasks=tasks)
    tally.unanswered = 0
    tally.note = f"{total} held (up to {opened} at once); all closed by the gateway within {waited:.1f} s"
    tally.report()
    assert closed == total, f"the gateway left {total - closed} idle connections open"
