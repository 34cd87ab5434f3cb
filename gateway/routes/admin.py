"""`/admin/keys`: create, list and revoke virtual keys. Every route needs the admin key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Protocol

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from gateway.errors import GatewayError, InvalidRequest
from gateway.http.json_bodies import JsonBodyRoute
from gateway.policy.key_store import KeyRecord, KeyStore
from gateway.policy.principal import PermissionDenied, authenticate, require_admin
from pricing.money import format_usd, usd_to_nano

_JSON = "application/json"
# A typo'd "1e12" must not become a budget nobody can reach; $1bn is beyond any real budget.
_MAX_USD = Decimal(1_000_000_000)
Usd = Annotated[Decimal, Field(ge=0, le=_MAX_USD)]


class _AuthSettings(Protocol):
    @property
    def admin_key(self) -> SecretStr | None: ...


class _Config(Protocol):
    @property
    def auth(self) -> _AuthSettings: ...


class AdminRuntime(Protocol):
    """What these routes need from `app.state.runtime`."""

    @property
    def config(self) -> _Config: ...

    @property
    def keys(self) -> KeyStore: ...


class KeyNotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "key_not_found"


async def require_admin_key(request: Request) -> None:
    runtime: AdminRuntime = request.app.state.runtime
    secret = runtime.config.auth.admin_key
    if secret is None:
        raise PermissionDenied(
            "the admin API is off: no admin key is configured (auth.admin_key); use `tollgate keys`"
        )
    principal = await authenticate(
        request.headers, admin_key=secret.get_secret_value(), keys=runtime.keys, open_mode=False
    )
    require_admin(principal)


router = APIRouter(
    prefix="/admin", tags=["admin"], dependencies=[Depends(require_admin_key)], route_class=JsonBodyRoute
)


class CreateKey(BaseModel):
    """Money as decimal strings or numbers of USD, parsed as `Decimal` (never float arithmetic)."""

    model_config = ConfigDict(extra="forbid")

    team: str = Field(min_length=1, max_length=128)
    name: str = Field(min_length=1, max_length=256)
    expires_in_days: float | None = Field(default=None, gt=0, le=36_500)
    expires_at: datetime | None = None  # without a zone: UTC
    allowed_models: list[str] | None = Field(default=None, min_length=1)
    budget_daily_usd: Usd | None = None
    budget_monthly_usd: Usd | None = None
    rpm: int | None = Field(default=None, gt=0)
    tpm: int | None = Field(default=None, gt=0)
    metadata: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_expiry(self) -> CreateKey:
        if self.expires_in_days is not None and self.expires_at is not None:
            raise ValueError("give either 'expires_in_days' or 'expires_at', not both")
        return self

    def expiry(self, now: datetime) -> datetime | None:
        if self.expires_in_days is not None:
            return now + timedelta(days=self.expires_in_days)
        if self.expires_at is None:
            return None
        moment = self.expires_at if self.expires_at.tzinfo else self.expires_at.replace(tzinfo=UTC)
        if moment <= now:
            raise InvalidRequest("expires_at is in the past", param="expires_at")
        return moment


@router.post("/keys", status_code=201, summary="Create a virtual key; its plaintext is shown only here")
async def create_key(request: Request, body: CreateKey) -> Response:
    runtime: AdminRuntime = request.app.state.runtime
    plaintext, record = await runtime.keys.create(
        body.team,
        body.name,
        expires_at=body.expiry(datetime.now(UTC)),
        allowed_models=body.allowed_models,
        budget_daily_nano=_nano(body.budget_daily_usd),
        budget_monthly_nano=_nano(body.budget_monthly_usd),
        rpm=body.rpm,
        tpm=body.tpm,
        metadata=body.metadata,
    )
    shown = {**present_key(record), "key": plaintext}
    # The one response that carries a key: no cache anywhere may keep it.
    return Response(
        orjson.dumps(shown), status_code=201, media_type=_JSON, headers={"cache-control": "no-store"}
    )


@router.get("/keys", summary="Virtual keys (never their plaintext or hash), revoked ones included")
async def list_keys(
    request: Request, team: Annotated[str | None, Query(description="only this team's keys")] = None
) -> Response:
    runtime: AdminRuntime = request.app.state.runtime
    records = await runtime.keys.list(team)
    return Response(
        orjson.dumps({"object": "list", "data": [present_key(r) for r in records]}), media_type=_JSON
    )


@router.delete("/keys/{key_id}", summary="Revoke a virtual key (every replica refuses it within a second)")
async def revoke_key(request: Request, key_id: str) -> Response:
    runtime: AdminRuntime = request.app.state.runtime
    if not await runtime.keys.revoke(key_id):
        raise KeyNotFound(f"no key with id '{key_id}'", param="key_id")
    record = await runtime.keys.get(key_id)
    assert record is not None, "a revoked key is never deleted"
    return Response(orjson.dumps(present_key(record)), media_type=_JSON)


def present_key(record: KeyRecord, *, now: datetime | None = None) -> dict[str, Any]:
    """A key's record as JSON: nano-USD stay exact integers, with dollar strings for people."""
    return {
        "object": "virtual_key",
        "id": record.id,
        "prefix": record.prefix,
        "team": record.team,
        "name": record.name,
        "status": record.status(now or datetime.now(UTC)),
        "created_at": record.created_at.isoformat(),
        "expires_at": _iso(record.expires_at),
        "revoked_at": _iso(record.revoked_at),
        "allowed_models": None if record.allowed_models is None else list(record.allowed_models),
        "budget_daily_nano": record.budget_daily_nano,
        "budget_daily_usd": _usd(record.budget_daily_nano),
        "budget_monthly_nano": record.budget_monthly_nano,
        "budget_monthly_usd": _usd(record.budget_monthly_nano),
        "rpm": record.rpm,
        "tpm": record.tpm,
        "metadata": dict(record.metadata),
    }


def _nano(usd: Decimal | None) -> int | None:
    return None if usd is None else usd_to_nano(usd)


def _usd(nano: int | None) -> str | None:
    return None if nano is None else format_usd(nano)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
