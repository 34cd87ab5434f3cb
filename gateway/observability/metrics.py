"""Prometheus metrics, one registry per app (never the process-global one, so several gateways can
live in one process, as they do in tests).

Two kinds, fed two ways:

- **Per request**, `Metrics.observe(record)` once the ledger row is final (from `close_record`):
  requests, tokens, cost, latency histograms, cache results, retries and fallbacks. It runs on
  every request, so each distinct label combination's children are bound once and kept: a request
  costs one dict lookup and a dozen increments (a few µs), not a dozen `labels()` calls.
- **State**, refreshed by `await Metrics.scrape(source)` when Prometheus asks for `/metrics`: circuit
  state per deployment, team budget use, ledger queue, spool and database health. Budgets and
  breakers live in the `StateStore`, which is async, while a Prometheus collector is sync; reading
  them in the scrape handler (bounded by a timeout) and rendering that snapshot keeps the values
  as fresh as the scrape with no background task. If the store does not answer, the previous
  snapshot is kept and `tollgate_metrics_refresh_errors_total` counts it.

Labels are bounded: model, provider and tier come from config (a requested model that does not
resolve is "unknown"), team from config or the admin's keys, status and error type from the
gateway's own vocabulary. Never request ids, users, tags or anything else a client writes.
Traffic and latency carry the team too (so a dashboard's team filter acts on them), capped at
`MAX_TEAMS` distinct names per process: teams seen after that count as "other". With
`observability.team_labels: false` team reads "all" and the per-team budget gauges are left out.

The registry also carries prometheus-client's standard process, GC and platform collectors and
`tollgate_build_info{version,python}`, so the usual dashboards and "which version runs" work.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from gateway.observability.state_gauges import (
    BuildInfo,
    LedgerView,
    MetricsSource,
    Snapshot,
    StateCollector,
    read_snapshot,
)

if TYPE_CHECKING:
    from gateway.accounting.record import RequestRecord
    from gateway.models import ModelRegistry

log = logging.getLogger("tollgate.metrics")

UNKNOWN = "unknown"
NONE = "none"
ALL_TEAMS = "all"
# Seconds, from a tenth of a millisecond (gateway overhead) to a minute (long generations).
SECONDS_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
)  # fmt: skip
CACHE_RESULTS = frozenset({"hit", "miss", "bypass", "idempotent_replay"})
_REFRESH_TIMEOUT = 2.0
# Label combinations whose children are kept bound; far above any real config's.
_MAX_BOUND = 10_000
# Distinct team label values per process; later teams are "other" (each team multiplies the
# latency histograms' series, 20 buckets per endpoint and model).
MAX_TEAMS = 200
OTHER_TEAM = "other"


class Metrics:
    def __init__(self, *, team_labels: bool = True) -> None:
        self.registry = CollectorRegistry()
        self.team_labels = team_labels
        for standard in (PROCESS_COLLECTOR, GC_COLLECTOR, PLATFORM_COLLECTOR):
            # The same collector objects the global registry holds: they keep no per-registry state.
            self.registry.register(standard)
        self.registry.register(BuildInfo())
        counter = partial(Counter, registry=self.registry)
        seconds = partial(Histogram, buckets=SECONDS_BUCKETS, registry=self.registry)
        route = ["endpoint", "model", "provider", "tier", "status", "team"]
        spend = ["model", "provider", "team"]
        self.requests = _RequestCounter(
            "tollgate_requests", "Requests answered.", route, registry=self.registry
        )
        self.errors = counter(
            "tollgate_request_errors", "Failed requests.", ["endpoint", "model", "error_type", "team"]
        )
        self.input_tokens = counter("tollgate_input_tokens", "Prompt tokens, cache reads included.", spend)
        self.output_tokens = counter("tollgate_output_tokens", "Completion tokens.", spend)
        self.cache_read_tokens = counter(
            "tollgate_prompt_cache_read_tokens", "Prompt tokens read from the provider's prompt cache.", spend
        )
        self.cache_write_tokens = counter(
            "tollgate_prompt_cache_write_tokens",
            "Prompt tokens written to the provider's prompt cache.",
            spend,
        )
        self.cost_nano = counter("tollgate_cost_nano_usd", "Cost in nano-USD (exact below 2^53: $9M).", spend)
        self.cost_usd = counter("tollgate_cost_usd", "Cost in USD.", spend)
        self.baseline_usd = counter(
            "tollgate_baseline_cost_usd", "Cost on the baseline model, uncached (savings: minus cost).", spend
        )
        self.ttft = seconds(
            "tollgate_time_to_first_token_seconds", "Time to the first streamed byte.", ["model", "team"]
        )
        self.latency = seconds(
            "tollgate_request_duration_seconds",
            "Whole request, in to last byte out.",
            ["endpoint", "model", "team"],
        )
        self.overhead = seconds(
            "tollgate_gateway_overhead_seconds",
            "Time in the gateway, not waiting on upstreams.",
            ["endpoint", "team"],
        )
        self.response_cache = counter(
            "tollgate_response_cache_requests",
            "Response-cache lookups (hit, miss, bypass).",
            ["model", "result", "team"],
        )
        self.retries = counter(
            "tollgate_upstream_retries", "Upstream attempts after the first.", ["model", "team"]
        )
        self.fallbacks = counter("tollgate_fallbacks", "Requests answered by a fallback.", ["model", "team"])
        self.price_unknown = counter(
            "tollgate_price_unknown",
            "Requests whose model has no known price: their ledger rows carry price_unknown.",
            ["model"],
        )
        self.escalations = counter(
            "tollgate_escalations",
            "auto answers redone on the next tier up because they failed a check (reason: the check).",
            ["reason", "from_tier"],
        )
        self.shadow_checks = counter(
            "tollgate_shadow_checks",
            "Shadow checks by outcome: agree, disagree, failed, dropped_saturated, dropped_shutdown.",
            ["outcome", "from_tier"],
        )
        self.ledger_spooled = counter(
            "tollgate_ledger_spooled_rows",
            "Ledger rows written to the local spool because the database was unavailable.",
        )
        self.ledger_written = counter("tollgate_ledger_written_rows", "Ledger rows written to the database.")
        self.refresh_errors = counter(
            "tollgate_metrics_refresh_errors", "Scrapes whose state gauges kept stale values."
        )
        self.snapshot = Snapshot()
        # Dependency name -> reachable, as the last readiness check or scrape saw it (set by the
        # caller, gateway.observability.readiness): `tollgate_dependency_up`.
        self.dependency_up: dict[str, bool] = {}
        self._teams: set[str] = set()
        self.registry.register(StateCollector(lambda: (self.snapshot, self.dependency_up)))
        self._bound: dict[tuple[Any, ...], _Bound] = {}
        # Public model names and aliases -> (model, tier), for requests refused before routing.
        self._models: dict[str, tuple[str, str]] = {}
        self._seen_written = 0
        self._seen_spooled = 0

    def use_registry(self, registry: ModelRegistry, *, auto_model: str | None = None) -> None:
        """Learn the config's model names (call at start-up and on every reload; each scrape does too):
        a request refused before it reached a model is labelled with the model it named when that is
        one of these (or the router's `auto_model`), else "unknown"."""
        models = {name: (model.name, model.tier) for name, model in registry.public_names()}
        if auto_model is not None:
            models[auto_model] = (auto_model, NONE)
        self._models = models

    def observe(self, record: RequestRecord) -> None:
        """Count one finished request. Cheap (a few µs) and never raises on odd values."""
        model, tier = record.model, record.tier
        if model is None:
            model, tier = self._models.get(record.requested_model, (UNKNOWN, tier))
        key = (
            record.endpoint,
            model,
            record.provider or NONE,
            tier or NONE,
            record.status,
            self.team_label(record.team),
            record.cache_status,
            record.error_type,
        )
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bind(key)
        bound.requests.inc()
        if bound.errors is not None:
            bound.errors.inc()
        if record.prompt_tokens > 0:
            bound.input_tokens.inc(record.prompt_tokens)
        if record.completion_tokens > 0:
            bound.output_tokens.inc(record.completion_tokens)
        if record.cached_tokens > 0:
            bound.cache_read_tokens.inc(record.cached_tokens)
        if record.cache_write_tokens > 0:
            bound.cache_write_tokens.inc(record.cache_write_tokens)
        if record.cost_nano > 0:
            bound.cost_nano.inc(record.cost_nano)
            bound.cost_usd.inc(record.cost_nano / 1e9)
        if record.baseline_cost_nano:
            bound.baseline_usd.inc(max(0, record.baseline_cost_nano) / 1e9)
        bound.latency.observe(record.latency_ms / 1000)
        if record.ttft_ms is not None:
            bound.ttft.observe(record.ttft_ms / 1000)
        if record.overhead_ms is not None:
            bound.overhead.observe(record.overhead_ms / 1000)
        if bound.cache is not None:
            bound.cache.inc()
        if record.attempts > 1:
            bound.retries.inc(record.attempts - 1)
        if record.fallback_used:
            bound.fallbacks.inc()

    def team_label(self, team: str | None) -> str:
        """The team as a label value: "none" without one, "other" past `MAX_TEAMS` distinct ones,
        "all" when team labels are off."""
        if not self.team_labels:
            return ALL_TEAMS
        if team is None:
            return NONE
        if team in self._teams:
            return team
        if len(self._teams) >= MAX_TEAMS:
            return OTHER_TEAM
        self._teams.add(team)
        return team

    def _bind(self, key: tuple[Any, ...]) -> _Bound:
        endpoint, model, provider, tier, status, team, cache, error_type = key
        if len(self._bound) >= _MAX_BOUND:
            self._bound.clear()
        spend = (model, provider, team)
        bound = _Bound(
            requests=self.requests.labels(endpoint, model, provider, tier, str(status), team),
            errors=None if error_type is None else self.errors.labels(endpoint, model, error_type, team),
            input_tokens=self.input_tokens.labels(*spend),
            output_tokens=self.output_tokens.labels(*spend),
            cache_read_tokens=self.cache_read_tokens.labels(*spend),
            cache_write_tokens=self.cache_write_tokens.labels(*spend),
            cost_nano=self.cost_nano.labels(*spend),
            cost_usd=self.cost_usd.labels(*spend),
            baseline_usd=self.baseline_usd.labels(*spend),
            latency=self.latency.labels(endpoint, model, team),
            ttft=self.ttft.labels(model, team),
            overhead=self.overhead.labels(endpoint, team),
            cache=None
            if cache is None
            else self.response_cache.labels(model, cache if cache in CACHE_RESULTS else "other", team),
            retries=self.retries.labels(model, team),
            fallbacks=self.fallbacks.labels(model, team),
        )
        self._bound[key] = bound
        return bound

    async def scrape(self, source: MetricsSource) -> bytes:
        """Refresh the state gauges from the running gateway, then render everything."""
        await self.refresh(source)
        return self.render()

    async def refresh(self, source: MetricsSource) -> None:
        routing = source.config.routing
        self.use_registry(source.registry, auto_model=routing.auto_model if routing.tiers else None)
        self._sync_ledger_counters(source.ledger)
        try:
            self.snapshot = await read_snapshot(source, budgets=self.team_labels, within=_REFRESH_TIMEOUT)
        except Exception as exc:  # a scrape must answer even while Redis or the disk does not
            self.refresh_errors.inc()
            log.warning("metrics: state gauges not refreshed (%s: %s)", type(exc).__name__, exc)
            self.snapshot = replace(
                self.snapshot,
                queue_depth=source.ledger.queue_depth,
                database_down=source.ledger.database_down,
            )

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def _sync_ledger_counters(self, ledger: LedgerView) -> None:
        """The writer keeps plain totals; the counters follow them."""
        if ledger.written > self._seen_written:
            self.ledger_written.inc(ledger.written - self._seen_written)
        if ledger.spooled > self._seen_spooled:
            self.ledger_spooled.inc(ledger.spooled - self._seen_spooled)
        self._seen_written, self._seen_spooled = ledger.written, ledger.spooled


class _RequestCounter(Counter):
    """Also takes `labels(endpoint, model, status)`, the form callers used before `observe` (provider,
    tier and team then read "none"), so a caller not yet moved to `observe` keeps counting."""

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> _RequestCounter:
        if len(labelvalues) == 3:
            endpoint, model, status = labelvalues
            labelvalues = (endpoint, model, NONE, NONE, status, NONE)
        return super().labels(*labelvalues, **labelkwargs)


@dataclass(slots=True)
class _Bound:
    """The children one label combination updates."""

    requests: Counter
    errors: Counter | None
    input_tokens: Counter
    output_tokens: Counter
    cache_read_tokens: Counter
    cache_write_tokens: Counter
    cost_nano: Counter
    cost_usd: Counter
    baseline_usd: Counter
    latency: Histogram
    ttft: Histogram
    overhead: Histogram
    cache: Counter | None
    retries: Counter
    fallbacks: Counter
