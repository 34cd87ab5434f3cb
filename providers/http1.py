"""A pooled HTTP/1.1 client on asyncio, for upstream calls only.

Why not httpx or aiohttp: an upstream call through httpx over aiohttp cost about 650 µs of CPU on
this machine, aiohttp alone about 370 µs, and a keep-alive connection driven by an
`asyncio.Protocol` with httptools' parser (llhttp, the parser uvicorn uses) about 80 µs (one
process, same run, same upstream). Tollgate's whole budget per request is a few hundred µs, and an
upstream call needs none of what those layers add (cookies, redirects, auth flows, proxies,
decompression, multipart, URL merging).

What it does: POST with Content-Length, responses delimited by Content-Length, chunked encoding or
connection close, keep-alive pools per origin (LIFO, bounded, expiring), TLS with certifi's roots,
a connect timeout, one DNS lookup per host at a time (`providers/resolver.py`), a read timeout
per wait, flow control for slow consumers, and closing the connection when the caller stops early,
which is how an upstream generation is cancelled. A
connection that breaks after the request went out is an error, never resent here: the upstream may
have acted on it, so the executor decides whether to retry, and counts the attempt.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from importlib.metadata import version
from urllib.parse import urlsplit

import certifi

from providers.http import MAX_ANSWER_BYTES, AnswerTooLarge, ConnectFailed, ConnectTimedOut, Timeouts
from providers.http1_connection import Connection
from providers.resolver import Resolver, is_address

_USER_AGENT = f"tollgate/{version('tollgate')}"
_MAX_ROUTES = 4096
# How long a finished stream's connection may take to end its body before it is closed instead: a
# well-behaved upstream sends the end right after `[DONE]`, and a connection held past that is one
# slot of the pool not serving.
_FINISH_WITHIN = 1.0


class _Pool:
    """The connections to one origin: at most `limit` open, idle ones reused newest first."""

    def __init__(
        self,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        resolver: Resolver,
        *,
        limit: int,
        max_idle: int,
        expiry: float,
        pool_timeout: float,
    ) -> None:
        self._host, self._port, self._tls = host, port, tls
        self._resolver = None if is_address(host) else resolver
        self._limit, self._max_idle, self._expiry, self._pool_timeout = limit, max_idle, expiry, pool_timeout
        self._idle: list[Connection] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.closed = False

    async def acquire(self, connect_timeout: float) -> Connection:
        deadline: float | None = None
        while True:
            now = time.monotonic()
            while self._idle:
                conn = self._idle.pop()
                if conn.closed:
                    continue
                if now - conn.idle_since > self._expiry:
                    conn.close()
                    continue
                conn.prepare()
                return conn
            if self._open < self._limit:
                return await self._connect(connect_timeout)
            if deadline is None:
                deadline = now + self._pool_timeout
            if now >= deadline:
                raise ConnectTimedOut(f"all {self._limit} connections to {self._host} are busy")
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, deadline - now)
            except TimeoutError:
                pass
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self, within: float) -> Connection:
        self._open += 1
        try:
            async with asyncio.timeout(within):
                conn = await self._open_connection()
        except TimeoutError:
            self._slot_freed()
            raise ConnectTimedOut(f"connecting to {self._host}:{self._port} took over {within:g} s") from None
        except OSError as exc:  # refused, unreachable, DNS (gaierror), TLS (SSLError)
            self._slot_freed()
            raise ConnectFailed(
                f"cannot connect to {self._host}:{self._port}: {type(exc).__name__}: {exc}"
            ) from exc
        except BaseException:
            self._slot_freed()
            raise
        return conn

    async def _open_connection(self) -> Connection:
        """Each address in the resolver's order until one connects, as `create_connection` does."""
        loop = asyncio.get_running_loop()
        if self._resolver is None:  # an IP literal
            hosts = [(self._host, 0)]
        else:
            hosts = [(info[4][0], info[0]) for info in await self._resolver.resolve(self._host, self._port)]
        failures: list[OSError] = []
        for host, family in hosts:
            try:
                _, conn = await loop.create_connection(
                    lambda: Connection(loop, self._lost),
                    host,
                    self._port,
                    family=family,
                    ssl=self._tls,
                    server_hostname=self._host if self._tls is not None else None,
                )
            except OSError as exc:
                failures.append(exc)
                continue
            return conn
        if len(failures) == 1:
            raise failures[0]
        raise OSError(f"every address failed: {'; '.join(str(f) for f in failures)}")

    def release(self, conn: Connection) -> None:
        """An answer read to its end: keep the connection for the next request if it can be."""
        if self.closed or not conn.keep_alive or conn.closed or len(self._idle) >= self._max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)
        self._wake_one()

    def _lost(self, conn: Connection) -> None:
        self._slot_freed()

    def _slot_freed(self) -> None:
        self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        self.closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()


class _Route:
    """What one URL needs per request, worked out once: its pool and its request line."""

    __slots__ = ("pool", "prefix")

    def __init__(self, pool: _Pool, prefix: str) -> None:
        self.pool = pool
        self.prefix = prefix


class Http1Client:
    """The gateway's upstream client (see the module docstring for what it is and is not)."""

    def __init__(
        self,
        *,
        max_connections: int = 2000,
        max_idle: int = 200,
        keepalive_expiry: float = 60.0,
        pool_timeout: float = 10.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._limits = {
            "limit": max_connections,
            "max_idle": max_idle,
            "expiry": keepalive_expiry,
            "pool_timeout": pool_timeout,
        }
        self._tls = tls
        self._resolver = Resolver()
        self._pools: dict[tuple[str, str, int], _Pool] = {}
        self._routes: dict[str, _Route] = {}

    async def send(
        self, url: str, *, content: bytes, headers: Mapping[str, str], timeouts: Timeouts
    ) -> Http1Response:
        route = self._routes.get(url) or self._route(url)
        head = _head(route.prefix, headers, len(content))
        conn = await route.pool.acquire(timeouts.connect)
        try:
            conn.send(head, content)
            while not conn.head_done:
                if conn.error is not None:
                    raise conn.take_error()
                await conn.wait(timeouts.read)
        except BaseException:
            conn.abort()
            raise
        return Http1Response(conn, route.pool, timeouts.read)

    def _route(self, url: str) -> _Route:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectFailed(f"not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        key = (parts.scheme, parts.hostname, port)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _Pool(
                parts.hostname,
                port,
                self._tls_context() if tls else None,
                self._resolver,
                **self._limits,  # type: ignore[arg-type]
            )
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        netloc = parts.netloc.rpartition("@")[2]
        if len(self._routes) >= _MAX_ROUTES:
            self._routes.clear()
        route = self._routes[url] = _Route(
            pool, f"POST {target} HTTP/1.1\r\nhost: {netloc}\r\nuser-agent: {_USER_AGENT}\r\n"
        )
        return route

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=certifi.where())
            self._tls.set_alpn_protocols(["http/1.1"])
        return self._tls

    async def aclose(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        self._routes.clear()


class Http1Response:
    """An answer being read from its connection; the connection goes back to the pool at its end."""

    __slots__ = ("_conn", "_done", "_pool", "_read_timeout", "headers", "status")

    def __init__(self, conn: Connection, pool: _Pool, read_timeout: float) -> None:
        self._conn = conn
        self._pool = pool
        self._read_timeout = read_timeout
        self._done = False
        self.status = conn.status
        self.headers: Mapping[str, str] = conn.headers

    async def read(self) -> bytes:
        parts: list[bytes] = []
        size = 0
        while (data := await self._next()) is not None:
            parts.append(data)
            size += len(data)
            if size > MAX_ANSWER_BYTES:
                await self.aclose()
                raise AnswerTooLarge(f"an answer over {MAX_ANSWER_BYTES >> 20} MiB")
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        while (data := await self._next()) is not None:
            yield data

    async def _next(self) -> bytes | None:
        """The body that has arrived since the last call, waiting for some; None at its end."""
        conn = self._conn
        try:
            while not self._done:
                data = conn.take()
                if data is not None:
                    return data
                if conn.complete:
                    self._finish()
                    return None
                if conn.error is not None:
                    raise conn.take_error()
                await conn.wait(self._read_timeout)
            return None
        except BaseException:
            if not self._done:
                self._done = True
                conn.abort()
            raise

    def _finish(self) -> None:
        self._done = True
        self._pool.release(self._conn)

    async def aclose(self) -> None:
        """Before the end of the body, the connection is closed: the upstream sees the caller leave."""
        if not self._done:
            self._done = True
            self._conn.abort()

    async def finish(self) -> None:
        """The caller has what it needs (a stream's final event); the rest of the body, usually
        just the end of its chunked encoding, is discarded. The connection goes back to the pool
        when the body ends, without the caller waiting for it; one that does not end promptly or
        fails is closed. Closing it instead would cost every stream a new connection (and, to a
        managed API, a TLS handshake on the next request's time to first token)."""
        if self._done:
            return
        self._done = True
        conn, pool = self._conn, self._pool
        if conn.error is not None or conn.closed:
            conn.abort()
        else:
            conn.when_complete(lambda: pool.release(conn), within=_FINISH_WITHIN)


def _head(prefix: str, headers: Mapping[str, str], length: int) -> bytes:
    lines = [prefix]
    for name, value in headers.items():
        if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
            raise ValueError(f"header {name!r} holds a line break")
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"content-length: {length}\r\n\r\n")
    return "".join(lines).encode("latin-1")
