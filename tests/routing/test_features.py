"""Features of hand-written chat bodies: each cue fires on the text it names, and odd input never raises."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gateway.routing.features import (
    FEATURE_NAMES,
    SAMPLE_CHARS,
    extract_features,
    feature_dict,
    last_user_sample,
)


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], **extra}


def test_one_value_per_name_all_finite() -> None:
    values = extract_features(user("hi"))
    assert len(values) == len(FEATURE_NAMES)
    assert all(math.isfinite(v) for v in values)


def test_plain_greeting_has_no_cues() -> None:
    f = feature_dict(user("hi"))
    for name in ("code_blocks", "code_keywords", "math_notation", "numbers", "reasoning_cues", "tools"):
        assert f[name] == 0.0, name
    assert f["prompt_tokens"] == pytest.approx(math.log1p(2 / 4))


def test_code() -> None:
    body = user(
        "Fix this bug:\n```python\ndef total(xs):\n    return sum(x for x in xs if x > 0)\n```\n"
        "and this one:\n```js\nconst f = async () => { await g(); };\n```"
    )
    f = feature_dict(body)
    assert f["code_blocks"] == pytest.approx(math.log1p(2))
    assert f["code_keywords"] >= 3  # def, const, async, await
    assert f["code_symbols"] > feature_dict(user("Fix this bug in my essay, please."))["code_symbols"]


def test_math() -> None:
    f = feature_dict(user(r"Solve $x^2 + 3x - 4 = 0$ and show that $\frac{a}{b} \le 1$ for 12 and 7."))
    assert f["math_notation"] > math.log1p(5)
    assert f["numbers"] == pytest.approx(math.log1p(7))  # distinct digit runs: 2 3 4 0 1 12 7
    assert f["expert_cues"] >= 1  # "show that"


def test_distinct_numbers() -> None:
    assert feature_dict(user("7 apples and 7 pears cost 12 dollars"))["numbers"] == pytest.approx(
        math.log1p(2)
    )


def test_number_size_is_the_longest_digit_run_capped() -> None:
    assert feature_dict(user("7 apples"))["number_size"] == 1.0
    assert feature_dict(user("a 2 and a 48,750 and 3.14159"))["number_size"] == 5.0  # 14159
    assert feature_dict(user("id " + "9" * 40))["number_size"] == 12.0
    assert feature_dict(user("no numbers"))["number_size"] == 0.0


def test_the_sample_is_the_last_user_message_head_and_tail() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "an answer"},
            {"role": "user", "content": [{"type": "text", "text": "H" * 5000 + "the real ask"}]},
        ]
    }
    sample = last_user_sample(body)
    assert sample.startswith("H") and sample.endswith("the real ask")
    assert len(sample) <= SAMPLE_CHARS + 1  # head, a newline, tail
    assert last_user_sample({"messages": [{"role": "system", "content": "x"}]}) == ""
    assert last_user_sample({"messages": "nonsense"}) == ""


def test_reasoning_steps_and_constraints() -> None:
    body = user(
        "Prove step by step that the algorithm terminates. First, define the invariant; then explain why "
        "it holds.\n1. State it\n2. Prove it\n3. Conclude\nYou must use at least two lemmas and do not "
        "exceed exactly one page."
    )
    f = feature_dict(body)
    assert f["reasoning_cues"] >= 4  # step, why, "step by step", "explain why"
    assert f["expert_cues"] == 2  # prove, invariant
    assert f["multi_step"] >= math.log1p(5)  # three list items, first, then
    assert f["constraints"] >= math.log1p(4)  # must, at least, do not, exactly


DOCUMENT = "The quarterly report is attached. Revenue grew in every region. " * 20  # 1,280 chars


@pytest.mark.parametrize(
    ("text", "material"),
    [
        ("Summarize this email:\n" + DOCUMENT, len(DOCUMENT) + 2),  # ask, colon, document
        ("Please summarize.\n\n" + DOCUMENT, len(DOCUMENT) + 2),  # ask, blank line, document
        (DOCUMENT + "\n\nWhat changed since last quarter?", len(DOCUMENT)),  # document, then the ask
        (DOCUMENT, 0),  # one long question: all ask
        ("Short ask:\n" + "tiny document", 0),  # too short to hold a document
        ("x" * 500 + "\n\n" + DOCUMENT, 0),  # no short paragraph at either end
    ],
)
def test_material_is_text_pasted_beside_a_short_ask(text: str, material: int) -> None:
    expected = math.log1p(material / 4)
    assert feature_dict(user(text))["material_tokens"] == pytest.approx(expected)


def test_material_in_content_parts() -> None:
    parts = [{"type": "text", "text": "Translate to French:"}, {"type": "text", "text": DOCUMENT}]
    f = feature_dict({"messages": [{"role": "user", "content": parts}]})
    assert f["material_tokens"] == pytest.approx(math.log1p(len(DOCUMENT) / 4))
    one_part = feature_dict({"messages": [{"role": "user", "content": parts[1:]}]})
    assert one_part["material_tokens"] == 0


def test_expert_and_routine_cues() -> None:
    design = feature_dict(user("Design a thread-safe, lock-free queue and discuss the trade-offs."))
    assert design["expert_cues"] == 4  # design, thread-safe, lock-free, trade-offs
    assert design["routine_cues"] == 0
    chore = feature_dict(user("Please summarize this email, then translate it to French: ..."))
    assert chore["routine_cues"] == 2
    assert chore["expert_cues"] == 0
    race = feature_dict(user("Find the race condition; mind the edge cases."))
    assert race["expert_cues"] == 2


def test_conditionals_quantities_negations() -> None:
    f = feature_dict(
        user("If Tom is twice as old as Ann, which statement is NOT true? Suppose each pays half.")
    )
    assert f["conditionals"] == 2  # if, suppose
    assert f["quantities"] == 3  # twice, each, half
    assert f["negation_cues"] == 1
    assert f["questions"] == pytest.approx(math.log1p(1))


def test_multiple_choice_shapes() -> None:
    lettered = "Which is a prime?\nA. 4\nB. 6\nC. 7\nD. 9"
    parenthesised = "Pick one:\n(a) red\n(b) green\n(c) blue"
    assert feature_dict(user(lettered))["multiple_choice"] == 1.0
    assert feature_dict(user(parenthesised))["multiple_choice"] == 1.0
    assert feature_dict(user("Plan A. Then plan B. Then C."))["multiple_choice"] == 0.0


def test_multi_turn_conversation() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "You are a careful reviewer. You must cite sources."},
            {"role": "user", "content": "Review my draft."},
            {"role": "assistant", "content": "Sure, paste it."},
            {"role": "user", "content": "Here it is: ..."},
            {"role": "assistant", "content": "Looks fine."},
            {"role": "user", "content": "And the conclusion?"},
        ]
    }
    f = feature_dict(body)
    assert f["conversation_turns"] == pytest.approx(math.log1p(2))
    assert f["system_tokens"] > 0
    assert f["constraints"] >= math.log1p(1)  # "must" in the system prompt counts as an instruction
    assert f["questions"] == pytest.approx(math.log1p(1))  # only the last user message is read


def test_the_system_prompt_is_weighed_apart_from_the_conversation() -> None:
    """An application sends the same system prompt with every request; counted in `prompt_tokens`, a
    60-token one lifted every short request as if it were a long question."""
    system = {"role": "system", "content": "You are a helpful support assistant for Acme. " * 5}
    alone = feature_dict(user("hi"))
    with_system = feature_dict({"messages": [system, *user("hi")["messages"]]})
    assert with_system["prompt_tokens"] == alone["prompt_tokens"]
    assert with_system["system_tokens"] > alone["system_tokens"] == 0


def test_tools_and_tool_results() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function"}]},
            {"role": "tool", "tool_call_id": "1", "content": "{}"},
        ],
        "tools": [{"type": "function", "function": {"name": f"t{i}"}} for i in range(3)],
    }
    f = feature_dict(body)
    assert f["tools"] == pytest.approx(math.log1p(3))
    assert f["tool_results"] == pytest.approx(math.log1p(1))
    assert f["prompt_tokens"] > feature_dict(user("Weather in Oslo?"))["prompt_tokens"]
    assert feature_dict({"messages": [], "functions": [{"name": "f"}]})["tools"] == pytest.approx(
        math.log1p(1)
    )


def test_schema_output_length_and_effort() -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    f = feature_dict(
        user("Extract.", response_format=schema, max_completion_tokens=8192, reasoning_effort="high")
    )
    assert f["structured_output"] == 1.0
    assert f["long_output"] == pytest.approx(3.0)
    assert f["reasoning_effort"] == 1.0
    g = feature_dict(user("Extract.", response_format={"type": "json_object"}, max_tokens=512))
    assert (g["structured_output"], g["long_output"], g["reasoning_effort"]) == (0.5, 0.0, 0.0)


def test_content_parts_and_images() -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            }
        ]
    }
    f = feature_dict(body)
    assert f["images"] == pytest.approx(math.log1p(1))
    assert f["questions"] == pytest.approx(math.log1p(1))


def test_language() -> None:
    assert feature_dict(user("Bonjour, ça va ?"))["non_ascii"] == pytest.approx(1 / 16)
    assert feature_dict(user("请帮我写一首关于秋天的诗"))["non_ascii"] == 1.0
    assert feature_dict(user("plain english"))["non_ascii"] == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "Pouvez-vous vérifier si notre calcul de TVA est correct pour les ventes en Belgique ?",
        "¿Por qué mi consulta tarda tanto cuando la tabla tiene más de un millón de filas?",
        "Bitte prüfe, ob die Kündigungsfrist in diesem Vertrag wirksam ist und was das für uns heißt.",
        "Você pode me explicar por que o balanço não fecha com a conta do banco?",
        "Mi spieghi perché la query è lenta e come posso migliorare gli indici della tabella?",
    ],
)
def test_a_latin_script_request_in_another_language_is_marked(text: str) -> None:
    """The cue lists and the lexicon read English: the prior on `non_english` keeps these requests
    from scoring lower than the same request in English."""
    assert feature_dict(user(text))["non_english"] == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "Why does our Postgres replica lag behind the primary after a failover?",
        "Translate this to French: le chat est sur la table et le chien dort.",  # an English ask
        "Compute \\[\\frac{1}{\\cos^2 10^\\circ} + \\frac{1}{\\sin^2 20^\\circ}\\]",
        "def merge(a, b):\n    return sorted(a + b, key=lambda x: x.id)",
        "Comment ça va ?",  # no function word to tell it by
        "请帮我写一首关于秋天的诗，要有押韵，四行就够了",  # noqa: RUF001 (another script: non_ascii's)
        "Почему наш сервер падает каждую ночь в три часа и как это исправить?",
    ],
)
def test_english_code_maths_and_other_scripts_are_not_marked(text: str) -> None:
    assert feature_dict(user(text))["non_english"] == 0.0


def test_capitals_share_is_smoothed() -> None:
    shouting = feature_dict(user("WHAT IS THE CAPITAL OF FRANCE"))["capitals"]
    normal = feature_dict(user("What is the capital of France"))["capitals"]
    assert shouting > 0.5 > normal
    assert feature_dict(user("请写诗"))["capitals"] == pytest.approx(1 / 20)  # no Latin letters: neutral


def test_long_prompt_reads_a_capped_sample_but_counts_every_token() -> None:
    document = "lorem ipsum " * 20_000  # 240k characters, ~60k tokens
    f = feature_dict(user(document + "\nNow prove it step by step."))
    assert f["prompt_tokens"] == pytest.approx(math.log1p((len(document) + 27) / 4))
    assert f["reasoning_cues"] >= 2  # the tail of the message is read
    assert f["expert_cues"] == 1  # prove
    cue_in_the_middle = "lorem " * 2000 + "prove derive justify " + "lorem " * 2000
    assert len(cue_in_the_middle) > SAMPLE_CHARS
    assert feature_dict(user(cue_in_the_middle))["reasoning_cues"] == 0
    assert feature_dict(user(cue_in_the_middle))["expert_cues"] == 0


def test_long_content_parts_are_sampled_too() -> None:
    parts = [{"type": "text", "text": "x " * 5000} for _ in range(20)] + [{"type": "text", "text": "Why?"}]
    f = feature_dict({"messages": [{"role": "user", "content": parts}]})
    assert f["prompt_tokens"] == pytest.approx(math.log1p((20 * 10000 + 4) / 4))
    assert f["reasoning_cues"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": "hi"},
        {"messages": [None, 3, "x", {"role": "user"}, {"role": "user", "content": 5}]},
        {"messages": [{"role": "user", "content": [None, {"type": "text", "text": 3}, {"type": "text"}]}]},
        {
            "messages": [],
            "tools": "many",
            "response_format": "json",
            "max_tokens": True,
            "reasoning_effort": 2,
        },
        {"messages": [{"role": "user", "content": "\udcff bad surrogate"}]},
    ],
)
def test_odd_bodies_never_raise(body: dict[str, Any]) -> None:
    values = extract_features(body)
    assert len(values) == len(FEATURE_NAMES)
    assert all(math.isfinite(v) for v in values)
