"""Stream ``streamGenerateContent``: SSE frames (``?alt=sse``) or one JSON array, paced and faultable.

With ``alt=sse`` each event is ``data: <GenerateContentResponse>`` with CRLF
line endings and no ``[DONE]``; without it the body is a JSON array whose
elements arrive one by one. A ``stream_error`` fault ends either with an
``{"error": {...}}`` element.
"""

from __future__ import annotations

import asyncio

from sandbox.core.asgi import Exchange
from sandbox.core.dialect import HeaderList
from sandbox.core.engine import Run
from sandbox.core.sse import SSEWriter, StreamCut
from sandbox.faults import FaultRule
from sandbox.gemini.errors import error_body, fault_error
from sandbox.gemini.response import ResponseWriter

__all__ = ["JsonArrayWriter", "stream_response"]

_JSON = b"application/json; charset=UTF-8"
# Gemini streams in bursts of several tokens, not token by token.
_FRAME_TOKENS = 8


class JsonArrayWriter:
    """Writes the elements of a streamed JSON array; a fault cuts it after N elements."""

    def __init__(
        self, exchange: Exchange, fault: FaultRule | None = None, *, error_event: bytes = b""
    ) -> None:
        self._exchange = exchange
        self._fault = fault
        self._error = error_event
        self.sent = 0
        self._cut_at = -1
        if fault is not None and fault.kind == "drop_after":
            self._cut_at = fault.chunks
        elif fault is not None and fault.kind == "stream_error":
            self._cut_at = fault.after_chunks

    def _lead(self) -> bytes:
        return b"[" if self.sent == 0 else b"\r\n,"

    async def event(self, payload: bytes) -> None:
        """Send one element."""
        if self.sent == self._cut_at:
            await self._cut()
        await self._exchange.write(self._lead() + payload)
        self.sent += 1

    async def close(self) -> None:
        """Close the array."""
        if self.sent == self._cut_at:
            await self._cut()
        await self._exchange.end(b"[]" if self.sent == 0 else b"]")

    async def _cut(self) -> None:
        assert self._fault is not None
        if self._fault.kind == "drop_after":
            await self._exchange.abort(reset=False)
        else:
            await self._exchange.end(self._lead() + self._error + b"]")
        raise StreamCut(self._fault.kind)


async def stream_response(
    ex: Exchange, writer: ResponseWriter, run: Run, *, offset: int, sse: bool, headers: HeaderList
) -> None:
    """Send the frames of ``writer``, each when its first token is due (after ``offset`` thoughts)."""
    error = error_body(fault_error(ex.fault)) if ex.fault else b""
    out: SSEWriter | JsonArrayWriter
    if sse:
        out = SSEWriter(ex, ex.fault, error_event=error, newline=b"\r\n")
    else:
        out = JsonArrayWriter(ex, ex.fault, error_event=error)
    watcher = None if run.instant else asyncio.ensure_future(ex.disconnected())
    try:
        await run.until_token(offset)
        await ex.start_stream(headers=headers, content_type=None if sse else _JSON)
        for pos, frame in writer.frames(_FRAME_TOKENS):
            await run.until_token(offset + pos)
            if watcher is not None and watcher.done():
                run.finish(aborted=True)
                return
            await out.event(frame)
        if isinstance(out, SSEWriter):
            await out.close(b"")
        else:
            await out.close()
        run.finish()
    except StreamCut:
        run.finish(aborted=True)
    finally:
        if watcher is not None:
            watcher.cancel()
