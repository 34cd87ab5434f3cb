"""Slowloris and oversized bodies: clients that send too slowly or too much are cut with a clean
408 or 413, and a polite client next to them is served as usual."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.chaos.conftest import SERVER, ChaosConfig
from tests.chaos.scenario import (
    HELLO,
    Answer,
    ChaosGateway,
    RawResponse,
    Tally,
    WellBehaved,
    answer_of,
    chat_body,
    chat_head,
    in_waves,
    one_by_one,
    rss_mb,
    scaled,
    trickle,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def settle_and_check(
    gateway: ChaosGateway, tally: Tally, *, before: set[str], tasks: int, same_status: bool = True
) -> list[Answer]:
    """What every hostile-client scenario asserts afterwards; returns the answers with a ledger row.
    `same_status=False` where the row may differ from the status line (a stream the client left)."""
    rows = tally.check_ledger(gateway, before=before)
    assert tally.lost == 0 and tally.duplicates == 0, tally.line()
    assert not tally.unclean, tally.unclean[:3]
    assert tally.probe and all(a.status == 200 for a in tally.probe), {a.status for a in tally.probe}
    by_id = {r["id"]: r for r in rows}
    for answer in tally.every:
        if answer.request_id and same_status:
            assert by_id[answer.request_id]["status"] == answer.status
    after = httpx.post(
        gateway.base_url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": HELLO}
    )
    assert after.status_code == 200, "the gateway stopped answering"
    left_tasks, left_conns = gateway.settle(tasks=tasks)
    assert left_tasks <= tasks, f"{left_tasks - tasks} asyncio tasks leaked"
    assert left_conns == 0, f"{left_conns} client connections still open"
    return [a for a in tally.every if a.request_id]


def test_slowloris_bodies_and_headers_are_cut_with_408_and_nobody_waits(chaos_config: ChaosConfig) -> None:
    tally = Tally("slowloris: slow bodies + slow headers")
    body = chat_body()
    with ChaosGateway(chaos_config()) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        tasks = gateway.tasks()

        async def attack() -> list[RawResponse | None]:
            head = chat_head(length=len(body))
            slow_bodies = [
                trickle(gateway.port, [head, *one_by_one(body)], pause=0.25, within=15)
                for _ in range(scaled(150))
            ]
            slow_heads = [
                trickle(gateway.port, list(one_by_one(head)), pause=0.25, within=15)
                for _ in range(scaled(100))
            ]
            return list(await asyncio.gather(*slow_bodies, *slow_heads))

        with WellBehaved(gateway.base_url) as probe:
            answers = asyncio.run(attack())
        tally.probe = probe.answers
        assert not probe.failures, probe.failures[:3]
        tally.answers = [a.answer() for a in answers if a is not None]
        tally.unanswered = answers.count(None)
        billed = settle_and_check(gateway, tally, before=before, tasks=tasks)
    tally.note = f"cut after {SERVER['body_timeout_seconds']:g} s; {len(billed) - len(tally.probe)} slow bodies billed as 408"
    tally.report()
    assert tally.unanswered == 0
    assert all(a.status == 408 for a in tally.answers), {a.status for a in tally.answers}
    # Slow bodies reached the application (a ledger row each); slow headers never did.
    assert len([a for a in tally.answers if a.request_id]) == scaled(150)


def test_oversized_chunked_bodies_get_413_under_load_without_memory_growth(chaos_config: ChaosConfig) -> None:
    tally = Tally("oversized chunked bodies (no length)")
    uploads, megabytes = scaled(24), 4
    piece = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
    with ChaosGateway(chaos_config()) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        tasks = gateway.tasks()
        baseline = peak = rss_mb()

        async def attack() -> tuple[list[RawResponse | None], list[Answer]]:
            nonlocal peak
            stop = asyncio.Event()

            async def watch_memory() -> None:
                nonlocal peak
                while not stop.is_set():
                    peak = max(peak, rss_mb())
                    await asyncio.sleep(0.05)

            async def load(http: httpx.AsyncClient) -> list[Answer]:
                done: list[Answer] = []
                while not stop.is_set():
                    body = {"model": "gpt-4o-mini", "messages": HELLO}
                    done.append(answer_of(await http.post("/v1/chat/completions", json=body)))
                return done

            pieces = [chat_head(chunked=True), *[piece] * (megabytes * 16), b"0\r\n\r\n"]
            async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as http:
                watcher = asyncio.ensure_future(watch_memory())
                loaders = [asyncio.ensure_future(load(http)) for _ in range(4)]

                async def wave() -> list[RawResponse | None]:
                    return list(
                        await asyncio.gather(
                            *(trickle(gateway.port, pieces, pause=0, within=20) for _ in range(uploads))
                        )
                    )

                big = await in_waves(1.0, wave)
                stop.set()
                loaded = await asyncio.gather(*loaders)
                await watcher
            return list(big), [a for batch in loaded for a in batch]

        with WellBehaved(gateway.base_url) as probe:
            big, loaded = asyncio.run(attack())
        tally.probe = probe.answers
        tally.answers = [a.answer() for a in big if a is not None] + loaded
        tally.unanswered = big.count(None)
        settle_and_check(gateway, tally, before=before, tasks=tasks)
    growth = peak - baseline
    tally.note = f"{len(big)} x {megabytes} MB sent, {uploads} at a time; RSS +{growth:.0f} MB"
    tally.report()
    assert tally.unanswered == 0
    assert {a.status for a in tally.answers[: len(big)]} == {413}
    assert all(a.status == 200 for a in loaded) and loaded
    # Buffering the uploads would cost their whole size; the gateway keeps at most the limit of each.
    assert growth < uploads * megabytes / 2, f"RSS grew {growth:.0f} MB"
