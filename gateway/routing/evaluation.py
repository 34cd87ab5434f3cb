"""How good a complexity score is at routing: AUROC, RouteLLM's APGR, accuracy and routed share.

Pure Python, so `tollgate route-eval` and the training script compute the same figures the same way.

Definitions (a higher score means "send to the strong model"):

- **AUROC**: the probability that a random `complex` item scores above a random `simple` one, ties
  counting one half (the Mann-Whitney U statistic over n_complex * n_simple).
- **Quality curve**: route the top share `c` of items by score to the strong model and the rest to
  the weak one; `Q(c)` is the mean quality over all items (per-item quality is whatever the data
  holds: 0/1 correctness, a judge score). Items with equal scores are routed together, and the curve
  is linear between tie groups, which is the expectation over a random order inside each group.
- **PGR(c)** (performance gap recovered) = `(Q(c) - Q_weak) / (Q_strong - Q_weak)`, where
  `Q_weak = Q(0)` and `Q_strong = Q(1)`.
- **APGR** = the integral of PGR(c) over strong-call rates c from 0 to 1 (exact trapezoid over every
  tie-group boundary). Random routing scores 0.5 in expectation; an oracle that sends exactly the
  items the strong model alone gets right can exceed 1 when the weak model wins some items. This is
  RouteLLM's metric (Ong et al., arXiv:2406.18665, section 5); their `evaluate.py` samples the curve
  at about ten score quantiles, this computes it at every boundary.
- **Accuracy at a threshold**: the share of labelled items where `score >= threshold` agrees with
  the label being `complex`.
- **Routed share**: the share of items with `score < threshold`, i.e. sent to the cheap tier.
- **AUROC by pair group**: the AUROC's (complex, simple) pairs split by the source of each side.
  The overall AUROC is their pair-weighted mean, so it shows which pairs a router wins: those inside
  one source (difficulty) or those across sources (telling data sets apart).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class CurvePoint:
    """One tie-group boundary of the quality curve."""

    strong_share: float  # share of items routed to the strong model
    quality: float  # mean quality over all items at that share
    threshold: float  # the lowest score routed to the strong model (inf at share 0)


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """AUROC of `scores` for `labels` (True = complex); ValueError unless both classes are present."""
    _same_length(labels, scores)
    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        raise ValueError("AUROC needs at least one complex and one simple item")
    order = sorted(range(len(scores)), key=scores.__getitem__)
    rank_sum = 0.0  # sum of the (tie-averaged, 1-based) ranks of the positives
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        mid_rank = (i + j) / 2 + 1
        rank_sum += mid_rank * sum(1 for k in order[i : j + 1] if labels[k])
        i = j + 1
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def auroc_by_pair_group(
    labels: Sequence[bool], scores: Sequence[float], groups: Sequence[str]
) -> dict[tuple[str, str], tuple[int, float]]:
    """(group of the complex item, group of the simple item) -> (pairs, AUROC over those pairs)."""
    _same_length(labels, scores)
    _same_length(labels, groups)
    out = {}
    for complex_group in sorted({g for g, label in zip(groups, labels, strict=True) if label}):
        for simple_group in sorted({g for g, label in zip(groups, labels, strict=True) if not label}):
            idx = [
                k
                for k, (g, label) in enumerate(zip(groups, labels, strict=True))
                if g == (complex_group if label else simple_group)
            ]
            sub = [labels[k] for k in idx]
            pairs = sum(sub) * (len(sub) - sum(sub))
            out[complex_group, simple_group] = (pairs, auroc(sub, [scores[k] for k in idx]))
    return out


def bootstrap_gain(
    labels: Sequence[bool],
    scores: Sequence[float],
    baseline: Sequence[float],
    *,
    seed: int,
    resamples: int = 1000,
) -> tuple[float, float]:
    """95% interval of AUROC(scores) - AUROC(baseline) over paired bootstrap resamples (seeded)."""
    rng = random.Random(seed)
    n = len(labels)
    gains = []
    for _ in range(resamples):
        idx = [rng.randrange(n) for _ in range(n)]
        sample = [labels[k] for k in idx]
        if all(sample) or not any(sample):
            continue
        gains.append(auroc(sample, [scores[k] for k in idx]) - auroc(sample, [baseline[k] for k in idx]))
    gains.sort()
    return gains[int(0.025 * len(gains))], gains[int(0.975 * len(gains)) - 1]


def quality_curve(
    scores: Sequence[float], weak: Sequence[float], strong: Sequence[float]
) -> list[CurvePoint]:
    """The quality curve at every tie-group boundary, from share 0 (all weak) to 1 (all strong)."""
    _same_length(scores, weak)
    _same_length(scores, strong)
    n = len(scores)
    if n == 0:
        raise ValueError("no items")
    order = sorted(range(n), key=lambda k: -scores[k])
    total = float(sum(weak))
    points = [CurvePoint(0.0, total / n, float("inf"))]
    i = 0
    while i < n:
        j = i
        while j + 1 < n and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        total += sum(strong[k] - weak[k] for k in order[i : j + 1])
        points.append(CurvePoint((j + 1) / n, total / n, scores[order[i]]))
        i = j + 1
    return points


def apgr(scores: Sequence[float], weak: Sequence[float], strong: Sequence[float]) -> float:
    """Average performance gap recovered (see the module docstring); ValueError when the strong
    and weak models are equally good on these items, as there is then no gap to recover."""
    curve = quality_curve(scores, weak, strong)
    low, high = curve[0].quality, curve[-1].quality
    if high == low:
        raise ValueError("the strong and weak models have the same mean quality: no gap to recover")
    area = sum((b.strong_share - a.strong_share) * (a.quality + b.quality) / 2 for a, b in pairwise(curve))
    return (area - low) / (high - low)


def quality_at(curve: Sequence[CurvePoint], strong_share: float) -> float:
    """Mean quality when `strong_share` of items go to the strong model (linear between points)."""
    if not curve:
        raise ValueError("empty curve")
    for a, b in pairwise(curve):
        if a.strong_share <= strong_share <= b.strong_share:
            if b.strong_share == a.strong_share:
                return b.quality
            t = (strong_share - a.strong_share) / (b.strong_share - a.strong_share)
            return a.quality + t * (b.quality - a.quality)
    return curve[-1].quality if strong_share > curve[-1].strong_share else curve[0].quality


def threshold_for_share(scores: Sequence[float], strong_share: float) -> float:
    """The score threshold that sends (about) `strong_share` of these items to the strong model."""
    if not scores:
        raise ValueError("no scores")
    ordered = sorted(scores, reverse=True)
    k = round(strong_share * len(ordered))
    if k <= 0:
        return float("inf")
    return ordered[min(k, len(ordered)) - 1]


def accuracy_at(labels: Sequence[bool], scores: Sequence[float], threshold: float) -> float:
    """Share of items where `score >= threshold` (strong) agrees with the label (True = complex)."""
    _same_length(labels, scores)
    if not labels:
        raise ValueError("no items")
    hits = sum(1 for label, score in zip(labels, scores, strict=True) if (score >= threshold) == label)
    return hits / len(labels)


def routed_share(scores: Sequence[float], threshold: float) -> float:
    """Share of items sent to the cheap tier (`score < threshold`)."""
    if not scores:
        raise ValueError("no scores")
    return sum(1 for score in scores if score < threshold) / len(scores)


def _same_length(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise ValueError(f"length mismatch: {len(a)} != {len(b)}")
