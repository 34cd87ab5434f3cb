"""Train the complexity classifier, write `gateway/routing/weights.json`, print the dev figures.

    .venv/bin/pip install numpy scipy        # training only; the gateway never imports them
    .venv/bin/python -m training.router.train_router                 # fit, report, write the weights
    .venv/bin/python -m training.router.train_router --check         # exit 1 if the shipped file differs
    .venv/bin/python -m training.router.train_router --compare       # the reference models (scikit-learn)
    .venv/bin/python -m training.router.train_router --second-stage  # the MiniLM head (needs .[embed])

Fits only `split == "train"` rows of `data/routing/` and measures on `split == "dev"` rows (the data,
its licences and the citations we owe: `data/routing/README.md`). The model and its fit are in
`router_model.py`, the lexicon's vocabulary and word weights in `router_lexicon.py`, the MiniLM head
in `router_head.py`; this script adds the checks on sources the fit did not see (each traffic set
scored by a lexicon fitted without it, the dev split with one source left out, the probe sets, which
are never fitted), the reference models of `--compare`, and the weights file.

Deterministic: L-BFGS-B from a fixed start, no sampling (the bootstrap intervals use a fixed seed).
On the same machine a rerun reproduces the file byte for byte (`--check`); on another numpy/BLAS
build the coefficients can move in the last printed digit and the figures agree to 3 decimals.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gateway.routing import evaluation
from gateway.routing.features import FEATURE_NAMES
from training.router.router_data import (
    HELD_OUT_SOURCES,
    ROOT,
    Item,
    data_digest,
    labelled_only_rows,
    length_scores,
    load,
    source_weights,
    traffic,
    training_rows,
)
from training.router.router_head import HEAD_PATH, fit_head, head_document
from training.router.router_lexicon import LEFT_OUT_WORDS, LEXICON_L2, LEXICON_MIN_ROWS, LEXICON_MIN_SOURCES
from training.router.router_model import (
    CLIP,
    EXCLUDED,
    FLOORS,
    L2,
    PRIORS,
    SIGNED,
    SPANS,
    Model,
    best_threshold,
    fit,
    fit_all,
    fit_lexicon,
    round_weight,
)
from training.router.router_report import SEED, print_report, report

WEIGHTS_PATH = ROOT / "gateway" / "routing" / "weights.json"
VERSION = "1.8.0"


def leave_one_source_out(
    labelled: Sequence[Item], outcomes: Sequence[Item], own: Sequence[Item]
) -> dict[str, float]:
    """Overall dev AUROC of a model trained without one source: how it copes with the unseen."""
    dev = [i for i in labelled if i.split == "dev" and i.label is not None]
    labels = [bool(i.label) for i in dev]
    out = {}
    for source in ("routellm_gsm8k", "clinc150", "nq_open"):
        exam = training_rows(labelled, outcomes, drop_source=source)
        out[source] = evaluation.auroc(labels, fit_all(exam, own).scores(dev))
    return out


def leave_one_traffic_set_out(model: Model, exam: Sequence[Item], own: Sequence[Item]) -> dict[str, Any]:
    """AUROC on each of our traffic sets when the lexicon is fitted without it, over the features-only
    `model` (fitted to the exam rows alone, so it needs no refit), pooled and per set, next to length."""
    labels: list[bool] = []
    scores: list[float] = []
    per_set = {}
    for source in sorted({item.source for item in own}):
        held = [item for item in own if item.source == source]
        rest = [item for item in own if item.source != source]
        held_scores = fit_lexicon(model, [*exam, *rest]).scores(held)
        held_labels = [bool(item.label) for item in held]
        per_set[source] = {
            "auroc": evaluation.auroc(held_labels, held_scores),
            "auroc_length_baseline": evaluation.auroc(held_labels, length_scores(held)),
        }
        labels += held_labels
        scores += held_scores
    return {
        "pooled": evaluation.auroc(labels, scores),
        "pooled_length_baseline": evaluation.auroc(labels, length_scores(own)),
        "sets": per_set,
    }


def compare(labelled: Sequence[Item], outcomes: Sequence[Item], rows: Sequence[Item]) -> None:
    """Reference models, not shipped: the same regression on `train.jsonl`'s labelled rows alone,
    and gradient boosting on the shipped rows (needs scikit-learn)."""
    reference = labelled_only_rows(labelled)
    model = fit(reference, weighted=False)
    threshold = best_threshold(reference, model.scores(reference))
    print_report(
        report(model.scores, labelled, outcomes, threshold=threshold),
        title="reference: train.jsonl rows only",
    )
    from sklearn.ensemble import HistGradientBoostingClassifier  # type: ignore[import-untyped]

    x = np.array([i.features for i in rows])
    y = np.array([bool(i.label) for i in rows])
    for depth in (1, 2, 3):
        gbm = HistGradientBoostingClassifier(
            max_depth=depth, learning_rate=0.05, max_iter=300, random_state=0
        )
        gbm.fit(x, y, sample_weight=source_weights(rows))

        def scores(items: Sequence[Item], gbm: Any = gbm) -> list[float]:
            return [float(p) for p in gbm.predict_proba(np.array([i.features for i in items]))[:, 1]]

        threshold = best_threshold(rows, scores(rows))
        print_report(
            report(scores, labelled, outcomes, threshold=threshold), title=f"reference: GBM depth {depth}"
        )


def weights_document(model: Model, *, threshold: float, training: dict[str, Any]) -> dict[str, Any]:
    """The shipped file: what `ComplexityClassifier.load` reads, and how it was made."""
    digest, files = data_digest()
    return {
        "format": 2,
        "model": "logistic_regression",
        "version": f"{VERSION}+data.{digest}",
        "threshold": threshold,
        "clip": CLIP,
        "intercept": round_weight(model.intercept),
        "features": [
            {
                "name": name,
                "mean": round_weight(model.means[j]),
                "scale": round_weight(model.scales[j]),
                "coefficient": round_weight(model.coefficients[j]),
                "fit": model.kinds[j],
            }
            for j, name in enumerate(FEATURE_NAMES)
        ],
        "training": {
            "script": "training/router/train_router.py",
            "data": files,
            "rows": training["rows"],
            "held_out_sources": sorted(HELD_OUT_SOURCES),
            "own_rows": training["own_rows"],
            "label": "complex = only the strong model was right (RouteLLM outcome rows); "
            "CLINC150 and NQ-open rows are simple; our traffic sets by judgement (data/routing/traffic/)",
            "row_weights": "every source weighs the same; our traffic sets together weigh as one source",
            "features_fitted_on": "the exam rows (RouteLLM outcomes, CLINC150, NQ-open)",
            "lexicon_fitted_on": "the exam rows and our traffic sets, the features' logit as a fixed offset, "
            "one intercept per source in the fit (sources with both labels only), their mean shipped",
            "lexicon_l2": LEXICON_L2,
            "lexicon_vocabulary": f"letters-only words of the ask in >= {LEXICON_MIN_ROWS} rows of >= "
            f"{LEXICON_MIN_SOURCES} sources, less LaTeX commands and {len(LEFT_OUT_WORDS)} words left "
            "out: pronouns, determiners and greetings, the words the traffic sets' brief told authors "
            "to plant or avoid, and languages and places",
            "l2": L2,
            "non_negative_except": sorted(SIGNED),
            "excluded": sorted(EXCLUDED),
            "floors": dict(FLOORS),
            "spans": dict(SPANS),
            "priors": dict(PRIORS),
            "threshold_rule": "best balanced accuracy on the training rows, every source weighing "
            "the same, 0.01 grid",
            "bootstrap_seed": SEED,
            "dev": _rounded(training["dev"]),
            "dev_features_alone": _rounded(training["dev_features_alone"]),
            "traffic_cross_validated": _rounded(training["traffic_cross_validated"]),
            "dev_with_excluded_features": _rounded(training["ablation"]),
            "dev_auroc_leave_one_source_out": _rounded(training["held_out"]),
            "credits": "Trained on public data: RouteLLM (Ong et al. 2024, arXiv:2406.18665, Apache-2.0); "
            "MMLU (Hendrycks et al., ICLR 2021, MIT); GSM8K (Cobbe et al. 2021, arXiv:2110.14168, MIT); "
            "CLINC150 (Larson et al., EMNLP-IJCNLP 2019, CC BY 3.0); NQ-open (Kwiatkowski et al., "
            "TACL 2019; Lee et al., ACL 2019; CC BY-SA 3.0); MATH-500 held out for evaluation "
            "(Hendrycks et al., NeurIPS 2021; Lightman et al. 2023; MIT). See data/routing/README.md. "
            "Our traffic sets and probe sets A and B: written for Tollgate, Apache-2.0.",
        },
        "lexicon": {
            "normalise": "sqrt_present",
            "words": {word.decode(): value for word, value in sorted((model.lexicon or {}).items())},
        },
    }


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train the complexity classifier.")
    parser.add_argument("--out", type=Path, default=WEIGHTS_PATH, help="weights file to write or check")
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    parser.add_argument("--compare", action="store_true", help="also report reference models")
    parser.add_argument(
        "--second-stage", action="store_true", help="also fit the MiniLM head and write (or check) it"
    )
    parser.add_argument("--head-out", type=Path, default=HEAD_PATH, help="embedding head to write or check")
    args = parser.parse_args(argv)

    labelled, outcomes = load()
    rows = training_rows(labelled, outcomes)
    own = list(traffic())
    features_only = fit(rows)
    model = fit_lexicon(features_only, [*rows, *own])
    threshold = best_threshold([*rows, *own], model.scores([*rows, *own]))
    print(
        f"trained on {len(rows)} exam rows ({sum(bool(i.label) for i in rows)} complex) and {len(own)} rows "
        f"of our traffic sets; lexicon of {len(model.lexicon or {})} words"
    )
    figures = report(model.scores, labelled, outcomes, threshold=threshold, bootstrap=True)
    print_report(figures, title="shipped model")
    features_figures = report(features_only.scores, labelled, outcomes, threshold=threshold)
    print_report(features_figures, title="the features alone, without the lexicon")
    crossed = leave_one_traffic_set_out(features_only, rows, own)
    print(
        "== our traffic sets, each scored by a lexicon fitted without it: "
        f"pooled AUROC {crossed['pooled']:.3f} (length alone {crossed['pooled_length_baseline']:.3f}); "
        + ", ".join(f"{k.split('/')[-1]} {v['auroc']:.3f}" for k, v in crossed["sets"].items())
    )

    ablated = fit_lexicon(fit(rows, exclude=frozenset(), signed=SIGNED | EXCLUDED), [*rows, *own])
    ablation = report(
        ablated.scores,
        labelled,
        outcomes,
        threshold=best_threshold([*rows, *own], ablated.scores([*rows, *own])),
    )
    print_report(ablation, title="ablation, not shipped: multiple_choice and questions back in, either sign")
    held_out = leave_one_source_out(labelled, outcomes, own)
    print(
        "== dev AUROC, one source left out of training: "
        + ", ".join(f"{k} {v:.3f}" for k, v in held_out.items())
    )
    if args.compare:
        compare(labelled, outcomes, rows)

    training = {
        "rows": len(rows),
        "own_rows": len(own),
        "dev": figures,
        "dev_features_alone": features_figures,
        "traffic_cross_validated": crossed,
        "ablation": ablation,
        "held_out": held_out,
    }
    files = {args.out: json.dumps(weights_document(model, threshold=threshold, training=training), indent=2)}
    if args.second_stage:
        head = fit_head(model.scores, [*rows, *own], labelled, outcomes, cheap_threshold=threshold)
        files[args.head_out] = json.dumps(head_document(head, version=VERSION), indent=1)
    status = 0
    for out, text in files.items():
        if args.check:
            same = out.exists() and same_document(
                json.loads(out.read_text(encoding="utf-8")), json.loads(text)
            )
            print(f"{out}: {'the same as this run' if same else 'DIFFERS from this run'}")
            status |= not same
        else:
            out.write_text(text + "\n", encoding="utf-8")
            print(f"wrote {out}")
    return status


# Refitting on another numpy/scipy build moves the weights in their sixth digit (seen: at most 0.3%
# relative, on weights near zero); that is the same model. A changed feature, row or threshold is not.
_REL, _ABS = 1e-2, 1e-4


def same_document(stored: Any, fresh: Any, *, path: str = "") -> bool:
    """Whether two weights documents hold the same model, numbers within the refit noise above."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        keys = set(stored) | set(fresh)
        return all(
            k in stored and k in fresh and same_document(stored[k], fresh[k], path=f"{path}/{k}")
            for k in keys
            if f"{path}/{k}" != "/training/script"  # where the script lives, not what it fitted
        )
    if isinstance(stored, list) and isinstance(fresh, list):
        return len(stored) == len(fresh) and all(
            same_document(a, b, path=path) for a, b in zip(stored, fresh, strict=True)
        )
    if isinstance(stored, float) or isinstance(fresh, float):
        if not isinstance(stored, int | float) or not isinstance(fresh, int | float):
            return False
        return abs(stored - fresh) <= max(_ABS, _REL * abs(stored))
    return bool(stored == fresh)


if __name__ == "__main__":
    sys.exit(main())
