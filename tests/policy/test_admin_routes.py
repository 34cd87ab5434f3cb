"""`/admin/keys` on a minimal app holding only what the routes need: a key store and the admin key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.app import _gateway_error, _validation_error
from gateway.errors import GatewayError
from gateway.policy.key_store import KeyStore
from gateway.policy.keys import hash_key, is_well_formed
from gateway.routes import admin

ADMIN_KEY = "tollgate-admin-secret"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def admin_app(keys: KeyStore, admin_key: str | None) -> FastAPI:
    app = FastAPI()
    app.include_router(admin.router)
    app.add_exception_handler(GatewayError, _gateway_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    secret = None if admin_key is None else SecretStr(admin_key)
    app.state.runtime = SimpleNamespace(
        keys=keys, config=SimpleNamespace(auth=SimpleNamespace(admin_key=secret))
    )
    return app


@pytest.fixture
def keys(sqlite_engine: AsyncEngine) -> KeyStore:
    return KeyStore(sqlite_engine, cache_ttl=0.2)


@pytest.fixture
async def api(keys: KeyStore) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=admin_app(keys, ADMIN_KEY))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


async def create(api: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await api.post("/admin/keys", json=body, headers=ADMIN)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_creating_shows_the_key_once_with_its_record(
    api: httpx.AsyncClient, keys: KeyStore, team: str
) -> None:
    response = await api.post(
        "/admin/keys",
        headers=ADMIN,
        json={
            "team": team,
            "name": "ci",
            "expires_in_days": 30,
            "allowed_models": ["gpt-4o-mini"],
            "budget_daily_usd": "12.50",
            "budget_monthly_usd": 0.1,
            "rpm": 60,
            "tpm": 90_000,
            "metadata": {"owner": "ops"},
        },
    )
    assert response.status_code == 201, response.text
    assert response.headers["cache-control"] == "no-store"
    shown = response.json()
    assert is_well_formed(shown["key"]) and shown["key"].startswith(shown["prefix"] + "_")
    assert shown["id"].startswith("key_") and shown["team"] == team and shown["status"] == "active"
    assert shown["budget_daily_nano"] == 12_500_000_000 and shown["budget_daily_usd"] == "12.5"
    assert shown["budget_monthly_nano"] == 100_000_000  # 0.1 read as a decimal, not a binary float
    assert (shown["allowed_models"], shown["rpm"], shown["tpm"]) == (["gpt-4o-mini"], 60, 90_000)
    expires = datetime.fromisoformat(shown["expires_at"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=30))) < timedelta(minutes=1)
    record = await keys.lookup(shown["key"])
    assert record is not None and record.id == shown["id"]


async def test_listing_omits_every_key(api: httpx.AsyncClient, team: str) -> None:
    first = await create(api, team=team, name="a")
    second = await create(api, team=team, name="b")
    await create(api, team=team + "-x", name="other team")
    response = await api.get("/admin/keys", params={"team": team}, headers=ADMIN)
    assert response.status_code == 200
    listed = response.json()["data"]
    assert [k["id"] for k in listed] == [first["id"], second["id"]]
    assert all("key" not in k for k in listed)
    everything = (await api.get("/admin/keys", headers=ADMIN)).text
    for created in (first, second):
        assert created["key"] not in everything and hash_key(created["key"]) not in everything
        assert created["id"] in everything


async def test_revoking_ends_the_key(api: httpx.AsyncClient, keys: KeyStore, team: str) -> None:
    created = await create(api, team=team, name="leaked")
    response = await api.delete(f"/admin/keys/{created['id']}", headers=ADMIN)
    assert response.status_code == 200
    assert response.json()["status"] == "revoked" and response.json()["revoked_at"]
    assert await keys.lookup(created["key"]) is None
    missing = await api.delete("/admin/keys/key_nope", headers=ADMIN)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "key_not_found"


async def test_a_team_key_gets_403_and_no_key_401(api: httpx.AsyncClient, team: str) -> None:
    team_key = (await create(api, team=team, name="app"))["key"]
    calls = [("GET", "/admin/keys"), ("POST", "/admin/keys"), ("DELETE", "/admin/keys/key_x")]
    for method, path in calls:
        body = {"team": team, "name": "sneaky"} if method == "POST" else None
        as_team = await api.request(method, path, json=body, headers={"Authorization": f"Bearer {team_key}"})
        assert as_team.status_code == 403, (method, path)
        assert as_team.json()["error"]["type"] == "permission_error"
        assert as_team.json()["error"]["code"] == "forbidden"
        anonymous = await api.request(method, path, json=body)
        assert anonymous.status_code == 401, (method, path)
        assert anonymous.json()["error"] == {
            "message": anonymous.json()["error"]["message"],
            "type": "authentication_error",
            "code": "invalid_api_key",
            "param": None,
        }
        wrong = await api.request(method, path, json=body, headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401
    as_anthropic = await api.get("/admin/keys", headers={"x-api-key": ADMIN_KEY})
    assert as_anthropic.status_code == 200


async def test_authentication_comes_before_reading_the_body(api: httpx.AsyncClient) -> None:
    response = await api.post("/admin/keys", json={"nonsense": True})
    assert response.status_code == 401


@pytest.mark.parametrize(
    "body",
    [
        {"team": "t", "name": "n", "expires_in_days": 1, "expires_at": "2099-01-01T00:00:00Z"},
        {"team": "t", "name": "n", "expires_at": "2001-01-01T00:00:00Z"},
        {"team": "t", "name": "n", "budget_daily_usd": "-1"},
        {"team": "t", "name": "n", "budget_daily_usd": "lots"},
        {"team": "t", "name": "n", "budget_monthly_usd": "1e12"},
        {"team": "t", "name": "n", "allowed_models": []},
        {"team": "t", "name": "n", "rpm": 0},
        {"team": "", "name": "n"},
        {"team": "t", "name": "n", "plaintext": "mine"},
    ],
)
async def test_bad_requests_are_400s(api: httpx.AsyncClient, body: dict[str, Any]) -> None:
    response = await api.post("/admin/keys", json=body, headers=ADMIN)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_without_an_admin_key_the_admin_api_is_off(keys: KeyStore) -> None:
    transport = httpx.ASGITransport(app=admin_app(keys, None))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.get("/admin/keys", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 403
    assert "tollgate keys" in response.json()["error"]["message"]
