"""The explicit (breakpoint) prompt cache: writes, reads, lookback, minimum size and TTLs."""

from __future__ import annotations

from sandbox.anthropic.breakpoint_cache import Breakpoint, BreakpointCache, CacheUsage

# Five blocks ending at these token offsets, with chained hashes 1..5.
ENDS = (600, 1200, 1300, 1400, 2000)
HASHES = (1, 2, 3, 4, 5)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_write_then_read_with_ttl_split() -> None:
    cache = BreakpointCache(min_tokens=1024, clock=Clock())
    marks = [Breakpoint(1, "1h"), Breakpoint(4, "5m")]
    assert cache.apply("m", ENDS, HASHES, marks) == CacheUsage(read=0, write_5m=800, write_1h=1200)
    assert cache.apply("m", ENDS, HASHES, marks) == CacheUsage(read=2000)
    assert cache.apply("other-model", ENDS, HASHES, marks).read == 0  # caches are per model


def test_short_prefixes_are_neither_written_nor_read() -> None:
    cache = BreakpointCache(min_tokens=1024, clock=Clock())
    assert cache.apply("m", ENDS, HASHES, [Breakpoint(0)]) == CacheUsage()
    # A short first breakpoint rolls its tokens into the next cacheable one.
    assert cache.apply("m", ENDS, HASHES, [Breakpoint(0), Breakpoint(2)]) == CacheUsage(write_5m=1300)


def test_lookback_finds_an_earlier_breakpoint() -> None:
    cache = BreakpointCache(min_tokens=1024, lookback=20, clock=Clock())
    cache.apply("m", ENDS, HASHES, [Breakpoint(1)])
    # The conversation grew and the breakpoint moved to the last block.
    assert cache.apply("m", ENDS, HASHES, [Breakpoint(4)]) == CacheUsage(read=1200, write_5m=800)
    narrow = BreakpointCache(min_tokens=1024, lookback=2, clock=Clock())
    narrow.apply("m", ENDS, HASHES, [Breakpoint(1)])
    assert narrow.apply("m", ENDS, HASHES, [Breakpoint(4)]).read == 0  # block 1 is 3 blocks back


def test_entries_expire_and_reads_refresh_them() -> None:
    clock = Clock()
    cache = BreakpointCache(min_tokens=1024, clock=clock)
    cache.apply("m", ENDS, HASHES, [Breakpoint(1)])
    clock.now = 299.0
    assert cache.apply("m", ENDS, HASHES, [Breakpoint(1)]).read == 1200  # refreshed for 5 more minutes
    clock.now = 590.0
    assert cache.apply("m", ENDS, HASHES, [Breakpoint(1)]).read == 1200
    clock.now = 900.0
    assert cache.apply("m", ENDS, HASHES, [Breakpoint(1)]) == CacheUsage(write_5m=1200)
    cache.apply("m", ENDS, HASHES, [Breakpoint(2, "1h")])
    clock.now += 3000.0
    assert cache.apply("m", ENDS, HASHES, [Breakpoint(2, "1h")]).read == 1300
    cache.clear()
    assert len(cache) == 0
