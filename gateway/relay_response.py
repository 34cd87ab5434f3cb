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


class RelayResponse(StreamingResponse):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with anyio.CancelScope() as relay:
            listener = asyncio.get_running_loop().create_task(_cancel_on_disconnect(receive, relay))
            try:
                await self.stream_response(send)
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


async def _cancel_on_disconnect(receive: Receive, relay: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            relay.cancel()
            return
