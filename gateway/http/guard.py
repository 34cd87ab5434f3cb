"""The HTTP/1.1 connection protocol `tollgate serve` runs: uvicorn's httptools protocol plus the limits
it lacks against slow or hostile clients.

uvicorn (0.54, httptools) puts no bound on the header block (200,000 headers or one 20 MB value are
buffered whole), no deadline on a connection that never finishes its headers, and none on a body that
arrives a byte a minute: each is a slowloris or memory lever. Here the request line and headers must
arrive within `header_timeout_seconds` and stay under `max_header_bytes` / `max_headers`, and the body
within `body_timeout_seconds`; past them the client gets an OpenAI-shaped 408 or 431 and the
connection is closed after a short linger (so a client still writing can read its answer first).
A body that times out is flagged in the ASGI scope, so the hot path bills it as 408
(gateway/http/body_limits.py) rather than as a client that left. On the way out, a client that leaves the
answer unread (its socket accepting nothing) for `send_timeout_seconds` is cut off: uvicorn would
otherwise wait on it forever, and a stream it holds keeps an upstream connection from a fixed-size
pool and a budget reservation.
"""

from __future__ import annotations

import asyncio
import copyreg
import http
import logging
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.config.schema import ServerConfig
from gateway.errors import error_body
from gateway.http.request_id import REQUEST_ID_KEY

log = logging.getLogger("tollgate.http")

BODY_TIMED_OUT = "tollgate.body_timed_out"
# The connection's `Liveness`, in every request's scope: whether the client is still there, readable
# without yielding to the loop (uvicorn's `send` returns silently once the client is gone).
CLIENT_LIVENESS = "tollgate.client"
# How long a refused connection keeps reading (and dropping) what the client still sends, so the
# client can read the refusal instead of meeting a reset.
LINGER_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_header_bytes: int
    max_headers: int
    header_timeout: float
    body_timeout: float
    send_timeout: float


class Liveness:
    """Set when the connection is lost or cut: a relay writing an answer faster than the loop
    runs other tasks would otherwise go on producing it (and reading its upstream) for nobody."""

    __slots__ = ("gone",)

    def __init__(self) -> None:
        self.gone = False


class _Refusal(Exception):
    """Raised inside a parser callback to stop parsing; carries the answer to give."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def refusal_bytes(status: int, message: str, code: str, request_id: str | None = None) -> bytes:
    """A complete HTTP/1.1 response with an OpenAI-shaped error body that closes the connection."""
    body = error_body(message, type="invalid_request_error", code=code)
    head = [
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if request_id:
        head.append(f"x-request-id: {request_id}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


class _LimitedProtocolType(type):
    """The type of a protocol class made for one config's limits; registered with copyreg below so
    the class can be pickled (`tollgate serve --workers N` spawns workers and sends them uvicorn's
    config, this class included), which pickle does by name for ordinary classes."""

    limits: ConnectionLimits


class GuardedHttpToolsProtocol(HttpToolsProtocol, metaclass=_LimitedProtocolType):
    """uvicorn's httptools protocol with header limits and header/body deadlines (see the module)."""

    limits: ClassVar[ConnectionLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_headers = False
        # Two lower bounds on the header block's size: whole lines as parsed, and raw bytes fed while
        # no line had ended (one giant value the parser is still buffering).
        self._parsed_bytes = self._raw_bytes = self._header_count = 0
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._liveness = Liveness()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # A connection that never sends a byte is a slow header too.
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._liveness.gone = True
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: read and drop
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as exc:
            refusal = exc.__context__
            if isinstance(refusal, _Refusal):
                self._refuse(refusal.status, refusal.message, refusal.code)
            else:
                self._refuse(400, "malformed HTTP request", "invalid_http")
            return
        if self._in_headers:
            # Still inside the header block: everything fed so far was header bytes, even a value
            # the parser has not finished (and is buffering).
            self._raw_bytes += len(data)
            if self._raw_bytes > self.limits.max_header_bytes:
                self._refuse(431, self._too_large_message(), "request_header_fields_too_large")

    # Flow control: the transport pauses our writes while the client's socket accepts nothing.
    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.limits.send_timeout, self._send_timed_out)

    def resume_writing(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        super().resume_writing()

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, msg, "invalid_http")

    # Parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        self._parsed_bytes = self._raw_bytes = self._header_count = 0
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_timed_out)

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            raise _Refusal(
                431,
                f"too many request headers; the limit is {self.limits.max_headers}",
                "request_header_fields_too_large",
            )
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()
        self.scope[CLIENT_LIVENESS] = self._liveness  # type: ignore[literal-required]
        if self._body_timer is None and not self.parser.should_upgrade():
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_timed_out)

    def on_message_complete(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    # Limits
    def _count(self, size: int) -> None:
        self._parsed_bytes += size
        if self._parsed_bytes > self.limits.max_header_bytes:
            raise _Refusal(431, self._too_large_message(), "request_header_fields_too_large")

    def _too_large_message(self) -> str:
        return f"request headers exceed the limit of {self.limits.max_header_bytes} bytes"

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # an answer is still being written: no room for a 408
            return
        self._refuse(
            408,
            f"request headers did not arrive within {self.limits.header_timeout:g} s",
            "request_timeout",
        )

    def _body_timed_out(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if cycle is None or cycle.response_started:
            # The answer is out already (a 413, say) and the client is still sending: stop reading.
            self.transport.close()
            return
        scope = cast(dict[str, Any], cycle.scope)
        scope[BODY_TIMED_OUT] = True
        # The application sees the client as gone (and bills a 408); the 408 itself is written here.
        cycle.disconnected = True
        cycle.message_event.set()
        request_id = scope.get(REQUEST_ID_KEY)
        self._refuse(
            408,
            f"request body did not arrive within {self.limits.body_timeout:g} s",
            "request_timeout",
            request_id=request_id if isinstance(request_id, str) else None,
        )

    def _send_timed_out(self) -> None:
        """The client has read none of the answer for `send_timeout`: drop the connection. The
        application sees the client gone (a stream's relay stops, its upstream call is aborted and
        its row written as 499 with the usage so far), and the buffered answer is discarded."""
        self._send_timer = None
        log.info(
            "closing a connection whose client read nothing for %g s (server.send_timeout_seconds)",
            self.limits.send_timeout,
        )
        self.transport.abort()  # connection_lost marks the client gone before any writer resumes

    def _refuse(self, status: int, message: str, code: str, *, request_id: str | None = None) -> None:
        """Answer, stop parsing, drop whatever else arrives, and close after a short linger."""
        if self._refused or self.transport.is_closing():
            return
        self._refused = True
        self._in_headers = False
        self._cancel_timers()
        self._unset_keepalive_if_required()
        self.transport.write(refusal_bytes(status, message, code, request_id))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.flow.resume_reading()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = self._send_timer = None


def guarded_protocol(server: ServerConfig) -> type[GuardedHttpToolsProtocol]:
    """The protocol class with this config's limits (uvicorn instantiates it per connection)."""
    return _protocol_for(
        ConnectionLimits(
            max_header_bytes=server.max_header_bytes,
            max_headers=server.max_headers,
            header_timeout=server.header_timeout_seconds,
            body_timeout=server.body_timeout_seconds,
            send_timeout=server.send_timeout_seconds,
        )
    )


def _protocol_for(limits: ConnectionLimits) -> type[GuardedHttpToolsProtocol]:
    made = _LimitedProtocolType("TollgateHttpProtocol", (GuardedHttpToolsProtocol,), {"limits": limits})
    return cast(type[GuardedHttpToolsProtocol], made)


def _reduce_protocol(cls: _LimitedProtocolType) -> tuple[Any, ...]:
    return (_protocol_for, (cls.limits,))


copyreg.pickle(_LimitedProtocolType, _reduce_protocol)


def uvicorn_settings(server: ServerConfig) -> dict[str, Any]:
    """The uvicorn options `tollgate serve` uses (and the chaos tests, so they test the same server)."""
    return {
        "http": guarded_protocol(server),
        # No WebSocket routes: "auto" would import the websockets package (~19 MB of RSS) for nothing.
        "ws": "none",
        "timeout_keep_alive": server.keep_alive_seconds,
        "access_log": False,
    }
