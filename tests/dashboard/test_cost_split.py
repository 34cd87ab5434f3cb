"""The explorer's cost split: the billed input and output shared out by token class so the classes
add up to the bill exactly, or today's price per class when the price has changed since."""

from __future__ import annotations

from typing import Any

from gateway.accounting.explorer import cost_split
from pricing.cost import cost_breakdown
from pricing.price import Price
from usage import Usage

# nano-USD per MTok: $3 in, $0.30 cached, $3.75 cache write, $15 out, $15 reasoning.
PRICE = Price(input=3_000_000_000, output=15_000_000_000, cached_input=300_000_000, cache_write=3_750_000_000)
USAGE = Usage(1_234, 567, cached_tokens=400, cache_write_tokens=101, reasoning_tokens=200)


def billed_row(usage: Usage, price: Price) -> dict[str, Any]:
    cost = cost_breakdown(usage, price)
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cache_write_1h_tokens": usage.cache_write_1h_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "input_cost_nano": cost.input_nano,
        "output_cost_nano": cost.output_nano,
        "cost_nano": cost.total_nano,
        "escalation_cost_nano": 0,
        "price_source": "config",
    }


def by_class(split: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {c["class"]: (c["tokens"], c["cost_nano"]) for c in split["classes"]}


def test_classes_add_up_to_the_bill_exactly() -> None:
    row = billed_row(USAGE, PRICE)
    split = cost_split(row, PRICE)
    assert split["priced"] == "as_billed"
    classes = by_class(split)
    assert {name: tokens for name, (tokens, _) in classes.items()} == {
        "input": 733,
        "cached": 400,
        "cache_write": 101,
        "output": 367,
        "reasoning": 200,
    }
    assert sum(classes[n][1] for n in ("input", "cached", "cache_write")) == row["input_cost_nano"]
    assert sum(classes[n][1] for n in ("output", "reasoning")) == row["output_cost_nano"]
    # Each class is within a nano-dollar of its exact price: 733 tokens at $3/MTok is 2,199,000.
    assert classes["input"][1] == 2_199_000 and classes["cached"][1] == 120_000
    assert classes["output"][1] == 5_505_000 and classes["reasoning"][1] == 3_000_000


def test_a_changed_price_is_said_and_the_bill_is_kept() -> None:
    row = billed_row(USAGE, PRICE)
    cheaper = Price(input=1_000_000_000, output=5_000_000_000)
    split = cost_split(row, cheaper)
    assert split["priced"] == "current_price"
    assert split["billed"]["total_nano"] == row["cost_nano"]
    assert by_class(split)["input"] == (733, 733_000)


def test_no_price_or_a_cache_hit_has_no_classes() -> None:
    row = billed_row(USAGE, PRICE)
    assert cost_split(row, None) == {
        "billed": {
            "input_nano": row["input_cost_nano"],
            "output_nano": row["output_cost_nano"],
            "escalation_nano": 0,
            "total_nano": row["cost_nano"],
        },
        "classes": None,
        "priced": "unknown",
    }
    assert cost_split(row | {"price_source": "response_cache"}, PRICE)["priced"] == "cache_hit"


def test_rounding_remainders_go_to_the_largest_fractions() -> None:
    # 1 token each at $0.50/MTok: each class is half a nano-dollar; the bill rounds the sum once.
    half = Price(input=500_000, output=500_000, cached_input=500_000, cache_write=500_000)
    usage = Usage(3, 0, cached_tokens=1, cache_write_tokens=1)
    row = billed_row(usage, half)
    assert row["input_cost_nano"] == 2
    split = cost_split(row, half)
    assert split["priced"] == "as_billed"
    assert sorted(cost for _, cost in by_class(split).values()) == [0, 0, 0, 1, 1]
