"""Who is calling: the admin, a team's virtual key, or anyone (open mode) — decided from headers.

A key arrives as `Authorization: Bearer <key>` (OpenAI SDKs) or `x-api-key: <key>` (Anthropic SDKs);
when both are sent, `Authorization` wins.

Open mode is the embedded default's "no auth configured" state. The caller passes
`open_mode=True` when its config has no admin key and no teams; this module then also asks the
key store whether any virtual key exists (cached, and permanently "yes" once one does), so creating
the first key — through the admin API or the CLI, on any replica — ends open mode within the key
cache's TTL, with no reload. In open mode nothing is refused, since there is nothing to check a key
against; a key that does resolve (one created a moment ago) still identifies its team.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from gateway.errors import GatewayError
from gateway.policy.key_store import KeyRecord, KeyStore
from gateway.policy.keys import secrets_equal, visible_prefix

PrincipalKind = Literal["admin", "team_key", "open"]


class AuthenticationError(GatewayError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class PermissionDenied(GatewayError):
    status = 403
    type = "permission_error"
    code = "forbidden"


@dataclass(frozen=True, slots=True)
class Principal:
    kind: PrincipalKind
    team: str | None = None
    key: KeyRecord | None = None

    @property
    def key_id(self) -> str | None:
        """What the ledger's `key_id` column records for this caller."""
        return None if self.key is None else self.key.id


ADMIN = Principal(kind="admin")
OPEN = Principal(kind="open")


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key the caller sent, if any. `headers` must look names up case-insensitively (Starlette's
    `Headers` does) or hold them in lower case."""
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, credential = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and credential.strip():
            return credential.strip()
        return None
    api_key = headers.get("x-api-key", "").strip()
    return api_key or None


async def authenticate(
    headers: Mapping[str, str], *, admin_key: str | None, keys: KeyStore, open_mode: bool
) -> Principal:
    """The caller behind `headers`, or `AuthenticationError` (401) when they cannot be identified."""
    presented = presented_key(headers)
    if open_mode and not await keys.any_exist():
        record = None if presented is None else await keys.lookup(presented)
        return OPEN if record is None else Principal(kind="team_key", team=record.team, key=record)
    if presented is None:
        raise AuthenticationError("no API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'")
    if admin_key is not None and secrets_equal(presented, admin_key):
        return ADMIN
    record = await keys.find(presented)
    if record is None:
        raise AuthenticationError(f"invalid API key{_shown(presented)}")
    status = record.status(datetime.now(UTC))
    if status != "active":
        raise AuthenticationError(f"API key {record.prefix}… ({record.name}) is {status}")
    return Principal(kind="team_key", team=record.team, key=record)


def require_admin(principal: Principal) -> None:
    if principal.kind != "admin":
        raise PermissionDenied("this needs the admin key")


def require_team(principal: Principal, team: str | None) -> None:
    """A team key may act on its own team only; the admin and open mode on any (None: all teams)."""
    if principal.kind == "team_key" and (team is None or team != principal.team):
        raise PermissionDenied(f"a key of team '{principal.team}' can only see team '{principal.team}'")


def _shown(presented: str) -> str:
    # Never echo a secret: only the visible prefix of something shaped like a Tollgate key.
    prefix = visible_prefix(presented)
    return "" if prefix is None else f" ({prefix}…)"
