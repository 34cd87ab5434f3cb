"""Recent time to first token per deployment, so a tier's equally priced models rank the faster
one first. Fed by streamed requests only: a non-streamed request's latency includes its whole
decode, which says more about the answer's length than about the deployment. In memory, per
gateway process; a deployment nobody has streamed from lately has no figure and ranks as unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class LatencyBook:
    def __init__(
        self, *, alpha: float = 0.2, max_age_s: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not 0 < alpha <= 1 or max_age_s <= 0:
            raise ValueError("alpha must be in (0, 1] and max_age_s positive")
        self._alpha = alpha
        self._max_age_s = max_age_s
        self._clock = clock
        self._ttft: dict[str, tuple[float, float]] = {}  # deployment key -> (EWMA ms, observed at)

    def observe(self, deployment: str, ttft_ms: float) -> None:
        old = self._ttft.get(deployment)
        value = ttft_ms if old is None else old[0] + self._alpha * (ttft_ms - old[0])
        self._ttft[deployment] = (value, self._clock())

    def ttft_ms(self, deployment: str) -> float | None:
        """The EWMA, or None without an observation in the last `max_age_s`."""
        entry = self._ttft.get(deployment)
        if entry is None or self._clock() - entry[1] > self._max_age_s:
            return None
        return entry[0]
