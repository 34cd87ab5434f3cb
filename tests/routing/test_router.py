"""Complexity routing for `auto` with `routing.routes: []`: the score picks the tier, headers and the
ledger say why, hard constraints (context window, data policy, allowed tiers) come before cost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer

ROUTING = {
    "tiers": [
        {"name": "local", "models": ["llama"]},
        {"name": "standard", "models": ["small-window", "gpt-4o-mini"]},
        {"name": "frontier", "models": ["big-window"]},
    ],
    "thresholds": [0.17, 0.6],
    # Score-only routing (no task routes): what these tests pin down is the score and its thresholds.
    "routes": [],
}
EASY = [{"role": "user", "content": "hi there"}]
HARD = [
    {
        "role": "user",
        "content": "Prove step by step that the algorithm below terminates, then explain why its complexity is "
        "O(n log n), and rewrite it so that it must use at most O(1) extra memory:\n```python\n"
        + "def f(xs):\n    return sorted(xs)\n" * 20
        + "```\nYou must state every invariant, at least three lemmas, and exactly one counterexample.",
    }
]


@pytest.fixture(scope="module")
def routed(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[GatewayServer]:
    teams = {"private": {"data_policy": "local-only"}, "thrifty": {"allowed_tiers": ["local", "standard"]}}
    config = gateway_config(sqlite_url, openai_upstream.base_url, vllm_upstream.base_url, routing=ROUTING)
    with GatewayServer(config) as server:
        yield server
    del teams


def ask(server: GatewayServer, messages: list[dict[str, Any]], **headers: str) -> httpx.Response:
    return httpx.post(
        server.base_url + "/v1/chat/completions",
        json={"model": "auto", "messages": messages},
        headers=headers,
        timeout=20,
    )


def test_easy_goes_local_and_hard_goes_up_with_the_reason_recorded(routed: GatewayServer) -> None:
    easy, hard = ask(routed, EASY), ask(routed, HARD)
    assert easy.status_code == hard.status_code == 200
    assert (easy.headers["x-tollgate-tier"], easy.headers["x-tollgate-model"]) == ("local", "llama")
    assert hard.headers["x-tollgate-tier"] in ("standard", "frontier")
    easy_row, hard_row = (
        routed.ledger_row(easy.headers["x-request-id"]),
        routed.ledger_row(hard.headers["x-request-id"]),
    )
    assert easy_row["route_score"] < 0.17 <= hard_row["route_score"]
    assert hard_row["route_reason"].startswith(f"score {hard_row['route_score']:.2f} -> ")
    assert (easy_row["requested_model"], easy_row["model"], easy_row["tier"]) == ("auto", "llama", "local")


def test_forced_tier_and_explicit_models(routed: GatewayServer) -> None:
    forced = ask(routed, EASY, **{"x-tollgate-tier": "frontier"})
    assert forced.headers["x-tollgate-model"] == "big-window"
    assert routed.ledger_row(forced.headers["x-request-id"])["route_reason"] == "forced by x-tollgate-tier"
    unknown = ask(routed, EASY, **{"x-tollgate-tier": "platinum"})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "x-tollgate-tier"
    explicit = httpx.post(
        routed.base_url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": HARD}
    )
    row = routed.ledger_row(explicit.headers["x-request-id"])
    assert (row["route_score"], row["route_reason"]) == (None, "model named by the client")


def test_context_window_comes_before_cost(routed: GatewayServer) -> None:
    """small-window (8k) heads the standard tier; a 40k-token prompt skips it for gpt-4o-mini."""
    long = [{"role": "user", "content": "Summarise this report step by step. " + "word " * 40_000}]
    answer = ask(routed, long, **{"x-tollgate-tier": "standard"})
    assert answer.status_code == 200
    assert answer.headers["x-tollgate-model"] == "gpt-4o-mini"


def test_models_list_offers_auto(routed: GatewayServer) -> None:
    ids = [m["id"] for m in httpx.get(routed.base_url + "/v1/models").json()["data"]]
    assert ids[0] == "auto"


def test_team_policy_limits_the_tiers(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    teams = {
        "private": {"data_policy": "local-only"},
        "thrifty": {"allowed_tiers": ["local", "standard"]},
        "fixed": {"allow_forced_tier": False},
    }
    config = gateway_config(
        sqlite_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        routing=ROUTING,
        teams=teams,
        auth={"admin_key": "adm"},
    )
    with GatewayServer(config) as server:
        private, _ = server.call(server.runtime.keys.create("private", "p"))
        thrifty, _ = server.call(server.runtime.keys.create("thrifty", "t"))
        fixed, _ = server.call(server.runtime.keys.create("fixed", "f"))
        local_only = ask(server, HARD, authorization=f"Bearer {private}")
        assert local_only.status_code == 200 and local_only.headers["x-tollgate-tier"] == "local"
        refused = ask(server, EASY, authorization=f"Bearer {thrifty}", **{"x-tollgate-tier": "frontier"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "tier_not_allowed"
        # This team may not force a tier at all, even one it may be routed to.
        unforced = ask(server, EASY, authorization=f"Bearer {fixed}", **{"x-tollgate-tier": "local"})
        assert unforced.status_code == 403 and unforced.json()["error"]["code"] == "tier_forcing_disabled"
        assert server.ledger_row(unforced.headers["x-request-id"])["status"] == 403
        assert ask(server, EASY, authorization=f"Bearer {fixed}").status_code == 200


def test_forcing_a_tier_can_be_turned_off_for_the_gateway(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    teams = {"trusted": {"allow_forced_tier": True}, "other": {}}
    config = gateway_config(
        sqlite_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        routing={**ROUTING, "allow_forced_tier": False},
        teams=teams,
        auth={"admin_key": "adm"},
    )
    with GatewayServer(config) as server:
        trusted, _ = server.call(server.runtime.keys.create("trusted", "t"))
        other, _ = server.call(server.runtime.keys.create("other", "o"))
        refused = ask(server, EASY, authorization=f"Bearer {other}", **{"x-tollgate-tier": "frontier"})
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "permission_error"
        forced = ask(server, EASY, authorization=f"Bearer {trusted}", **{"x-tollgate-tier": "frontier"})
        assert forced.status_code == 200 and forced.headers["x-tollgate-tier"] == "frontier"


class _SlowModel:
    """A classifier that runs a model (as the MiniLM second stage does): 0.6 s of blocking work."""

    blocking = True

    def __init__(self, real: Any) -> None:
        self._real = real
        self.threshold = real.threshold

    def assess(self, body: dict[str, Any], *, top: int = 3) -> Any:
        time.sleep(0.6)
        return self._real.assess(body, top=top)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_classifier_that_runs_a_model_does_not_stall_other_requests(routed: GatewayServer) -> None:
    runtime = routed.runtime
    real = runtime.classifier
    slow = _SlowModel(real)
    key, _ = routed.call(runtime.keys.create("slow-router", "s"))
    runtime.classifier = runtime.router._classifier = slow  # type: ignore[assignment]
    try:

        async def both() -> tuple[float, float]:
            headers = {"authorization": f"Bearer {key}"}  # open mode may be over: keys exist
            async with httpx.AsyncClient(base_url=routed.base_url, timeout=20, headers=headers) as http:
                started = time.monotonic()

                async def timed(body: dict[str, Any]) -> float:
                    assert (await http.post("/v1/chat/completions", json=body)).status_code == 200
                    return time.monotonic() - started

                routed_auto = asyncio.create_task(timed({"model": "auto", "messages": EASY}))
                await asyncio.sleep(0.1)
                named = await timed({"model": "gpt-4o-mini", "messages": EASY})
                return await routed_auto, named

        auto_took, named_took = asyncio.run(both())
    finally:
        runtime.classifier = runtime.router._classifier = real  # type: ignore[assignment]
    assert auto_took >= 0.6
    assert named_took < 0.5, "a request that needs no classifier waited for the one that did"


def test_a_trimming_team_keeps_the_small_window_instead_of_a_larger_model(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    """With `on_overflow: trim` the 8k small-window keeps a 40k-token conversation, trimmed to fit."""
    teams = {"lean": {"context": {"trim": "middle-out", "on_overflow": "trim"}}}
    config = gateway_config(
        sqlite_url, openai_upstream.base_url, vllm_upstream.base_url, routing=ROUTING, teams=teams
    )
    with GatewayServer(config) as server:
        key, _ = server.call(server.runtime.keys.create("lean", "lean"))
        long = [{"role": "user", "content": "Summarise our talk."}]
        for turn in range(10):
            long += [
                {"role": "assistant", "content": f"part {turn} " + "word " * 4_000},
                {"role": "user", "content": f"go on {turn}"},
            ]
        answer = ask(server, long, **{"x-tollgate-tier": "standard", "authorization": f"Bearer {key}"})
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-tollgate-model"] == "small-window"
        assert answer.headers["x-tollgate-context"].startswith("trimmed=")
        row = server.ledger_row(answer.headers["x-request-id"])
        assert row["prompt_tokens"] < 8192 and row["context_tokens_removed"] > 30_000
