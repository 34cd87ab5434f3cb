"""The SSE decoder yields the same events however the bytes are split across reads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.http import AnswerTooLarge
from providers.sse import ServerSentEvent, SSEDecoder, encode_data

payload = st.binary(min_size=1, max_size=60).filter(lambda b: b"\n" not in b and b"\r" not in b)
newline = st.sampled_from([b"\n", b"\r\n", b"\r"])


def decode_in_pieces(stream: bytes, cuts: list[int]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    start = 0
    for cut in sorted(set(cuts)):
        events += decoder.feed(stream[start:cut])
        start = cut
    events += decoder.feed(stream[start:])
    return events + decoder.flush()


@given(
    datas=st.lists(payload, min_size=1, max_size=8),
    eol=newline,
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
    comments=st.booleans(),
)
def test_any_split_gives_the_same_events(
    datas: list[bytes], eol: bytes, cuts: list[int], comments: bool
) -> None:
    frames = []
    for data in datas:
        prefix = b": keep-alive" + eol if comments else b""
        frames.append(prefix + b"data: " + data + eol + eol)
    stream = b"".join(frames)
    expected = [ServerSentEvent(d) for d in datas]
    cuts = [c % (len(stream) + 1) for c in cuts]
    assert decode_in_pieces(stream, cuts) == expected


@given(
    st.lists(
        st.binary(min_size=1, max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b),
        min_size=2,
        max_size=4,
    )
)
def test_multi_line_data_is_joined_with_newlines(lines: list[bytes]) -> None:
    stream = b"event: delta\n" + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    events = decode_in_pieces(stream, [])
    assert events == [ServerSentEvent(b"\n".join(lines), "delta")]


def test_stream_without_final_blank_line_is_flushed() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a":1}\n\ndata: [DONE]') == [ServerSentEvent(b'{"a":1}')]
    assert decoder.flush() == [ServerSentEvent(b"[DONE]")]


def test_encode_round_trips() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(encode_data(b'{"x": "y"}')) == [ServerSentEvent(b'{"x": "y"}')]


def test_an_event_past_the_limit_is_refused_however_it_grows() -> None:
    """An upstream that never ends a line, or never ends an event, cannot make the gateway hold
    more than the limit for it; many events each under the limit are fine."""
    endless_line = SSEDecoder(limit=4096)
    with pytest.raises(AnswerTooLarge):
        endless_line.feed(b"data: ")
        for _ in range(100):
            endless_line.feed(b"x" * 100)
    endless_event = SSEDecoder(limit=4096)
    with pytest.raises(AnswerTooLarge):
        for _ in range(100):
            endless_event.feed(b"data: " + b"y" * 94 + b"\n")
    many = SSEDecoder(limit=4096)
    events = [e for _ in range(1000) for e in many.feed(b"data: " + b"z" * 94 + b"\n\n")]
    assert len(events) == 1000


def test_a_long_line_read_byte_by_byte_is_one_event() -> None:
    decoder = SSEDecoder()
    line = b"data: " + b"a" * 20_000 + b"\r\n\r\n"
    events = [e for i in range(len(line)) for e in decoder.feed(line[i : i + 1])]
    assert events == [ServerSentEvent(b"a" * 20_000)] and decoder.flush() == []
