"""The ``/_sandbox/`` test-control endpoints (request log, fault rules, reset); not emulated API."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson

from sandbox.core.asgi import Exchange
from sandbox.core.prefix_cache import PrefixCache
from sandbox.faults import FaultBook, parse_rule

__all__ = ["Control", "RequestLog"]

Handler = Callable[[Exchange], Awaitable[None]]


class RequestLog:
    """The most recent requests as received: method, path, query, headers, raw body, time, and the
    client's address (`[host, port]`: requests on one kept-alive connection share it)."""

    def __init__(self, size: int = 1000) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=size)

    def record(self, ex: Exchange) -> None:
        """Remember one request."""
        self._entries.append(
            {
                "method": ex.method,
                "path": ex.path,
                "query": bytes(ex.scope.get("query_string", b"")).decode("latin-1"),
                "headers": ex.headers(),
                "body": ex.body.decode("utf-8", "replace"),
                "time": time.time(),
                "client": list(ex.scope["client"]) if ex.scope.get("client") else None,
            }
        )

    def entries(self) -> list[dict[str, Any]]:
        """Every remembered request, oldest first."""
        return list(self._entries)

    def clear(self) -> None:
        """Forget every request."""
        self._entries.clear()


class Control:
    """Handlers for ``/_sandbox/requests``, ``/_sandbox/faults`` and ``/_sandbox/reset``."""

    def __init__(
        self,
        log: RequestLog,
        faults: FaultBook,
        cache: PrefixCache,
        *,
        on_reset: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.log = log
        self.faults = faults
        self.cache = cache
        self.on_reset = tuple(on_reset)

    def routes(self) -> dict[tuple[str, str], Handler]:
        """The endpoints, by (method, path)."""
        return {
            ("GET", "/_sandbox/requests"): self.list_requests,
            ("DELETE", "/_sandbox/requests"): self.clear_requests,
            ("GET", "/_sandbox/faults"): self.list_faults,
            ("POST", "/_sandbox/faults"): self.add_faults,
            ("DELETE", "/_sandbox/faults"): self.clear_faults,
            ("POST", "/_sandbox/reset"): self.reset,
        }

    async def list_requests(self, ex: Exchange) -> None:
        """``GET /_sandbox/requests``: the request log, oldest first."""
        await ex.respond(200, orjson.dumps(self.log.entries()))

    async def clear_requests(self, ex: Exchange) -> None:
        """``DELETE /_sandbox/requests``."""
        self.log.clear()
        await ex.respond(200, b'{"ok":true}')

    async def list_faults(self, ex: Exchange) -> None:
        """``GET /_sandbox/faults``: the pending rules."""
        await ex.respond(200, self._pending())

    async def add_faults(self, ex: Exchange) -> None:
        """``POST /_sandbox/faults``: queue a rule or a list of rules."""
        try:
            raw = orjson.loads(ex.body or b"null")
            rules = [parse_rule(r) for r in (raw if isinstance(raw, list) else [raw])]
        except (orjson.JSONDecodeError, ValueError, TypeError) as exc:
            await ex.respond(400, orjson.dumps({"error": {"message": str(exc)}}))
            return
        self.faults.add(rules)
        await ex.respond(200, self._pending())

    async def clear_faults(self, ex: Exchange) -> None:
        """``DELETE /_sandbox/faults``."""
        self.faults.clear()
        await ex.respond(200, b'{"ok":true}')

    async def reset(self, ex: Exchange) -> None:
        """``POST /_sandbox/reset``: clear the log, the faults and the prompt caches."""
        self.log.clear()
        self.faults.clear()
        self.cache.clear()
        for hook in self.on_reset:
            hook()
        await ex.respond(200, b'{"ok":true}')

    def _pending(self) -> bytes:
        return orjson.dumps({"pending": [rule.to_json() for rule in self.faults.rules]})
