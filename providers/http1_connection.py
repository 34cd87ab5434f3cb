"""One upstream HTTP/1.1 connection: an `asyncio.Protocol` feeding httptools' parser (llhttp) and
holding the answer in flight, for `providers.http1`'s pools to hand from request to request.

It never blocks and never awaits on its own: the caller `wait()`s for the next event (head, body,
end or failure) with a read timeout, `take()`s what body has arrived, and `abort()`s to leave early.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import cast

import httptools

from providers.http import ConnectionBroke, ReadTimedOut

HIGH_WATER = 1 << 20  # pause reading from the upstream past 1 MiB unread by the caller


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the answer currently arriving on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_lost: Callable[[Connection], None]) -> None:
        self._loop = loop
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self.parser: httptools.HttpResponseParser | None = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        self.error: Exception | None = None
        self.received = False
        self.delimited = False  # Content-Length or chunked: the end is not the connection's end
        self.paused = False
        self._informational = False
        self._waiter: asyncio.Future[None] | None = None
        self._on_complete: Callable[[], None] | None = None

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.received = True
        if self.complete:  # bytes nobody asked for: this connection cannot be trusted again
            self.keep_alive = False
            self.abort()
            return
        if self.parser is None:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionBroke(f"upstream answered with something that is not HTTP/1.1: {exc}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:  # a tunnel whose TLS never came up: the pool never had it
            return
        self.closed = True
        if not self.complete:
            if self.head_done and not self.delimited:
                self.complete = True  # a body delimited by the connection's end has ended
            else:
                # e.g. a TLS 1.3 upstream refusing the client certificate, told after the handshake
                reason = f": {exc}" if exc else ""
                when = "mid-answer" if self.received else "before answering"
                self._fail(ConnectionBroke(f"the upstream closed the connection {when}{reason}"))
        self.keep_alive = False
        self._wake()
        self._on_lost(self)
        # The parser holds this protocol's bound methods and the transport holds the protocol: drop
        # both, or every closed connection waits for the cycle collector (one per upstream error).
        self.parser = None
        self.transport = None

    def pause_writing(self) -> None:  # a large body to a slow upstream: the transport buffers it
        pass

    def resume_writing(self) -> None:
        pass

    # -- httptools callbacks ----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        if key == "content-length" or (key == "transfer-encoding" and "chunked" in text.lower()):
            self.delimited = True
        previous = self.headers.get(key)
        self.headers[key] = text if previous is None else f"{previous}, {text}"

    def on_headers_complete(self) -> None:
        assert self.parser is not None  # called by the parser itself
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # 1xx: another head follows
            self._informational = True
            self.headers = {}
            self.delimited = False
            return
        self.status = status
        self.head_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        self.complete = True
        self.keep_alive = self.parser is not None and self.parser.should_keep_alive()
        self._wake()
        if self._on_complete is not None:
            on_complete, self._on_complete = self._on_complete, None
            on_complete()

    # -- for the client ---------------------------------------------------------------------

    def prepare(self) -> None:
        """Ready for the next exchange on this (kept-alive) connection."""
        self._reset()

    def send(self, head: bytes, content: bytes) -> None:
        assert self.transport is not None
        self.transport.writelines((head, content))

    def take(self) -> bytes | None:
        """Whatever body has arrived, or None when nothing is waiting."""
        if not self.body:
            return None
        data = self.body.popleft() if len(self.body) == 1 else b"".join(self.body)
        self.body.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    async def wait(self, within: float) -> None:
        """Until something happens on this connection: head, body, end or failure."""
        waiter = self._loop.create_future()
        self._waiter = waiter
        timer = self._loop.call_later(within, _expire, waiter, within)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def when_complete(self, callback: Callable[[], None], *, within: float) -> None:
        """`callback` once the answer has ended (at once if it has), if it ends within `within`
        seconds; otherwise, or if the connection fails first, the connection is aborted and
        `callback` never runs."""
        self.body.clear()  # the caller wants none of the rest
        self.buffered = 0
        if self.complete:
            callback()
            return
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        timer = self._loop.call_later(within, self.abort)

        def done() -> None:
            timer.cancel()
            callback()

        self._on_complete = done

    def take_error(self) -> Exception:
        """The failure, handed over to be raised. Not kept: once raised, its traceback holds the
        caller's frame, which holds this connection, and a stored copy would close that cycle."""
        error, self.error = self.error, None
        assert error is not None
        return error

    def abort(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.abort()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _expire(waiter: asyncio.Future[None], timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimedOut(f"no answer from the upstream within {timeout:g} s"))
