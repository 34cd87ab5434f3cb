"""The GPU cost model: a self-hosted deployment's $/GPU-hour turned into $/MTok, and its break-even.

A self-hosted deployment costs the same whether it is busy or idle, so its per-token price is an
allocation of that fixed cost over the tokens it serves, by the GPU time each token takes:

    deployment cost per busy second  C = gpu_hour_usd x gpus / (3600 x utilisation)
    input  (prefill) $ per token     = C / input_tokens_per_second
    output (decode)  $ per token     = C / output_tokens_per_second

so a request of `i` input and `o` output tokens is charged C x (i/in_tps + o/out_tps): the GPU
seconds it occupied at full speed, with idle time spread over every token. The throughputs are
the whole deployment's (all its GPUs, batched, at saturation), configured or measured from
vLLM's `/metrics` over a busy interval; prefill is typically about 10x faster than decode.
`utilisation` is the share of wall-clock time the GPUs are busy (default 0.6): at 0.6 each busy
second also carries 0.67 idle seconds. Prefix-cache hits are billed as plain input, because
vLLM's measured prompt throughput already counts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from pricing.money import NANO_PER_USD, TOKENS_PER_MTOK, usd_to_nano
from pricing.price import Price

HOURS_PER_MONTH = 730  # 8,760 hours a year / 12
SECONDS_PER_HOUR = 3600
DEFAULT_UTILISATION = Decimal("0.6")

Number = Decimal | int | float | str


@dataclass(frozen=True, slots=True)
class GpuDeployment:
    """What a self-hosted deployment costs and how fast it is."""

    gpu_hour_usd: Decimal
    gpus: int
    input_tokens_per_second: Decimal
    output_tokens_per_second: Decimal
    utilisation: Decimal = DEFAULT_UTILISATION

    @classmethod
    def of(
        cls,
        *,
        gpu_hour_usd: Decimal | str | int,
        gpus: int,
        input_tokens_per_second: Number,
        output_tokens_per_second: Number,
        utilisation: Number = DEFAULT_UTILISATION,
    ) -> GpuDeployment:
        """Validated; throughputs and utilisation may be floats (measured), money may not."""
        if isinstance(gpu_hour_usd, float):
            raise TypeError("gpu_hour_usd is money: pass a Decimal or a string, never a float")
        deployment = cls(
            gpu_hour_usd=Decimal(gpu_hour_usd),
            gpus=gpus,
            input_tokens_per_second=_decimal(input_tokens_per_second),
            output_tokens_per_second=_decimal(output_tokens_per_second),
            utilisation=_decimal(utilisation),
        )
        if deployment.gpu_hour_usd < 0 or deployment.gpus < 1:
            raise ValueError("needs gpu_hour_usd >= 0 and at least one GPU")
        if deployment.input_tokens_per_second <= 0 or deployment.output_tokens_per_second <= 0:
            raise ValueError("throughputs must be positive tokens per second")
        if not 0 < deployment.utilisation <= 1:
            raise ValueError("utilisation is a share of time: 0 < utilisation <= 1")
        return deployment

    @property
    def source(self) -> str:
        return f"gpu:{self.gpu_hour_usd}x{self.gpus}"

    def monthly_cost_nano(self) -> int:
        return usd_to_nano(self.gpu_hour_usd * self.gpus * HOURS_PER_MONTH)

    def busy_seconds_per_month(self) -> Fraction:
        return Fraction(HOURS_PER_MONTH * SECONDS_PER_HOUR) * Fraction(self.utilisation)

    def price(self) -> Price:
        """The effective per-MTok price, `source="gpu:<gpu_hour>x<gpus>"`."""
        return Price(
            input=_round_half_up(self._nano_per_mtok(self.input_tokens_per_second)),
            output=_round_half_up(self._nano_per_mtok(self.output_tokens_per_second)),
            source=self.source,
        )

    def _nano_per_mtok(self, tokens_per_second: Decimal) -> Fraction:
        per_busy_second = (
            Fraction(self.gpu_hour_usd)
            * self.gpus
            * NANO_PER_USD
            / (SECONDS_PER_HOUR * Fraction(self.utilisation))
        )
        return per_busy_second * TOKENS_PER_MTOK / Fraction(tokens_per_second)


@dataclass(frozen=True, slots=True)
class BreakEven:
    """Monthly volume above which the GPU deployment is cheaper than a managed model.

    `tokens_per_month` is None when the managed model is free; `capacity_tokens_per_month` is
    how many tokens the deployment can serve a month at this mix and utilisation: a break-even
    above it means this deployment alone never pays off.
    """

    monthly_cost_nano: int
    managed_nano_per_mtok: int
    tokens_per_month: int | None
    capacity_tokens_per_month: int

    @property
    def reachable(self) -> bool:
        return self.tokens_per_month is not None and self.tokens_per_month <= self.capacity_tokens_per_month


def break_even(
    deployment: GpuDeployment, managed: Price, *, input_share: int = 3, output_share: int = 1
) -> BreakEven:
    """Where `monthly cost = volume x managed blended $/token`, at an input:output mix (3:1).

    The managed side is priced at its base input and output rates: no cache discount, no
    long-context tier, so the figure is the volume of plain traffic at which self-hosting wins.
    """
    if input_share < 0 or output_share < 0 or input_share + output_share == 0:
        raise ValueError("the input:output mix needs non-negative shares, not both zero")
    shares = input_share + output_share
    blended = Fraction(input_share * managed.input + output_share * managed.output, shares)
    monthly = deployment.monthly_cost_nano()
    tokens = None if blended == 0 else math.ceil(Fraction(monthly * TOKENS_PER_MTOK) / blended)
    seconds_per_token = Fraction(input_share, shares) / Fraction(
        deployment.input_tokens_per_second
    ) + Fraction(output_share, shares) / Fraction(deployment.output_tokens_per_second)
    return BreakEven(
        monthly_cost_nano=monthly,
        managed_nano_per_mtok=_round_half_up(blended),
        tokens_per_month=tokens,
        capacity_tokens_per_month=math.floor(deployment.busy_seconds_per_month() / seconds_per_token),
    )


def _decimal(value: Number) -> Decimal:
    # repr() of a measured float is its shortest exact decimal spelling.
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _round_half_up(value: Fraction) -> int:
    return math.floor(value + Fraction(1, 2))


__all__ = ["DEFAULT_UTILISATION", "HOURS_PER_MONTH", "BreakEven", "GpuDeployment", "break_even"]
