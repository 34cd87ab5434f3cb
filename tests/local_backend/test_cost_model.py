"""The GPU cost model and break-even, each figure worked by hand."""

from __future__ import annotations

from decimal import Decimal

import pytest

from local_backend.cost_model import BreakEven, GpuDeployment, break_even
from pricing.cost import cost_nano
from pricing.price import Price
from usage import Usage

GPT_4O = Price.per_mtok(input="2.50", output="10", cached_input="1.25")
# One $2.50/hour GPU doing 20,000 prefill and 1,500 decode tokens/s, busy 60% of the time.
L40S = GpuDeployment.of(
    gpu_hour_usd="2.50", gpus=1, input_tokens_per_second=20_000, output_tokens_per_second=1_500
)


def test_a_fully_busy_gpu_charges_each_token_its_gpu_time() -> None:
    # $3.60/hour = $0.001 a second. 10,000 input tokens/s -> $0.0000001 a token = $0.10/MTok;
    # 1,000 output tokens/s -> $0.000001 a token = $1/MTok.
    gpu = GpuDeployment.of(
        gpu_hour_usd="3.60",
        gpus=1,
        input_tokens_per_second=10_000,
        output_tokens_per_second=1_000,
        utilisation=1,
    )
    price = gpu.price()
    assert (price.input, price.output) == (100_000_000, 1_000_000_000)
    assert price.source == "gpu:3.60x1"
    # A request of 5,000 in + 500 out occupies 0.5 s + 0.5 s of the GPU = $0.001:
    assert cost_nano(Usage(prompt_tokens=5_000, completion_tokens=500), price) == 1_000_000


def test_idle_time_and_more_gpus_raise_the_price_per_token() -> None:
    # Half as busy doubles the price; two GPUs at the same total throughput double it again.
    gpu = GpuDeployment.of(
        gpu_hour_usd="3.60",
        gpus=2,
        input_tokens_per_second=10_000,
        output_tokens_per_second=1_000,
        utilisation="0.5",
    )
    assert (gpu.price().input, gpu.price().output) == (400_000_000, 4_000_000_000)
    assert gpu.source == "gpu:3.60x2"


def test_the_default_utilisation_is_sixty_percent() -> None:
    # $2.50 / (3,600 s x 0.6) = $0.00115741 a busy second;
    # / 20,000 tokens/s x 1e6 = $0.0578703704/MTok -> 57,870,370 nano-USD per MTok;
    # / 1,500 tokens/s x 1e6 = $0.7716049383/MTok -> 771,604,938 nano-USD per MTok.
    assert L40S.utilisation == Decimal("0.6")
    price = L40S.price()
    assert (price.input, price.output) == (57_870_370, 771_604_938)


def test_measured_float_throughputs_are_accepted_but_money_must_be_exact() -> None:
    measured = GpuDeployment.of(
        gpu_hour_usd=Decimal("3.60"),
        gpus=1,
        input_tokens_per_second=10_000.0,
        output_tokens_per_second=1_000.0,
        utilisation=1.0,
    )
    assert measured.price().input == 100_000_000
    with pytest.raises(TypeError):
        GpuDeployment.of(gpu_hour_usd=2.5, gpus=1, input_tokens_per_second=1, output_tokens_per_second=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"gpus": 0},
        {"input_tokens_per_second": 0},
        {"output_tokens_per_second": -5},
        {"utilisation": 0},
        {"utilisation": "1.5"},
        {"gpu_hour_usd": "-1"},
    ],
)
def test_nonsense_deployments_are_refused(change: dict[str, object]) -> None:
    settings: dict[str, object] = {
        "gpu_hour_usd": "2.50",
        "gpus": 1,
        "input_tokens_per_second": 20_000,
        "output_tokens_per_second": 1_500,
    }
    with pytest.raises(ValueError):
        GpuDeployment.of(**{**settings, **change})  # type: ignore[arg-type]


def test_break_even_against_gpt_4o_at_three_to_one() -> None:
    # Fixed: $2.50 x 1 GPU x 730 h = $1,825 a month.
    # gpt-4o blended 3:1: (3 x $2.50 + 1 x $10) / 4 = $4.375/MTok.
    # $1,825 / $4.375 = 417.142857 MTok -> self-hosting is cheaper from 417,142,858 tokens a month.
    # Capacity: 730 h x 3,600 s x 0.6 = 1,576,800 busy s; a 3:1 token takes
    # 0.75/20,000 + 0.25/1,500 = 0.000204166... s -> 7,723,102,040 tokens a month.
    result = break_even(L40S, GPT_4O)
    assert result == BreakEven(
        monthly_cost_nano=1_825_000_000_000,
        managed_nano_per_mtok=4_375_000_000,
        tokens_per_month=417_142_858,
        capacity_tokens_per_month=7_723_102_040,
    )
    assert result.reachable


def test_break_even_at_another_mix() -> None:
    # 1:1: ($2.50 + $10) / 2 = $6.25/MTok; $1,825 / $6.25 = 292 MTok exactly.
    assert break_even(L40S, GPT_4O, input_share=1, output_share=1).tokens_per_month == 292_000_000


def test_a_deployment_too_small_to_break_even_says_so() -> None:
    # gpt-4o-mini blended 3:1: (3 x $0.15 + $0.60) / 4 = $0.2625/MTok; $1,825 / $0.2625
    # = 6,952.38 MTok, within capacity; at 8 GPUs ($14,600/month) it needs 55,619 MTok, far beyond.
    mini = Price.per_mtok(input="0.15", output="0.60")
    assert break_even(L40S, mini).tokens_per_month == 6_952_380_953
    assert break_even(L40S, mini).reachable
    eight = GpuDeployment.of(
        gpu_hour_usd="2.50", gpus=8, input_tokens_per_second=20_000, output_tokens_per_second=1_500
    )
    result = break_even(eight, mini)
    assert result.tokens_per_month == 55_619_047_620
    assert not result.reachable


def test_a_free_managed_model_never_breaks_even() -> None:
    result = break_even(L40S, Price.per_mtok(input="0", output="0"))
    assert result.tokens_per_month is None and not result.reachable
