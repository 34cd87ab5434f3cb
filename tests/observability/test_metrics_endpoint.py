"""`/metrics` as an operator's Prometheus and a stranger see it: the standard process and GC
figures and the build, behind a token once the gateway has keys (it shows every team's spend), and
team labels that can be switched off."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.accounting.record import RequestRecord
from gateway.config.loader import ConfigError, build_config
from gateway.observability.metrics import Metrics
from gateway.observability.metrics_access import metrics_refusal
from gateway.policy.key_store import KeyStoreUnavailable
from sandbox.server import SandboxServer
from tests.conftest import gateway_config, gateway_settings
from tests.harness import GatewayServer

ADMIN = "adm-metrics-test-0001"
TOKEN = "scrape-token-0001-abcdef"


class Keys:
    def __init__(self, exist: bool | None) -> None:
        self.exist = exist

    async def any_exist(self) -> bool:
        if self.exist is None:
            raise KeyStoreUnavailable("down")
        return self.exist


def _source(*, keys: bool | None = False, teams: bool = False, **observability: Any) -> Any:
    config = build_config(
        {
            **gateway_settings("sqlite+aiosqlite://", "http://a", "http://b"),
            "observability": observability,
            **({"auth": {"admin_key": observability.pop("admin")}} if "admin" in observability else {}),
            **({"teams": {"search": {}}} if teams else {}),
        },
        source="test",
        environ={},
    )
    return SimpleNamespace(config=config, keys=Keys(keys))


def _status(source: Any, key: str | None = None) -> int:
    headers = {} if key is None else {"authorization": f"Bearer {key}"}
    refused = asyncio.run(metrics_refusal(source, headers))
    return 200 if refused is None else refused.status_code


@pytest.mark.parametrize(
    ("source", "anonymous"),
    [
        pytest.param(lambda: _source(), 200, id="open gateway, no key yet"),
        pytest.param(lambda: _source(keys=True), 401, id="a virtual key exists"),
        pytest.param(lambda: _source(keys=None), 401, id="key store unreachable: closed"),
        pytest.param(lambda: _source(teams=True), 401, id="teams configured"),
        pytest.param(lambda: _source(admin=ADMIN), 401, id="an admin key"),
        pytest.param(lambda: _source(admin=ADMIN, metrics_public=True), 200, id="metrics_public"),
        pytest.param(lambda: _source(metrics_token=TOKEN), 401, id="a token, even while open"),
    ],
)
def test_who_may_scrape(source: Any, anonymous: int) -> None:
    built = source()
    assert _status(built) == anonymous
    assert _status(built, "tg-abcdefgh_not-a-metrics-credential") == anonymous
    if built.config.observability.metrics_token is not None:
        assert _status(built, TOKEN) == 200
    if built.config.auth.admin_key is not None:
        assert _status(built, ADMIN) == 200


def test_a_public_endpoint_with_a_token_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="metrics_public and metrics_token"):
        _source(metrics_token=TOKEN, metrics_public=True)


def test_a_protected_scrape_and_what_it_shows(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    config = gateway_config(
        sqlite_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        auth={"admin_key": ADMIN},
        observability={"metrics_token": TOKEN},
    )
    with GatewayServer(config) as gateway:
        url = gateway.base_url + "/metrics"
        refused = httpx.get(url)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["error"]["type"] == "authentication_error"
        assert "tollgate_" not in refused.text
        assert httpx.get(url, headers={"authorization": "Bearer wrong-token-000000"}).status_code == 401
        assert httpx.get(url, headers={"authorization": f"Bearer {ADMIN}"}).status_code == 200
        text = httpx.get(url, headers={"authorization": f"Bearer {TOKEN}"}).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for standard in (
        "process_cpu_seconds",
        "process_resident_memory_bytes",
        "python_gc_collections",
        "python_info",
    ):
        assert standard in families, standard
    (build,) = families["tollgate_build_info"].samples
    assert build.value == 1 and build.labels["version"] and build.labels["python"].count(".") == 2


def _spent(metrics: Metrics, team: str) -> str:
    record = RequestRecord.begin(id="r", client_request_id=None)
    record.requested_model, record.model, record.provider, record.team = "m", "m", "p", team
    record.status, record.cost_nano, record.prompt_tokens = 200, 5_000, 10
    record.finish()
    metrics.observe(record)
    return metrics.render().decode()


def test_team_labels_can_be_switched_off() -> None:
    assert 'team="alpha"' in _spent(Metrics(), "alpha")
    text = _spent(Metrics(team_labels=False), "alpha")
    assert "alpha" not in text
    assert 'tollgate_cost_nano_usd_total{model="m",provider="p",team="all"} 5000.0' in text
