"""Routes by task on the request path: the configured routes (or the shipped default set, mapped
onto the configured tiers), resolved once per config load, and where a matched request ends up.

The semantic model (`gateway.routing.semantic`) says which route a request looks like and how hard
it is within that route; this module turns that into a tier and the sentence the ledger keeps.
Building a `RouteTable` embeds every route's examples once; `decide` costs one match per request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gateway.config.schema import RoutingConfig

if TYPE_CHECKING:
    # Imported when a table is built: numpy, the tokenizer and the embeddings cost a gateway that
    # routes no `auto` traffic ~25 MB of RSS and ~0.3 s of start-up.
    from gateway.routing.semantic import RouteMatch, RouteSpec

_EXAMPLE_CHARS = 40
_REASON_CHARS = 256


class Matcher(Protocol):
    """What the table needs of the semantic router (tests may hand in their own)."""

    blocking: bool

    def match(self, body: Mapping[str, Any]) -> RouteMatch: ...


MatcherFactory = Callable[[Sequence["RouteSpec"]], Matcher]


@dataclass(frozen=True, slots=True)
class TaskRoute:
    """A route resolved onto the tiers: a tier index, or a fixed list of models."""

    name: str
    tier: int | None
    models: tuple[str, ...] | None = None
    lower_below: float | None = None
    raise_above: float | None = None
    escalate: bool = True


@dataclass(frozen=True, slots=True)
class Decision:
    """The route a request matched, what the model said about it, and the tier it ends on."""

    route: TaskRoute
    match: RouteMatch
    tier: int | None  # None: the route names models, not a tier
    moved: str = ""  # why difficulty moved it a tier, or "" when it did not

    def reason(self, destination: str) -> str:
        """`route code 0.81, like 'implement a parser…' -> frontier`, at most 256 characters."""
        example = self.match.example.replace("\n", " ")
        if len(example) > _EXAMPLE_CHARS:
            example = example[:_EXAMPLE_CHARS].rstrip() + "…"
        text = f"route {self.route.name} {self.match.similarity:.2f}, like '{example}'"
        if self.moved:
            text += f", {self.moved}"
        return f"{text} -> {destination}"[:_REASON_CHARS]


def strength_tier(strength: str, tiers: int) -> int:
    """Where a default route's strength lands on `tiers` tiers: cheap the first, strong the last,
    middle the middle one (of two middles, the cheaper: difficulty may still raise it)."""
    if strength == "cheap":
        return 0
    if strength == "strong":
        return tiers - 1
    return (tiers - 1) // 2


def move(index: int, difficulty: float, route: TaskRoute, tiers: int) -> tuple[int, str]:
    """One tier down below `lower_below`, one up above `raise_above`, never off either end."""
    if route.lower_below is not None and difficulty < route.lower_below and index > 0:
        return index - 1, f"difficulty {difficulty:.2f} < {route.lower_below:g}, one tier down"
    if route.raise_above is not None and difficulty > route.raise_above and index < tiers - 1:
        return index + 1, f"difficulty {difficulty:.2f} > {route.raise_above:g}, one tier up"
    return index, ""


class RouteTable:
    """The routes of one config load and the semantic router built from their examples."""

    def __init__(self, routes: Sequence[TaskRoute], matcher: Matcher, *, tiers: int) -> None:
        self.routes = {route.name: route for route in routes}
        self._matcher = matcher
        self._tiers = tiers

    @property
    def blocking(self) -> bool:
        return bool(getattr(self._matcher, "blocking", False))

    @classmethod
    def from_config(
        cls, config: RoutingConfig, *, matcher: MatcherFactory | None = None
    ) -> RouteTable | None:
        """The table for `config`, or None when routing is by score alone (`routes: []`, no tiers)."""
        if not config.tiers or config.routes == ():
            return None
        from gateway.routing.semantic import RouteSpec, SemanticRouter, load_default_routes

        tiers = [tier.name for tier in config.tiers]
        specs: list[RouteSpec] = []
        routes: list[TaskRoute] = []
        if config.routes is None:
            for default in load_default_routes():
                specs.append(RouteSpec(default.name, default.description, tuple(default.examples)))
                routes.append(
                    TaskRoute(
                        default.name,
                        strength_tier(default.strength, len(tiers)),
                        lower_below=default.lower_below,
                        raise_above=default.raise_above,
                    )
                )
        else:
            for route in config.routes:
                specs.append(RouteSpec(route.name, route.description, route.examples))
                routes.append(
                    TaskRoute(
                        route.name,
                        None if route.tier is None else tiers.index(route.tier),
                        route.models,
                        route.lower_below,
                        route.raise_above,
                        route.escalate,
                    )
                )
        if matcher is None:
            cheapest = frozenset(route.name for route in routes if route.tier == 0)
            return cls(
                routes,
                SemanticRouter(specs, prefer=cheapest, margin=config.cheap_route_margin),
                tiers=len(tiers),
            )
        return cls(routes, matcher(specs), tiers=len(tiers))

    def decide(self, body: Mapping[str, Any]) -> Decision:
        match = self._matcher.match(body)
        route = self.routes[match.route]
        if route.tier is None:
            return Decision(route, match, None)
        tier, moved = move(route.tier, match.difficulty, route, self._tiers)
        return Decision(route, match, tier, moved)
