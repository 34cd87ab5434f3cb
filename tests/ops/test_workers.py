"""`tollgate serve --workers 2` as an operator runs it, on the real Redis and PostgreSQL: limits and
budgets hold across the two processes as if they were one, every request gets exactly one ledger
row, and any scrape of /metrics counts every worker's requests. Without Redis it refuses to start."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

import gateway.cli.main as cli
from gateway.accounting.spool import Spool
from gateway.cli.sandbox_launcher import free_port
from gateway.config.loader import build_config
from gateway.runtime import REDIS_URL_ENV
from gateway.workers import claim_spool_slot, fold_orphan_spools, refusal
from sandbox.server import SandboxServer
from tests.conftest import PRICE
from tests.services import require_redis

RPM = 8
BUDGET_USD = 0.002
_SCRUBBED = ("TOLLGATE_DATABASE_URL", "TOLLGATE_CONFIG", "TOLLGATE_REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")


@dataclass
class Served:
    base: str
    admin: dict[str, str]
    metrics_dir: Path
    database_url: str
    sent: list[httpx.Response] = field(default_factory=list)

    def key(self, team: str) -> dict[str, str]:
        created = httpx.post(
            self.base + "/admin/keys", json={"team": team, "name": team}, headers=self.admin, timeout=20
        )
        assert created.status_code == 201, created.text
        return {"authorization": f"Bearer {created.json()['key']}"}

    def chat_burst(self, auth: dict[str, str], count: int, *, max_tokens: int = 20) -> list[httpx.Response]:
        """`count` requests at once, each on its own connection, so the kernel spreads them over
        the workers."""

        def one(i: int) -> httpx.Response:
            body = {
                "model": "gpt-4o-mini",
                "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": f"hello {i}"}],
            }
            return httpx.post(self.base + "/v1/chat/completions", json=body, headers=auth, timeout=30)

        with ThreadPoolExecutor(max_workers=count) as pool:
            answers = list(pool.map(one, range(count)))
        self.sent += answers
        return answers


def _write_config(tmp: Path, database_url: str, upstream: str) -> Path:
    raw: dict[str, Any] = {
        "database": {"url": database_url, "auto_migrate": True},
        "state": {
            "backend": "redis",
            "redis_url": require_redis(),
            "prefix": f"tollgate-test:{uuid.uuid4().hex}:",
        },
        "ledger": {"spool_dir": str(tmp / "spool"), "flush_interval_ms": 5},
        "auth": {"admin_key": "adm"},
        "teams": {"limited": {"rpm": RPM}, "capped": {"budget_daily_usd": str(BUDGET_USD)}},
        "providers": {"up": {"type": "openai", "base_url": upstream + "/v1", "api_key": "sk-upstream"}},
        "models": {"gpt-4o-mini": {"provider": "up", "price": PRICE}},
    }
    path = tmp / "tollgate.yaml"
    path.write_text(json.dumps(raw))  # JSON is YAML
    return path


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str, openai_upstream: SandboxServer
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("workers")
    config = _write_config(tmp, postgres_url, openai_upstream.base_url)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp / "metrics")
    log = tmp / "serve.log"
    argv = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(config), "--workers", "2"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*argv, "--port", str(port)], cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            # Both workers, not just the first one to answer: the tests are about two processes.
            deadline = time.monotonic() + 60
            while log.read_text().count("Application startup complete") < 2:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the workers did not start:\n" + log.read_text())
                time.sleep(0.05)
            yield Served(
                f"http://127.0.0.1:{port}", {"authorization": "Bearer adm"}, tmp / "metrics", postgres_url
            )
        finally:
            process.terminate()
            process.wait(timeout=30)


@pytest.mark.postgres
@pytest.mark.redis
def test_a_rate_limit_admits_exactly_rpm_requests_across_workers(served: Served) -> None:
    answers = served.chat_burst(served.key("limited"), 2 * RPM)

    assert [a.status_code for a in answers].count(200) == RPM, [a.text for a in answers]
    refused = [a.json()["error"]["code"] for a in answers if a.status_code != 200]
    assert refused == ["rate_limit_exceeded"] * RPM


@pytest.mark.postgres
@pytest.mark.redis
def test_a_budget_holds_across_workers(served: Served) -> None:
    answers = served.chat_burst(served.key("capped"), 24)

    admitted = [a for a in answers if a.status_code == 200]
    refused = {a.json()["error"]["code"] for a in answers if a.status_code != 200}
    assert admitted and refused == {"budget_exceeded"}
    spent = sum(float(a.headers["x-tollgate-cost-usd"]) for a in admitted)
    assert spent <= BUDGET_USD


@pytest.mark.postgres
@pytest.mark.redis
def test_every_request_has_one_ledger_row_and_both_workers_served(served: Served) -> None:
    assert served.sent, "runs after the tests that send requests"
    ids = {a.headers["x-request-id"] for a in served.sent}

    rows: set[str] = set()
    deadline = time.monotonic() + 15
    while rows != ids and time.monotonic() < deadline:
        rows = asyncio.run(_ledger_ids(served.database_url))
        time.sleep(0.1)
    assert rows == ids

    per_worker = _requests_per_worker(served.metrics_dir)
    assert len(per_worker) == 2 and all(per_worker.values()), per_worker


@pytest.mark.postgres
@pytest.mark.redis
def test_any_scrape_counts_every_workers_requests(served: Served) -> None:
    served.chat_burst(served.key("metrics"), 6)
    expected = len(served.sent)

    for _ in range(4):  # fresh connections: whichever worker the kernel picks answers
        # Keys exist: /metrics wants the admin key (or observability.metrics_token).
        text = httpx.get(served.base + "/metrics", headers=served.admin, timeout=20).text
        total = sum(
            sample.value
            for family in text_string_to_metric_families(text)
            if family.name == "tollgate_requests"
            for sample in family.samples
            if sample.name == "tollgate_requests_total"
        )
        assert total == expected


def test_workers_refuse_to_start_on_in_memory_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in _SCRUBBED:
        monkeypatch.delenv(name, raising=False)
    raw = {
        "database": {"url": f"sqlite:///{tmp_path / 'ledger.db'}"},
        "providers": {"up": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"}},
        "models": {"gpt-4o-mini": {"provider": "up", "price": PRICE}},
    }
    config = tmp_path / "tollgate.yaml"
    config.write_text(json.dumps(raw))

    status = cli.main(["serve", "--config", str(config), "--workers", "2"])

    assert status == 2
    stderr = capsys.readouterr().err
    assert "--workers 2 needs shared state" in stderr
    assert "--allow-per-process-state" in stderr
    assert not (tmp_path / "ledger.db").exists(), "refused before touching the database"


def test_workers_start_on_redis_from_the_environment_or_when_per_process_state_is_accepted() -> None:
    config = build_config(
        {"providers": {"up": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"}}, "models": {}},
        source="test",
        environ={},
    )

    assert (
        refusal(config, {REDIS_URL_ENV: "redis://127.0.0.1:6379/0"}, workers=2, per_process_state=False)
        is None
    )
    assert refusal(config, {}, workers=2, per_process_state=True) is None
    assert refusal(config, {}, workers=1, per_process_state=False) is None
    assert refusal(config, {}, workers=3, per_process_state=False) is not None


def test_each_worker_spools_in_its_own_directory_and_a_replacement_takes_over(tmp_path: Path) -> None:
    first, second = claim_spool_slot(tmp_path), claim_spool_slot(tmp_path)
    try:
        assert (first.directory, second.directory) == (tmp_path, tmp_path / "worker-1")
        os.close(first.fd)  # the worker in slot 0 died
        replacement = claim_spool_slot(tmp_path)
        assert replacement.directory == tmp_path
        os.close(replacement.fd)
    finally:
        os.close(second.fd)


def test_rows_in_slots_no_worker_will_claim_are_replayed_from_slot_zero(tmp_path: Path) -> None:
    Spool(tmp_path / "worker-1").append([{"id": "kept-by-worker-1"}])
    retired = Spool(tmp_path / "worker-3")
    retired.append([{"id": "sealed"}])
    retired.pending()  # seals the file as a replay, as a crash mid-replay leaves it
    retired.append([{"id": "active"}])

    assert fold_orphan_spools(tmp_path, workers=2) == 2

    assert not (tmp_path / "worker-3").exists()
    replayed = [row["id"] for path in Spool(tmp_path).pending() for row in Spool.read(path)]
    assert sorted(replayed) == ["active", "sealed"]
    assert Spool(tmp_path / "worker-1").has_rows()


async def _ledger_ids(database_url: str) -> set[str]:
    dsn = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return {row["id"] for row in await conn.fetch("SELECT id FROM requests")}
    finally:
        await conn.close()


def _requests_per_worker(directory: Path) -> dict[str, float]:
    """Requests each worker process counted, from its own metrics file."""
    counts = {}
    for path in directory.glob("counter_*.db"):
        merged = MultiProcessCollector.merge([str(path)])  # type: ignore[no-untyped-call]
        counts[path.stem] = sum(
            s.value
            for m in merged
            if m.name == "tollgate_requests"
            for s in m.samples
            if s.name.endswith("_total")
        )
    return counts
