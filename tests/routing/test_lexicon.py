"""The fitted lexicon: what the words of a request add to its score, read from the weights file."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from gateway.routing import ComplexityClassifier, WeightsError
from gateway.routing.features import read_request
from gateway.routing.lexicon import Lexicon

WEIGHTS = Path(__file__).resolve().parents[2] / "gateway" / "routing" / "weights.json"


@pytest.fixture(scope="module")
def shipped() -> dict[str, Any]:
    return json.loads(WEIGHTS.read_text())


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_push_is_the_sum_over_the_root_of_the_words_present() -> None:
    lexicon = Lexicon({"prove": 1.5, "summarize": -2.0, "invoice": -0.5})
    assert lexicon.push({b"prove", b"summarize", b"unknown"}) == pytest.approx(-0.5 / math.sqrt(2))
    assert lexicon.push({b"prove"}) == 1.5
    assert lexicon.push({b"unknown"}) == 0.0 and lexicon.push(set()) == 0.0
    # A long prompt is pushed by which words it has, not by how many times or how many others.
    assert lexicon.push({b"prove", *(b"w%d" % k for k in range(500))}) == 1.5


def test_words_are_the_users_lower_cased_and_split_at_punctuation() -> None:
    system = {"role": "system", "content": "You review SQL. Never reveal internal notes."}
    body = {
        "messages": [
            system,
            {"role": "user", "content": "Why does our Postgres replica lag? (It's 3x behind.)"},
        ]
    }
    _, words = read_request(body)
    assert {b"why", b"postgres", b"replica", b"lag", b"it's", b"3x"} <= words
    assert b"Postgres" not in words and b"lag?" not in words
    assert not {b"review", b"sql", b"never", b"reveal"} & words  # the system prompt's are not read


def test_the_words_of_a_pasted_document_are_not_read() -> None:
    """Beside a short ask, a pasted document's words say what it is about (dates, names, column
    headers), not what is asked of it: only the ask's words are weighed. A message that is all ask
    is read whole."""
    ask = "What is the root cause of this outage, and what should we change first?"
    log = "\n".join(
        f"2026-11-{d:02d} 03:{d:02d} payments-api ERROR upstream timeout (pool exhausted)"
        for d in range(1, 20)
    )
    invoice = "\n".join(
        f"Invoice {d}: 3 x blue widgets, EUR {d * 40}.00, due on the {d}th, ref ACME-{d}"
        for d in range(1, 20)
    )
    _, short = read_request(user(ask))
    for document in (log, invoice):
        for text in (f"{ask}\n\n{document}", f"{document}\n\n{ask}"):
            _, words = read_request(user(text))
            assert words == short, text[:40]
    parts = {"role": "user", "content": [{"type": "text", "text": ask}, {"type": "text", "text": invoice}]}
    assert read_request({"messages": [parts]})[1] == short
    _, whole = read_request(user("Summarize: the invoice is due on the 4th."))
    assert {b"summarize", b"invoice", b"due", b"4th"} <= whole


def test_a_system_prompt_does_not_move_the_words_push() -> None:
    """An application sends the same system prompt with every request: its words must not dilute
    the user's, nor lift a greeting over the threshold."""
    classifier = ComplexityClassifier.load()
    system = {
        "role": "system",
        "content": "You are a helpful customer support assistant for Acme Corp. Answer concisely and "
        "politely. If you do not know the answer, say so and offer to escalate to a human agent.",
    }
    for text in ("hi", "Why does our Postgres replica lag behind the primary after a failover?"):
        alone = dict(classifier.assess(user(text), top=40).reasons).get("words")
        with_system = dict(classifier.assess({"messages": [system, *user(text)["messages"]]}, top=40).reasons)
        assert with_system.get("words") == alone
    assert classifier.score({"messages": [system, *user("hi")["messages"]]}) < classifier.threshold


def test_the_score_adds_the_push_to_the_features_logit(shipped: dict[str, Any]) -> None:
    """The same file without its lexicon (a format 1 file) scores every request by the features
    alone; with it, the logit moves by exactly the lexicon's push."""
    with_words = ComplexityClassifier.from_dict(shipped)
    features_only = copy.deepcopy(shipped)
    del features_only["lexicon"]
    features_only["format"] = 1
    without = ComplexityClassifier.from_dict(features_only)
    assert with_words.lexicon is not None and without.lexicon is None

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    for text in ("Summarize this email in two lines.", "Why does our Postgres replica lag behind?"):
        _, words = read_request(user(text))
        push = with_words.lexicon.push(words)
        assert push != 0.0
        expected = logit(without.score(user(text))) + push
        assert logit(with_words.score(user(text))) == pytest.approx(expected)


def test_the_shipped_lexicon_weighs_what_is_asked_not_who_asks(shipped: dict[str, Any]) -> None:
    """Pronouns, greetings, LaTeX commands, languages and places, other languages' function words,
    and the words the traffic sets' brief told authors to plant or avoid are left out
    (`LEXICON_STOP`, `BRIEF_WORDS`, `PLACE_WORDS`, `LANGUAGE_WORDS` and the LaTeX rule in
    training/router/router_lexicon.py); numbers and code punctuation are the features' business."""
    words = shipped["lexicon"]["words"]
    assert len(words) > 1000
    assert not {"we", "our", "you", "please", "thanks", "the", "frac", "cdot"} & set(words)
    assert not {"prove", "design", "step", "explain", "must", "carefully"} & set(words)
    # Languages and places say where a user is, not how hard the ask is (`PLACE_WORDS`).
    assert not {"english", "german", "germany", "uk", "france", "french", "eu"} & set(words)
    # Nor the grammar of another language (`LANGUAGE_WORDS`): 1.4 weighed `de` at -2.2.
    assert not {"de", "en", "para", "pour", "los", "den", "ce", "et", "la", "le"} & set(words)
    assert all(w.replace("'", "").replace("-", "").isalpha() and w == w.lower() for w in words)
    assert words["summarise"] < 0 < words["why"]


def test_reasons_name_the_lexicon_but_never_the_prompt_words() -> None:
    """The ledger keeps the reason; it says the words pushed, not which words the user wrote."""
    classifier = ComplexityClassifier.load()
    body = user("Summarize this meeting: Maria, Jonas and Elif agreed the payroll date moves.")
    assessment = classifier.assess(body, top=5)
    assert "words -" in assessment.reason()
    assert not any(w in assessment.reason().lower() for w in ("summarize", "payroll", "maria", "meeting"))


@pytest.mark.parametrize(
    "lexicon, message",
    [
        ({"normalise": "sum", "words": {}}, "normalise"),
        ({"normalise": "sqrt_present", "words": {"prove": float("nan")}}, "finite"),
        ({"normalise": "sqrt_present", "words": {"prüfen": 1.0}}, "ASCII"),
        ({"normalise": "sqrt_present", "words": ["prove"]}, "words"),
        ("not an object", "normalise"),
    ],
)
def test_a_malformed_lexicon_is_refused(shipped: dict[str, Any], lexicon: Any, message: str) -> None:
    data = {**shipped, "lexicon": lexicon}
    with pytest.raises(WeightsError, match=message):
        ComplexityClassifier.from_dict(data)
