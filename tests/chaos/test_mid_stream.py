"""Clients that hang up mid-stream: the upstream call is cancelled (the emulator sees its request
aborted and no upstream connection stays open), the tokens generated so far are billed (a 499 row
each), and no asyncio task outlives its request."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from gateway.accounting import estimate
from sandbox.server import SandboxServer
from tests.chaos.conftest import ChaosConfig
from tests.chaos.scenario import Answer, ChaosGateway, Tally, WellBehaved, scaled
from tests.chaos.test_slow_clients import settle_and_check

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(scope="module")
def paced_vllm() -> Iterator[SandboxServer]:
    """A vLLM emulator that decodes at 50 tokens/s, so a stream lasts long enough to leave."""
    with SandboxServer(dialect="vllm", profile="managed") as server:
        yield server


def engine_figures(sandbox: SandboxServer) -> tuple[float, float]:
    """(requests running, requests aborted) from the emulator's vLLM /metrics."""
    text = httpx.get(sandbox.base_url + "/metrics").text
    running = sum(float(v) for v in re.findall(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", text, re.M))
    aborted = sum(
        float(v)
        for v in re.findall(
            r'^vllm:request_success_total\{[^}]*finished_reason="abort"[^}]*\} (\S+)$', text, re.M
        )
    )
    return running, aborted


def upstream_sockets(port: int) -> int:
    """Established TCP connections from anyone on this machine to `port` (only the gateway calls it)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                    count += 1
    return count


def test_clients_leaving_mid_stream_cancel_upstream_and_are_billed(
    chaos_config: ChaosConfig, paced_vllm: SandboxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    tally = Tally("clients leaving mid-stream")
    # vLLM reports usage only at the end, so cut streams are counted by the gateway: in a worker
    # thread, never on the event loop (the first count loads the tokenizer, ~0.4 s of CPU).
    on_loop: list[bool] = []
    count = estimate.count_tokens

    def count_tokens(text: str) -> int:
        on_loop.append(_loop_running())
        return count(text)

    monkeypatch.setattr(estimate, "count_tokens", count_tokens)
    streams = scaled(40)
    with ChaosGateway(chaos_config(vllm_url=paced_vllm.base_url)) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        tasks = gateway.tasks()
        _, aborted_before = engine_figures(paced_vllm)

        async def leave_early(http: httpx.AsyncClient, i: int) -> Answer:
            body = {"model": "llama", "stream": True, "messages": [{"role": "user", "content": f"story {i}"}]}
            async with http.stream("POST", "/v1/chat/completions", json=body) as response:
                async for _ in response.aiter_lines():
                    break  # hang up at the first event, the answer still being generated
                return Answer(response.status_code, response.headers.get("x-request-id"), True)

        async def run() -> list[Answer]:
            async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as http:
                return list(await asyncio.gather(*(leave_early(http, i) for i in range(streams))))

        with WellBehaved(gateway.base_url) as probe:
            tally.answers = asyncio.run(run())
        tally.probe = probe.answers
        deadline = time.monotonic() + 5
        while (running := engine_figures(paced_vllm)[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        aborted = engine_figures(paced_vllm)[1] - aborted_before
        # A cut stream's row is written when its handler ends, after its usage is estimated in a
        # worker thread (the first estimate loads the tokenizer): count rows once handlers are done.
        gateway.settle(tasks=tasks)
        rows = settle_and_check(gateway, tally, before=before, tasks=tasks, same_status=False)
        ledger = {r["id"]: r for r in gateway.ledger_rows()}
        left_open = upstream_sockets(paced_vllm.port)
    stream_rows = [ledger[a.request_id] for a in tally.answers if a.request_id]
    cut = [r for r in stream_rows if r["status"] == 499]
    tally.note = f"{len(cut)} cut, {aborted:.0f} aborted upstream, {left_open} upstream sockets left"
    tally.report()
    assert len(stream_rows) == streams and rows
    assert running == 0, f"{running} upstream requests still generating"
    assert {r["status"] for r in stream_rows} <= {200, 499}
    assert cut, "no stream was cut: the emulator answered too fast to test this"
    # A client may leave after the emulator's last token but before the gateway relayed it: a 499
    # row with nothing upstream left to abort. Most cuts must have aborted a generation, though.
    assert len(cut) / 2 <= aborted <= len(cut), "upstream calls outlived their clients"
    assert all(r["error_type"] == "client_closed" for r in cut)
    assert all(r["prompt_tokens"] > 0 and r["cost_nano"] > 0 and r["usage_estimated"] for r in cut)
    assert left_open <= len(stream_rows) - len(cut), "upstream connections of cut streams stayed open"
    assert on_loop and not any(on_loop), "a cut stream was counted on the event loop"


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
