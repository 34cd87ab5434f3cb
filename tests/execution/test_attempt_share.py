"""Each attempt's share of the deadline: even across what is left, floored, never over the rest."""

from __future__ import annotations

import pytest

from gateway.execution.executor import attempt_bound


@pytest.mark.parametrize(
    ("remaining", "left", "floor", "bound"),
    [
        (300.0, 0, 2.0, 300.0),  # the last deployment: everything that remains
        (300.0, 1, 2.0, 150.0),  # one fallback behind: half
        (300.0, 2, 2.0, 100.0),
        (3.0, 2, 2.0, 2.0),  # the floor, not a useless 1 s sliver
        (1.5, 3, 2.0, 1.5),  # but never more than remains
    ],
)
def test_attempt_bound(remaining: float, left: int, floor: float, bound: float) -> None:
    assert attempt_bound(remaining, left, floor) == bound
