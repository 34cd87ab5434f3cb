"""Host names to addresses for the upstream client: one lookup per host at a time, kept briefly.

asyncio resolves every new connection with its own `getaddrinfo` in the default thread pool (a
handful of threads, shared with the gateway's other `to_thread` work). A burst of new connections
to one provider therefore sent a burst of identical DNS queries; on this machine's resolver a
burst of 32 lost several, each then waiting out the resolver's 5 s retry, and every waiting
lookup held a pool thread. Concurrent connections to one host now share one lookup, and its answer
is reused for `ttl` seconds (aiohttp's default is 10 s too), so a provider's address changes reach
new connections within that. Failures are not kept: the next connection asks again, and the
circuit breaker is what stops asking a provider that keeps failing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from typing import Any

AddressInfo = tuple[int, int, int, str, tuple[Any, ...]]

_MAX_HOSTS = 1024


class Resolver:
    def __init__(self, *, ttl: float = 10.0) -> None:
        self._ttl = ttl
        self._known: dict[tuple[str, int], tuple[float, list[AddressInfo]]] = {}
        self._asking: dict[tuple[str, int], asyncio.Future[list[AddressInfo]]] = {}

    async def resolve(self, host: str, port: int) -> list[AddressInfo]:
        """The addresses to try, in the resolver's order; raises `socket.gaierror` as getaddrinfo does."""
        key = (host, port)
        known = self._known.get(key)
        if known is not None and time.monotonic() - known[0] < self._ttl:
            return known[1]
        asking = self._asking.get(key)
        if asking is None:
            asking = asyncio.ensure_future(_lookup(host, port))
            self._asking[key] = asking
            asking.add_done_callback(lambda done: self._answered(key, done))
        # Shielded: one caller's connect timeout must not cancel the lookup the others wait for.
        return await asyncio.shield(asking)

    def _answered(self, key: tuple[str, int], done: asyncio.Future[list[AddressInfo]]) -> None:
        self._asking.pop(key, None)
        if done.cancelled() or done.exception() is not None:  # retrieved, so never "unretrieved"
            return
        if len(self._known) >= _MAX_HOSTS:
            self._known.clear()
        self._known[key] = (time.monotonic(), done.result())


async def _lookup(host: str, port: int) -> list[AddressInfo]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(int(family), int(kind), proto, name, tuple(addr)) for family, kind, proto, name, addr in infos]


def is_address(host: str) -> bool:
    """An IP literal needs no lookup (asyncio parses it without one)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
