"""Header floods: thousands of headers, one enormous value, an enormous URL, a malformed line. Each
gets a clean 431 or 400 from the server itself (nothing reaches the application), memory stays flat,
and a polite client next to them is served as usual."""

from __future__ import annotations

import asyncio

import pytest

from tests.chaos.conftest import ChaosConfig
from tests.chaos.scenario import (
    ChaosGateway,
    RawResponse,
    Tally,
    WellBehaved,
    in_waves,
    rss_mb,
    scaled,
    trickle,
)
from tests.chaos.test_slow_clients import settle_and_check

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

START = b"POST /v1/chat/completions HTTP/1.1\r\nhost: tollgate\r\n"


def split(data: bytes, size: int = 65536) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


FLOODS: dict[str, tuple[list[bytes], set[int]]] = {
    "10,000 headers": ([START, *split(b"".join(b"x-h%d: v\r\n" % i for i in range(10_000))), b"\r\n"], {431}),
    "one 2 MB value": ([START, b"x-big: ", *split(b"a" * 2_000_000), b"\r\n\r\n"], {431}),
    "100 x 1 KB values": (
        [START, *split(b"".join(b"x-k%d: %s\r\n" % (i, b"b" * 1024) for i in range(100))), b"\r\n"],
        {431},
    ),
    "a 1 MB URL": (
        [b"POST /v1/chat/completions?q=", *split(b"u" * 1_000_000), b" HTTP/1.1\r\n\r\n"],
        {431, 400},
    ),
    "a header with no colon": ([START, b"this is not a header\r\n\r\n"], {400}),
}


def test_header_floods_get_431_or_400_from_the_server(chaos_config: ChaosConfig) -> None:
    tally = Tally("header floods")
    per_kind = scaled(20)
    with ChaosGateway(chaos_config()) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        tasks = gateway.tasks()
        baseline = rss_mb()

        async def wave() -> list[tuple[str, RawResponse | None]]:
            kinds = [kind for kind in FLOODS for _ in range(per_kind)]
            got = await asyncio.gather(
                *(trickle(gateway.port, FLOODS[k][0], pause=0, within=15) for k in kinds)
            )
            return list(zip(kinds, got, strict=True))

        async def flood() -> list[tuple[str, RawResponse | None]]:
            return await in_waves(1.0, wave)

        with WellBehaved(gateway.base_url) as probe:
            answers = asyncio.run(flood())
        growth = rss_mb() - baseline
        tally.probe = probe.answers
        tally.answers = [a.answer() for _, a in answers if a is not None]
        tally.unanswered = sum(a is None for _, a in answers)
        settle_and_check(gateway, tally, before=before, tasks=tasks)
    tally.note = f"{len(FLOODS)} kinds, {len(answers)} floods; RSS +{growth:.0f} MB"
    tally.report()
    assert tally.unanswered == 0
    for kind, answer in answers:
        assert answer is not None and answer.status in FLOODS[kind][1], (kind, answer)
        assert answer.headers.get("connection") == "close"
        assert "x-request-id" not in answer.headers, "a flood reached the application"
    assert growth < 100, f"RSS grew {growth:.0f} MB"
