"""What the app needs from a wire dialect (routes, auth, error shapes), with the defaults most share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

from sandbox.core.asgi import Exchange
from sandbox.core.errors import ApiError
from sandbox.faults import FaultRule

__all__ = ["Dialect", "Handler", "HeaderList"]

Handler = Callable[[Exchange], Awaitable[None]]
HeaderList = list[tuple[str, str]]


class Dialect(ABC):
    """One upstream API's wire format; the app routes, injects faults and catches errors around it."""

    # The message of the 500 the app answers when a handler crashes.
    crash_message = "Internal server error"

    @abstractmethod
    def routes(self) -> dict[tuple[str, str], Handler]:
        """The fixed endpoints, by (method, path)."""

    def resolve(self, method: str, path: str) -> Handler | None:
        """A handler for a path with parameters in it (checked after the fixed routes)."""
        return None

    def request_facts(self, ex: Exchange, payload: object) -> tuple[str | None, bool]:
        """The model and stream flag that fault rules match on (from the JSON body by default)."""
        if not isinstance(payload, dict):
            return None, False
        model = payload.get("model")
        return (model if isinstance(model, str) else None), bool(payload.get("stream"))

    def authenticate(self, ex: Exchange) -> None:  # noqa: B027 - optional hook
        """Raise an ApiError when the request's credentials are missing (no check by default)."""

    @abstractmethod
    def error(self, error: ApiError) -> bytes:
        """The JSON body of an error answer (and of a mid-stream error event)."""

    def error_response(self, error: ApiError) -> tuple[bytes, HeaderList]:
        """Body and headers of an error answer."""
        return self.error(error), list(error.headers)

    @abstractmethod
    def fault_error(self, rule: FaultRule, model: str | None) -> ApiError:
        """The error a ``status`` or ``stream_error`` fault answers with."""

    @abstractmethod
    def malformed_json(self) -> ApiError:
        """The 400 for a body that is not JSON."""

    async def not_found(self, ex: Exchange, *, known: bool) -> None:
        """Answer a path no handler serves (``known``: the path exists for another method)."""
        status = 405 if known else 404
        raise ApiError(status, f"Invalid URL ({ex.method} {ex.path})")

    def reset(self) -> None:  # noqa: B027 - optional hook
        """Forget state the dialect keeps itself (``POST /_sandbox/reset``)."""
