"""Fault rules: parsing, the header short form, and how the book hands them out."""

from __future__ import annotations

import pytest

from sandbox.faults import FaultBook, parse_header, parse_rule


def test_parse_rule_fields_and_defaults() -> None:
    rule = parse_rule({"kind": "status", "status": 429, "retry_after": 2, "count": 3})
    assert (rule.status, rule.retry_after, rule.count) == (429, 2.0, 3)
    assert rule.response_headers() == [("retry-after", "2")]
    assert parse_rule({"status": 503}).kind == "status"


@pytest.mark.parametrize(
    "raw",
    [{"kind": "explode"}, {"kind": "status", "status": 42}, {"kind": "reset", "bogus": 1},
     {"kind": "status", "count": 0}, [1]],
)  # fmt: skip
def test_parse_rule_rejects_bad_rules(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_rule(raw)


def test_header_short_forms() -> None:
    assert parse_header("429").status == 429
    rule = parse_header("status=503,retry_after_ms=250")
    assert (rule.kind, rule.status, rule.retry_after_ms) == ("status", 503, 250)
    assert parse_header("reset").kind == "reset"
    assert parse_header("timeout=1.5").seconds == 1.5
    assert parse_header("drop_after=3").chunks == 3
    assert parse_header("stream_error=2").after_chunks == 2
    assert parse_header('{"kind": "status", "status": 401}').status == 401


def test_book_counts_filters_and_stream_kinds() -> None:
    book = FaultBook()
    book.add(
        [
            parse_rule({"kind": "drop_after", "chunks": 1}),
            parse_rule({"kind": "status", "status": 500, "count": 2, "model": "a"}),
            parse_rule({"kind": "reset", "path": "/health", "count": -1}),
        ]
    )
    assert book.take("/v1/chat/completions", "b", stream=False) is None
    hit = book.take("/v1/chat/completions", "a", stream=False)
    assert hit is not None and hit.status == 500
    assert book.take("/v1/chat/completions", "a", stream=False) is not None
    assert book.take("/v1/chat/completions", "a", stream=False) is None
    stream_hit = book.take("/v1/chat/completions", "a", stream=True)
    assert stream_hit is not None and stream_hit.kind == "drop_after"
    for _ in range(3):
        forever = book.take("/health", None, stream=False)
        assert forever is not None and forever.kind == "reset"
    assert book.take("/metrics", None, stream=False) is None


def test_fault_rate_is_seeded() -> None:
    def draws(seed: int) -> list[bool]:
        book = FaultBook(fault_rate=0.5, seed=seed)
        return [book.take("/v1/embeddings", None, stream=False) is not None for _ in range(40)]

    assert draws(1) == draws(1)
    assert 5 < sum(draws(1)) < 35


def test_answer_rules() -> None:
    rule = parse_rule({"kind": "answer", "content": "x", "finish_reason": "length", "mean_logprob": -3})
    assert (rule.content, rule.finish_reason, rule.mean_logprob) == ("x", "length", -3.0)
    assert parse_header("mean_logprob=-3.5").kind == "answer"
    assert parse_header("answer,mean_logprob=-1").mean_logprob == -1.0
    assert parse_rule({"tool_arguments": "{"}).kind == "answer"
    for bad in (
        {"kind": "answer", "finish_reason": "content_filter"},
        {"kind": "answer", "mean_logprob": 0.5},
    ):
        with pytest.raises(ValueError):
            parse_rule(bad)
