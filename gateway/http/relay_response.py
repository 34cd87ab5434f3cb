"""The streamed answer's response: Starlette's `StreamingResponse` without its task group.

Under uvicorn (which declares ASGI spec 2.3) Starlette runs every stream in an anyio task group:
the writer as a second task beside a disconnect listener, and a cancellation delivered to both at
the end of every stream, about a tenth of the gateway's CPU per streamed request (profiled). Here
the body is written from the handler's own task inside one cancel scope, and a plain asyncio task
listens for the client leaving and cancels that scope, so a client that leaves mid-stream still
stops the relay, and with it the upstream call, at once.
"""

from __future__ import annotations

import asyncio

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.http.guard import CLIENT_LIVENESS, Liveness


class RelayResponse(StreamingResponse):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        liveness: Liveness | None = scope.get(CLIENT_LIVENESS)
        with anyio.CancelScope() as relay:
            listener = asyncio.get_running_loop().create_task(_cancel_on_disconnect(receive, relay))
            try:
                await self._relay(send, liveness)
            finally:
                listener.cancel()
        # Cancelled while waiting to write, the relay is left suspended at a `yield`: close it now,
        # so its `finally` (the ledger row, the budget, the upstream connection) runs at once
        # rather than whenever the generator is collected.
        aclose = getattr(self.body_iterator, "aclose", None)
        if aclose is not None:
            await aclose()
        if self.background is not None:
            await self.background()

    async def _relay(self, send: Send, liveness: Liveness | None) -> None:
        """Starlette's `stream_response` (the body is bytes already), stopping as soon as the client
        is known to be gone: uvicorn's `send` then returns at once without yielding, so when the
        upstream's next chunks are already buffered the relay would run on through the rest of the
        answer before the disconnect listener got a turn, and record it as delivered."""
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if liveness is not None and liveness.gone:
                return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _cancel_on_disconnect(receive: Receive, relay: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            relay.cancel()
            return
