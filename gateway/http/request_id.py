"""Pure-ASGI middleware: every response carries `x-request-id` (the client's, when it sent a sane one)
and `x-tollgate-model`."""

from __future__ import annotations

import os

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.policy.keys import SCHEME, is_well_formed

REQUEST_ID_KEY = "tollgate.request_id"
CLIENT_REQUEST_ID_KEY = "tollgate.client_request_id"
_MAX_CLIENT_ID = 128


def client_request_id(raw: bytes | None) -> str | None:
    """A client-sent id is echoed only if it is short printable ASCII; anything else is ignored, and
    so is a virtual key sent by mistake in this header, which would otherwise be stored in the
    ledger and echoed back."""
    if not raw or len(raw) > _MAX_CLIENT_ID:
        return None
    if not all(0x21 <= b <= 0x7E for b in raw):
        return None
    text = raw.decode("ascii")
    return None if text.startswith(SCHEME) and is_well_formed(text) else text


def assign_request_id(scope: Scope) -> bytes:
    """Give the request its own id (and note the client's, if it sent a sane one); returns the id to
    echo in `x-request-id`: the client's when there is one."""
    sent = None
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            sent = client_request_id(value)
            break
    own = os.urandom(16).hex()  # as unique as uuid4().hex, at a third of the cost
    scope[REQUEST_ID_KEY] = own
    scope[CLIENT_REQUEST_ID_KEY] = sent
    return (sent or own).encode()


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        echoed = assign_request_id(scope)

        async def send_with_ids(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                names = {name for name, _ in headers}
                if b"x-request-id" not in names:
                    headers.append((b"x-request-id", echoed))
                if b"x-tollgate-model" not in names:
                    headers.append((b"x-tollgate-model", b"none"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_ids)
