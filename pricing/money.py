"""Money as an integer count of nano-USD (1e-9 USD); conversions happen only at the edges."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

NANO_PER_USD = 1_000_000_000
TOKENS_PER_MTOK = 1_000_000


def usd_to_nano(usd: Decimal | str | int) -> int:
    """Exact dollars (never a float) to nano-USD, rounded half up."""
    value = Decimal(usd) * NANO_PER_USD
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def nano_to_usd(nano: int) -> Decimal:
    return Decimal(nano) / NANO_PER_USD


def format_usd(nano: int) -> str:
    """Plain decimal dollars without exponent or trailing zeros: 8_700_000 -> '0.0087'. Integer
    arithmetic: this runs for every answer's x-tollgate-cost-usd header."""
    whole, fraction = divmod(abs(nano), NANO_PER_USD)
    sign = "-" if nano < 0 else ""
    if not fraction:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{fraction:09d}".rstrip("0")
