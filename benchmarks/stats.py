"""Percentiles by nearest rank: no interpolation, so a reported p99 is a latency that really happened."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Summary:
    """A latency distribution in milliseconds."""

    count: int
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    max: float

    def as_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def percentile(sorted_values: list[int], q: float) -> int:
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def summarize(values_ns: list[int]) -> Summary | None:
    if not values_ns:
        return None
    ordered = sorted(values_ns)
    ms = 1e6
    return Summary(
        count=len(ordered),
        p50=percentile(ordered, 0.50) / ms,
        p90=percentile(ordered, 0.90) / ms,
        p99=percentile(ordered, 0.99) / ms,
        mean=sum(ordered) / len(ordered) / ms,
        min=ordered[0] / ms,
        max=ordered[-1] / ms,
    )
