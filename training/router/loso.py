"""Leave-one-source-out: the router's headline figure. Fit on every source but one, score the one left out.

`python -m training.router.loso` prints, per source: n, the AUROC of the semantic head when that
source was held out of fitting, of prompt length, and of the shipped 1.8 classifier (which was
fitted on the RouteLLM and CLINC/NQ rows, so its figures on those are not held out); then the
pooled figure over every held-out score. A source with one class (CLINC150, NQ-open, MATH-500's
labelled rows are all `simple`) gets the share that would route cheap at the operating threshold.

`loso_table(rows, fit, score)` is the library function (for `tollgate route-eval --loso`): `fit`
takes training rows and returns a model, `score` takes the model and rows and returns scores.
`--dims`, `--features`, `--l2` try other heads without shipping them.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

import numpy as np

from gateway.routing.evaluation import auroc
from gateway.routing.semantic import read_ask
from training.router.common import (
    Row,
    balanced_weights,
    embed_rows,
    feature_rows,
    fit_logistic,
    load_rows,
)

Model = TypeVar("Model")
Score = Callable[[Sequence[Row]], list[float]]
DEFAULT_FEATURES = ("log_chars",)  # what the shipped head reads (train.py)


@dataclass(frozen=True, slots=True)
class SourceFigure:
    source: str
    n: int
    n_complex: int
    auroc: float | None  # None when the source has one class
    cheap_share: float  # share scored under the threshold (routed cheap)
    baselines: dict[str, float | None]  # name -> AUROC of that baseline on the same rows
    routed_cheap: float | None = None  # share the default routes + thresholds would answer cheap


def loso_table(
    rows: Sequence[Row],
    fit: Callable[[Sequence[Row]], Model],
    score: Callable[[Model, Sequence[Row]], list[float]],
    *,
    threshold: float = 0.5,
    baselines: dict[str, Score] | None = None,
) -> tuple[list[SourceFigure], SourceFigure]:
    """Per-source held-out figures and the pooled one ("all"). Dev rows are scored, never fitted."""
    baselines = baselines or {"length": lambda rs: [float(len(r.prompt)) for r in rs]}
    figures = []
    pooled_y: list[bool] = []
    pooled: list[float] = []
    pooled_base: dict[str, list[float]] = {name: [] for name in baselines}
    for source in sorted({row.source for row in rows}):
        held = [row for row in rows if row.source == source]
        model = fit([row for row in rows if row.source != source and not row.dev])
        scores = score(model, held)
        labels = [row.complex for row in held]
        pooled_y += labels
        pooled += scores
        base = {}
        for name, baseline in baselines.items():
            values = baseline(held)
            pooled_base[name] += values
            base[name] = _auroc(labels, values)
        figures.append(_figure(source, labels, scores, threshold, base))
    total = _figure(
        "all", pooled_y, pooled, threshold, {n: _auroc(pooled_y, v) for n, v in pooled_base.items()}
    )
    return figures, total


def _figure(
    source: str, labels: list[bool], scores: list[float], threshold: float, base: dict[str, float | None]
) -> SourceFigure:
    cheap = sum(1 for s in scores if s < threshold) / len(scores) if scores else 0.0
    return SourceFigure(source, len(labels), sum(labels), _auroc(labels, scores), cheap, base)


def _auroc(labels: list[bool], scores: Sequence[float]) -> float | None:
    return auroc(labels, list(scores)) if 0 < sum(labels) < len(labels) else None


def render(figures: list[SourceFigure], total: SourceFigure, title: str) -> str:
    names = list(total.baselines)
    head = f"{'source':32} {'n':>6} {'cplx':>5} {'head':>6} " + " ".join(f"{n:>7}" for n in names)
    lines = [title, head + f" {'cheap%':>7} {'routed':>7}"]
    for f in [*figures, total]:
        cells = " ".join(f"{_cell(f.baselines[n]):>7}" for n in names)
        routed = "" if f.routed_cheap is None else f" {f.routed_cheap:7.1%}"
        lines.append(
            f"{f.source:32} {f.n:6} {f.n_complex:5} {_cell(f.auroc):>6} {cells} {f.cheap_share:7.1%}{routed}"
        )
    wins = [f.source for f in figures if f.auroc is not None and f.auroc < (f.baselines.get("length") or 0)]
    lines.append(f"sources where the head ranks below length: {', '.join(wins) or 'none'}")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


class HeadExperiment:
    """Precomputed inputs for every row, so each fold is one Newton fit (seconds, not minutes)."""

    def __init__(self, rows: Sequence[Row], emb: np.ndarray, feats: np.ndarray, *, l2: float) -> None:
        self.index = {row.id: k for k, row in enumerate(rows)}
        self.emb, self.feats, self.l2 = emb, feats, l2

    def fit(self, rows: Sequence[Row]) -> Any:
        idx = [self.index[row.id] for row in rows]
        y = np.asarray([row.complex for row in rows])
        return fit_logistic(self.emb[idx], self.feats[idx], y, balanced_weights(rows), l2=self.l2)

    def score(self, model: Any, rows: Sequence[Row]) -> list[float]:
        idx = [self.index[row.id] for row in rows]
        logits = model.logits(self.emb[idx], self.feats[idx])
        return [float(v) for v in 1.0 / (1.0 + np.exp(-logits))]


def default_tier(
    strength: str, difficulty: float, lower_below: float | None, raise_above: float | None
) -> int:
    """0 cheap, 1 middle, 2 strong: a route's strength moved one tier by its thresholds."""
    tier = {"cheap": 0, "middle": 1, "strong": 2}[strength]
    if lower_below is not None and difficulty < lower_below:
        return max(0, tier - 1)
    if raise_above is not None and difficulty > raise_above:
        return min(2, tier + 1)
    return tier


def with_routed_cheap(
    figures: list[SourceFigure],
    rows: Sequence[Row],
    scores: dict[str, float],
    *,
    cheap_margin: float | None = None,
) -> list[SourceFigure]:
    """Each figure with the share of its rows the shipped default routes would send to the cheap tier,
    the difficulty being the held-out score (`scores`, by row id)."""
    from dataclasses import replace

    from gateway.config.schema import RoutingConfig
    from gateway.routing.semantic import SemanticRouter, load_default_routes

    defaults = {route.name: route for route in load_default_routes()}
    cheap = frozenset(name for name, route in defaults.items() if route.strength == "cheap")
    margin = (
        RoutingConfig.model_fields["cheap_route_margin"].default if cheap_margin is None else cheap_margin
    )
    router = SemanticRouter([route.spec() for route in defaults.values()], prefer=cheap, margin=margin)
    out = []
    for figure in figures:
        held = [row for row in rows if row.source == figure.source]
        cheap = 0
        for row in held:
            route = defaults[router.match_text(row.prompt).route]
            cheap += default_tier(route.strength, scores[row.id], route.lower_below, route.raise_above) == 0
        out.append(replace(figure, routed_cheap=cheap / len(held)))
    return out


def old_classifier_scores() -> Score:
    """The shipped 1.8 classifier, loaded the shipped way, on each prompt as one user message."""
    from gateway.routing.classifier import ComplexityClassifier

    classifier = ComplexityClassifier.load()
    return lambda rs: [classifier.score({"messages": [{"role": "user", "content": r.prompt}]}) for r in rs]


def read_logs(path: Path) -> list[Row]:
    """Labelled chat logs (one JSON object a line: `messages`, or `prompt` as a string or a message
    list; `label` simple|complex; `source`) as rows; unlabelled lines are skipped. The prompt is what
    the router reads: the last user message."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            item = json.loads(line)
            if not isinstance(item, dict) or item.get("label") not in ("simple", "complex"):
                continue
            ask = read_ask(item)
            source = str(item.get("source") or "unknown")
            rows.append(Row(str(item.get("id", number)), source, ask.text, item["label"] == "complex", False))
    return rows


def loso_file(path: Path, out: TextIO, *, features: Sequence[str] = DEFAULT_FEATURES) -> None:
    """`tollgate route-eval --loso FILE`: the shipped head's inputs refitted on every source of the
    file but one and scored on that one, each source beside prompt length."""
    rows = read_logs(path)
    if len({row.source for row in rows}) < 2:
        raise ValueError(f"{path}: --loso needs labelled rows from at least two sources")
    experiment = HeadExperiment(rows, np.zeros((len(rows), 0)), feature_rows(rows, features), l2=3.0)
    figures, total = loso_table(rows, experiment.fit, experiment.score)
    title = f"leave-one-source-out on {path}: head = {', '.join(features)}; {len(rows)} labelled rows"
    print(render(figures, total, title), file=out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", default=",".join(DEFAULT_FEATURES), help="comma-separated, or ''")
    parser.add_argument("--l2", type=float, default=3.0)
    parser.add_argument("--matrix", help="a full-width float matrix from distill --keep-full (experiments)")
    parser.add_argument("--dims", type=int, help="with --matrix: the PCA width to try")
    parser.add_argument("--embedding", action="store_true", help="the head also reads the embedding")
    parser.add_argument("--no-old", action="store_true", help="skip the 1.8 classifier's column")
    parser.add_argument("--cheap-margin", type=float, help="routing.cheap_route_margin to try")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = load_rows()
    embedder = None
    if args.matrix:
        from gateway.routing.embedding import StaticEmbedder

        shipped = StaticEmbedder.load()
        full = np.load(args.matrix)
        embedder = StaticEmbedder(full[:, : args.dims or full.shape[1]], shipped.tokenizer)
    names = [n for n in args.features.split(",") if n]
    emb = embed_rows(rows, embedder) if args.embedding else np.zeros((len(rows), 0))
    experiment = HeadExperiment(rows, emb, feature_rows(rows, names), l2=args.l2)
    held_scores: dict[str, float] = {}

    def score(model: Any, rs: Sequence[Row]) -> list[float]:
        values = experiment.score(model, rs)
        held_scores.update(zip((r.id for r in rs), values, strict=True))
        return values

    baselines: dict[str, Score] = {"length": lambda rs: [float(len(r.prompt)) for r in rs]}
    if not args.no_old:
        baselines["1.8"] = old_classifier_scores()
    figures, total = loso_table(rows, experiment.fit, score, baselines=baselines)
    figures = with_routed_cheap(figures, rows, held_scores, cheap_margin=args.cheap_margin)
    width = (embedder.dims if embedder else "shipped") if args.embedding else "no"
    title = (
        f"leave-one-source-out, head = {width} embedding + {names or 'no features'}, l2 {args.l2}; "
        f"{len(rows)} labelled rows; cheap% = difficulty < 0.5; routed = cheap tier via default routes"
    )
    print(render(figures, total, title))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
