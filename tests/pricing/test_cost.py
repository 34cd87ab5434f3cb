"""Money is exact: integer nano-USD, one rounding per request, figures a user can check by hand."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from pricing.cost import CostBreakdown, Price, Tier, cost_breakdown, cost_nano
from pricing.money import format_usd, usd_to_nano
from usage import Usage

# claude-sonnet-4-5 per LiteLLM: $3 in, $3.75 5-minute write, $6 1-hour write, $0.30 read, $15 out.
SONNET = Price.per_mtok(input="3", output="15", cached_input="0.30", cache_write="3.75", cache_write_1h="6")
# gemini-2.5-pro: $1.25 / $10, read $0.125; above 200k prompt tokens $2.50 / $15, read $0.25.
GEMINI_PRO = Price.per_mtok(
    input="1.25",
    output="10",
    cached_input="0.125",
    tiers=[Tier.per_mtok(200_000, input="2.50", output="15", cached_input="0.25")],
)


def test_the_worked_example() -> None:
    # 1,800 input + 220 output tokens at $3 / $15 per MTok = $0.0054 + $0.0033 = $0.0087.
    price = Price.per_mtok(input="3", output="15")
    cost = cost_nano(Usage(prompt_tokens=1800, completion_tokens=220), price)
    assert cost == 8_700_000
    assert format_usd(cost) == "0.0087"
    assert cost_breakdown(Usage(prompt_tokens=1800, completion_tokens=220), price) == CostBreakdown(
        input_nano=5_400_000, output_nano=3_300_000, total_nano=8_700_000
    )


def test_cached_tokens_are_billed_at_the_cached_price() -> None:
    # 2,000 prompt tokens of which 1,536 cached: 464 x $3 + 1,536 x $0.30 + 100 x $15 per MTok
    # = 1,392,000 + 460,800 + 1,500,000 nano-USD.
    price = Price.per_mtok(input="3", output="15", cached_input="0.30")
    assert cost_nano(Usage(prompt_tokens=2000, completion_tokens=100, cached_tokens=1536), price) == 3_352_800


def test_cached_tokens_without_a_cached_price_cost_full_input() -> None:
    price = Price.per_mtok(input="3", output="15")
    assert cost_nano(Usage(prompt_tokens=2000, completion_tokens=0, cached_tokens=1536), price) == 6_000_000


def test_five_minute_and_one_hour_cache_writes_have_their_own_prices() -> None:
    # 10,000 prompt tokens: 2,000 read, 6,000 written (4,000 of them with a 1h TTL), 2,000 fresh.
    #   fresh 2,000 x $3 = $0.006; read 2,000 x $0.30 = $0.0006;
    #   5m writes 2,000 x $3.75 = $0.0075; 1h writes 4,000 x $6 = $0.024  -> input $0.0381
    #   output 500 x $15 = $0.0075                                          -> total $0.0456
    cost = cost_breakdown(
        Usage(
            prompt_tokens=10_000,
            completion_tokens=500,
            cached_tokens=2_000,
            cache_write_tokens=6_000,
            cache_write_1h_tokens=4_000,
        ),
        SONNET,
    )
    assert cost == CostBreakdown(input_nano=38_100_000, output_nano=7_500_000, total_nano=45_600_000)


def test_one_hour_writes_without_their_own_price_cost_a_five_minute_write() -> None:
    # 1,000 1h-written tokens at the 5m price $3.75/MTok = $0.00375.
    price = Price.per_mtok(input="3", output="15", cache_write="3.75")
    cost = cost_nano(
        Usage(prompt_tokens=1000, completion_tokens=0, cache_write_tokens=1000, cache_write_1h_tokens=1000),
        price,
    )
    assert cost == 3_750_000


def test_reasoning_tokens_are_output_unless_priced_separately() -> None:
    # 1,000 completion tokens of which 800 reasoning, all at $15 = $0.015: reasoning is no extra.
    assert (
        cost_nano(Usage(prompt_tokens=0, completion_tokens=1000, reasoning_tokens=800), SONNET) == 15_000_000
    )
    # With $1.20 output and $4 reasoning (qwen-plus style): 200 x $1.20 + 800 x $4 = $0.00024 +
    # $0.0032 = $0.00344.
    split = Price.per_mtok(input="0.40", output="1.20", reasoning="4")
    cost = cost_breakdown(Usage(prompt_tokens=0, completion_tokens=1000, reasoning_tokens=800), split)
    assert cost == CostBreakdown(input_nano=0, output_nano=3_440_000, total_nano=3_440_000)


def test_a_long_prompt_prices_the_whole_request_at_the_tier() -> None:
    # 250,000 prompt tokens (> 200k) of which 50,000 cached, 2,000 out, every class at the tier:
    #   200,000 x $2.50 = $0.50; 50,000 x $0.25 = $0.0125; 2,000 x $15 = $0.03 -> $0.5425.
    cost = cost_breakdown(
        Usage(prompt_tokens=250_000, completion_tokens=2_000, cached_tokens=50_000), GEMINI_PRO
    )
    assert cost == CostBreakdown(input_nano=512_500_000, output_nano=30_000_000, total_nano=542_500_000)


def test_the_tier_starts_above_its_threshold() -> None:
    # Exactly 200,000 prompt tokens is not above 200k: 200,000 x $1.25 + 2,000 x $10 = $0.27.
    assert cost_nano(Usage(prompt_tokens=200_000, completion_tokens=2_000), GEMINI_PRO) == 270_000_000
    # One more token and the whole request moves: 200,001 x $2.50 + 2,000 x $15 = $0.5300025.
    assert cost_nano(Usage(prompt_tokens=200_001, completion_tokens=2_000), GEMINI_PRO) == 530_002_500


def test_a_tier_keeps_base_prices_it_does_not_set() -> None:
    # The tier sets input/output only: above 128k, cached reads stay $0.30 and reasoning follows
    # the tier's output. 200,000 in (100,000 cached) + 1,000 reasoning out:
    #   100,000 x $6 + 100,000 x $0.30 + 1,000 x $30 = $0.60 + $0.03 + $0.03 = $0.66.
    price = Price.per_mtok(
        input="3", output="15", cached_input="0.30", tiers=[Tier.per_mtok(128_000, input="6", output="30")]
    )
    cost = cost_nano(
        Usage(prompt_tokens=200_000, completion_tokens=1_000, cached_tokens=100_000, reasoning_tokens=1_000),
        price,
    )
    assert cost == 660_000_000


def test_the_highest_tier_exceeded_applies() -> None:
    # dashscope-style bands: $1.20 to 32k, $2.40 above 32k, $3 above 128k (input only here).
    price = Price.per_mtok(
        input="1.20",
        output="6",
        tiers=[
            Tier.per_mtok(128_000, input="3", output="15"),
            Tier.per_mtok(32_000, input="2.40", output="12"),
        ],
    )
    assert price.tier_for(32_000) is None
    assert cost_nano(Usage(prompt_tokens=100_000, completion_tokens=0), price) == 240_000_000  # x $2.40
    assert cost_nano(Usage(prompt_tokens=130_000, completion_tokens=0), price) == 390_000_000  # x $3


def test_embeddings_bill_input_only() -> None:
    # text-embedding-3-small at $0.02/MTok (20 nano-USD a token): 10,000 tokens = $0.0002.
    embedding = Price.per_mtok(input="0.02", output="0")
    assert cost_breakdown(Usage(prompt_tokens=10_000, completion_tokens=0), embedding) == CostBreakdown(
        input_nano=200_000, output_nano=0, total_nano=200_000
    )
    assert cost_nano(Usage(prompt_tokens=7, completion_tokens=0), embedding) == 140


def test_sub_nano_prices_stay_exact_and_round_once() -> None:
    # $0.075 per MTok is exactly 75 nano-USD per token.
    assert (
        cost_nano(Usage(prompt_tokens=7, completion_tokens=0), Price.per_mtok(input="0.075", output="0"))
        == 525
    )
    # $0.0003 per MTok is 0.3 nano-USD a token: 1 input + 1 output = 0.6 nano, rounded once to 1
    # (rounding each class on its own would have given 0).
    tiny = Price.per_mtok(input="0.0003", output="0.0003")
    assert cost_nano(Usage(prompt_tokens=1, completion_tokens=1), tiny) == 1
    assert cost_nano(Usage(prompt_tokens=1, completion_tokens=0), tiny) == 0


def test_the_parts_add_up_to_the_total_and_output_absorbs_the_rounding() -> None:
    # Input 0.3 nano rounds to 0; the total 0.6 rounds to 1, so output carries the 1.
    tiny = Price.per_mtok(input="0.0003", output="0.0003")
    assert cost_breakdown(Usage(prompt_tokens=1, completion_tokens=1), tiny) == CostBreakdown(0, 1, 1)
    # Input 0.5 nano rounds half up to 1; the total 0.9 rounds to 1, so output is 0.
    half = Price.per_mtok(input="0.0005", output="0.0004")
    assert cost_breakdown(Usage(prompt_tokens=1, completion_tokens=1), half) == CostBreakdown(1, 0, 1)


def test_usage_counts_that_overflow_their_container_are_clamped() -> None:
    # 5,000 "cached" of a 1,000-token prompt: all 1,000 at $0.30 = $0.0003; 1h writes beyond the
    # writes and reasoning beyond the completion are likewise capped, never billed twice.
    assert cost_nano(Usage(prompt_tokens=1000, completion_tokens=0, cached_tokens=5000), SONNET) == 300_000
    cost = cost_nano(
        Usage(
            prompt_tokens=1000,
            completion_tokens=10,
            cache_write_tokens=100,
            cache_write_1h_tokens=900,
            reasoning_tokens=50,
        ),
        SONNET,
    )
    # 900 x $3 + 100 x $6 + 10 x $15 = $0.0027 + $0.0006 + $0.00015
    assert cost == 3_450_000


@given(
    prompt=st.integers(0, 2_000_000),
    completion=st.integers(0, 200_000),
    cached=st.integers(0, 2_000_000),
    written=st.integers(0, 2_000_000),
    written_1h=st.integers(0, 2_000_000),
    reasoning=st.integers(0, 200_000),
    rates=st.lists(st.integers(0, 100_000_000_000), min_size=6, max_size=6),
)
def test_parts_always_add_up_and_stay_within_a_nano(
    prompt: int, completion: int, cached: int, written: int, written_1h: int, reasoning: int, rates: list[int]
) -> None:
    price = Price(*rates[:4], cache_write_1h=rates[4], reasoning=rates[5])
    cost = cost_breakdown(
        Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            cache_write_tokens=written,
            cache_write_1h_tokens=written_1h,
            reasoning_tokens=reasoning,
        ),
        price,
    )
    assert cost.input_nano + cost.output_nano == cost.total_nano
    assert cost.output_nano >= 0
    exact_output = (
        Decimal(completion - min(reasoning, completion)) * rates[1] / 10**6
        + Decimal(min(reasoning, completion)) * rates[5] / 10**6
    )
    assert abs(cost.output_nano - exact_output) < 1


def test_existing_callers_keep_working() -> None:
    # Positional construction and the four original keywords, as gateway/config/schema.py used them.
    assert Price(3_000_000_000, 15_000_000_000).source == "config"
    price = Price.per_mtok(input="3", output="15", cached_input="0.30", cache_write="3.75", source="x")
    assert (price.cached_input, price.cache_write, price.source) == (300_000_000, 3_750_000_000, "x")


def test_money_conversions_never_use_floats() -> None:
    assert usd_to_nano("0.0000000005") == 1
    assert usd_to_nano(Decimal("2.50")) == 2_500_000_000
    assert format_usd(1) == "0.000000001"
    assert format_usd(12_340_000_000) == "12.34"
