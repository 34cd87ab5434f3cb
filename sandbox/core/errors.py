"""The dialect-neutral error answer: an HTTP status, a message, wire fields and extra headers."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus

__all__ = ["ApiError", "phrase"]


class ApiError(Exception):
    """An error answer; each dialect writes the body in its own shape.

    ``type`` is the dialect's error kind (OpenAI ``type``, Anthropic
    ``error.type``, Google ``status``); ``param`` and ``code`` are OpenAI's.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        param: str | None = None,
        code: str | None = None,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = list(headers)


def phrase(status: int) -> str:
    """The HTTP reason phrase of ``status`` (a generic one for unknown codes)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Server Error" if status >= 500 else "Client Error"
