"""The semantic router on the shipped default routes and head: what a request is matched to and scored."""

import numpy as np
import pytest

from gateway.routing.semantic import (
    FEATURES,
    STRENGTHS,
    DifficultyHead,
    RouteSpec,
    SemanticRouter,
    load_default_routes,
    read_ask,
)


@pytest.fixture(scope="module")
def router() -> SemanticRouter:
    return SemanticRouter([route.spec() for route in load_default_routes()])


def _chat(*turns: tuple[str, object]) -> dict[str, object]:
    return {"model": "auto", "messages": [{"role": role, "content": content} for role, content in turns]}


def test_default_routes_are_well_formed() -> None:
    routes = load_default_routes()
    assert 10 <= len(routes) <= 16
    for route in routes:
        assert route.strength in STRENGTHS
        assert 5 <= len(route.examples) <= 12
    strength = {route.name: route.strength for route in routes}
    assert strength["code"] == strength["maths"] == strength["analysis"] == "strong"
    assert strength["chitchat"] == strength["factual"] == "cheap"


@pytest.mark.parametrize(
    ("text", "route"),
    [
        ("Write a function in Rust that reverses a linked list. Return only the code.", "code"),
        ("Implement a binary search tree with insert and delete in Java.", "code"),
        ("hello! how's it going?", "chitchat"),
        ("What is the capital of Peru?", "factual"),
        ("Solve 2x + 3 = 11 for x.", "maths"),
    ],
)
def test_smoke_requests_match_their_route(router: SemanticRouter, text: str, route: str) -> None:
    match = router.match(_chat(("user", text)))
    assert match.route == route
    assert (
        match.example in next(r.examples for r in load_default_routes() if r.name == route) or match.example
    )
    assert 0.0 <= match.difficulty <= 1.0


def test_a_follow_ups_difficulty_does_not_depend_on_the_previous_answer(router: SemanticRouter) -> None:
    question = ("user", "Explain what a mutex is.")
    follow_up = ("user", "ok, and a semaphore?")
    short = router.match(_chat(question, ("assistant", "A lock."), follow_up))
    long = router.match(_chat(question, ("assistant", "A mutex is a lock. " * 2000), follow_up))
    assert short == long


def test_dollar_amounts_are_not_maths(router: SemanticRouter) -> None:
    ask = read_ask(_chat(("user", "I paid $20 for lunch and $15 for a taxi, $35 in all.")))
    assert FEATURES["maths"](ask) == 0.0
    assert FEATURES["maths"](read_ask(_chat(("user", "solve x^2 = 4")))) > 0.0
    assert (
        router.match_text("Lunch was $20 and the taxi $15, please add both to my expense list.").route
        != "maths"
    )


def test_a_code_block_reads_as_code() -> None:
    ask = read_ask(_chat(("user", "why does this fail?\n```python\nx = [1]\nprint(x[3])\n```")))
    assert FEATURES["code"](ask) == 1.0


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": "not a list"},
        {"messages": [None, 3, {"role": "user"}]},
        {"messages": [{"role": "user", "content": 42}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}]},
        {"prompt": ["odd", None]},
    ],
)
def test_malformed_bodies_do_not_raise(router: SemanticRouter, body: dict[str, object]) -> None:
    match = router.match(body)
    assert match.route in {route.name for route in router.routes}
    assert 0.0 <= match.difficulty <= 1.0


def test_longer_asks_score_harder_with_the_shipped_head(router: SemanticRouter) -> None:
    short = router.match_text("Prove it.")
    long = router.match_text("Prove that there are infinitely many primes of the form 4k + 3. " * 6)
    assert long.difficulty > short.difficulty


def test_custom_routes_and_a_head_from_bytes() -> None:
    head = DifficultyHead.load(
        b'{"format": 1, "intercept": 0.0, "features": [], "embedding_weights": ' + b"[0.0]" + b"}"
    )
    assert head.threshold == 0.5
    with pytest.raises(ValueError):
        SemanticRouter([])
    with pytest.raises(ValueError):
        SemanticRouter([RouteSpec("a", "x", ()), RouteSpec("a", "y", ())])


class _Fixed:
    """An embedder that reads each text as a fixed unit vector (so similarities are chosen)."""

    dims = 2

    def __init__(self, vectors: dict[str, tuple[float, float]]) -> None:
        self.vectors = vectors

    def embed(self, text: str) -> np.ndarray:
        v = np.asarray(self.vectors.get(text, (0.0, 0.0)), dtype=np.float32)
        n = float(np.linalg.norm(v))
        return v / n if n else v


def test_a_cheap_route_wins_when_it_is_nearly_as_near() -> None:
    embedder = _Fixed({"analyse": (1.0, 0.0), "chat": (0.0, 1.0), "ask": (1.0, 0.9), "deep": (1.0, 0.2)})
    specs = [RouteSpec("analysis", "", ("analyse",)), RouteSpec("chat", "", ("chat",))]
    head = DifficultyHead(
        embedding_weights=[0.0, 0.0], features=[], means=[], scales=[], feature_weights=[], intercept=0.0
    )
    plain = SemanticRouter(specs, embedder=embedder, head=head)
    preferring = SemanticRouter(specs, embedder=embedder, head=head, prefer=frozenset({"chat"}), margin=0.1)
    # "ask" is 0.74 near analysis and 0.67 near chat: within the margin, so chat.
    assert (plain.match_text("ask").route, preferring.match_text("ask").route) == ("analysis", "chat")
    assert preferring.match_text("deep").route == "analysis"  # 0.98 against 0.20: stays
