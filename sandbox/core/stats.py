"""Per-model engine counters and histograms, kept as plain numbers for a cheap request path."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

__all__ = ["EngineStats", "Histogram", "ModelStats"]

# Bucket bounds as vLLM V1 uses them (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
    50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


class Histogram:
    """A fixed-bucket histogram that can record many equal observations at once."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        """Record ``value`` ``times`` times."""
        if times > 0:
            self.counts[bisect_left(self.bounds, value)] += times
            self.total += value * times

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus-style ``(le, cumulative count)`` pairs ending with ``+Inf``."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out

    @property
    def count(self) -> int:
        """Number of observations."""
        return sum(self.counts)


@dataclass(slots=True)
class ModelStats:
    """What one served model has done since start-up."""

    running: int = 0
    waiting: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    cache_queries: int = 0
    cache_hits: int = 0
    preemptions: int = 0
    finished: dict[str, int] = field(default_factory=dict)
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    inter_token: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))

    def finish(self, reason: str) -> None:
        """Count one finished request (vLLM's ``finished_reason``: stop, length, abort)."""
        self.finished[reason] = self.finished.get(reason, 0) + 1


class EngineStats:
    """Stats for every model the sandbox has served."""

    def __init__(self) -> None:
        self.models: dict[str, ModelStats] = {}

    def model(self, name: str) -> ModelStats:
        """The stats of ``name``, created on first use."""
        stats = self.models.get(name)
        if stats is None:
            stats = self.models[name] = ModelStats()
        return stats
