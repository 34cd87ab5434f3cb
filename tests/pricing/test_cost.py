"""Money is exact: integer nano-USD, one rounding per request, figures a user can check by hand."""

from __future__ import annotations

from decimal import Decimal

from pricing.cost import Price, cost_nano
from pricing.money import format_usd, usd_to_nano


def test_the_worked_example() -> None:
    # 1,800 input + 220 output tokens at $3 / $15 per MTok = $0.0054 + $0.0033 = $0.0087.
    price = Price.per_mtok(input="3", output="15")
    cost = cost_nano(price, prompt_tokens=1800, completion_tokens=220)
    assert cost == 8_700_000
    assert format_usd(cost) == "0.0087"


def test_cached_tokens_are_billed_at_the_cached_price() -> None:
    # 2,000 prompt tokens of which 1,536 cached: 464 x $3 + 1,536 x $0.30 + 100 x $15 per MTok
    # = 1,392,000 + 460,800 + 1,500,000 nano-USD.
    price = Price.per_mtok(input="3", output="15", cached_input="0.30")
    assert cost_nano(price, prompt_tokens=2000, completion_tokens=100, cached_tokens=1536) == 3_352_800


def test_cached_tokens_without_a_cached_price_cost_full_input() -> None:
    price = Price.per_mtok(input="3", output="15")
    assert cost_nano(price, prompt_tokens=2000, completion_tokens=0, cached_tokens=1536) == 6_000_000


def test_sub_nano_prices_stay_exact_and_round_once() -> None:
    # $0.075 per MTok is exactly 75 nano-USD per token.
    assert cost_nano(Price.per_mtok(input="0.075", output="0"), prompt_tokens=7, completion_tokens=0) == 525
    # $0.0003 per MTok is 0.3 nano-USD a token: 1 input + 1 output = 0.6 nano, rounded once to 1
    # (rounding each class on its own would have given 0).
    tiny = Price.per_mtok(input="0.0003", output="0.0003")
    assert cost_nano(tiny, prompt_tokens=1, completion_tokens=1) == 1
    assert cost_nano(tiny, prompt_tokens=1, completion_tokens=0) == 0


def test_money_conversions_never_use_floats() -> None:
    assert usd_to_nano("0.0000000005") == 1
    assert usd_to_nano(Decimal("2.50")) == 2_500_000_000
    assert format_usd(1) == "0.000000001"
    assert format_usd(12_340_000_000) == "12.34"
