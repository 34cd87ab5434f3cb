"""The upstream error taxonomy: what went wrong talking to a provider, and whether trying again can help.

    ProviderError                  any failure reaching or using an upstream
    ├── UpstreamTimeout            connect / first byte / total deadline passed   (retryable, 504)
    ├── UpstreamUnreachable        DNS, refused connection, reset               (retryable, 502)
    ├── UpstreamRateLimited        429, may carry Retry-After                   (retryable, 429)
    │   └── UpstreamOverloaded     529 overloaded: the provider's capacity, not a quota (retryable, 503)
    ├── UpstreamUnavailable        5xx from the upstream                        (retryable, 502)
    ├── UpstreamBadResponse        a body we cannot read                        (retryable, 502)
    └── UpstreamRejected           4xx: the request itself is wrong upstream    (not retryable)
        └── ContextLengthExceeded  prompt too long for the model's window       (not retryable)

Adapters map every low-level failure into this tree in exactly one function each; the gateway turns
it into an HTTP error body in exactly one place.
"""

from __future__ import annotations

import email.utils
import time


class ProviderError(Exception):
    """A failure talking to an upstream; `status` is what the gateway answers the client with."""

    status: int = 502
    type: str = "upstream_error"
    code: str = "upstream_error"
    retryable: bool = True

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        upstream_status: int | None = None,
        retry_after: float | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.upstream_status = upstream_status
        self.retry_after = retry_after
        if code is not None:
            self.code = code


class UpstreamTimeout(ProviderError):
    status = 504
    type = "upstream_timeout"
    code = "upstream_timeout"


class UpstreamUnreachable(ProviderError):
    status = 502
    type = "upstream_unreachable"
    code = "upstream_unreachable"


class UpstreamRateLimited(ProviderError):
    status = 429
    type = "upstream_rate_limited"
    code = "upstream_rate_limited"


class UpstreamOverloaded(UpstreamRateLimited):
    """Anthropic's 529 `overloaded_error`: the provider is out of capacity for everyone, not this
    caller's quota. Retried like a rate limit; once retries run out the client gets 503 (529
    `overloaded_error` on `/v1/messages`), never a 429 it would read as its own limit."""

    status = 503
    type = "upstream_overloaded"
    code = "upstream_overloaded"


class UpstreamUnavailable(ProviderError):
    status = 502
    type = "upstream_unavailable"
    code = "upstream_unavailable"


class UpstreamBadResponse(ProviderError):
    status = 502
    type = "upstream_bad_response"
    code = "upstream_bad_response"


class UpstreamRejected(ProviderError):
    """The upstream said the request is wrong (4xx); the same request will fail again anywhere."""

    type = "invalid_request_error"
    code = "upstream_rejected"
    retryable = False

    def __init__(self, message: str, *, status: int = 400, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.status = status


class ContextLengthExceeded(UpstreamRejected):
    code = "context_length_exceeded"


def invalid_parameter(message: str) -> UpstreamRejected:
    """A client request a provider cannot take (an out-of-range parameter, an unsupported part):
    a 400 raised before any network call."""
    return UpstreamRejected(message, status=400, code="invalid_parameter")


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` (seconds or HTTP date) or `retry-after-ms` value."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if "," in value or " " in value else None
        if parsed is None:
            return None
        seconds = parsed.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds)
