"""A price update through the real gateway: `tollgate prices update` stores a newer table, both
replicas on the database price the next request with it, earlier rows keep their cost until
`tollgate reprice`, and every row names the catalog version it was priced with."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
import yaml

from gateway.cli.main import main
from gateway.config.loader import build_config
from pricing.catalog import PriceCatalog, shipped_table
from pricing.money import usd_to_nano
from sandbox.server import SandboxServer
from tests.conftest import gateway_settings
from tests.execution.test_retries import HELLO
from tests.harness import GatewayServer


def tollgate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def cut_gpt_4o_price(tmp_path: Path) -> Path:
    """The shipped table with gpt-4o at $5 / $20 per MTok (twice its $2.50 / $10)."""
    document = orjson.loads(shipped_table().read_bytes())
    document["models"]["gpt-4o"].update(input_cost_per_token=5e-06, output_cost_per_token=2e-05)
    document["date"] = "2031-01-02"
    path = tmp_path / "prices-2031-01-02.json"
    path.write_bytes(orjson.dumps(document))
    return path


def nano(usage: Any, input_usd_per_mtok: str, output_usd_per_mtok: str) -> int:
    """Cost in nano-USD of `usage` at these rates per MTok, rounded half up once (pricing/cost.py)."""
    exact = usage.prompt_tokens * usd_to_nano(input_usd_per_mtok) + usage.completion_tokens * usd_to_nano(
        output_usd_per_mtok
    )
    return (exact + 500_000) // 10**6


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'tollgate.db'}"
        return
    from tests.services import scratch_postgres_database

    with scratch_postgres_database() as url:
        yield url


def test_an_update_prices_the_next_request_on_every_replica_and_reprice_catches_up_the_rest(
    database_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer, tmp_path: Path
) -> None:
    settings = gateway_settings(
        database_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        database={"url": database_url, "auto_migrate": True},
        pricing={"catalog_check_seconds": 0.05},
    )
    config_file = tmp_path / "tollgate.yaml"
    config_file.write_text(yaml.safe_dump(settings))
    assert tollgate("migrate", "--config", str(config_file))[0] == 0
    config = build_config(settings, source="test", environ={})
    shipped = PriceCatalog.load().version
    with GatewayServer(config) as first, GatewayServer(config) as second:

        def ask(gateway: GatewayServer) -> tuple[dict[str, Any], Any]:
            client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key="k", max_retries=0)
            raw = client.chat.completions.with_raw_response.create(model="catalog-priced", messages=HELLO)
            usage = raw.parse().usage
            return gateway.ledger_row(raw.headers["x-request-id"]), usage

        before, before_usage = ask(first)
        assert before["price_version"] == shipped
        assert before["cost_nano"] == nano(before_usage, "2.5", "10")

        code, out, err = tollgate(
            "prices", "update", "--from", str(cut_gpt_4o_price(tmp_path)), "--config", str(config_file)
        )
        assert (code, err) == (0, "")
        version = out.split()[1]
        assert version.startswith("prices-2031-01-02+sha256:") and version != shipped
        assert f"against {shipped}: 0 models added, 0 removed, 1 changed\n" in out

        for gateway in (first, second):
            for _ in range(400):  # each replica checks every 0.05 s
                if gateway.runtime.prices.version == version:
                    break
                time.sleep(0.025)
            after, usage = ask(gateway)
            assert after["price_version"] == version
            assert after["price_source"] == "litellm:gpt-4o"
            assert after["cost_nano"] == nano(usage, "5", "20")
        unchanged = first.ledger_row(before["id"])
        assert (unchanged["cost_nano"], unchanged["price_version"]) == (before["cost_nano"], shipped)

        code, out, err = tollgate("reprice", "--since", "1d", "--config", str(config_file))
        assert code == 0, err
        assert f"with {version}: changed 1;" in out
        repriced = first.ledger_row(before["id"])
        assert repriced["price_version"] == version
        assert repriced["cost_nano"] == nano(before_usage, "5", "20")

        # Back to the shipped table on request: `reprice --catalog shipped` restores the first cost.
        code, out, err = tollgate(
            "reprice", "--since", "1d", "--catalog", "shipped", "--config", str(config_file)
        )
        assert code == 0, err
        restored = first.ledger_row(before["id"])
        assert (restored["cost_nano"], restored["price_version"]) == (before["cost_nano"], shipped)
