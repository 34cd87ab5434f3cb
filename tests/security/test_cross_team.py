"""A team's key reaches its own team's data and nobody else's, on every route the app serves.

The table below names every (method, path) the app has, with the check that proves the route keeps
teams apart; `test_every_route_is_in_the_table` fails when a route is added without a row here.
Team beta's traces (its key's prefix, id and name, a tag, its team name) are planted first, then
team alpha's key tries to read them, act on them or act as beta.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from sandbox.server import SandboxServer
from tests.harness import GatewayServer
from tests.security.conftest import ADMIN, bearer, create_key, sandbox_requests, security_config

BETA_TAG = "beta-only-tag-7f3a"
BETA_KEY_NAME = "beta-secret-project"
PROMPT = [{"role": "user", "content": "What colour is a lighthouse?"}]


@dataclass
class World:
    gateway: GatewayServer
    http: httpx.Client
    upstreams: dict[str, SandboxServer]
    alpha: dict[str, Any]
    beta: dict[str, Any]

    @property
    def as_alpha(self) -> dict[str, str]:
        return bearer(self.alpha["key"])

    @property
    def as_beta(self) -> dict[str, str]:
        return bearer(self.beta["key"])

    def beta_marks(self) -> list[str]:
        """Strings that exist only in beta's data."""
        return [self.beta["prefix"], self.beta["id"], BETA_KEY_NAME, BETA_TAG, '"beta"']

    def assert_nothing_of_beta(self, response: httpx.Response) -> None:
        assert response.status_code < 500, response.text
        seen = [mark for mark in self.beta_marks() if mark in response.text]
        assert not seen, f"{response.request.method} {response.request.url.path} showed {seen}"

    def chat(self, headers: dict[str, str], **extra: Any) -> httpx.Response:
        body = {"model": "gpt-4o-mini", "messages": PROMPT, "max_tokens": 8, **extra}
        return self.http.post("/v1/chat/completions", headers=headers, json=body)

    def rows(self) -> list[dict[str, Any]]:
        return self.gateway.ledger_rows()


@pytest.fixture(scope="module")
def world(upstreams: dict[str, SandboxServer], fresh_sqlite_url: str) -> Iterator[World]:
    with GatewayServer(security_config(upstreams, fresh_sqlite_url)) as gateway:
        alpha = create_key(gateway.base_url, "alpha", "alpha-app")
        beta = create_key(gateway.base_url, "beta", BETA_KEY_NAME)
        with httpx.Client(base_url=gateway.base_url, timeout=30) as http:
            world = World(gateway, http, upstreams, alpha, beta)
            # Beta's history: spend, a tag, a stored body (beta opts in), a cached answer.
            for _ in range(3):
                assert world.chat({**world.as_beta, "x-tollgate-tags": BETA_TAG}).status_code == 200
            assert world.chat(world.as_alpha).status_code == 200
            yield world


def denied_to_alpha(world: World, method: str, path: str, **kwargs: Any) -> None:
    """401 without a key, 403 with alpha's (and the error says nothing about beta)."""
    anonymous = world.http.request(method, path, **kwargs)
    assert anonymous.status_code == 401, anonymous.text
    response = world.http.request(method, path, headers=world.as_alpha, **kwargs)
    assert response.status_code == 403, response.text
    world.assert_nothing_of_beta(response)


def public_without_team_data(world: World, method: str, path: str) -> None:
    """Served to anyone (documents, health, the model list): nothing in it belongs to a team."""
    response = world.http.request(method, path, headers=world.as_alpha)
    assert response.status_code in (200, 308), response.text
    world.assert_nothing_of_beta(response)


# --- the checks, one per kind of route ------------------------------------------------------------


def check_chat(world: World) -> None:
    """Alpha cannot bill beta, nor read beta's cached answers, by any header or body field."""
    before = len(world.rows())
    impersonating = {
        **world.as_alpha,
        "x-tollgate-team": "beta",
        "x-tollgate-key": world.beta["id"],
        "x-tollgate-tags": f"team:beta,{BETA_TAG}",
        "x-api-key": world.beta["key"],  # Authorization wins, and it is alpha's
    }
    response = world.chat(impersonating, user="beta", metadata={"team": "beta"}, temperature=0)
    assert response.status_code == 200
    row = world.rows()[before]
    assert (row["team"], row["key_id"]) == ("alpha", world.alpha["id"])
    # Beta asked the same deterministic question first; alpha must get its own answer, not beta's.
    world.chat(world.as_beta, temperature=0, seed=11)
    again = world.chat(world.as_alpha, temperature=0, seed=11)
    assert again.headers["x-tollgate-cache"] != "hit"


def check_chat_idempotency(world: World) -> None:
    """Beta's Idempotency-Key names beta's request only: alpha reusing it gets a fresh answer."""
    body = {"model": "gpt-4o-mini", "messages": PROMPT, "max_tokens": 8}
    key = {"Idempotency-Key": "shared-order-1"}
    first = world.http.post("/v1/chat/completions", headers={**world.as_beta, **key}, json=body)
    assert first.status_code == 200
    calls = len(sandbox_requests(world.upstreams["openai"]))
    second = world.http.post("/v1/chat/completions", headers={**world.as_alpha, **key}, json=body)
    assert second.status_code == 200
    assert second.headers.get("x-tollgate-idempotent-replay") is None
    assert len(sandbox_requests(world.upstreams["openai"])) == calls + 1
    changed = {**body, "max_tokens": 9}  # and it is not a conflict with beta's body either
    third = world.http.post(
        "/v1/chat/completions", headers={**world.as_alpha, "Idempotency-Key": "shared-order-2"}, json=changed
    )
    world.http.post(
        "/v1/chat/completions", headers={**world.as_beta, "Idempotency-Key": "shared-order-2"}, json=body
    )
    assert third.status_code == 200


def check_chat_and_idempotency(world: World) -> None:
    check_chat(world)
    check_chat_idempotency(world)


def check_messages(world: World) -> None:
    before = len(world.rows())
    body = {"model": "claude", "max_tokens": 8, "messages": PROMPT, "metadata": {"user_id": "beta"}}
    headers = {"x-api-key": world.alpha["key"], "x-tollgate-team": "beta"}
    assert world.http.post("/v1/messages", headers=headers, json=body).status_code == 200
    assert world.rows()[before]["team"] == "alpha"


def check_embeddings(world: World) -> None:
    before = len(world.rows())
    headers = {**world.as_alpha, "x-tollgate-team": "beta"}
    body = {"model": "text-embedding-3-small", "input": "hi", "user": "beta"}
    assert world.http.post("/v1/embeddings", headers=headers, json=body).status_code == 200
    assert world.rows()[before]["team"] == "alpha"


def check_completions(path: str, body: dict[str, Any]) -> Callable[[World], None]:
    """Legacy completions and token counts bill (or log) the caller's team, whatever it names."""

    def check(world: World) -> None:
        before = len(world.rows())
        headers = {**world.as_alpha, "x-tollgate-team": "beta", "x-tollgate-key": world.beta["id"]}
        response = world.http.post(path, headers=headers, json=body)
        assert response.status_code < 500, response.text
        world.assert_nothing_of_beta(response)
        added = world.rows()[before:]
        assert added and {row["team"] for row in added} == {"alpha"}, added

    return check


def check_responses(world: World) -> None:
    """A stored response is its team's: another team's key cannot read, list, delete or continue it
    (404, as for an id that does not exist), and beta still has it afterwards."""
    body = {"model": "gpt-4o-mini", "input": "What colour is a lighthouse?", "max_output_tokens": 16}
    made = world.http.post("/v1/responses", headers=world.as_beta, json={**body, "store": True})
    assert made.status_code == 200, made.text
    rid = made.json()["id"]
    impersonating = {**world.as_alpha, "x-tollgate-team": "beta", "x-tollgate-key": world.beta["id"]}
    for method, path in (
        ("GET", f"/v1/responses/{rid}"),
        ("GET", f"/v1/responses/{rid}/input_items"),
        ("DELETE", f"/v1/responses/{rid}"),
    ):
        assert world.http.request(method, path).status_code == 401
        response = world.http.request(method, path, headers=impersonating)
        assert response.status_code == 404, response.text
        world.assert_nothing_of_beta(response)
    chained = world.http.post(
        "/v1/responses", headers=impersonating, json={**body, "previous_response_id": rid}
    )
    assert chained.status_code == 404, chained.text
    kept = world.http.get(f"/v1/responses/{rid}", headers=world.as_beta)
    assert kept.status_code == 200 and kept.json()["id"] == rid


def check_spend(world: World) -> None:
    """Alpha's spend only, whatever it asks for; naming beta is refused."""
    response = world.http.get("/v1/spend", params={"team": "beta"}, headers=world.as_alpha)
    assert response.status_code == 403
    for params in (
        {"group_by": "team,key"},
        {"group_by": "key"},
        {"group_by": "tag"},
        {"group_by": "team,day"},
    ):
        for headers in (world.as_alpha, {**world.as_alpha, "x-tollgate-team": "beta"}):
            shown = world.http.get("/v1/spend", params=params, headers=headers)
            assert shown.status_code == 200, shown.text
            world.assert_nothing_of_beta(shown)
            csv = world.http.get("/v1/spend", params=params, headers={**headers, "accept": "text/csv"})
            world.assert_nothing_of_beta(csv)
    assert world.http.get("/v1/spend").status_code == 401
    # The check above can fail: the admin does see beta.
    assert BETA_TAG in world.http.get("/v1/spend", params={"group_by": "tag"}, headers=ADMIN).text


def check_spend_routing(path: str) -> Callable[[World], None]:
    def check(world: World) -> None:
        """The routing report of a team key holds its own team's requests only."""
        for headers in (world.as_alpha, {**world.as_alpha, "x-tollgate-team": "beta"}):
            shown = world.http.get(path, params={"since": "7d"}, headers=headers)
            assert shown.status_code == 200, shown.text
            world.assert_nothing_of_beta(shown)
        assert world.http.get(path).status_code == 401

    return check


# --- issue 25: the request explorer (gateway/routes/requests.py) ---
def check_spend_requests(world: World) -> None:
    """Alpha lists alpha's rows only, whatever it filters by; naming beta is refused."""
    assert world.http.get("/v1/spend/requests").status_code == 401
    assert (
        world.http.get("/v1/spend/requests", params={"team": "beta"}, headers=world.as_alpha).status_code
        == 403
    )
    for params in ({}, {"tag": BETA_TAG}, {"key": world.beta["id"]}, {"status": "ok"}, {"limit": 500}):
        for headers in (world.as_alpha, {**world.as_alpha, "x-tollgate-team": "beta"}):
            shown = world.http.get("/v1/spend/requests", params=params, headers=headers)
            assert shown.status_code == 200, shown.text
            world.assert_nothing_of_beta(shown)
    # The check above can fail: the admin does see beta's rows.
    assert BETA_TAG in world.http.get("/v1/spend/requests", headers=ADMIN).text


def check_spend_request(world: World) -> None:
    """Beta's request, opened with alpha's key, does not exist (404, as a made-up id)."""
    theirs = next(row["id"] for row in world.rows() if row["team"] == "beta")
    path = f"/v1/spend/requests/{theirs}"
    assert world.http.get(path).status_code == 401
    refused = world.http.get(path, headers=world.as_alpha)
    assert refused.status_code == 404, refused.text
    world.assert_nothing_of_beta(refused)
    assert world.http.get(path, headers=ADMIN).json()["team"] == "beta"


# --- end issue 25 ---
def check_dashboard_api(name: str) -> Callable[[World], None]:
    def check(world: World) -> None:
        path = f"/dashboard/api/{name}"
        assert world.http.get(path).status_code == 401
        naming_beta = world.http.get(path, params={"team": "beta"}, headers=world.as_alpha)
        if name == "me":  # takes no filters: it says who the caller is
            world.assert_nothing_of_beta(naming_beta)
        else:
            assert naming_beta.status_code == 403, naming_beta.text
        answered = 0
        for params in ({}, {"tag": BETA_TAG}, {"model": "gpt-4o-mini"}, {"stack": "team"}):
            response = world.http.get(path, params=params, headers=world.as_alpha)
            if response.status_code == 400:
                continue  # a filter this figure does not take
            assert response.status_code == 200, response.text
            world.assert_nothing_of_beta(response)
            answered += 1
        assert answered >= 2

    return check


def check_admin(method: str, path: str) -> Callable[[World], None]:
    def check(world: World) -> None:
        concrete = path.replace("{key_id}", world.beta["id"])
        kwargs: dict[str, Any] = {}
        if method == "POST":
            kwargs["json"] = {"team": "beta", "name": "minted-by-alpha"}
        if method == "GET":
            kwargs["params"] = {"team": "beta"}
        denied_to_alpha(world, method, concrete, **kwargs)
        assert world.chat(world.as_beta).status_code == 200  # beta's key still works
        listed = world.http.get("/admin/keys", params={"team": "beta"}, headers=ADMIN).json()["data"]
        assert [k["name"] for k in listed] == [BETA_KEY_NAME]  # nothing minted or revoked

    return check


def check_metrics(world: World) -> None:
    """An operator endpoint with per-team aggregates and no key, id or prompt. Keys exist, so it is
    closed to anonymous scrapes and to team keys (it shows every team's spend); the admin key reads
    it. Team names appear as labels; key prefixes and ids never do."""
    assert world.http.get("/metrics").status_code == 401
    assert world.http.get("/metrics", headers=world.as_alpha).status_code == 401
    text = world.http.get("/metrics", headers=ADMIN).text
    assert "tollgate_requests_total" in text
    for mark in (world.beta["prefix"], world.beta["id"], BETA_KEY_NAME, BETA_TAG, "lighthouse"):
        assert mark not in text


def check_public(method: str, path: str) -> Callable[[World], None]:
    def check(world: World) -> None:
        public_without_team_data(world, method, path.replace("{name}", "dashboard.js"))

    return check


ROUTES: dict[tuple[str, str], Callable[[World], None]] = {
    ("POST", "/v1/chat/completions"): check_chat_and_idempotency,
    ("POST", "/v1/messages"): check_messages,
    ("POST", "/v1/embeddings"): check_embeddings,
    ("POST", "/v1/completions"): check_completions(
        "/v1/completions", {"model": "tail", "prompt": "hi", "max_tokens": 4, "user": "beta"}
    ),
    ("POST", "/v1/messages/count_tokens"): check_completions(
        "/v1/messages/count_tokens", {"model": "claude", "messages": PROMPT}
    ),
    ("POST", "/v1/responses"): check_responses,
    ("GET", "/v1/responses/{response_id}"): check_responses,
    ("GET", "/v1/responses/{response_id}/input_items"): check_responses,
    ("DELETE", "/v1/responses/{response_id}"): check_responses,
    ("GET", "/v1/spend"): check_spend,
    ("GET", "/v1/spend/routing"): check_spend_routing("/v1/spend/routing"),
    ("GET", "/v1/spend/routes"): check_spend_routing("/v1/spend/routes"),
    ("GET", "/dashboard/api/routing"): check_dashboard_api("routing"),
    ("GET", "/v1/spend/requests"): check_spend_requests,  # issue 25
    ("GET", "/v1/spend/requests/{request_id}"): check_spend_request,  # issue 25
    ("POST", "/admin/keys"): check_admin("POST", "/admin/keys"),
    ("GET", "/admin/keys"): check_admin("GET", "/admin/keys"),
    ("DELETE", "/admin/keys/{key_id}"): check_admin("DELETE", "/admin/keys/{key_id}"),
    ("GET", "/dashboard/api/me"): check_dashboard_api("me"),
    ("GET", "/dashboard/api/summary"): check_dashboard_api("summary"),
    ("GET", "/dashboard/api/spend-over-time"): check_dashboard_api("spend-over-time"),
    ("GET", "/dashboard/api/budgets"): check_dashboard_api("budgets"),
    ("GET", "/dashboard/api/top"): check_dashboard_api("top"),
    ("GET", "/dashboard/api/fleet"): check_dashboard_api("fleet"),
    ("GET", "/dashboard/api/table"): check_dashboard_api("table"),  # issue 25
    ("GET", "/dashboard/api/latency"): check_dashboard_api("latency"),  # issue 25
    ("GET", "/dashboard/api/errors"): check_dashboard_api("errors"),  # issue 25
    ("GET", "/metrics"): check_metrics,
    ("GET", "/dashboard"): check_public("GET", "/dashboard"),
    ("GET", "/dashboard/"): check_public("GET", "/dashboard/"),
    ("GET", "/dashboard/assets/{name}"): check_public("GET", "/dashboard/assets/{name}"),
    ("GET", "/v1/models"): check_public("GET", "/v1/models"),
    ("GET", "/v1/models/{model_id:path}"): check_public("GET", "/v1/models/gpt-4o-mini"),
    ("GET", "/healthz"): check_public("GET", "/healthz"),
    ("GET", "/readyz"): check_public("GET", "/readyz"),
    ("GET", "/openapi.json"): check_public("GET", "/openapi.json"),
    ("GET", "/docs"): check_public("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"): check_public("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"): check_public("GET", "/redoc"),
    ("GET", "/docs/assets/{name}"): lambda world: public_without_team_data(
        world, "GET", "/docs/assets/swagger-ui.css"
    ),
}


def served_routes(gateway: GatewayServer) -> set[tuple[str, str]]:
    """(method, path) of every route, included routers flattened, read from the app itself."""
    found = set()
    for route in iter_route_contexts(gateway.app.routes):
        assert route.methods, f"a route without methods (a mount?) no table row can cover: {route.path}"
        found |= {(method, route.path) for method in route.methods if method != "HEAD"}
    return found


def test_every_route_is_in_the_table(world: World) -> None:
    served = served_routes(world.gateway)
    assert served - ROUTES.keys() == set(), "routes with no cross-team check: add them to ROUTES"
    assert ROUTES.keys() - served == set(), "ROUTES names routes the app no longer serves"


@pytest.mark.parametrize("route", sorted(ROUTES), ids=lambda r: f"{r[0]} {r[1]}")
def test_team_alpha_cannot_reach_team_beta(world: World, route: tuple[str, str]) -> None:
    ROUTES[route](world)
