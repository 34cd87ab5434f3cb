"""Idempotency keys: a repeated request (same key, same body) within the TTL gets the stored answer —
no second upstream call, no second charge; a concurrent duplicate waits for the first; the same key
with a different body is a client error. Keys belong to the caller's team: another team sending the
same key (guessed, or just common, like "1") neither gets the stored answer nor collides with it."""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass

import orjson

from gateway.errors import GatewayError
from gateway.state.store import StateStore

_PENDING = b"P"
_DONE = b"D"
_POLL_SECONDS = 0.05


class IdempotencyConflict(GatewayError):
    status = 422
    type = "invalid_request_error"
    code = "idempotency_key_reused"


class IdempotencyInFlight(GatewayError):
    status = 409
    type = "invalid_request_error"
    code = "idempotency_key_in_flight"


@dataclass(frozen=True, slots=True)
class StoredResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def fingerprint(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class IdempotencyKeys:
    def __init__(self, store: StateStore, *, ttl: float) -> None:
        self._store = store
        self._ttl = ttl

    async def claim(
        self, key: str, digest: str, *, wait_until: float, team: str | None = None
    ) -> StoredResponse | None:
        """None when this request now owns the key; the stored answer when it is a repeat.

        A duplicate of a request still in flight waits for it until `wait_until` (monotonic).
        """
        name = _name(team, key)
        while True:
            if await self._store.set_if_absent(name, _PENDING + digest.encode(), ttl=self._ttl):
                return None
            value = await self._store.get(name)
            if value is None:
                continue  # the first attempt failed and released the key: take it
            if value[1 : 1 + len(digest)].decode() != digest:
                raise IdempotencyConflict(
                    f"Idempotency-Key '{key}' was already used with a different request body",
                    param="Idempotency-Key",
                )
            if value[:1] == _DONE:
                return _decode(value[1 + len(digest) :])
            if time.monotonic() >= wait_until:
                raise IdempotencyInFlight(f"a request with Idempotency-Key '{key}' is still in progress")
            await asyncio.sleep(_POLL_SECONDS)

    async def complete(
        self, key: str, digest: str, response: StoredResponse, *, team: str | None = None
    ) -> None:
        record = orjson.dumps({"s": response.status, "h": response.headers, "b": response.body.decode()})
        await self._store.set(_name(team, key), _DONE + digest.encode() + record, ttl=self._ttl)

    async def release(self, key: str, *, team: str | None = None) -> None:
        """The first request failed: let a retry of it run for real."""
        await self._store.delete(_name(team, key))


def _name(team: str | None, key: str) -> str:
    # The team's length first, so no team name and key can spell another pair's name.
    team = team or ""
    return f"idem:{len(team)}:{team}:{key}"


def _decode(record: bytes) -> StoredResponse:
    obj = orjson.loads(record)
    return StoredResponse(status=int(obj["s"]), headers=dict(obj["h"]), body=str(obj["b"]).encode())
