"""The shipped classifier: loads, scores in [0, 1], ranks the obvious cases, explains itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.routing import FEATURE_NAMES, ComplexityClassifier, WeightsError

WEIGHTS = Path(__file__).resolve().parents[2] / "gateway" / "routing" / "weights.json"


@pytest.fixture(scope="module")
def classifier() -> ComplexityClassifier:
    return ComplexityClassifier.load()


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], **extra}


PROOF = user(
    "Prove step by step that for every integer n >= 1 the sum 1 + 3 + 5 + ... + (2n - 1) equals n^2. "
    "First state the base case, then the inductive step, and explain why each step holds. Then "
    "generalise: if S(n, k) is the sum of the first n terms of an arithmetic progression starting at "
    "k with difference 2, derive a closed form, prove it by induction, and compare it with the "
    "formula above. You must not skip any algebra, and the proof must be rigorous."
)


def test_weights_file_matches_the_features() -> None:
    data = json.loads(WEIGHTS.read_text())
    assert [f["name"] for f in data["features"]] == list(FEATURE_NAMES)
    assert data["format"] == 1 and 0 < data["threshold"] < 1
    assert {f["fit"] for f in data["features"]} <= {"data", "prior", "excluded"}
    credits = data["training"]["credits"]
    for owed in ("RouteLLM", "MMLU", "GSM8K", "CLINC150", "NQ-open", "CC BY-SA 3.0"):
        assert owed in credits


def test_load_shipped_weights(classifier: ComplexityClassifier) -> None:
    assert classifier.names == FEATURE_NAMES
    assert classifier.version.startswith("1.")
    assert ComplexityClassifier.load(WEIGHTS).version == classifier.version


@pytest.mark.parametrize(
    "body",
    [
        user("hi"),
        PROOF,
        user("x" * 300_000),
        user("WHAT IS THE CAPITAL OF FRANCE " * 100),
        {"messages": [], "tools": [{}] * 500, "reasoning_effort": "high", "max_tokens": 10**9},
        {},
    ],
)
def test_score_is_a_probability(classifier: ComplexityClassifier, body: dict[str, Any]) -> None:
    assert 0.0 <= classifier.score(body) <= 1.0


def test_sanity_ordering(classifier: ComplexityClassifier) -> None:
    hi = classifier.score(user("hi"))
    assert classifier.score(PROOF) > classifier.score(user("What's the weather in Paris today?")) > hi
    assert classifier.score(PROOF) > classifier.threshold > hi
    plain = user("Find my order and email me its status.")
    with_tools = {**plain, "tools": [{"type": "function", "function": {"name": "find"}}] * 3}
    assert classifier.score(with_tools) > classifier.score(plain)
    assert classifier.score({**plain, "reasoning_effort": "high"}) > classifier.score(plain)


def test_explain_names_the_biggest_pushes(classifier: ComplexityClassifier) -> None:
    reasons = classifier.explain(user("hi"))
    assert reasons and reasons[0][0] == "prompt_tokens" and reasons[0][1] < 0
    assert len(classifier.explain(PROOF, top=5)) <= 5
    pushes = [abs(v) for _, v in classifier.explain(PROOF, top=5)]
    assert pushes == sorted(pushes, reverse=True)
    assessment = classifier.assess(user("hi", tools=[{}] * 4))
    assert assessment.score == classifier.score(user("hi", tools=[{}] * 4))
    assert "tools +" in assessment.reason()


def test_clip_bounds_one_extreme_feature(classifier: ComplexityClassifier) -> None:
    shouting = classifier.score(user("WHAT IS THE CAPITAL OF FRANCE"))
    assert shouting < classifier.threshold  # capitals alone cannot send a short question upstream


def test_weights_for_other_features_are_refused(tmp_path: Path) -> None:
    data = json.loads(WEIGHTS.read_text())
    data["features"] = data["features"][:-1]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    with pytest.raises(WeightsError, match="features"):
        ComplexityClassifier.load(path)
    path.write_text("{not json")
    with pytest.raises(WeightsError):
        ComplexityClassifier.load(path)
    with pytest.raises(WeightsError):
        ComplexityClassifier.load(tmp_path / "missing.json")
    with pytest.raises(WeightsError, match="format"):
        ComplexityClassifier.from_dict({"format": 99})


def test_scoring_does_not_import_numpy_or_sklearn() -> None:
    code = (
        "import json, sys\n"
        "from gateway.routing.classifier import ComplexityClassifier\n"
        "c = ComplexityClassifier.load()\n"
        "c.assess({'messages': [{'role': 'user', 'content': 'hi'}]})\n"
        "heavy = {'numpy', 'sklearn', 'scipy', 'torch', 'pandas'}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & heavy)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == []
