"""Routes by task (`routing.routes`): a named kind of request, the examples that teach the semantic
router what it looks like, and where it goes.

Cross-references (a tier that exists, a model that exists, names that are unique, thresholds that
do not cross) are checked in `gateway.config.loader`, which can name the YAML path of the bad field.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gateway.config.base import Strict
from gateway.config.context import ContextConfig

Example = Annotated[str, Field(min_length=1)]
Difficulty = Annotated[float, Field(ge=0, le=1)]


class RouteConfig(Strict):
    """One route. A request matched to it goes to its `tier` (or its `models`, in order); within the
    route, a difficulty below `lower_below` drops it one tier and one above `raise_above` raises it
    one tier (difficulty is in [0, 1], higher meaning the stronger tier is worth it)."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = Field(min_length=1)
    examples: tuple[Example, ...] = Field(min_length=1)
    tier: str | None = None
    # A fixed list instead of a tier: the first able model answers, the rest are its fallbacks.
    models: tuple[str, ...] | None = Field(default=None, min_length=1)
    lower_below: Difficulty | None = None
    raise_above: Difficulty | None = None
    # Whether a lower tier's verifiably bad answer may be retried one tier up (`routing` escalation).
    escalate: bool = True
    # The context policy for requests matched to this route; a team's own block overrides it field by
    # field (`gateway.context.policy`).
    context: ContextConfig | None = None
