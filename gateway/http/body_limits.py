"""What the hot path makes of a request body that never fully arrives: a client that left mid-body is
a 499 (not a 500 with a traceback), and a body the connection protocol timed out is a 408, so the
ledger row says what happened either way."""

from __future__ import annotations

from starlette.types import Message, Receive, Scope

from gateway.errors import GatewayError
from gateway.http.guard import BODY_TIMED_OUT


class BodyTimeout(GatewayError):
    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class ClientClosed(GatewayError):
    status = 499
    type = "client_closed"
    code = "client_closed"


def guard_body(scope: Scope, receive: Receive) -> Receive:
    """`receive`, raising BodyTimeout or ClientClosed if the connection ends before the body does.
    Once the body is complete, messages pass through untouched (a disconnect then is a normal one)."""
    done = False

    async def guarded() -> Message:
        nonlocal done
        message = await receive()
        if done:
            return message
        if message["type"] == "http.request":
            done = not message.get("more_body", False)
        elif message["type"] == "http.disconnect":
            done = True
            if scope.get(BODY_TIMED_OUT):
                raise BodyTimeout("the request body did not arrive in time")
            raise ClientClosed("client went away before sending the whole body")
        return message

    return guarded
