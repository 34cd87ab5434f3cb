"""The route table: default strengths onto tiers, difficulty moving one tier, and the reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from gateway.config.schema import RoutingConfig
from gateway.routing.routes import Decision, RouteTable, TaskRoute, move, strength_tier
from gateway.routing.semantic import RouteMatch, RouteSpec


class Fixed:
    """A matcher that answers every request with the same match, and remembers what it was built on."""

    blocking = False

    def __init__(self, specs: Sequence[RouteSpec], answer: RouteMatch) -> None:
        self.specs = list(specs)
        self.answer = answer

    def match(self, body: Mapping[str, Any]) -> RouteMatch:
        return self.answer


@pytest.mark.parametrize(
    ("strength", "tiers", "index"),
    [
        ("cheap", 3, 0),
        ("middle", 3, 1),
        ("strong", 3, 2),
        ("middle", 2, 0),
        ("strong", 2, 1),
        ("middle", 4, 1),
        ("middle", 5, 2),
        ("strong", 1, 0),
        ("middle", 1, 0),
    ],
)
def test_a_default_routes_strength_lands_on_a_tier(strength: str, tiers: int, index: int) -> None:
    assert strength_tier(strength, tiers) == index


def test_difficulty_moves_one_tier_and_never_off_the_ends() -> None:
    route = TaskRoute("code", 1, lower_below=0.3, raise_above=0.7)
    assert move(1, 0.1, route, 3)[0] == 0
    assert move(1, 0.5, route, 3) == (1, "")
    assert move(1, 0.9, route, 3)[0] == 2
    assert move(0, 0.1, TaskRoute("x", 0, lower_below=0.3), 3) == (0, "")
    assert move(2, 0.9, TaskRoute("x", 2, raise_above=0.7), 3) == (2, "")
    assert move(1, 0.3, route, 3) == (1, "")  # the thresholds themselves do not move it


def test_the_reason_names_route_similarity_example_and_tier() -> None:
    match = RouteMatch("code", 0.812, "implement a parser for arithmetic expressions in Rust", 0.9)
    decision = Decision(TaskRoute("code", 2), match, 2)
    assert (
        decision.reason("frontier")
        == "route code 0.81, like 'implement a parser for arithmetic expres…' -> frontier"
    )
    long = Decision(TaskRoute("x" * 64, 2), RouteMatch("x" * 64, 0.5, "y" * 400, 0.1), 2, "z" * 300)
    assert len(long.reason("frontier")) == 256


def config(**routing: Any) -> RoutingConfig:
    tiers = [{"name": n, "models": [n]} for n in ("local", "standard", "frontier")]
    return RoutingConfig.model_validate({"tiers": tiers, **routing})


def test_configured_routes_are_resolved_and_embedded_once() -> None:
    built: list[Fixed] = []

    def factory(specs: Sequence[RouteSpec]) -> Fixed:
        built.append(Fixed(specs, RouteMatch("code", 0.9, "e", 0.95)))
        return built[-1]

    routes = [
        {"name": "code", "description": "code", "examples": ["e"], "tier": "standard", "raise_above": 0.8},
        {
            "name": "chat",
            "description": "chat",
            "examples": ["hi", "yo"],
            "models": ["local"],
            "escalate": False,
        },
    ]
    table = RouteTable.from_config(config(routes=routes), matcher=factory)
    assert table is not None and len(built) == 1
    assert [(s.name, s.examples) for s in built[0].specs] == [("code", ("e",)), ("chat", ("hi", "yo"))]
    assert table.routes["chat"] == TaskRoute("chat", None, ("local",), None, None, False)
    decision = table.decide({"messages": []})
    assert (decision.route.name, decision.tier) == ("code", 2)  # standard, raised by 0.95 > 0.8
    assert table.decide({}) is not decision  # deciding again embeds nothing new
    assert len(built) == 1


def test_unset_routes_are_the_shipped_defaults_and_empty_is_none() -> None:
    assert RouteTable.from_config(config(routes=[], thresholds=[0.2, 0.6])) is None
    table = RouteTable.from_config(config())
    assert table is not None
    assert "code" in table.routes and table.routes["code"].tier == 2
