"""Token counting: the documented rule, and pieces that rebuild the text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sandbox.core.tokens import count_tokens, render_chat, split_tokens


def test_rule_letters_digits_punctuation() -> None:
    assert count_tokens("hello") == 1
    assert count_tokens("gateway") == 2  # 6 letters a token
    assert count_tokens("2026") == 2  # 3 digits a token
    assert count_tokens("Hi, there!") == 4
    assert count_tokens("   ") == 0
    assert count_tokens("snake_case") == 3


def test_english_prose_is_about_four_characters_a_token() -> None:
    text = (
        "Applications send every LLM call to one OpenAI-compatible endpoint. Tollgate decides "
        "which model should answer, applies prompt caching, retries with jitter and falls back "
        "across providers, enforces team policy, and writes one ledger row per request."
    )
    assert 3.5 <= len(text) / count_tokens(text) <= 5.0


@given(st.text())
def test_pieces_rebuild_the_text_and_match_the_count(text: str) -> None:
    pieces = split_tokens(text)
    assert len(pieces) == count_tokens(text)
    assert "".join(pieces) == (text if pieces else "")


def test_chat_overhead_is_three_per_message_plus_three() -> None:
    prompt = render_chat([("system", "Be brief.", None), ("user", "hello", None)])
    assert len(prompt) == (3 + 3) + (3 + 1) + 3


def test_digest_depends_on_roles_and_text() -> None:
    a = render_chat([("user", "hello", None)])
    b = render_chat([("system", "hello", None)])
    c = render_chat([("user", "hello", None)])
    assert a.digest != b.digest
    assert a.digest == c.digest
