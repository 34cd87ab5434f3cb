"""Who may read `/metrics`: it carries every team's spend and budgets, which a team key may not see
(a team reads its own team's spend only), so once the gateway has keys it wants a credential too.

The rule: with `observability.metrics_token`, a scrape sends it (or the admin key) as a bearer.
Without one, `/metrics` is open while the gateway is (no admin key, no teams, no virtual key yet),
and afterwards only to the admin key, unless `observability.metrics_public: true` keeps it open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from fastapi import Response

from gateway.config.schema import Config
from gateway.errors import error_body
from gateway.policy.auth_mode import open_eligible
from gateway.policy.key_store import KeyStoreUnavailable
from gateway.policy.keys import secrets_equal
from gateway.policy.principal import presented_key


class KeysView(Protocol):
    async def any_exist(self) -> bool: ...


class MetricsGuarded(Protocol):
    """What the check reads (the runtime satisfies it)."""

    @property
    def config(self) -> Config: ...

    @property
    def keys(self) -> KeysView: ...


async def metrics_refusal(source: MetricsGuarded, headers: Mapping[str, str]) -> Response | None:
    """None when `headers` may read `/metrics`, else the 401 to answer with."""
    observability, auth = source.config.observability, source.config.auth
    secrets = [s.get_secret_value() for s in (observability.metrics_token, auth.admin_key) if s is not None]
    presented = presented_key(headers)
    if presented is not None and any(secrets_equal(presented, secret) for secret in secrets):
        return None
    if observability.metrics_token is None:
        if observability.metrics_public:
            return None
        if open_eligible(source.config) and not await _keys_exist(source):
            return None
    return _refused(presented is not None)


async def _keys_exist(source: MetricsGuarded) -> bool:
    try:
        return await source.keys.any_exist()
    except KeyStoreUnavailable:
        return True  # unknown: closed, since the answer may well be yes


def _refused(sent: bool) -> Response:
    message = (
        "this key may not read /metrics"
        if sent
        else "/metrics shows every team's spend: send 'Authorization: Bearer <observability.metrics_token "
        "or the admin key>', or set observability.metrics_public: true"
    )
    return Response(
        error_body(message, type="authentication_error", code="invalid_api_key"),
        status_code=401,
        media_type="application/json",
        headers={"www-authenticate": 'Bearer realm="metrics"'},
    )
