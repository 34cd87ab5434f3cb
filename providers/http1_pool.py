"""The keep-alive connections to one upstream origin for `providers.http1`: opening them (directly,
to a forward proxy, or through a CONNECT tunnel), lending them newest first, and closing the idle
ones before the upstream would.

Idle expiry: a server closes a keep-alive connection after its own idle timeout (uvicorn, so vLLM,
5 s; nginx 75 s; proxies and NATs may drop them silently). A request written to a connection the
server is closing fails with nothing to show for it, so connections idle longer than `expiry` are
never lent, and a timer closes them (one per pool at a time, not one per connection) so they hold
no file descriptor or proxy slot while nobody uses them.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque

from providers.http import ConnectFailed, ConnectTimedOut
from providers.http1_connection import Connection
from providers.proxy import ConnectReply, Proxy, connect_request
from providers.resolver import Resolver, is_address


class Pool:
    """The connections to one origin: at most `limit` open, idle ones reused newest first."""

    def __init__(
        self,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        resolver: Resolver,
        *,
        proxy: Proxy | None,
        user_agent: str,
        limit: int,
        max_idle: int,
        expiry: float,
        pool_timeout: float,
    ) -> None:
        self._host, self._port, self._tls, self._proxy = host, port, tls, proxy
        self._user_agent = user_agent
        dial = proxy.host if proxy is not None else host
        self._resolver = None if is_address(dial) else resolver
        self._limit, self._max_idle, self._expiry, self._pool_timeout = limit, max_idle, expiry, pool_timeout
        self._idle: list[Connection] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._sweep: asyncio.TimerHandle | None = None
        self.closed = False

    @property
    def open_connections(self) -> int:
        return self._open

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
            raise ConnectTimedOut(f"connecting to {self._where()} took over {within:g} s") from None
        except ConnectFailed:
            self._slot_freed()
            raise
        except OSError as exc:  # refused, unreachable, DNS (gaierror), TLS (SSLError)
            self._slot_freed()
            raise ConnectFailed(f"cannot connect to {self._where()}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            self._slot_freed()
            raise
        return conn

    def _where(self) -> str:
        target = f"{self._host}:{self._port}"
        return target if self._proxy is None else f"{target} through proxy {self._proxy.display}"

    async def _open_connection(self) -> Connection:
        """Each address in the resolver's order until one connects, as `create_connection` does."""
        dial_host, dial_port = (
            (self._proxy.host, self._proxy.port) if self._proxy is not None else (self._host, self._port)
        )
        if self._resolver is None:  # an IP literal
            hosts = [(dial_host, 0)]
        else:
            hosts = [(info[4][0], info[0]) for info in await self._resolver.resolve(dial_host, dial_port)]
        failures: list[OSError] = []
        for host, family in hosts:
            try:
                if self._proxy is not None and self._tls is not None:
                    return await self._tunnel(host, dial_port, family, self._proxy, self._tls)
                return await self._dial(host, dial_port, family)
            except OSError as exc:
                failures.append(exc)
        if len(failures) == 1:
            raise failures[0]
        raise OSError(f"every address failed: {'; '.join(str(f) for f in failures)}")

    async def _dial(self, host: str, port: int, family: int) -> Connection:
        """Straight to the upstream, or to a proxy that takes absolute-form http requests."""
        loop = asyncio.get_running_loop()
        tls = self._tls if self._proxy is None else None
        _, conn = await loop.create_connection(
            lambda: Connection(loop, self._lost),
            host,
            port,
            family=family,
            ssl=tls,
            server_hostname=self._host if tls is not None else None,
        )
        return conn

    async def _tunnel(
        self, host: str, port: int, family: int, proxy: Proxy, tls: ssl.SSLContext
    ) -> Connection:
        """CONNECT through the proxy, then TLS with the upstream inside the tunnel."""
        loop = asyncio.get_running_loop()
        target = f"{self._host}:{self._port}"
        transport, reply = await loop.create_connection(
            lambda: ConnectReply(loop, proxy, target), host, port, family=family
        )
        try:
            transport.write(connect_request(proxy, self._host, self._port, self._user_agent))
            await reply.answered
            if reply.stray:
                raise ConnectFailed(f"proxy {proxy.display} sent bytes ahead of the upstream's")
            conn = Connection(loop, self._lost)
            inner = await loop.start_tls(transport, conn, tls, server_hostname=self._host)
        except BaseException:
            transport.abort()
            raise
        if inner is None:  # pragma: no cover (only when the transport closed mid-handshake)
            raise ConnectFailed(f"the tunnel through proxy {proxy.display} closed during TLS")
        conn.connection_made(inner)  # start_tls does not call it
        return conn

    def release(self, conn: Connection) -> None:
        """An answer read to its end: keep the connection for the next request if it can be."""
        if self.closed or not conn.keep_alive or conn.closed or len(self._idle) >= self._max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(self._expiry, self._close_expired)
        self._wake_one()

    def _close_expired(self) -> None:
        """Close what has been idle past the expiry (the list's oldest are first), then come back
        when the next one will be."""
        self._sweep = None
        now = time.monotonic()
        keep = 0
        for conn in self._idle:
            if conn.closed or now - conn.idle_since >= self._expiry:
                conn.close()
            else:
                self._idle[keep] = conn
                keep += 1
        del self._idle[keep:]
        if self._idle and not self.closed:
            due = self._idle[0].idle_since + self._expiry - now
            self._sweep = asyncio.get_running_loop().call_later(max(due, 0.01), self._close_expired)

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
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in self._idle:
            conn.close()
        self._idle.clear()
