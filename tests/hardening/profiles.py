"""How hard the hardening tests search: a fixed, bounded set of examples for `make test`, a random
and longer search for `make fuzz`.

TOLLGATE_FUZZ_PROFILE=long makes every run draw new examples; TOLLGATE_FUZZ_EXAMPLES sets how many
per test (default 1,000 when long). Settings are applied per test, never loaded as hypothesis'
default profile, so the rest of the suite is untouched.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

LONG = os.environ.get("TOLLGATE_FUZZ_PROFILE", "ci") == "long"
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def fuzz_settings(*, ci_examples: int) -> settings:
    """`ci_examples` derandomized examples with no example database (the same ones every run, so CI
    never flakes on a new one), or the long profile's random search."""
    default = 1000 if LONG else ci_examples
    return settings(
        max_examples=int(os.environ.get("TOLLGATE_FUZZ_EXAMPLES", default)),
        derandomize=not LONG,
        database=None,
        deadline=None,
        suppress_health_check=_HEALTH,
        print_blob=LONG,
    )
