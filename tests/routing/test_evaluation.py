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


def test_auroc_by_pair_group_hand_computed() -> None:
    # exam: complex 0.9, simple 0.5; chat: complex 0.4, simple 0.1 and 0.6.
    labels = [True, False, True, False, False]
    scores = [0.9, 0.5, 0.4, 0.1, 0.6]
    groups = ["exam", "exam", "chat", "chat", "chat"]
    split = evaluation.auroc_by_pair_group(labels, scores, groups)
    assert split == {
        ("chat", "chat"): (2, 0.5),  # 0.4 beats 0.1, loses to 0.6
        ("chat", "exam"): (1, 0.0),  # 0.4 below the exam's simple 0.5
        ("exam", "chat"): (2, 1.0),
        ("exam", "exam"): (1, 1.0),
    }
    # The overall AUROC is the pair-weighted mean of the groups: (1 + 0 + 2 + 1) / 6.
    pairs = sum(n for n, _ in split.values())
    assert sum(n * auc for n, auc in split.values()) / pairs == pytest.approx(
        evaluation.auroc(labels, scores)
    )
    assert pairs == 2 * 3


def test_bootstrap_gain_brackets_the_observed_gain_and_is_seeded() -> None:
    labels = [True, False] * 20
    better = [0.6 + (0.01 * k if label else -0.01 * k) for k, label in enumerate(labels)]
    worse = [float(k % 7) for k in range(len(labels))]
    gain = evaluation.auroc(labels, better) - evaluation.auroc(labels, worse)
    low, high = evaluation.bootstrap_gain(labels, better, worse, seed=1, resamples=200)
    assert low <= gain <= high
    assert low > 0
    assert (low, high) == evaluation.bootstrap_gain(labels, better, worse, seed=1, resamples=200)
    same = evaluation.bootstrap_gain(labels, worse, worse, seed=1, resamples=50)
    assert same == (0.0, 0.0)
