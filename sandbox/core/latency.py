"""Latency profiles: time to first token from uncached prompt tokens, and decode speed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["PROFILES", "LatencyProfile", "ProfileName"]

ProfileName = Literal["managed", "local", "instant"]


@dataclass(frozen=True, slots=True)
class LatencyProfile:
    """A latency model: TTFT = base + prefill per uncached prompt token; then a decode rate."""

    name: str
    base_s: float
    prefill_s_per_token: float
    decode_tokens_per_s: float

    @property
    def instant(self) -> bool:
        """True when the profile never sleeps (benchmarks of the gateway's own overhead)."""
        return self.decode_tokens_per_s <= 0

    def time_to_first_token(self, uncached_tokens: int) -> float:
        """Seconds from admission to the first output token."""
        if self.instant:
            return 0.0
        return self.base_s + self.prefill_s_per_token * max(uncached_tokens, 0)

    @property
    def inter_token_s(self) -> float:
        """Seconds between two output tokens."""
        return 0.0 if self.instant else 1.0 / self.decode_tokens_per_s


PROFILES: dict[str, LatencyProfile] = {
    # A managed API (OpenAI-like): ~40 ms overhead, 0.2 ms per prompt token to
    # prefill (1,800 uncached tokens -> ~0.4 s TTFT), ~50 output tokens/s.
    "managed": LatencyProfile("managed", 0.040, 0.0002, 50.0),
    # A vLLM replica on a local GPU: less overhead, faster prefill and decode.
    "local": LatencyProfile("local", 0.015, 0.00005, 120.0),
    # No sleeping at all.
    "instant": LatencyProfile("instant", 0.0, 0.0, 0.0),
}
