"""Server-sent events out of an Exchange, with the stream faults (drop, error event) applied."""

from __future__ import annotations

from sandbox.core.asgi import Exchange
from sandbox.faults import FaultRule

__all__ = ["SSEWriter", "StreamCut"]


class StreamCut(Exception):
    """The stream was ended early by a fault; the caller stops generating."""


class SSEWriter:
    """Writes ``data:`` events, counting them so a fault can cut the stream after N.

    ``error_name`` names the event that carries a ``stream_error`` fault's body
    (Anthropic's ``event: error``); ``newline`` is the line ending (Google's
    servers end SSE lines with CRLF).
    """

    __slots__ = ("_cut_at", "_error_event", "_exchange", "_fault", "_nl", "sent")

    def __init__(
        self,
        exchange: Exchange,
        fault: FaultRule | None = None,
        *,
        error_event: bytes = b"",
        error_name: str | None = None,
        newline: bytes = b"\n",
    ) -> None:
        self._exchange = exchange
        self._fault = fault
        self._nl = newline
        self._error_event = self._frame(error_event, error_name)
        self.sent = 0
        self._cut_at = -1
        if fault is not None and fault.kind == "drop_after":
            self._cut_at = fault.chunks
        elif fault is not None and fault.kind == "stream_error":
            self._cut_at = fault.after_chunks

    def _frame(self, payload: bytes, name: str | None) -> bytes:
        head = b"event: " + name.encode() + self._nl if name else b""
        return head + b"data: " + payload + self._nl + self._nl

    async def event(self, payload: bytes, *, name: str | None = None) -> None:
        """Send one event (``event: name`` line first when given)."""
        if self.sent == self._cut_at:
            await self._cut()
        await self._exchange.write(self._frame(payload, name))
        self.sent += 1

    async def close(self, final: bytes = b"data: [DONE]\n\n") -> None:
        """End the stream (OpenAI's ``[DONE]`` sentinel by default; ``b""`` for none)."""
        if self.sent == self._cut_at:
            await self._cut()
        await self._exchange.end(final)

    async def _cut(self) -> None:
        assert self._fault is not None
        if self._fault.kind == "drop_after":
            await self._exchange.abort(reset=False)
        else:
            # A mid-stream error is an event holding an error object, then the end.
            await self._exchange.end(self._error_event)
        raise StreamCut(self._fault.kind)
