"""Explicit prompt caching (Anthropic's ``cache_control`` breakpoints): exact prefixes with a TTL.

A prompt is a list of content blocks in cache order (tools, system, messages).
For each block the caller gives the token offset where it ends and a chained
hash of everything up to it. A breakpoint (a block carrying ``cache_control``)
asks for the prefix ending there to be cached for 5 minutes or an hour:

* read: the longest prefix already cached, found at a breakpoint or at any of
  the ``lookback`` block boundaries before one, is billed as a cache read (and
  its TTL is refreshed);
* write: the tokens after that, up to the last breakpoint, are billed as a cache
  write, each segment at the TTL of the breakpoint that closes it;
* prefixes shorter than the minimum are silently neither written nor read.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["TTL_SECONDS", "Breakpoint", "BreakpointCache", "CacheUsage"]

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A ``cache_control`` mark: the index of the block it closes and its TTL (``5m``/``1h``)."""

    block: int
    ttl: str = "5m"


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """Input tokens of one request split by cache outcome."""

    read: int = 0
    write_5m: int = 0
    write_1h: int = 0

    @property
    def written(self) -> int:
        """Tokens written to the cache (both TTLs)."""
        return self.write_5m + self.write_1h


class BreakpointCache:
    """Prefix entries keyed by (model, chained hash), each with its expiry and TTL; LRU-bounded."""

    def __init__(
        self,
        *,
        min_tokens: int = 1024,
        lookback: int = 20,
        capacity: int = 65_536,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_tokens = min_tokens
        self.lookback = lookback
        self.capacity = capacity
        self._clock = clock
        self._entries: OrderedDict[tuple[str, int], tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def _alive(self, key: tuple[str, int], now: float) -> bool:
        entry = self._entries.get(key)
        if entry is None:
            return False
        if entry[0] <= now:
            del self._entries[key]
            return False
        return True

    def _store(self, key: tuple[str, int], now: float, ttl: float) -> None:
        old_expires, old_ttl = self._entries.get(key, (0.0, 0.0))
        ttl = max(ttl, old_ttl)
        self._entries[key] = (max(now + ttl, old_expires), ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def lookup(
        self, model: str, ends: Sequence[int], hashes: Sequence[int], breakpoints: Sequence[Breakpoint]
    ) -> int:
        """The block index of the longest cached prefix reachable from a breakpoint, or -1."""
        now = self._clock()
        best = -1
        for mark in breakpoints:
            for block in range(mark.block, max(mark.block - self.lookback, -1), -1):
                if block <= best:
                    break
                if ends[block] >= self.min_tokens and self._alive((model, hashes[block]), now):
                    best = block
                    break
        return best

    def apply(
        self, model: str, ends: Sequence[int], hashes: Sequence[int], breakpoints: Sequence[Breakpoint]
    ) -> CacheUsage:
        """Read the longest cached prefix, write the rest up to the last breakpoint, and bill both."""
        hit = self.lookup(model, ends, hashes, breakpoints)
        now = self._clock()
        read = ends[hit] if hit >= 0 else 0
        if hit >= 0:  # a read refreshes the entry's own TTL at no cost
            key = (model, hashes[hit])
            self._store(key, now, self._entries[key][1])
        written = {"5m": 0, "1h": 0}
        covered = read
        for mark in sorted(breakpoints, key=lambda m: m.block):
            end = ends[mark.block]
            if mark.block <= hit or end < self.min_tokens or end <= covered:
                continue
            written[mark.ttl] += end - covered
            covered = end
            self._store((model, hashes[mark.block]), now, TTL_SECONDS[mark.ttl])
        return CacheUsage(read=read, write_5m=written["5m"], write_1h=written["1h"])
