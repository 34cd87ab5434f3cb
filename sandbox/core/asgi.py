"""Raw ASGI plumbing: one HTTP exchange with JSON, SSE and connection-abort primitives.

The sandbox talks ASGI directly (no framework) so the instant profile costs as
little CPU as possible and so it can reach the server's transport to abort a
connection, which no framework exposes.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from sandbox.faults import FaultRule

__all__ = ["Exchange", "Receive", "Scope", "Send"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
HeaderPairs = Iterable[tuple[str, str]]

_SSE = ((b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"))


class Exchange:
    """One HTTP request and its response, written through the raw ASGI ``send``."""

    __slots__ = ("body", "fault", "method", "path", "payload", "receive", "scope", "send", "started")

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.body = b""
        self.started = False
        # Set by the app before a handler runs: the parsed JSON body (None when
        # empty) and a stream fault (drop_after / stream_error) to apply.
        self.payload: Any = None
        self.fault: FaultRule | None = None

    def header(self, name: bytes) -> str | None:
        """The first value of a (lower-case) request header, or None."""
        for key, value in self.scope["headers"]:
            if key == name:
                return bytes(value).decode("latin-1")
        return None

    def query(self, name: str) -> str | None:
        """The first value of a query-string parameter, or None."""
        raw = bytes(self.scope.get("query_string", b"")).decode("latin-1")
        for key, value in parse_qsl(raw, keep_blank_values=True):
            if key == name:
                return value
        return None

    def headers(self) -> dict[str, str]:
        """All request headers as a dict (names lower-case; repeated names joined by ', ')."""
        out: dict[str, str] = {}
        for key, value in self.scope["headers"]:
            name, text = bytes(key).decode("latin-1"), bytes(value).decode("latin-1")
            out[name] = f"{out[name]}, {text}" if name in out else text
        return out

    async def read_body(self) -> bytes:
        """Receive the whole request body."""
        chunks: list[bytes] = []
        while True:
            message = await self.receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        self.body = b"".join(chunks)
        return self.body

    async def respond(
        self,
        status: int,
        body: bytes,
        *,
        content_type: bytes = b"application/json",
        headers: HeaderPairs = (),
    ) -> None:
        """Send a complete response."""
        raw = [
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
            *((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers),
        ]
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": raw})
        await self.send({"type": "http.response.body", "body": body})

    async def start_stream(self, *, headers: HeaderPairs = (), content_type: bytes | None = None) -> None:
        """Send the 200 head of a streamed body: server-sent events unless ``content_type`` is given."""
        head = _SSE if content_type is None else ((b"content-type", content_type),)
        raw = [*head, *((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers)]
        self.started = True
        await self.send({"type": "http.response.start", "status": 200, "headers": raw})

    async def write(self, data: bytes) -> None:
        """Send part of a streamed body."""
        await self.send({"type": "http.response.body", "body": data, "more_body": True})

    async def end(self, data: bytes = b"") -> None:
        """Send the last part of a streamed body."""
        await self.send({"type": "http.response.body", "body": data, "more_body": False})

    async def abort(self, *, reset: bool) -> None:
        """Close the connection now: with a TCP reset (``reset``) or a bare FIN.

        uvicorn keeps its transport on the object whose bound method is ``send``;
        closing it is the only way to drop a connection without sending a
        response. Other servers get an exception, which closes the connection
        when the response has started and becomes a 500 when it has not.
        """
        transport = getattr(getattr(self.send, "__self__", None), "transport", None)
        if transport is None or not hasattr(transport, "abort"):
            raise ConnectionAbortedError("sandbox fault: connection aborted")
        if reset:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
        transport.abort()
        # Wait for the server to see the connection go, so it does not try to
        # answer on our behalf ("ASGI callable returned without a response").
        try:
            async with asyncio.timeout(1.0):
                while (await self.receive())["type"] != "http.disconnect":
                    pass
        except TimeoutError:
            pass

    async def disconnected(self) -> None:
        """Return once the client has gone (used to stop pacing an abandoned stream)."""
        while (await self.receive())["type"] != "http.disconnect":
            pass
