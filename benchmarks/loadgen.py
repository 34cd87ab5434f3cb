"""A lean HTTP/1.1 keep-alive load generator on a raw `asyncio.Protocol`.

Why not httpx or aiohttp: the client shares a core with the sandbox, so every microsecond it spends
is a microsecond the measured servers cannot have. A protocol object that writes prebuilt request
bytes and parses just enough of the answer (status line, Content-Length or chunked transfer
encoding) costs a few microseconds per request, an order of magnitude less than a general client.

One connection per concurrent worker, one request in flight per connection (no pipelining), times
taken with `time.perf_counter_ns`. Every answer's status is checked; a stream is read to its end and
must carry `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import orjson

_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)
_DONE_EVENT = b"data: [DONE]"
_MAX_ERROR_SAMPLES = 5


def build_request(host: str, port: int, path: str, body: bytes, headers: Sequence[str] = ()) -> bytes:
    """The exact bytes of one POST, built once and written as is for every request; `headers` are
    extra `Name: value` lines (a virtual key's Authorization)."""
    extra = "".join(f"{line}\r\n" for line in headers)
    head = (
        f"POST {path} HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: */*\r\n"
        f"{extra}"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


class ProtocolError(Exception):
    """The server said something this tiny parser does not accept as HTTP/1.1."""


class Response:
    """An HTTP/1.1 response parsed incrementally from the bytes as they arrive."""

    __slots__ = (
        "_buf",
        "_remaining",
        "_scan",
        "_state",
        "body",
        "first_content_ns",
        "keep_alive",
        "status",
        "stream",
    )

    def __init__(self, *, stream: bool) -> None:
        self.stream = stream
        self.status = 0
        self.body = bytearray()
        self.keep_alive = True
        self.first_content_ns = 0
        self._buf = bytearray()
        self._state = _HEAD
        self._remaining = 0
        self._scan = 0

    @property
    def done(self) -> bool:
        return self._state == _DONE

    def feed(self, data: bytes, now_ns: int) -> None:
        """Consume `data`; `now_ns` is when it arrived (the time of the first content chunk)."""
        buf = self._buf
        buf += data
        body_before = len(self.body)
        while True:
            state = self._state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                self._parse_head(bytes(buf[:end]))
                del buf[: end + 4]
            elif state == _LENGTH:
                take = min(self._remaining, len(buf))
                self.body += buf[:take]
                del buf[:take]
                self._remaining -= take
                if self._remaining:
                    break
                self._state = _DONE
            elif state == _CHUNK_SIZE:
                end = buf.find(b"\r\n")
                if end < 0:
                    break
                try:
                    size = int(bytes(buf[:end]).split(b";", 1)[0], 16)
                except ValueError as exc:
                    raise ProtocolError(f"bad chunk size {bytes(buf[:end])[:20]!r}") from exc
                del buf[: end + 2]
                self._remaining = size
                self._state = _CHUNK_DATA if size else _TRAILER
            elif state == _CHUNK_DATA:
                take = min(self._remaining, len(buf))
                self.body += buf[:take]
                del buf[:take]
                self._remaining -= take
                if self._remaining:
                    break
                self._state = _CHUNK_CRLF
            elif state == _CHUNK_CRLF:
                if len(buf) < 2:
                    break
                if buf[:2] != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                del buf[:2]
                self._state = _CHUNK_SIZE
            elif state == _TRAILER:
                end = buf.find(b"\r\n")
                if end < 0:
                    break
                del buf[: end + 2]
                if end == 0:
                    self._state = _DONE
            elif state == _UNTIL_CLOSE:
                self.body += buf
                buf.clear()
                break
            else:  # _DONE
                if buf:
                    raise ProtocolError("bytes after the end of the response")
                break
        if self.stream and not self.first_content_ns and len(self.body) > body_before:
            self._scan_for_content(now_ns)

    def close(self) -> None:
        """The peer closed: only a response delimited by the close itself is then complete."""
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        status_line = lines[0]
        if not status_line.startswith(b"HTTP/1.") or len(status_line) < 12:
            raise ProtocolError(f"bad status line {status_line[:40]!r}")
        self.status = int(status_line[9:12])
        length = -1
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                self.keep_alive = b"close" not in value.lower()
        if chunked:
            self._state = _CHUNK_SIZE
        elif length >= 0:
            self._remaining = length
            self._state = _LENGTH if length else _DONE
        elif self.status in (204, 304) or 100 <= self.status < 200:
            self._state = _DONE
        else:
            self.keep_alive = False
            self._state = _UNTIL_CLOSE

    def _scan_for_content(self, now_ns: int) -> None:
        # Only the first few events are parsed: once content is seen, the rest is just bytes.
        body = self.body
        while True:
            end = body.find(b"\n\n", self._scan)
            if end < 0:
                return
            event = bytes(body[self._scan : end])
            self._scan = end + 2
            for line in event.split(b"\n"):
                line = line.rstrip(b"\r")
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    continue
                try:
                    chunk = orjson.loads(payload)
                except orjson.JSONDecodeError:
                    continue
                for choice in chunk.get("choices") or ():
                    if (choice.get("delta") or {}).get("content"):
                        self.first_content_ns = now_ns
                        return

    def stream_complete(self) -> bool:
        return _DONE_EVENT in self.body[-64:]


class Connection(asyncio.Protocol):
    """One keep-alive TCP connection with at most one request in flight."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._response: Response | None = None
        self._waiter: asyncio.Future[Response] | None = None
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(lambda: cls(loop), host, port)
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but they quack the same.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        response, waiter = self._response, self._waiter
        if response is None or waiter is None or waiter.done():
            self._fail(ProtocolError(f"unexpected {len(data)} bytes from the server"))
            return
        try:
            response.feed(data, now)
        except (ProtocolError, ValueError) as exc:
            self._fail(exc)
            return
        if response.done:
            self._response = self._waiter = None
            waiter.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response, waiter = self._response, self._waiter
        if response is not None and waiter is not None and not waiter.done():
            response.close()
            if response.done:
                waiter.set_result(response)
            else:
                waiter.set_exception(ConnectionError(f"connection closed mid-response ({exc})"))
        self._response = self._waiter = None

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self._response = self._waiter = None
        self.close()

    async def send(self, request: bytes, *, stream: bool = False) -> Response:
        """Write one prebuilt request and wait for its complete response."""
        if self.closed or self._transport is None:
            raise ConnectionError("connection is closed")
        self._response = Response(stream=stream)
        waiter: asyncio.Future[Response] = self._loop.create_future()
        self._waiter = waiter
        self._transport.write(request)
        return await waiter

    def close(self) -> None:
        if self._transport is not None and not self.closed:
            self._transport.close()
        self.closed = True


@dataclass
class Target:
    """Where to send requests, and how many it answered overall (the ledger check needs warm-ups too)."""

    name: str
    host: str
    port: int
    sent: int = 0
    answered: int = 0
    headers: tuple[str, ...] = ()


@dataclass
class Tally:
    """What a batch of requests produced: per-request timings and every failure."""

    latencies_ns: list[int] = field(default_factory=list)
    ttfts_ns: list[int] = field(default_factory=list)
    sent: int = 0
    answered: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    elapsed_ns: int = 0
    started_ns: int = 0
    finished_ns: list[int] = field(default_factory=list)  # when each answer completed

    def error(self, message: str) -> None:
        self.errors += 1
        if len(self.error_samples) < _MAX_ERROR_SAMPLES:
            self.error_samples.append(message)

    def absorb_errors(self, other: Tally) -> None:
        """Count a warm-up's failures: its timings are thrown away, its errors are not."""
        self.errors += other.errors
        for sample in other.error_samples:
            if len(self.error_samples) < _MAX_ERROR_SAMPLES:
                self.error_samples.append(sample)

    def merge(self, other: Tally) -> None:
        self.latencies_ns += other.latencies_ns
        self.ttfts_ns += other.ttfts_ns
        self.sent += other.sent
        self.answered += other.answered
        self.absorb_errors(other)
        self.elapsed_ns += other.elapsed_ns


class Worker:
    """One closed-loop client: a connection that sends the next request when the last one is answered."""

    def __init__(self, target: Target, request: bytes, *, stream: bool) -> None:
        self.target = target
        self.request = request
        self.stream = stream
        self._conn: Connection | None = None

    async def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            self._conn = await Connection.open(self.target.host, self.target.port)
        return self._conn

    async def connect(self) -> None:
        """Open the connection ahead of a timed window so set-up is not part of it."""
        await self._connection()

    async def one(self, tally: Tally) -> None:
        """Send one request, time it and validate it; failures are counted, never raised."""
        tally.sent += 1
        self.target.sent += 1
        try:
            conn = await self._connection()
        except OSError as exc:
            tally.error(f"{self.target.name}: connect: {exc}")
            return
        start = time.perf_counter_ns()
        try:
            response = await conn.send(self.request, stream=self.stream)
        except (OSError, ProtocolError) as exc:
            tally.error(f"{self.target.name}: {type(exc).__name__}: {exc}")
            conn.close()
            return
        end = time.perf_counter_ns()
        tally.answered += 1
        tally.finished_ns.append(end)
        self.target.answered += 1
        if not response.keep_alive:
            conn.close()
        if response.status != 200:
            tally.error(f"{self.target.name}: HTTP {response.status}: {bytes(response.body[:200])!r}")
            return
        if self.stream:
            if not response.stream_complete():
                tally.error(f"{self.target.name}: stream ended without data: [DONE]")
                return
            if not response.first_content_ns:
                tally.error(f"{self.target.name}: stream carried no content")
                return
            tally.ttfts_ns.append(response.first_content_ns - start)
        tally.latencies_ns.append(end - start)

    async def run_count(self, count: int, tally: Tally) -> None:
        start = time.perf_counter_ns()
        for _ in range(count):
            await self.one(tally)
        tally.elapsed_ns += time.perf_counter_ns() - start

    async def run_until(self, deadline_ns: int, tally: Tally) -> None:
        while time.perf_counter_ns() < deadline_ns:
            await self.one(tally)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


async def closed_loop(
    workers: list[Worker], duration_s: float, *, clock: Callable[[], int] = time.perf_counter_ns
) -> Tally:
    """Every worker sends back-to-back until the deadline; elapsed runs to the last answer."""
    tally = Tally()
    start = tally.started_ns = clock()
    deadline = start + int(duration_s * 1e9)
    await asyncio.gather(*(worker.run_until(deadline, tally) for worker in workers))
    tally.elapsed_ns = clock() - start
    return tally
