"""A pooled HTTP/1.1 client on asyncio, for upstream calls only.

Why not httpx or aiohttp: an upstream call through httpx over aiohttp cost about 650 µs of CPU on
this machine, aiohttp alone about 370 µs, and a keep-alive connection driven by an
`asyncio.Protocol` with httptools' parser (llhttp, the parser uvicorn uses) about 80 µs (one
process, same run, same upstream). Tollgate's whole budget per request is a few hundred µs, and an
upstream call needs none of what those layers add (cookies, redirects, auth flows, decompression,
multipart, URL merging).

What it does: POST with Content-Length, responses delimited by Content-Length, chunked encoding or
connection close, keep-alive pools per origin (LIFO, bounded, idle ones closed after
`keepalive_expiry`, `providers/http1_pool.py`), TLS with the system's and certifi's roots or the
operator's CA and client certificate (`providers/tls.py`), forward proxies from the environment or
the config with CONNECT tunnels (`providers/proxy.py`), a connect timeout (covering the proxy's
CONNECT), one DNS lookup per host at a time (`providers/resolver.py`), a read timeout per wait,
flow control for slow consumers, and closing the connection when the caller stops early, which is
how an upstream generation is cancelled. A connection that breaks after the request went out is an
error, never resent here: the upstream may have acted on it, so the executor decides whether to
retry, and counts the attempt.

Proxy and TLS choices are made once: per provider when its adapter is built (`configured`, one
client per distinct choice, sharing the resolver), and per URL when its route is first built.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from importlib.metadata import version
from urllib.parse import urlsplit

from providers.http import MAX_ANSWER_BYTES, AnswerTooLarge, ConnectFailed, Timeouts
from providers.http1_connection import Connection
from providers.http1_pool import Pool
from providers.proxy import Proxy, ProxyRefused, ProxyRules
from providers.resolver import Resolver
from providers.tls import TLSSettings, tls_context

_USER_AGENT = f"tollgate/{version('tollgate')}"
_MAX_ROUTES = 4096
# How long a finished stream's connection may take to end its body before it is closed instead: a
# well-behaved upstream sends the end right after `[DONE]`, and a connection held past that is one
# slot of the pool not serving.
_FINISH_WITHIN = 1.0


class _Route:
    """What one URL needs per request, worked out once: its pool, its request line and, for a plain
    http URL through a proxy, the proxy whose 407 must not pass for the upstream's answer."""

    __slots__ = ("pool", "prefix", "proxy")

    def __init__(self, pool: Pool, prefix: str, proxy: Proxy | None) -> None:
        self.pool = pool
        self.prefix = prefix
        self.proxy = proxy


class Http1Client:
    """The gateway's upstream client (see the module docstring for what it is and is not)."""

    def __init__(
        self,
        *,
        max_connections: int = 2000,
        max_idle: int = 200,
        keepalive_expiry: float = 15.0,
        pool_timeout: float = 10.0,
        tls: ssl.SSLContext | None = None,
        proxies: ProxyRules | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self._max_connections, self._max_idle = max_connections, max_idle
        self._keepalive_expiry, self._pool_timeout = keepalive_expiry, pool_timeout
        self._tls = tls
        self._proxies = proxies or ProxyRules()
        self._resolver = resolver or Resolver()
        self._pools: dict[tuple[str, str, int], Pool] = {}
        self._routes: dict[str, _Route] = {}
        self._siblings: dict[tuple[ProxyRules, TLSSettings, float], Http1Client] = {}

    def configured(
        self, *, proxies: ProxyRules | None, tls: TLSSettings | None = None, keepalive_expiry: float
    ) -> Http1Client:
        """A client for one provider's network settings, made once and shared by every provider
        with the same ones; closed with this one. `proxies=None` keeps this client's (the
        environment's). Raises `TLSSettingError` for unusable files."""
        proxies = proxies or self._proxies
        tls = tls or TLSSettings()
        key = (proxies, tls, keepalive_expiry)
        sibling = self._siblings.get(key)
        if sibling is None:
            sibling = self._siblings[key] = Http1Client(
                max_connections=self._max_connections,
                max_idle=self._max_idle,
                keepalive_expiry=keepalive_expiry,
                pool_timeout=self._pool_timeout,
                tls=tls_context(tls),
                proxies=proxies,
                resolver=self._resolver,
            )
        return sibling

    async def send(
        self,
        url: str,
        *,
        content: bytes,
        headers: Mapping[str, str],
        timeouts: Timeouts,
        method: str = "POST",
    ) -> Http1Response:
        route = self._routes.get(url) or self._route(url)
        # The request line is cached for POST, the hot path; a rare GET (batch status, files) swaps the verb.
        prefix = route.prefix if method == "POST" else method + route.prefix[4:]
        head = _head(prefix, headers, len(content))
        conn = await route.pool.acquire(timeouts.connect)
        try:
            conn.send(head, content)
            while not conn.head_done:
                if conn.error is not None:
                    raise conn.take_error()
                await conn.wait(timeouts.read)
            if route.proxy is not None and conn.status == 407:
                raise ProxyRefused(
                    f"proxy {route.proxy.display} refused the request: 407 Proxy Authentication Required",
                    status=407,
                )
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
        proxy = self._proxies.choose(parts.scheme, parts.hostname, port)
        key = (parts.scheme, parts.hostname, port)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = Pool(
                parts.hostname,
                port,
                self._tls_context() if tls else None,
                self._resolver,
                proxy=proxy,
                user_agent=_USER_AGENT,
                limit=self._max_connections,
                max_idle=self._max_idle,
                expiry=self._keepalive_expiry,
                pool_timeout=self._pool_timeout,
            )
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        netloc = parts.netloc.rpartition("@")[2]
        forward = proxy if not tls else None  # plain http through a proxy: absolute-form
        auth = ""
        if forward is not None:
            target = f"http://{netloc}{target}"
            if forward.authorization:
                auth = f"proxy-authorization: {forward.authorization}\r\n"
        if len(self._routes) >= _MAX_ROUTES:
            self._routes.clear()
        route = self._routes[url] = _Route(
            pool,
            f"POST {target} HTTP/1.1\r\nhost: {netloc}\r\n{auth}user-agent: {_USER_AGENT}\r\n",
            forward,
        )
        return route

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = tls_context()
        return self._tls

    async def aclose(self) -> None:
        for sibling in self._siblings.values():
            await sibling.aclose()
        self._siblings.clear()
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        self._routes.clear()


class Http1Response:
    """An answer being read from its connection; the connection goes back to the pool at its end."""

    __slots__ = ("_conn", "_done", "_pool", "_read_timeout", "headers", "status")

    def __init__(self, conn: Connection, pool: Pool, read_timeout: float) -> None:
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
