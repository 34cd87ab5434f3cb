"""The gauges read from the running gateway when /metrics is scraped, not counted per request:
circuit breakers, team budgets, the ledger's queue and spool, which dependencies answer, and the
build. `gateway.observability.metrics` refreshes the snapshot and registers these collectors."""

from __future__ import annotations

import asyncio
import os
import platform
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gateway.execution.breaker import CircuitBreakers
from pricing.money import usd_to_nano

if TYPE_CHECKING:
    from gateway.config.schema import Config
    from gateway.models import ModelRegistry
    from gateway.state.store import StateStore


class LedgerView(Protocol):
    """What the gauges read from the ledger writer."""

    @property
    def database_down(self) -> bool: ...

    @property
    def queue_depth(self) -> int: ...

    @property
    def spool_dir(self) -> Path:
        """This process's spool (a worker's own slot, not necessarily `ledger.spool_dir`)."""
        ...

    @property
    def written(self) -> int: ...

    @property
    def spooled(self) -> int: ...


class MetricsSource(Protocol):
    """What a scrape reads: the runtime satisfies it (the ledger needs `queue_depth`)."""

    @property
    def config(self) -> Config: ...

    @property
    def registry(self) -> ModelRegistry: ...

    @property
    def store(self) -> StateStore: ...

    @property
    def ledger(self) -> LedgerView: ...


@dataclass(frozen=True, slots=True)
class BudgetUse:
    team: str
    period: str  # "day" or "month"
    used_nano: int  # reserved + spent in the current period, from the shared counter
    limit_nano: int


@dataclass(slots=True)
class Snapshot:
    """The state gauges as of the last scrape."""

    circuits: dict[str, bool] = field(default_factory=dict)
    budgets: list[BudgetUse] = field(default_factory=list)
    queue_depth: int = 0
    database_down: bool = False
    spool_bytes: int = 0
    rejected_bytes: int = 0
    journal_bytes: int = 0


class BuildInfo(Collector):
    """`tollgate_build_info` as a collector, not a `Gauge`: with several workers a Gauge would go to
    the shared files and show once per process."""

    def __init__(self) -> None:
        self._labels = [_version(), platform.python_version()]

    def collect(self) -> Iterable[Any]:
        info = GaugeMetricFamily(
            "tollgate_build_info",
            "1, labelled with the running version and Python.",
            labels=["version", "python"],
        )
        info.add_metric(self._labels, 1.0)
        return [info]


class StateCollector(Collector):
    """Yields the last snapshot as gauges at collection time."""

    def __init__(self, current: Callable[[], tuple[Snapshot, Mapping[str, bool]]]) -> None:
        self._current = current

    def describe(self) -> Iterable[Any]:
        return list(self._families(Snapshot()))

    def collect(self) -> Iterable[Any]:
        up = GaugeMetricFamily(
            "tollgate_dependency_up",
            "1 while a dependency (database, state) answers; 0 while the gateway serves without it.",
            labels=["dependency"],
        )
        snapshot, dependencies = self._current()
        for name, is_up in sorted(dependencies.items()):
            up.add_metric([name], 1.0 if is_up else 0.0)
        return [*self._families(snapshot), up]

    @staticmethod
    def _families(snapshot: Snapshot) -> Iterator[GaugeMetricFamily]:
        circuit = GaugeMetricFamily(
            "tollgate_circuit_open", "1 while a deployment's circuit breaker is open.", labels=["deployment"]
        )
        for deployment, is_open in sorted(snapshot.circuits.items()):
            circuit.add_metric([deployment], 1.0 if is_open else 0.0)
        yield circuit
        used = GaugeMetricFamily(
            "tollgate_budget_used_nano_usd",
            "Team budget reserved and spent this period (shown once the team has a counter).",
            labels=["team", "period"],
        )
        limit = GaugeMetricFamily(
            "tollgate_budget_limit_nano_usd", "Team budget limit for the period.", labels=["team", "period"]
        )
        ratio = GaugeMetricFamily(
            "tollgate_budget_used_ratio", "Team budget used over its limit.", labels=["team", "period"]
        )
        for use in snapshot.budgets:
            used.add_metric([use.team, use.period], use.used_nano)
            limit.add_metric([use.team, use.period], use.limit_nano)
            ratio.add_metric([use.team, use.period], use.used_nano / use.limit_nano if use.limit_nano else 0)
        yield from (used, limit, ratio)
        yield GaugeMetricFamily(
            "tollgate_ledger_queue_depth", "Ledger rows waiting for the writer.", value=snapshot.queue_depth
        )
        yield GaugeMetricFamily(
            "tollgate_ledger_database_down",
            "1 while the ledger database is unreachable (rows go to the spool).",
            value=1.0 if snapshot.database_down else 0.0,
        )
        spool = GaugeMetricFamily(
            "tollgate_ledger_spool_bytes",
            "Bytes in the ledger spool: the live journal (every row passes through it; at most a "
            "segment or two), pending replay, or rejected by the database (needs a person).",
            labels=["state"],
        )
        spool.add_metric(["journal"], snapshot.journal_bytes)
        spool.add_metric(["pending"], snapshot.spool_bytes)
        spool.add_metric(["rejected"], snapshot.rejected_bytes)
        yield spool


async def read_snapshot(source: MetricsSource, *, budgets: bool, within: float) -> Snapshot:
    """The state gauges as they are now: circuits and team budgets from the store (within
    `within` seconds), the spool's size off the loop, the writer's queue."""
    ledger = source.ledger
    async with asyncio.timeout(within):
        circuits = await _circuits(source)
        uses = await _budgets(source) if budgets else []
    journal, spool, rejected = await asyncio.to_thread(_spool_bytes, ledger.spool_dir)
    return Snapshot(
        circuits=circuits,
        budgets=uses,
        queue_depth=ledger.queue_depth,
        database_down=ledger.database_down,
        spool_bytes=spool,
        rejected_bytes=rejected,
        journal_bytes=journal,
    )


async def _circuits(source: MetricsSource) -> dict[str, bool]:
    # The breakers keep everything in the store, so a fresh view over it reads the same state.
    breakers = CircuitBreakers(source.store, source.config.resilience.breaker)
    keys = {d.key for _, model in source.registry.public_names() for d in model.deployments}
    return {key: await breakers.is_open(key) for key in sorted(keys)}


async def _budgets(source: MetricsSource) -> list[BudgetUse]:
    """Team budgets from the shared counters `gateway.policy.budgets` keeps (same keys)."""
    today = datetime.now(UTC).date()
    wanted: list[tuple[str, str, str, int]] = []
    for team, spec in source.config.teams.items():
        if spec.budget_daily_usd is not None:
            limit = usd_to_nano(spec.budget_daily_usd)
            wanted.append((team, "day", f"budget:team:{team}:d:{today.isoformat()}", limit))
        if spec.budget_monthly_usd is not None:
            limit = usd_to_nano(spec.budget_monthly_usd)
            wanted.append((team, "month", f"budget:team:{team}:m:{today:%Y-%m}", limit))
    if not wanted:
        return []
    values = await source.store.get_many([key for _, _, key, _ in wanted])
    return [
        BudgetUse(team=team, period=period, used_nano=int(value), limit_nano=limit)
        for (team, period, _, limit), value in zip(wanted, values, strict=True)
        if value is not None
    ]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tollgate")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "unknown"


def _spool_bytes(directory: Path) -> tuple[int, int, int]:
    """Journal, pending and rejected bytes. A live journal segment is normal traffic on its way to
    the database, not a backlog: only replay files (and rows the database refused) are alarms."""
    journal = pending = rejected = 0
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return 0, 0, 0
    for entry in entries:
        if not entry.is_file():
            continue
        size = entry.stat().st_size
        if entry.name.endswith(".rejected"):
            rejected += size
        elif entry.name.endswith(".journal"):
            journal += size
        else:
            pending += size
    return journal, pending, rejected
