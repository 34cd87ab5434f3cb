"""Generated text: deterministic, bounded, and cut by max_tokens and stop sequences."""

from __future__ import annotations

import orjson

from sandbox.core.textgen import TextGenerator
from sandbox.core.tokens import count_tokens


def test_same_inputs_same_text_and_seeds_change_it() -> None:
    one, two = TextGenerator(seed=0), TextGenerator(seed=0)
    assert one.complete(42).text == two.complete(42).text
    assert one.complete(42).text != TextGenerator(seed=1).complete(42).text
    assert one.complete(42, request_seed=7).text != one.complete(42).text
    assert one.complete(42, index=1).text != one.complete(42).text


def test_natural_length_is_twenty_to_sixty_tokens_ending_a_sentence() -> None:
    generator = TextGenerator(seed=3)
    for digest in range(50):
        done = generator.complete(digest)
        assert 20 <= len(done.pieces) <= 64
        assert done.finish_reason == "stop"
        assert done.text.endswith(".")
        assert count_tokens(done.text) == len(done.pieces)


def test_max_tokens_cuts_with_length() -> None:
    done = TextGenerator(seed=0).complete(1, max_tokens=5)
    assert len(done.pieces) == 5
    assert done.finish_reason == "length"


def test_stop_sequence_cuts_before_it() -> None:
    generator = TextGenerator(seed=0)
    full = generator.complete(9).text
    stop = full.split()[3]
    done = generator.complete(9, stop=["zzz-never", stop])
    assert stop not in done.text
    assert full.startswith(done.text)
    assert done.finish_reason == "stop"


def test_tool_arguments_fit_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer"},
        },
        "required": ["city", "unit", "days"],
    }
    arguments = orjson.loads(TextGenerator(seed=0).tool_arguments(5, schema))
    assert set(arguments) == {"city", "unit", "days"}
    assert isinstance(arguments["city"], str)
    assert arguments["unit"] in ("c", "f")
    assert isinstance(arguments["days"], int)
