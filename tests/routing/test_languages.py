"""Requests in other languages keep their cues and their length, and English requests are read exactly
as before (`gateway/routing/languages.py`, `features.CJK_CHAR_WEIGHT`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gateway.routing import ComplexityClassifier, features, languages
from gateway.routing.features import CJK_CHAR_WEIGHT, feature_dict

PROBES = Path(__file__).resolve().parents[2] / "data" / "routing" / "probes"

# "Summarise this" and "prove that", as people write them in each language.
SUMMARIES = {
    "fr": "Résume ce texte en trois phrases pour l'équipe, s'il te plaît.",
    "es": "Hazme un resumen de este texto en tres frases para el equipo.",
    "de": "Fasse diesen Text bitte in drei Sätzen für das Team zusammen.",
    "pt": "Resuma este texto em três frases para a equipe, por favor.",
    "it": "Riassumi questo testo in tre frasi per il team, per favore.",
    "ru": "Перескажи этот текст в трёх предложениях для команды.",
    "zh": "请把这段文字总结成三句话，发给团队。",  # noqa: RUF001 (a Chinese comma)
    "ja": "この文章をチーム向けに三文で要約してください。",
}
PROOFS = {
    "fr": "Démontre que tout graphe planaire est 5-colorable.",
    "es": "Demuestra que todo grafo plano es 5-coloreable.",
    "de": "Beweise, dass jeder planare Graph 5-färbbar ist.",
    "pt": "Demonstre que todo grafo planar é 5-colorível.",
    "it": "Dimostra che ogni grafo planare è 5-colorabile.",
    "ru": "Докажи, что любой планарный граф 5-раскрашиваем.",
    "zh": "证明任意平面图都可以5-着色。",
    "ja": "任意の平面グラフが5彩色可能であることを証明せよ。",
}


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("language", sorted(SUMMARIES))
def test_a_summary_and_a_proof_keep_their_cues_in_each_language(language: str) -> None:
    summary, proof = feature_dict(user(SUMMARIES[language])), feature_dict(user(PROOFS[language]))
    assert summary["routine_cues"] >= 1 and summary["expert_cues"] == 0
    assert proof["expert_cues"] >= 1 and proof["routine_cues"] == 0
    classifier = ComplexityClassifier.load()
    assert classifier.score(user(SUMMARIES[language])) < classifier.score(user(PROOFS[language]))


def test_apostrophes_split_words_in_other_languages() -> None:
    f = feature_dict(user("D'abord, explique-moi l'hypothèse, puis démontre qu'elle tient."))
    assert f["multi_step"] == pytest.approx(math.log1p(2))  # d'abord, puis
    assert f["reasoning_cues"] == 1  # l'hypothèse
    assert f["expert_cues"] == 1  # démontre


def test_the_other_lists_never_repeat_an_english_cue() -> None:
    """A word on both lists would count twice in a request that mixes the languages."""
    english = (
        features._REASONING_WORDS
        | features._EXPERT_WORDS
        | features._ROUTINE_WORDS
        | features._SEQUENCE_WORDS
        | features._CONDITIONAL_WORDS
        | features._QUANTITY_WORDS
        | features._CONSTRAINT_WORDS
    )
    for kind in languages.CUE_KINDS:
        assert not languages._WORDS[kind] & english, kind
        others = set().union(*(languages._WORDS[k] for k in languages.CUE_KINDS if k != kind))
        assert not languages._WORDS[kind] & others, kind


def test_english_requests_are_read_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other languages' lists are read only for a request that is not evidently English: of the
    320 prompts of probe sets F and G, only the one written in Spanish reads differently with them
    switched off."""
    rows = [
        json.loads(line)
        for name in ("f.jsonl", "g.jsonl")
        for line in (PROBES / name).read_text(encoding="utf-8").splitlines()
    ]
    with_lists = [features.extract_features(user(row["prompt"])) for row in rows]
    monkeypatch.setattr(features, "foreign_cues", lambda sample, cjk: (0,) * len(languages.CUE_KINDS))
    without = [features.extract_features(user(row["prompt"])) for row in rows]
    changed = {row["id"] for row, a, b in zip(rows, with_lists, without, strict=True) if a != b}
    assert changed == {"probe-f:017"}  # "corrige la ortografía y la puntuación por favor..."


def test_chinese_and_japanese_characters_count_for_more_length() -> None:
    chinese = "请解释一下为什么我们的数据库在高并发时会出现死锁" * 4  # 96 Han characters
    assert feature_dict(user(chinese))["prompt_tokens"] == pytest.approx(
        math.log1p(len(chinese) * CJK_CHAR_WEIGHT / 4), rel=0.01
    )
    mixed = "SELECT * FROM orders;\n" + "このクエリが遅い理由を教えて"  # code stays one per character
    expected = (len(mixed) + (CJK_CHAR_WEIGHT - 1) * 14) / 4
    assert feature_dict(user(mixed))["prompt_tokens"] == pytest.approx(math.log1p(expected), rel=0.01)
    russian = "Почему наш сервер падает каждую ночь?"
    assert feature_dict(user(russian))["prompt_tokens"] == pytest.approx(math.log1p(len(russian) / 4))
