"""When a shadow answer agrees with the cheap one: structurally for JSON and tool calls, normalised
for short answers, by word overlap otherwise."""

from __future__ import annotations

from typing import Any

from gateway.routing.agreement import compare, normalise, overlap
from gateway.routing.shadow import judge_request, judge_says


def said(content: str | None = None, calls: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": str(i), "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ]
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def test_json_compares_parsed_with_key_order_ignored() -> None:
    same = compare(said('{"a": 1, "b": [1, 2]}'), said('{\n "b": [1, 2], "a": 1}'))
    assert (same.agreed, same.method) == (True, "json")
    assert not compare(said('{"a": 1}'), said('{"a": 2}')).agreed


def test_tool_calls_compare_by_name_and_arguments_in_any_order() -> None:
    first = said(calls=[("weather", '{"city": "Oslo", "unit": "c"}'), ("time", '{"tz": "CET"}')])
    second = said(calls=[("time", '{"tz":"CET"}'), ("weather", '{"unit": "c", "city": "Oslo"}')])
    assert compare(first, second).agreed
    assert not compare(first, said(calls=[("weather", '{"city": "Bergen", "unit": "c"}')])).agreed
    assert not compare(first, said("Oslo is 4 degrees")).agreed


def test_short_answers_compare_normalised() -> None:
    assert compare(said("B"), said("b.")).agreed
    assert compare(said("(B)"), said(" B ")).method == "short"
    assert compare(said("3.50"), said("3.5")).agreed
    assert compare(said("1,000"), said("1000")).agreed
    assert not compare(said("-3"), said("3")).agreed
    assert not compare(said("A"), said("B")).agreed
    assert normalise("  Yes!\n") == "yes"


def test_long_answers_by_word_overlap() -> None:
    a = "The capital of Norway is Oslo, which lies at the head of the Oslofjord."
    b = "Oslo is the capital of Norway; it lies at the head of the Oslofjord."
    c = "Photosynthesis converts light energy into chemical energy stored in sugars."
    agreed = compare(said(a), said(b))
    assert agreed.method == "overlap" and agreed.agreed and agreed.similarity is not None
    assert not compare(said(a), said(c)).agreed
    assert overlap("", "") == 1.0 and overlap("a b", "c d") == 0.0


def test_the_judge_is_asked_yes_or_no() -> None:
    body = judge_request({"messages": [{"role": "user", "content": "Capital of Norway?"}]}, "Oslo", "Bergen")
    prompt = body["messages"][-1]["content"]
    assert "Capital of Norway?" in prompt and "Oslo" in prompt and "Bergen" in prompt
    assert prompt.endswith("yes/no")
    assert (judge_says("Yes."), judge_says("no"), judge_says("**No**"), judge_says("maybe")) == (
        True,
        False,
        False,
        None,
    )
