"""The dev figures the routing issue asks for, computed for any scoring function, and their printout.

Every figure comes from `gateway.routing.evaluation`, the code `tollgate route-eval` uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gateway.routing import evaluation
from training.router.router_data import PROBE_SETS, Item, length_scores, probes

Scorer = Callable[[Sequence[Item]], list[float]]
SEED = 20241130  # the data's own seed; the bootstrap is the only thing here that draws numbers
BOOTSTRAP = 1000


def report(
    scorer: Scorer,
    labelled: Sequence[Item],
    outcomes: Sequence[Item],
    *,
    threshold: float,
    bootstrap: bool = False,
) -> dict[str, Any]:
    """Overall and per-source AUROC on `train.jsonl` dev (next to prompt length alone), accuracy and
    routed share at `threshold`, APGR on the outcome dev rows, and the MATH-500 difficulty check."""
    dev = [i for i in labelled if i.split == "dev" and i.label is not None]
    labels = [bool(i.label) for i in dev]
    scores = scorer(dev)
    baseline = length_scores(dev)
    figures: dict[str, Any] = {
        "dev_items": len(dev),
        "auroc": evaluation.auroc(labels, scores),
        "auroc_length_baseline": evaluation.auroc(labels, baseline),
        "threshold": threshold,
        "accuracy": evaluation.accuracy_at(labels, scores, threshold),
        "routed_to_cheap": evaluation.routed_share(scores, threshold),
        "by_source": {},
    }
    for source in sorted({i.source for i in dev}):
        idx = [k for k, i in enumerate(dev) if i.source == source]
        src_labels = [labels[k] for k in idx]
        src_scores = [scores[k] for k in idx]
        entry: dict[str, Any] = {
            "items": len(idx),
            "complex": sum(src_labels),
            "mean_score": sum(src_scores) / len(idx),
            "routed_to_cheap": evaluation.routed_share(src_scores, threshold),
        }
        if 0 < sum(src_labels) < len(idx):
            src_baseline = [baseline[k] for k in idx]
            entry["auroc"] = evaluation.auroc(src_labels, src_scores)
            entry["auroc_length_baseline"] = evaluation.auroc(src_labels, src_baseline)
            if bootstrap:
                entry["gain_over_length_95ci"] = list(
                    evaluation.bootstrap_gain(
                        src_labels, src_scores, src_baseline, seed=SEED, resamples=BOOTSTRAP
                    )
                )
        figures["by_source"][source] = entry
    figures["apgr"] = apgr_figures(scorer, outcomes, threshold=threshold)
    maths = [i for i in labelled if i.source == "math500" and i.difficulty is not None]
    hard = [(i.difficulty or 0) >= 3 for i in maths]
    figures["math500_unseen"] = {
        "items": len(maths),
        "auroc_level3_4_vs_1_2": evaluation.auroc(hard, scorer(maths)),
        "auroc_length_baseline": evaluation.auroc(hard, length_scores(maths)),
    }
    # Across kinds: a competition problem should outrank a grade-school word problem both models solve.
    level4 = [i for i in maths if i.difficulty == 4]
    word_problems = [i for i in dev if i.source == "routellm_gsm8k" and not i.label]
    figures["math500_unseen"]["auroc_level4_vs_gsm8k_simple"] = evaluation.auroc(
        [True] * len(level4) + [False] * len(word_problems), scorer(level4 + word_problems)
    )
    figures["probes"] = {
        name: probe_figures(scorer, probes(name), threshold=threshold) for name in PROBE_SETS
    }
    return figures


def balanced_threshold(labels: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> float:
    """The threshold on a 0.01 grid with the best weighted balanced accuracy (the mean of the hit
    rates on complex and on simple rows): a rule that does not move with base rates."""
    positives, negatives = weights * labels, weights * ~labels

    def balanced(t: float) -> float:
        above = scores >= t
        return float(positives @ above / positives.sum() + negatives @ ~above / negatives.sum()) / 2

    return max((round(t / 100, 2) for t in range(1, 100)), key=balanced)


def probe_figures(scorer: Scorer, items: Sequence[Item], *, threshold: float) -> dict[str, Any]:
    """How a probe set (the kinds of request the public data lacks) is ranked and routed."""
    labels = [bool(i.label) for i in items]
    scores = scorer(items)
    return {
        "items": len(items),
        "auroc": evaluation.auroc(labels, scores),
        "auroc_length_baseline": evaluation.auroc(labels, length_scores(items)),
        "accuracy": evaluation.accuracy_at(labels, scores, threshold),
        "routed_to_cheap": evaluation.routed_share(scores, threshold),
    }


def apgr_figures(scorer: Scorer, outcomes: Sequence[Item], *, threshold: float) -> dict[str, Any]:
    """APGR on the outcome dev rows, all together and per source, next to prompt length alone."""
    dev = [i for i in outcomes if i.split == "dev" and i.weak is not None and i.strong is not None]
    groups = {"all": dev} | {s: [i for i in dev if i.source == s] for s in sorted({i.source for i in dev})}
    out: dict[str, Any] = {}
    for name, group in groups.items():
        weak = [float(i.weak or 0.0) for i in group]
        strong = [float(i.strong or 0.0) for i in group]
        scores = scorer(group)
        strong_share = 1.0 - evaluation.routed_share(scores, threshold)
        curve = evaluation.quality_curve(scores, weak, strong)
        out[name] = {
            "items": len(group),
            "apgr": evaluation.apgr(scores, weak, strong),
            "apgr_length_baseline": evaluation.apgr(length_scores(group), weak, strong),
            "weak_quality": sum(weak) / len(group),
            "strong_quality": sum(strong) / len(group),
            "strong_share_at_threshold": strong_share,
            "quality_at_threshold": evaluation.quality_at(curve, strong_share),
        }
    return out


def print_report(figures: dict[str, Any], *, title: str) -> None:
    print(f"== {title}")
    print(
        f"dev AUROC {figures['auroc']:.3f}  (prompt length alone {figures['auroc_length_baseline']:.3f}, "
        f"{figures['dev_items']} labelled items of train.jsonl)"
    )
    print(
        f"threshold {figures['threshold']:.2f}: accuracy {figures['accuracy']:.3f}, "
        f"routed to the cheap tier {figures['routed_to_cheap']:.1%}"
    )
    print(f"  {'source':16} {'items':>5} {'complex':>7} {'AUROC':>6} {'length':>6} {'mean':>5} {'cheap':>6}")
    for source, entry in figures["by_source"].items():
        auc = f"{entry['auroc']:.3f}" if "auroc" in entry else "-"
        base = f"{entry['auroc_length_baseline']:.3f}" if "auroc" in entry else "-"
        ci = entry.get("gain_over_length_95ci")
        gain = f"  gain over length: 95% CI [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
        print(
            f"  {source:16} {entry['items']:5} {entry['complex']:7} {auc:>6} {base:>6} "
            f"{entry['mean_score']:5.2f} {entry['routed_to_cheap']:6.1%}{gain}"
        )
    for name, entry in figures["apgr"].items():
        print(
            f"APGR {name:15} {entry['apgr']:.3f}  (length alone {entry['apgr_length_baseline']:.3f}, "
            f"random 0.5; {entry['items']} outcome rows; at the threshold "
            f"{entry['strong_share_at_threshold']:.0%} strong calls, "
            f"quality {entry['quality_at_threshold']:.3f} "
            f"between weak {entry['weak_quality']:.3f} and strong {entry['strong_quality']:.3f})"
        )
    m = figures["math500_unseen"]
    print(
        f"MATH-500 (never trained on) level 3-4 vs 1-2: AUROC {m['auroc_level3_4_vs_1_2']:.3f} "
        f"(length alone {m['auroc_length_baseline']:.3f}, {m['items']} items); "
        f"level 4 vs GSM8K dev simple: {m['auroc_level4_vs_gsm8k_simple']:.3f}"
    )
    for name, entry in figures["probes"].items():
        print(
            f"probe set {name} ({PROBE_SETS[name]}): AUROC {entry['auroc']:.3f} (length alone "
            f"{entry['auroc_length_baseline']:.3f}, {entry['items']} items); at the threshold accuracy "
            f"{entry['accuracy']:.3f}, {entry['routed_to_cheap']:.0%} to the cheap tier"
        )
