"""Prometheus metrics: real traffic through a real gateway shows up in /metrics with the right
counts and bounded labels; the state gauges read budgets, breakers, ledger and spool."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.accounting.record import RequestRecord
from gateway.config.loader import build_config
from gateway.config.schema import Config
from gateway.execution.breaker import CircuitBreakers
from gateway.models import ModelRegistry
from gateway.observability.metrics import Metrics
from gateway.state.memory import MemoryStateStore
from gateway.state.store import StateStore
from tests.conftest import PRICE
from tests.harness import GatewayServer
from tests.ops.scrape import label_values, observe_records, samples, scrape, total

SECRET_USER = "alice-private-user-7f3a"
SECRET_TAG = "checkout-experiment-91"


@pytest.fixture(scope="module")
def observed(gateway: GatewayServer) -> GatewayServer:
    observe_records(gateway)
    return gateway


def chat(server: GatewayServer, **body: Any) -> httpx.Response:
    body.setdefault("messages", [{"role": "user", "content": "Hello there"}])
    return httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=30)


def stream(server: GatewayServer, model: str) -> httpx.Response:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Count to five"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", server.base_url + "/v1/chat/completions", json=body, timeout=30) as response:
        response.read()
    return response


def test_real_traffic_is_counted_once_per_request_with_bounded_labels(observed: GatewayServer) -> None:
    before = scrape(observed)
    sent = [
        *(chat(observed, model="gpt-4o-mini", temperature=0.5) for _ in range(3)),
        *(stream(observed, "llama") for _ in range(2)),
        chat(observed, model="no-such-model"),
        chat(observed, model="gpt-4o-mini", temperature=0, messages=[{"role": "user", "content": "2+2?"}]),
        chat(observed, model="gpt-4o-mini", temperature=0, messages=[{"role": "user", "content": "2+2?"}]),
        chat(observed, model="ghost-with-fallback"),
        httpx.post(
            observed.base_url + "/v1/chat/completions",
            json={
                "model": "gpt-4o-mini",
                "user": SECRET_USER,
                "messages": [{"role": "user", "content": "hi"}],
            },
            headers={"x-tollgate-tags": SECRET_TAG},
        ),
    ]
    assert [r.status_code for r in sent] == [200] * 5 + [404] + [200] * 4
    text = scrape(observed)

    def delta(name: str, **labels: str) -> float:
        return total(text, name, **labels) - total(before, name, **labels)

    assert delta("tollgate_requests_total") == len(sent)
    assert delta("tollgate_requests_total", model="unknown", status="404", provider="none") == 1
    assert delta("tollgate_requests_total", model="llama", provider="local", tier="local", status="200") == 2
    assert delta("tollgate_request_errors_total", model="unknown") == 1
    assert delta("tollgate_request_duration_seconds_count") == len(sent)
    assert delta("tollgate_time_to_first_token_seconds_count", model="llama") == 2
    assert delta("tollgate_gateway_overhead_seconds_count") >= 8  # every answered request
    assert delta("tollgate_response_cache_requests_total", model="gpt-4o-mini", result="miss") == 1
    assert delta("tollgate_response_cache_requests_total", model="gpt-4o-mini", result="hit") == 1
    assert delta("tollgate_fallbacks_total", model="gpt-4o-mini") == 1
    assert delta("tollgate_upstream_retries_total", model="gpt-4o-mini") >= 1

    rows = [r for r in observed.ledger_rows() if r["id"] in {r.headers["x-request-id"] for r in sent}]
    assert len(rows) == len(sent)
    # Tokens and money match the ledger exactly, nano-USD included.
    assert delta("tollgate_input_tokens_total") == sum(r["prompt_tokens"] for r in rows)
    assert delta("tollgate_output_tokens_total") == sum(r["completion_tokens"] for r in rows)
    assert delta("tollgate_cost_nano_usd_total") == sum(r["cost_nano"] for r in rows) > 0
    assert delta("tollgate_cost_usd_total") == pytest.approx(sum(r["cost_nano"] for r in rows) / 1e9)

    # Bounded labels: config names and the gateway's own vocabulary, never what a client wrote.
    config = observed.runtime.config
    assert label_values(text, "model") <= {*config.models, "unknown"}
    assert label_values(text, "provider") <= {*config.providers, "none"}
    assert label_values(text, "tier") <= {"managed", "local", "none"}
    assert label_values(text, "team") <= {"none"}
    for secret in [SECRET_USER, SECRET_TAG, "no-such-model", *(r["id"] for r in rows)]:
        assert secret not in text


def test_state_gauges_show_circuits_and_the_ledger(observed: GatewayServer) -> None:
    chat(observed, model="gpt-4o-mini")
    runtime = observed.runtime
    breakers = CircuitBreakers(runtime.store, runtime.config.resilience.breaker)
    for _ in range(runtime.config.resilience.breaker.consecutive_failures):
        observed.call(breakers.record_failure("dead/ghost"))
    text = scrape(observed)
    circuits = {labels["deployment"]: value for labels, value in samples(text)["tollgate_circuit_open"]}
    assert circuits["dead/ghost"] == 1
    assert circuits["openai/gpt-4o-mini"] == 0
    assert set(circuits) == {d.key for _, m in runtime.registry.public_names() for d in m.deployments}
    assert total(text, "tollgate_ledger_queue_depth") == 0
    assert total(text, "tollgate_ledger_database_down") == 0
    assert total(text, "tollgate_ledger_written_rows_total") == runtime.ledger.written > 0
    # Every row passes through the journal: a live segment is traffic, not a backlog to alarm on.
    assert total(text, "tollgate_ledger_spool_bytes", state="pending") == 0
    assert total(text, "tollgate_ledger_spool_bytes", state="journal") > 0


# --- observe, on records built by hand ---------------------------------------------------------


def record(**fields: Any) -> RequestRecord:
    rec = RequestRecord.begin(id=fields.pop("id", "req-1"), client_request_id=None)
    for name, value in {"status": 200, "latency_ms": 12.5, **fields}.items():
        setattr(rec, name, value)
    return rec


def test_observe_counts_money_exactly_and_keeps_labels_bounded() -> None:
    metrics = Metrics()
    for i in range(3):
        metrics.observe(
            record(
                id=f"req-{i}",
                model="gpt-4o",
                provider="openai",
                tier="frontier",
                team="search",
                user="someone@example.com",
                tags=("secret-tag",),
                prompt_tokens=1_500,
                cached_tokens=1_024,
                completion_tokens=80,
                cost_nano=123_456_789,
                baseline_cost_nano=200_000_000,
                ttft_ms=250.0,
                overhead_ms=0.4,
                attempts=3,
                fallback_used=True,
                cache_status="miss",
            )
        )
    text = metrics.render().decode()
    spend = {"model": "gpt-4o", "provider": "openai", "team": "search"}
    assert total(text, "tollgate_cost_nano_usd_total", **spend) == 370_370_367
    assert total(text, "tollgate_cost_usd_total", **spend) == pytest.approx(0.370370367)
    assert total(text, "tollgate_baseline_cost_usd_total", **spend) == pytest.approx(0.6)
    assert total(text, "tollgate_input_tokens_total", **spend) == 4_500
    assert total(text, "tollgate_prompt_cache_read_tokens_total", **spend) == 3_072
    assert total(text, "tollgate_upstream_retries_total", model="gpt-4o") == 6
    assert total(text, "tollgate_fallbacks_total", model="gpt-4o") == 3
    assert total(text, "tollgate_time_to_first_token_seconds_count", model="gpt-4o") == 3
    assert total(text, "tollgate_time_to_first_token_seconds_bucket", model="gpt-4o", le="0.25") == 3
    assert total(text, "tollgate_gateway_overhead_seconds_bucket", le="0.0005") == 3
    for secret in ["req-0", "someone@example.com", "secret-tag"]:
        assert secret not in text


def test_a_request_refused_before_routing_is_labelled_by_its_model_or_unknown() -> None:
    metrics = Metrics()
    metrics.observe(
        record(requested_model="gpt-4o-2099-made-up", status=404, error_type="invalid_request_error")
    )
    config = build_config(
        {
            "providers": {"p": {"type": "openai", "base_url": "http://x/v1"}},
            "models": {"m": {"provider": "p", "tier": "local", "price": PRICE}},
            "aliases": {"fast": "m"},
        },
        environ={},
    )
    metrics.use_registry(ModelRegistry(config), auto_model="auto")
    metrics.observe(record(requested_model="fast", status=429, error_type="insufficient_quota"))
    metrics.observe(record(requested_model="auto", status=401, error_type="authentication_error"))
    text = metrics.render().decode()
    assert total(text, "tollgate_requests_total", model="unknown", tier="none", status="404") == 1
    assert total(text, "tollgate_requests_total", model="m", tier="local", provider="none", status="429") == 1
    assert total(text, "tollgate_request_errors_total", model="m", error_type="insufficient_quota") == 1
    assert total(text, "tollgate_requests_total", model="auto", status="401") == 1
    assert "gpt-4o-2099-made-up" not in text


def test_the_old_three_label_form_still_counts() -> None:
    metrics = Metrics()
    metrics.requests.labels("chat.completions", "gpt-4o", "200").inc()
    text = metrics.render().decode()
    assert total(text, "tollgate_requests_total", model="gpt-4o", provider="none", tier="none") == 1


# --- state gauges from a source built by hand --------------------------------------------------


@dataclass
class FakeLedger:
    database_down: bool = False
    queue_depth: int = 0
    written: int = 0
    spooled: int = 0
    spool_dir: Path = Path("./no-spool-here")


@dataclass
class FakeSource:
    config: Config
    store: StateStore
    ledger: FakeLedger = field(default_factory=FakeLedger)

    @property
    def registry(self) -> ModelRegistry:
        return ModelRegistry(self.config)


class BrokenStore(MemoryStateStore):
    async def get(self, key: str) -> bytes | None:
        raise ConnectionError("redis is away")

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        raise ConnectionError("redis is away")


@pytest.fixture
def source(tmp_path: Path) -> Iterator[FakeSource]:
    raw = {
        "ledger": {"spool_dir": str(tmp_path / "spool")},
        "providers": {"p": {"type": "openai", "base_url": "http://x/v1"}},
        "models": {"m": {"provider": "p", "price": PRICE}},
        "teams": {
            "search": {"budget_daily_usd": "10", "budget_monthly_usd": "100"},
            "support": {"budget_daily_usd": "5"},
            "free": {},
        },
    }
    yield FakeSource(build_config(raw, environ={}), MemoryStateStore())


async def test_budget_use_is_read_from_the_shared_counters(source: FakeSource) -> None:
    today = datetime.now(UTC).date()
    await source.store.set(f"budget:team:search:d:{today.isoformat()}", b"2500000000")
    await source.store.set(f"budget:team:search:m:{today:%Y-%m}", b"40000000000")
    metrics = Metrics()
    text = (await metrics.scrape(source)).decode()
    assert total(text, "tollgate_budget_used_nano_usd", team="search", period="day") == 2_500_000_000
    assert total(text, "tollgate_budget_limit_nano_usd", team="search", period="day") == 10_000_000_000
    assert total(text, "tollgate_budget_used_ratio", team="search", period="day") == 0.25
    assert total(text, "tollgate_budget_used_ratio", team="search", period="month") == 0.4
    # No counter yet (no request this period on any replica): no series rather than a false zero.
    assert "support" not in text and "free" not in text


def write_spool(spool: Path) -> None:
    spool.mkdir()
    (spool / "ledger.spool").write_bytes(b"x" * 300)
    (spool / "ledger.spool.17.replay").write_bytes(b"x" * 200)
    (spool / "ledger.spool.18.rejected").write_bytes(b"x" * 50)
    (spool / "ledger.spool.19.journal").write_bytes(b"x" * 70)


async def test_ledger_gauges_spool_bytes_and_counters_follow_the_writer(source: FakeSource) -> None:
    write_spool(Path(source.config.ledger.spool_dir))
    source.ledger = FakeLedger(
        database_down=True,
        queue_depth=42,
        written=5,
        spooled=3,
        spool_dir=Path(source.config.ledger.spool_dir),
    )
    metrics = Metrics()
    text = (await metrics.scrape(source)).decode()
    assert total(text, "tollgate_ledger_spool_bytes", state="pending") == 500
    assert total(text, "tollgate_ledger_spool_bytes", state="rejected") == 50
    assert total(text, "tollgate_ledger_spool_bytes", state="journal") == 70
    assert total(text, "tollgate_ledger_queue_depth") == 42
    assert total(text, "tollgate_ledger_database_down") == 1
    source.ledger.written, source.ledger.spooled = 9, 3
    text = (await metrics.scrape(source)).decode()
    assert total(text, "tollgate_ledger_written_rows_total") == 9
    assert total(text, "tollgate_ledger_spooled_rows_total") == 3


async def test_a_store_that_does_not_answer_keeps_the_last_values(source: FakeSource) -> None:
    metrics = Metrics()
    await metrics.refresh(source)
    assert metrics.snapshot.circuits == {"p/m": False}
    source.store = BrokenStore()
    source.ledger.queue_depth = 7
    text = (await metrics.scrape(source)).decode()
    assert total(text, "tollgate_metrics_refresh_errors_total") == 1
    assert total(text, "tollgate_circuit_open", deployment="p/m") == 0
    assert total(text, "tollgate_ledger_queue_depth") == 7  # read from the process, still fresh
