"""Shared pieces of router training and evaluation: the labelled rows, their inputs, a seeded numpy fit.

Rows come only from the shared routing data (`/work/shared/data/routing/` or `$TOLLGATE_ROUTING_DATA`):
`train.jsonl` for CLINC150, NQ-open and MATH-500, `routellm_outcomes.jsonl` for RouteLLM's MMLU and
GSM8K outcome rows (a superset of those in train.jsonl, same ids and splits), and the labelled rows
of `modern_pair_outcomes.jsonl`. Rows whose `split` is `dev` are never fitted on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gateway.routing.embedding import Embedder, default_embedder
from gateway.routing.semantic import FEATURES, Ask, _ask_of

DATA_DIR = Path(os.environ.get("TOLLGATE_ROUTING_DATA", "/work/shared/data/routing"))
SEED = 20261207


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    source: str
    prompt: str
    complex: bool
    dev: bool  # in the dev split: scored, never fitted


def load_rows(data_dir: Path = DATA_DIR) -> list[Row]:
    """Every labelled row, one per id, in file order."""
    rows: dict[str, Row] = {}

    def read(name: str, keep: set[str] | None) -> None:
        with (data_dir / name).open(encoding="utf-8") as handle:
            for line in handle:
                item = json.loads(line)
                if item.get("label") not in ("simple", "complex"):
                    continue
                if keep is not None and item["source"] not in keep:
                    continue
                rows.setdefault(
                    item["id"],
                    Row(
                        item["id"],
                        item["source"],
                        item["prompt"],
                        item["label"] == "complex",
                        item.get("split") == "dev",
                    ),
                )

    read("train.jsonl", {"clinc150", "nq_open", "math500"})
    read("routellm_outcomes.jsonl", None)
    read("modern_pair_outcomes.jsonl", None)
    return list(rows.values())


def ask_of(row: Row) -> Ask:
    return _ask_of(row.prompt, "")


def embed_rows(rows: Sequence[Row], embedder: Embedder | None = None) -> np.ndarray:
    embedder = embedder or default_embedder()
    return np.stack([embedder.embed(ask_of(row).text) for row in rows]).astype(np.float64)


def feature_rows(rows: Sequence[Row], names: Sequence[str]) -> np.ndarray:
    reads = [FEATURES[name] for name in names]
    asks = [ask_of(row) for row in rows]
    return np.asarray([[read(ask) for read in reads] for ask in asks], dtype=np.float64).reshape(
        len(rows), len(names)
    )


def balanced_weights(rows: Sequence[Row]) -> np.ndarray:
    """Each source weighs the same in total (MMLU has 40 times CLINC150's rows), then the two classes
    are scaled to equal total weight so 0.5 is the natural operating threshold."""
    sources = [row.source for row in rows]
    counts = {s: sources.count(s) for s in set(sources)}
    w = np.asarray([1.0 / counts[s] for s in sources])
    y = np.asarray([row.complex for row in rows])
    if y.any() and (~y).any():
        w[y] *= w[~y].sum() / w[y].sum()
    return w * (len(rows) / w.sum())


@dataclass(frozen=True, slots=True)
class Fitted:
    """A logistic regression: coefficients over [embedding | standardised features], intercept."""

    embedding_weights: np.ndarray
    feature_weights: np.ndarray
    means: np.ndarray
    scales: np.ndarray
    intercept: float

    def logits(self, emb: np.ndarray, feats: np.ndarray) -> np.ndarray:
        z = np.clip((feats - self.means) / self.scales, -4.0, 4.0)
        return emb @ self.embedding_weights + z @ self.feature_weights + self.intercept


def fit_logistic(
    emb: np.ndarray, feats: np.ndarray, y: np.ndarray, w: np.ndarray, *, l2: float = 1.0, iterations: int = 25
) -> Fitted:
    """Weighted L2-regularised logistic regression by Newton's method (deterministic: no sampling)."""
    means = feats.mean(axis=0) if feats.shape[1] else np.zeros(0)
    scales = feats.std(axis=0) if feats.shape[1] else np.zeros(0)
    scales = np.where(scales > 1e-9, scales, 1.0)
    z = np.clip((feats - means) / scales, -4.0, 4.0)
    x = np.hstack([emb, z, np.ones((len(y), 1))])
    beta = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2 / len(y) * w.sum())
    penalty[-1] = 0.0
    target = y.astype(np.float64)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ beta, -30, 30)))
        gradient = x.T @ (w * (p - target)) + penalty * beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-7:
            break
    d = emb.shape[1]
    return Fitted(beta[:d], beta[d:-1], means, scales, float(beta[-1]))
