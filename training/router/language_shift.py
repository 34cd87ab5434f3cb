"""How much a request's score moves when the same request is written in another language, and the
priors of `non_english` and `non_ascii` at which it does not move on average: what sets them
without reading a label (`docs/routing/classifier-experiments.md`, versions 1.4 and 1.5).

    python -m training.router.language_shift            # shifts and tier changes under the shipped weights
    python -m training.router.language_shift --solve    # and the two priors that zero the mean shifts,
                                                # and the weight of a Chinese or Japanese character
                                                # at which their translations have F's mean length

Reads probe set F and its line-for-line translations (`data/routing/probes/f-*.jsonl`, each row
naming its English original in `source_id`). Labels are not read.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gateway.routing import features
from gateway.routing.classifier import ComplexityClassifier
from gateway.routing.features import feature_dict

PROBES = Path(__file__).resolve().parents[2] / "data" / "routing" / "probes"
LATIN = ("fr", "de", "es")  # marked by `non_english`
OTHER_SCRIPTS = ("zh", "ja", "ru")  # marked by `non_ascii`
_PRIORS = ("non_english", "non_ascii")


def prompts(name: str) -> dict[str, str]:
    """Prompts of a probe file by the id of their English original."""
    rows = [json.loads(line) for line in (PROBES / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    return {row.get("source_id", row["id"]): row["prompt"] for row in rows}


def _body(prompt: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": prompt}]}


def logits(classifier: ComplexityClassifier, texts: dict[str, str]) -> dict[str, float]:
    out = {}
    for key, prompt in texts.items():
        score = min(max(classifier.score(_body(prompt)), 1e-9), 1 - 1e-9)
        out[key] = math.log(score / (1.0 - score))
    return out


def shifts(classifier: ComplexityClassifier, languages: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Per language: mean logit shift against English, and share of requests that change tier."""
    english = prompts("f")
    base = logits(classifier, english)
    cut = math.log(classifier.threshold / (1.0 - classifier.threshold))
    result = {}
    for language in languages:
        moved = logits(classifier, prompts(f"f-{language}"))
        keys = [key for key in base if key in moved]
        mean = sum(moved[key] - base[key] for key in keys) / len(keys)
        changed = sum((moved[key] >= cut) != (base[key] >= cut) for key in keys) / len(keys)
        result[language] = (mean, changed)
    return result


def feature_gaps(languages: Sequence[str], names: Sequence[str]) -> list[float]:
    """Each named feature's mean over F's translations into `languages` minus its mean over F."""
    english = [feature_dict(_body(p)) for p in prompts("f").values()]
    moved = [feature_dict(_body(p)) for language in languages for p in prompts(f"f-{language}").values()]
    return [float(np.mean([f[name] for f in moved]) - np.mean([f[name] for f in english])) for name in names]


def solve(classifier: ComplexityClassifier) -> dict[str, float]:
    """The two priors at which the mean shift over the Latin-script translations, and over the
    other-script ones, are both zero: the logit is linear in both (neither is clipped)."""
    index = {name: classifier.names.index(name) for name in _PRIORS}
    current = {name: classifier.coefficients[i] / classifier.scales[i] for name, i in index.items()}
    rows, targets = [], []
    for group in (LATIN, OTHER_SCRIPTS):
        shift = np.mean([s for s, _ in shifts(classifier, group).values()])
        deltas = feature_gaps(group, _PRIORS)
        rows.append(deltas)
        targets.append(-shift + sum(d * current[n] for d, n in zip(deltas, _PRIORS, strict=True)))
    values = np.linalg.solve(np.array(rows), np.array(targets))  # per raw unit
    return {name: round(float(v), 2) for name, v in zip(_PRIORS, values, strict=True)}


def cjk_weight() -> float:
    """`features.CJK_CHAR_WEIGHT` at which F's Chinese and Japanese translations have, pooled, the
    mean `prompt_tokens` of F itself (bisection; the gap grows with the weight)."""
    shipped, low, high = features.CJK_CHAR_WEIGHT, 1.0, 8.0
    try:
        for _ in range(30):
            features.CJK_CHAR_WEIGHT = (low + high) / 2
            (gap,) = feature_gaps(("zh", "ja"), ("prompt_tokens",))
            low, high = (features.CJK_CHAR_WEIGHT, high) if gap < 0 else (low, features.CJK_CHAR_WEIGHT)
    finally:
        features.CJK_CHAR_WEIGHT = shipped
    return round((low + high) / 2, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", help="weights file (default: the shipped one)")
    parser.add_argument("--solve", action="store_true", help="print the priors that zero the mean shifts")
    args = parser.parse_args()
    classifier = ComplexityClassifier.load(args.weights)
    available = [lang for lang in (*LATIN, *OTHER_SCRIPTS) if (PROBES / f"f-{lang}.jsonl").exists()]
    for language, (mean, changed) in shifts(classifier, available).items():
        print(f"f-{language}: mean logit shift {mean:+.2f}, {changed:.0%} of requests change tier")
    if args.solve:
        print("priors that zero both mean shifts:", solve(classifier))
        print("weight of a Chinese or Japanese character for F's mean length:", cjk_weight())


if __name__ == "__main__":
    main()
