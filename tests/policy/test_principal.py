"""Who is calling: the admin, a team key, nobody (401), or anyone in open mode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.datastructures import Headers

from gateway.accounting.database import create_engine
from gateway.errors import describe
from gateway.policy.key_store import KeyStore
from gateway.policy.keys import generate_key
from gateway.policy.principal import (
    AuthenticationError,
    PermissionDenied,
    Principal,
    authenticate,
    presented_key,
    require_admin,
    require_team,
)

ADMIN_KEY = "tollgate-admin-secret"


@pytest.fixture
async def keys(sqlite_engine: AsyncEngine) -> KeyStore:
    return KeyStore(sqlite_engine, cache_ttl=0.2)


@pytest.fixture
async def empty_keys(empty_sqlite_url: str) -> AsyncIterator[KeyStore]:
    engine = create_engine(empty_sqlite_url)
    yield KeyStore(engine, cache_ttl=0.2)
    await engine.dispose()


def bearer(key: str) -> Headers:
    return Headers({"Authorization": f"Bearer {key}"})


async def auth(headers: Headers, keys: KeyStore, *, open_mode: bool = False) -> Principal:
    return await authenticate(headers, admin_key=ADMIN_KEY, keys=keys, open_mode=open_mode)


def error_of(exc: BaseException) -> tuple[int, dict[str, str]]:
    status, body, _ = describe(exc)
    return status, orjson.loads(body)["error"]


def test_the_key_comes_from_either_header() -> None:
    assert presented_key(Headers({"authorization": "Bearer tg-abc"})) == "tg-abc"
    assert presented_key(Headers({"AUTHORIZATION": "bearer   tg-abc  "})) == "tg-abc"
    assert presented_key(Headers({"X-Api-Key": "tg-abc"})) == "tg-abc"
    assert presented_key(Headers({"authorization": "Bearer one", "x-api-key": "two"})) == "one"
    assert presented_key(Headers({"authorization": "Basic dXNlcjpwYXNz"})) is None
    assert presented_key(Headers({"authorization": "Bearer "})) is None
    assert presented_key(Headers({})) is None
    assert presented_key({"x-api-key": " "}) is None


async def test_the_admin_key_makes_an_admin(keys: KeyStore) -> None:
    for headers in (bearer(ADMIN_KEY), Headers({"x-api-key": ADMIN_KEY})):
        principal = await auth(headers, keys)
        assert principal.kind == "admin" and principal.team is None and principal.key is None
        require_admin(principal)
    with pytest.raises(AuthenticationError):
        await auth(bearer(ADMIN_KEY + "x"), keys)
    with pytest.raises(AuthenticationError):  # no admin key configured: nothing matches it
        await authenticate(bearer(ADMIN_KEY), admin_key=None, keys=keys, open_mode=False)


async def test_a_team_key_makes_its_team(keys: KeyStore, team: str) -> None:
    plaintext, record = await keys.create(team, "svc")
    for headers in (bearer(plaintext), Headers({"x-api-key": plaintext})):
        principal = await auth(headers, keys)
        assert principal == Principal(kind="team_key", team=team, key=record)
        assert principal.key_id == record.id
    require_team(principal, team)
    for other in ("someone-else", None):
        with pytest.raises(PermissionDenied) as denied:
            require_team(principal, other)
        assert error_of(denied.value) == (
            403,
            {"message": denied.value.message, "type": "permission_error", "code": "forbidden", "param": None},
        )
    with pytest.raises(PermissionDenied):
        require_admin(principal)


@pytest.mark.parametrize(
    "headers",
    [
        Headers({}),
        Headers({"authorization": "Basic dXNlcjpwYXNz"}),
        bearer("sk-proj-not-ours"),
        bearer(generate_key()[0]),
    ],
    ids=["missing", "not-bearer", "foreign", "unknown"],
)
async def test_anything_else_is_a_401_in_openais_shape(keys: KeyStore, headers: Headers) -> None:
    with pytest.raises(AuthenticationError) as refused:
        await auth(headers, keys)
    status, error = error_of(refused.value)
    assert status == 401
    assert error["type"] == "authentication_error" and error["code"] == "invalid_api_key"
    presented = presented_key(headers)
    if presented:
        assert presented.split("_", 1)[-1] not in error["message"]  # the secret is never echoed


async def test_revoked_and_expired_keys_say_why(keys: KeyStore, team: str) -> None:
    revoked, record = await keys.create(team, "old")
    await keys.revoke(record.id)
    expired, _ = await keys.create(team, "temp", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    for plaintext, why in ((revoked, "revoked"), (expired, "expired")):
        with pytest.raises(AuthenticationError, match=why) as refused:
            await auth(bearer(plaintext), keys)
        assert error_of(refused.value)[0] == 401
        assert plaintext.split("_", 1)[-1] not in refused.value.message


async def test_open_mode_lets_anyone_in_until_the_first_key_exists(empty_keys: KeyStore) -> None:
    for headers in (Headers({}), bearer("anything"), bearer(generate_key()[0])):
        assert await auth(headers, empty_keys, open_mode=True) == Principal(kind="open")
    plaintext, record = await empty_keys.create("payments", "first key")
    # That key's holder is known at once; everyone else needs a key from now on.
    assert await auth(bearer(plaintext), empty_keys, open_mode=True) == Principal(
        kind="team_key", team="payments", key=record
    )
    with pytest.raises(AuthenticationError):
        await auth(Headers({}), empty_keys, open_mode=True)
    with pytest.raises(AuthenticationError):
        await auth(bearer("anything"), empty_keys, open_mode=True)


async def test_without_open_mode_an_empty_store_still_needs_a_key(empty_keys: KeyStore) -> None:
    with pytest.raises(AuthenticationError):
        await auth(Headers({}), empty_keys, open_mode=False)
