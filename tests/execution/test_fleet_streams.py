"""A fleet stream keeps its replica leased until the stream ends, however it ends, and a stream
that finished feeds the replica's decode speed (`gateway.execution.fleets.hold`)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator

import pytest

from gateway.execution.fleets import hold
from local_backend.fleet import Replica
from providers.errors import UpstreamBadResponse
from providers.types import StreamChunk
from usage import Usage


class Upstream:
    """An adapter's chunk generator: `texts` chunks of generated text `gap_s` apart, then the
    usage chunk (when `completion_tokens` is given) or a failure (`fail`)."""

    def __init__(
        self, texts: int, *, gap_s: float = 0.0, completion_tokens: int | None = None, fail: bool = False
    ) -> None:
        self.texts, self.gap_s, self.completion_tokens, self.fail = texts, gap_s, completion_tokens, fail
        self.closed = False

    async def chunks(self) -> AsyncGenerator[StreamChunk, None]:
        try:
            yield StreamChunk(b'{"role":"assistant"}')
            for _ in range(self.texts):
                await asyncio.sleep(self.gap_s)
                yield StreamChunk(b'{"content":"tok"}', content_chars=3)
            if self.fail:
                raise UpstreamBadResponse("connection reset mid-stream", provider="gpu0")
            if self.completion_tokens is not None:
                usage = Usage(prompt_tokens=5, completion_tokens=self.completion_tokens)
                yield StreamChunk(b"{}", usage=usage, usage_only=True)
        finally:
            self.closed = True


async def opened(
    upstream: Upstream, replica: Replica
) -> tuple[StreamChunk, AsyncGenerator[StreamChunk, None]]:
    chunks = upstream.chunks()
    first = await anext(chunks)  # as `Executor.open_stream` does before anything is held
    return await hold((first, chunks), replica.lease())


def replica() -> Replica:
    return Replica("gpu0", "http://gpu0:8000", healthy=True)


async def test_the_replica_stays_in_flight_until_the_stream_ends() -> None:
    r, upstream = replica(), Upstream(3, completion_tokens=3)
    first, rest = await opened(upstream, r)
    assert first.data == b'{"role":"assistant"}'
    seen = 0
    async for _ in rest:
        seen += 1
        assert r.in_flight == 1
    assert seen == 4  # three texts and the usage chunk, after the first
    assert r.in_flight == 0 and upstream.closed


async def test_closing_a_stream_nobody_read_past_its_first_chunk_releases_it() -> None:
    r, upstream = replica(), Upstream(5)
    _, rest = await opened(upstream, r)
    assert r.in_flight == 1
    await rest.aclose()
    assert r.in_flight == 0 and upstream.closed
    assert r.tokens_per_s is None  # cut short: not timed


async def test_a_stream_closed_midway_or_failing_is_released_and_not_timed() -> None:
    r, upstream = replica(), Upstream(5, completion_tokens=5)
    _, rest = await opened(upstream, r)
    await anext(rest)
    await anext(rest)
    await rest.aclose()
    assert r.in_flight == 0 and upstream.closed

    upstream = Upstream(3, fail=True)
    _, rest = await opened(upstream, r)
    with pytest.raises(UpstreamBadResponse):
        async for _ in rest:
            pass
    assert r.in_flight == 0 and upstream.closed
    assert r.tokens_per_s is None


async def test_a_stream_dropped_without_being_closed_is_released_when_collected() -> None:
    r, upstream = replica(), Upstream(5)
    _, rest = await opened(upstream, r)
    del rest
    gc.collect()
    for _ in range(5):  # the loop's finaliser closes the generator in a task of its own
        await asyncio.sleep(0)
    assert r.in_flight == 0 and upstream.closed


async def test_a_finished_stream_feeds_its_decode_speed_from_the_usage_chunk() -> None:
    r = replica()
    _, rest = await opened(Upstream(4, gap_s=0.02, completion_tokens=8), r)
    async for _ in rest:
        pass
    # 8 tokens over at least 4 gaps of 20 ms: at most 100 tokens/s.
    assert r.tokens_per_s is not None and 8 / 2.0 < r.tokens_per_s <= 100
    assert r.ttft_ms is None  # the TTFT is the executor's to observe, at the first chunk


async def test_without_a_usage_chunk_the_chunks_of_text_are_counted() -> None:
    r = replica()
    _, rest = await opened(Upstream(4, gap_s=0.02), r)
    async for _ in rest:
        pass
    # 4 chunks of text over at least 4 gaps of 20 ms: at most 50 tokens/s.
    assert r.tokens_per_s is not None and 4 / 2.0 < r.tokens_per_s <= 50

    r = replica()
    _, rest = await opened(Upstream(1, gap_s=0.02), r)
    async for _ in rest:
        pass
    assert r.tokens_per_s is None  # one token: no speed
