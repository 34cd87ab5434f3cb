"""The routing metrics against examples worked by hand."""

from __future__ import annotations

import pytest

from gateway.routing import evaluation


def test_auroc_hand_computed() -> None:
    # complex items score 0.8 and 0.4, simple ones 0.6 and 0.2: of the four (complex, simple) pairs,
    # (0.8, 0.6), (0.8, 0.2) and (0.4, 0.2) are ordered right and (0.4, 0.6) wrong -> 3/4.
    assert evaluation.auroc([True, False, True, False], [0.8, 0.6, 0.4, 0.2]) == 0.75


def test_auroc_ties_count_half() -> None:
    assert evaluation.auroc([True, False], [0.5, 0.5]) == 0.5
    # pairs: (0.5 vs 0.5) a tie = 0.5, (0.9 vs 0.5) right = 1 -> 1.5 / 2
    assert evaluation.auroc([True, True, False], [0.5, 0.9, 0.5]) == 0.75


def test_auroc_extremes_and_errors() -> None:
    assert evaluation.auroc([False, False, True], [1, 2, 3]) == 1.0
    assert evaluation.auroc([True, False, False], [1, 2, 3]) == 0.0
    with pytest.raises(ValueError):
        evaluation.auroc([True, True], [0.1, 0.2])
    with pytest.raises(ValueError):
        evaluation.auroc([True, False], [0.1])


def test_quality_curve_and_apgr_hand_computed() -> None:
    scores = [0.9, 0.7, 0.4, 0.1]
    weak = [0.0, 1.0, 1.0, 0.0]
    strong = [1.0, 1.0, 0.0, 1.0]
    # Route the top k to the strong model: quality 2/4, 3/4, 3/4, 2/4, 3/4 at shares 0, .25, .5, .75, 1.
    curve = evaluation.quality_curve(scores, weak, strong)
    assert [(p.strong_share, p.quality) for p in curve] == [
        (0.0, 0.5),
        (0.25, 0.75),
        (0.5, 0.75),
        (0.75, 0.5),
        (1.0, 0.75),
    ]
    assert [p.threshold for p in curve[1:]] == [0.9, 0.7, 0.4, 0.1]
    # PGR at those shares: 0, 1, 1, 0, 1; trapezoids of width 1/4: (0.5 + 1 + 0.5 + 0.5) / 4 = 0.625.
    assert evaluation.apgr(scores, weak, strong) == pytest.approx(0.625)


def test_apgr_of_one_tie_group_is_random_routing() -> None:
    weak = [0.0, 1.0, 1.0, 0.0]
    strong = [1.0, 1.0, 0.0, 1.0]
    assert evaluation.apgr([0.3] * 4, weak, strong) == pytest.approx(0.5)


def test_apgr_perfect_and_reversed() -> None:
    weak = [1.0, 1.0, 0.0, 0.0]
    strong = [1.0, 1.0, 1.0, 1.0]
    # strong-only items first: PGR 0, .5, 1, 1, 1 -> trapezoids (.25 + .75 + 1 + 1) / 4 = 0.75;
    # last: PGR 0, 0, 0, .5, 1 -> (0 + 0 + .25 + .75) / 4 = 0.25. The two mirror each other around 0.5.
    assert evaluation.apgr([0.1, 0.2, 0.9, 0.8], weak, strong) == pytest.approx(0.75)
    assert evaluation.apgr([0.9, 0.8, 0.1, 0.2], weak, strong) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        evaluation.apgr([0.1, 0.2], [1.0, 0.0], [0.0, 1.0])  # same mean quality: no gap


def test_quality_at_interpolates() -> None:
    curve = evaluation.quality_curve([0.9, 0.1], [0.0, 0.0], [1.0, 1.0])
    assert evaluation.quality_at(curve, 0.0) == 0.0
    assert evaluation.quality_at(curve, 0.25) == pytest.approx(0.25)
    assert evaluation.quality_at(curve, 1.0) == 1.0


def test_threshold_accuracy_routed_share() -> None:
    scores = [0.9, 0.7, 0.4, 0.1]
    assert evaluation.threshold_for_share(scores, 0.5) == 0.7
    assert evaluation.threshold_for_share(scores, 0.0) == float("inf")
    assert evaluation.threshold_for_share(scores, 1.0) == 0.1
    assert evaluation.routed_share(scores, 0.5) == 0.5
    assert evaluation.routed_share(scores, 0.7) == 0.5  # a score equal to the threshold goes strong
    assert evaluation.accuracy_at([True, True, False, False], scores, 0.5) == 1.0
    assert evaluation.accuracy_at([False, True, False, True], scores, 0.5) == 0.5
