"""How long to wait before a retry: the upstream's Retry-After when it gives one, else full jitter."""

from __future__ import annotations

import random
from collections.abc import Callable

from gateway.config.schema import RetryConfig


def full_jitter(retry: int, *, base: float, cap: float, rand: Callable[[], float] = random.random) -> float:
    """AWS's full jitter: uniform(0, min(cap, base * 2**retry)), retry counted from 0."""
    return rand() * min(cap, base * 2.0**retry)


def plan_delay(
    config: RetryConfig, *, retry: int, retry_after: float | None, remaining: float, rand: Callable[[], float]
) -> float | None:
    """Seconds to sleep before retry number `retry`, or None when waiting makes no sense: the
    upstream asks for longer than we accept, or the wait would not fit in the request's deadline."""
    if retry_after is not None:
        if retry_after > config.max_retry_after_seconds:
            return None
        delay = retry_after
    else:
        delay = full_jitter(
            retry, base=config.backoff_base_seconds, cap=config.backoff_cap_seconds, rand=rand
        )
    return delay if delay < remaining else None
