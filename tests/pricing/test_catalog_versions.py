"""Catalog versions in the database: `prices update` refuses bad tables in one line and stores good
ones once, from a file or a URL; `prices list` shows them; a pin picks one, and a pin the database
lacks keeps the catalog in force and says why."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from gateway.accounting import catalogs
from gateway.accounting.catalog_watch import CatalogWatcher
from gateway.accounting.database import create_engine, run_migrations
from gateway.cli.main import main
from gateway.config.schema import PricingConfig
from pricing.catalog import PriceCatalog
from pricing.table import PriceTable, parse_table

GPT = {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05}


def tollgate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'tollgate.db'}"
    run_migrations(url)
    return url


def config_file_text(database: str = "sqlite://") -> str:
    return yaml.safe_dump(
        {
            "database": {"url": database},
            "providers": {"openai": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"}},
            "models": {"gpt-4o": {"provider": "openai"}},
        }
    )


@pytest.fixture
def config_file(tmp_path: Path, database: str) -> Path:
    path = tmp_path / "tollgate.yaml"
    path.write_text(config_file_text(database))
    return path


def table_file(tmp_path: Path, models: dict[str, object], name: str = "new.json") -> Path:
    path = tmp_path / name
    path.write_bytes(orjson.dumps(models))
    return path


@pytest.fixture
def big_table(tmp_path: Path) -> Path:
    """As many models as the shipped table, one of them repriced: not refused as truncated."""
    models = {f"model-{i}": GPT for i in range(len(PriceCatalog.load()))}
    return table_file(
        tmp_path, {**models, "gpt-4o": {"input_cost_per_token": 1e-06, "output_cost_per_token": 4e-06}}
    )


def test_a_bad_table_is_refused_in_one_line_and_nothing_is_stored(tmp_path: Path, config_file: Path) -> None:
    bad = table_file(tmp_path, {"gpt-4o": {**GPT, "output_cost_per_token": -1e-05}})
    code, out, err = tollgate("prices", "update", "--from", str(bad), "--config", str(config_file))
    assert (code, out) == (1, "")
    assert (
        err
        == f"price table {bad} not stored: model 'gpt-4o' field 'output_cost_per_token': -1e-05 is negative\n"
    )
    missing = tmp_path / "missing.json"
    code, _, err = tollgate("prices", "update", "--from", str(missing), "--config", str(config_file))
    assert code == 1 and err.startswith(f"cannot read {missing}: ") and err.count("\n") == 1
    assert tollgate("prices", "list", "--config", str(config_file))[1].count("\n") == 2  # shipped + pin


def test_a_table_far_smaller_than_the_one_in_force_needs_force(tmp_path: Path, config_file: Path) -> None:
    small = table_file(tmp_path, {"gpt-4o": GPT})
    code, _, err = tollgate("prices", "update", "--from", str(small), "--config", str(config_file))
    assert code == 1 and "1 models against" in err and "(a truncated download?); --force stores it" in err
    code, out, _ = tollgate("prices", "update", "--from", str(small), "--force", "--config", str(config_file))
    assert code == 0 and out.startswith("stored prices-")


def test_an_update_from_a_url_is_stored_once_and_listed(big_table: Path, config_file: Path) -> None:
    body = big_table.read_bytes()

    class Table(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Table)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/model_prices_and_context_window.json"
    try:
        code, out, err = tollgate(
            "prices", "update", "--from", url, "--date", "2031-01-02", "--config", str(config_file)
        )
        again = tollgate(
            "prices", "update", "--from", url, "--date", "2031-01-02", "--config", str(config_file)
        )
    finally:
        server.shutdown()
        server.server_close()
    assert (code, err) == (0, "")
    version = parse_table(body, source=url, date="2031-01-02").version
    assert out.startswith(f"stored {version} from {url}: ")
    assert "replicas price the next request with it within 30 s" in out
    assert again[1].startswith(f"already stored, same prices: {version}")
    code, listing, _ = tollgate("prices", "list", "--config", str(config_file))
    lines = listing.splitlines()
    assert lines[0].startswith(f"* {version}") and lines[0].endswith(url)
    assert lines[1].startswith(f"  {PriceCatalog.load().version}") and "shipped" in lines[1]
    assert lines[2] == "pricing.catalog: latest"
    # `prices MODEL` prices with the version in force too.
    code, shown, _ = tollgate("prices", "gpt-4o", "--config", str(config_file))
    assert f"catalog: {version}\n" in shown and "  input           $1\n" in shown


def test_a_pin_picks_a_version_and_a_missing_pin_keeps_the_catalog_in_force(
    database: str, big_table: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shipped = PriceCatalog.load()
    newer = parse_table(big_table.read_bytes(), source="newer", date="2031-01-02")

    async def scenario() -> list[str]:
        engine = create_engine(database)
        settings = PricingConfig()
        in_force = [shipped]
        watcher = CatalogWatcher(
            engine,
            shipped=shipped,
            settings=lambda: settings,
            current=lambda: in_force[-1].version,
            swap=in_force.append,
        )
        seen = []
        try:
            await watcher.check()  # nothing stored: the shipped table stays
            seen.append(in_force[-1].version)
            assert await catalogs.store(engine, newer, source="newer") == (newer.version, True)
            redated = PriceTable(newer.models, source="again", date="2031-02-03")
            assert await catalogs.store(engine, redated, source="again") == (newer.version, False)
            assert await watcher.check()
            seen.append(in_force[-1].version)
            settings = PricingConfig(catalog="shipped")
            assert await watcher.check()
            seen.append(in_force[-1].version)
            settings = PricingConfig(catalog=newer.version)
            await watcher.check()
            seen.append(in_force[-1].version)
            settings = PricingConfig(catalog="prices-2000-01-01+sha256:00000000")
            assert not await watcher.check()
            assert not await watcher.check()  # said once, not at every tick
            seen.append(in_force[-1].version)
        finally:
            await engine.dispose()
        return seen

    with caplog.at_level("ERROR", logger="tollgate.pricing"):
        seen = asyncio.run(scenario())
    assert seen == [shipped.version, newer.version, shipped.version, newer.version, newer.version]
    assert [r.getMessage() for r in caplog.records] == [
        f"price catalog not changed, {newer.version} keeps pricing: pricing.catalog pins "
        "'prices-2000-01-01+sha256:00000000', which the database does not hold"
    ]


def test_reprice_with_a_catalog_the_database_lacks_says_so(config_file: Path) -> None:
    code, _, err = tollgate(
        "reprice", "--catalog", "prices-2000-01-01+sha256:00000000", "--config", str(config_file)
    )
    assert code == 1
    assert err == (
        "error: pricing.catalog pins 'prices-2000-01-01+sha256:00000000', which the database does not hold\n"
    )


def test_prices_model_never_creates_a_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOLLGATE_CONFIG", raising=False)
    monkeypatch.delenv("TOLLGATE_DATABASE_URL", raising=False)
    code, out, _ = tollgate("prices", "gpt-4o")
    assert code == 0 and f"catalog: {PriceCatalog.load().version}\n" in out
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(autouse=True)
def _no_config_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("TOLLGATE_CONFIG", raising=False)
    monkeypatch.delenv("TOLLGATE_DATABASE_URL", raising=False)
    yield


def test_an_unreachable_database_is_one_line_not_a_traceback(tmp_path: Path, big_table: Path) -> None:
    config = tmp_path / "away.yaml"
    settings = yaml.safe_load(config_file_text())
    settings["database"] = {"url": "postgresql://tollgate@127.0.0.1:9/none"}
    config.write_text(yaml.safe_dump(settings))
    code, out, err = tollgate("prices", "update", "--from", str(big_table), "--config", str(config))
    assert (code, out) == (1, "")
    assert err.startswith("cannot use the database postgresql+asyncpg://tollgate@127.0.0.1:9/none: ")
    assert err.count("\n") == 1
