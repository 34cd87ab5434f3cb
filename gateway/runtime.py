"""What a running gateway holds: config, model registry, adapters, HTTP pool, shared state,
the executor, database and ledger.

Created in the app's lifespan and reached through `app.state.runtime`; never a module global.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.catalog_watch import CatalogWatcher
from gateway.accounting.database import create_engine
from gateway.accounting.spend import period_spend
from gateway.accounting.spool import Spool
from gateway.accounting.writer import LedgerWriter
from gateway.caching.response_cache import ResponseCache
from gateway.caching.semantic import SemanticIndex
from gateway.config.schema import Config
from gateway.execution.breaker import CircuitBreakers
from gateway.execution.executor import Executor
from gateway.execution.fleets import Fleets
from gateway.execution.idempotency import IdempotencyKeys
from gateway.execution.latency import LatencyBook
from gateway.execution.retry_budget import RetryBudget
from gateway.execution.upstreams import build_adapters, create_http_client
from gateway.models import ModelRegistry, price_book
from gateway.observability.fleet_metrics import FleetCollector
from gateway.observability.metrics import Metrics
from gateway.observability.redaction import Redactor
from gateway.observability.tracing import Tracing
from gateway.policy.auth_mode import open_eligible
from gateway.policy.budgets import Budgets, SpendLookup
from gateway.policy.gate import PolicyGate
from gateway.policy.key_store import KeyStore
from gateway.policy.limits import RateLimits
from gateway.routing.classifier import ComplexityClassifier
from gateway.routing.router import Router
from gateway.routing.second_stage import load_classifier
from gateway.routing.shadow import ShadowChecks
from gateway.state.memory import MemoryStateStore
from gateway.state.store import StateStore
from pricing.book import PriceBook
from pricing.catalog import PriceCatalog
from providers.adapter import Adapter
from providers.http import UpstreamHTTP

REDIS_URL_ENV = "TOLLGATE_REDIS_URL"


def create_state_store(config: Config, environ: Mapping[str, str]) -> StateStore:
    """Redis when configured (or TOLLGATE_REDIS_URL is set), else this process's memory."""
    url = environ.get(REDIS_URL_ENV) or (config.state.redis_url if config.state.backend == "redis" else None)
    if url:
        # Imported only here: redis-py costs a gateway without Redis ~10 MB of RSS and start-up time.
        from gateway.state.failover import FallbackStateStore
        from gateway.state.redis_store import UNREACHABLE, RedisStateStore

        shared = RedisStateStore.from_url(url, prefix=config.state.prefix)
        return FallbackStateStore(
            shared, fail_open=config.state.on_failure == "open", unreachable=UNREACHABLE
        )
    return MemoryStateStore()


@dataclass(slots=True)
class Runtime:
    """The composition root. No stage takes a `Runtime`: each names the part it uses as a Protocol
    (`accounting.closing.Books`, `caching.lookup.Caches`, `routing.escalation.RoutingChecks`,
    `routing.shadow.ShadowRuntime`, `config.reload.Reloadable`), which this class satisfies; the
    handlers in `gateway.routes` are the only code that holds the whole."""

    config: Config
    # policy: who may call, what they may use, what they may spend
    keys: KeyStore
    gate: PolicyGate
    budgets: Budgets
    limits: RateLimits
    # routing
    router: Router
    classifier: ComplexityClassifier
    shadow: ShadowChecks
    # caching
    response_cache: ResponseCache
    semantic_index: SemanticIndex | None
    # execution: the registry, the adapters and the pool they share, and what is learned per deployment
    registry: ModelRegistry
    adapters: dict[str, Adapter]
    http: UpstreamHTTP
    executor: Executor
    idempotency: IdempotencyKeys
    fleets: Fleets
    latency: LatencyBook
    # accounting
    prices: PriceBook
    engine: AsyncEngine
    ledger: LedgerWriter
    # observability
    metrics: Metrics
    tracing: Tracing
    # shared state (memory or Redis) under budgets, limits, breakers, idempotency and the cache
    store: StateStore
    # The price table in force (shipped, or a version stored in the database) and what keeps it so.
    catalog: PriceCatalog
    catalogs: CatalogWatcher = field(init=False)

    def __post_init__(self) -> None:
        self.catalogs = CatalogWatcher(
            self.engine,
            shipped=self.catalog,
            settings=lambda: self.config.pricing,
            current=lambda: self.prices.version,
            swap=self.use_catalog,
        )

    @classmethod
    def start(
        cls,
        config: Config,
        *,
        database_url: str,
        environ: Mapping[str, str],
        spool_dir: Path | None = None,
    ) -> Runtime:
        http = create_http_client(environ)
        engine = create_engine(database_url)
        ledger = LedgerWriter(
            engine,
            spool=Spool(spool_dir or Path(config.ledger.spool_dir)),
            batch_size=config.ledger.batch_size,
            flush_interval=config.ledger.flush_interval_ms / 1000,
            max_queue=config.ledger.max_queue,
            probe_interval=config.ledger.probe_interval_seconds,
            retention_days=config.ledger.retention_days,
            durability=config.ledger.durability,
        )
        ledger.start()
        store = create_state_store(config, environ)
        budgets, limits = Budgets(store, _spent_from(engine)), RateLimits(store)
        classifier = load_classifier(second_stage=config.routing.second_stage)
        fleets = Fleets(config)
        metrics = Metrics(team_labels=config.observability.team_labels)
        metrics.registry.register(FleetCollector(fleets))
        tracing = Tracing.from_settings(
            config.observability.otlp_endpoint, environ, service_name=config.observability.service_name
        )
        http = tracing.propagating(http)  # upstream calls carry the trace (when tracing is on)
        latency = LatencyBook()
        catalog = PriceCatalog.load()
        prices, registry, adapters, executor, gate, router = _policy(
            config, http, store, budgets, limits, classifier, fleets, tracing, latency, catalog
        )

        return cls(
            config=config,
            prices=prices,
            metrics=metrics,
            registry=registry,
            adapters=adapters,
            http=http,
            store=store,
            executor=executor,
            idempotency=IdempotencyKeys(store, ttl=config.resilience.idempotency_ttl_seconds),
            budgets=budgets,
            limits=limits,
            gate=gate,
            router=router,
            classifier=classifier,
            fleets=fleets,
            tracing=tracing,
            latency=latency,
            keys=KeyStore(engine, cache_ttl=config.auth.key_cache_seconds),
            semantic_index=SemanticIndex(
                threshold=config.cache.semantic.threshold, max_entries=config.cache.semantic.max_entries
            )
            if config.cache.semantic.enabled
            else None,
            response_cache=ResponseCache(
                store,
                ttl_seconds=config.cache.response_ttl_seconds,
                max_body_bytes=config.cache.response_max_bytes,
            ),
            engine=engine,
            ledger=ledger,
            shadow=ShadowChecks(),
            catalog=catalog,
        )

    def apply(self, config: Config) -> list[str]:
        """Swap in a new policy (models, providers, prices, teams) without dropping requests:
        in-flight ones finish on the objects they started with. Returns what needs a restart."""
        built = _policy(
            config,
            self.http,
            self.store,
            self.budgets,
            self.limits,
            self.classifier,
            self.fleets,
            self.tracing,
            self.latency,
            self.catalog,
        )
        self.prices, self.registry, self.adapters, self.executor, self.gate, self.router = built
        restart = [
            name
            for name in ("server", "database", "state", "ledger", "observability")
            if getattr(config, name) != getattr(self.config, name)
        ]
        if _fleet_shape(config) != _fleet_shape(self.config):
            restart.append("models.*.fleet")
        self.config = config
        return restart

    def use_catalog(self, catalog: PriceCatalog) -> None:
        """Price the next request with `catalog` (a version from the database, or the shipped one)."""
        self.catalog = catalog
        self.apply(self.config)

    @property
    def admin_key(self) -> str | None:
        key = self.config.auth.admin_key
        return key.get_secret_value() if key is not None else None

    @property
    def open_mode(self) -> bool:
        """No admin key and no teams configured: serve without authentication until a key exists."""
        return open_eligible(self.config)

    async def begin(self) -> None:
        """What needs the running loop: the first scrape of every self-hosted fleet."""
        await self.ledger.prepare()
        await self.catalogs.start()  # the version in force before the first request
        await self.fleets.start()

    async def stop(self) -> None:
        await self.shadow.stop()  # before the adapters and the ledger they need close
        await self.catalogs.stop()
        await self.fleets.stop()
        await asyncio.to_thread(self.tracing.shutdown)
        await self.ledger.stop()
        for adapter in self.adapters.values():
            await adapter.aclose()
        await self.http.aclose()
        await self.store.aclose()
        await self.engine.dispose()


def _policy(
    config: Config,
    http: UpstreamHTTP,
    store: StateStore,
    budgets: Budgets,
    limits: RateLimits,
    classifier: ComplexityClassifier,
    fleets: Fleets,
    tracing: Tracing,
    latency: LatencyBook,
    catalog: PriceCatalog,
) -> tuple[PriceBook, ModelRegistry, dict[str, Adapter], Executor, PolicyGate, Router]:
    """Everything that follows from the policy file, built fresh on every (re)load (what is
    measured, the fleets' state and the deployments' latencies, carries over)."""
    prices = price_book(config, catalog=catalog)
    registry = ModelRegistry(config, prices=prices)
    tracing.use_config(config)
    adapters = build_adapters(config, http)
    executor = Executor(
        registry=registry,
        adapters=adapters,
        breakers=CircuitBreakers(store, config.resilience.breaker),
        budget=RetryBudget(store, config.resilience.retry),
        config=config.resilience,
        fleets=fleets,
        tracing=tracing,
        redactor=Redactor.from_config(config),
        latency=latency,
    )
    gate = PolicyGate(config, registry, budgets, limits)
    router = Router(config.routing, registry, classifier, latency)
    return prices, registry, adapters, executor, gate, router


def _fleet_shape(config: Config) -> dict[str, Any]:
    """What the running fleets were built from: each fleet model's settings, deployments and their
    providers (a replica added, moved or no longer self-hosted needs the fleets rebuilt)."""
    return {
        name: (model.fleet, model.deployments, [config.providers.get(d.provider) for d in model.deployments])
        for name, model in config.models.items()
        if model.fleet is not None
    }


def _spent_from(engine: AsyncEngine) -> SpendLookup:
    """Where budget counters start when a period is first seen: the ledger's rollups."""

    async def spent(owner: str, first: date, last: date) -> int:
        kind, _, name = owner.partition(":")
        if kind == "team":
            return await period_spend(engine, first_day=first, last_day=last, team=name)
        return await period_spend(engine, first_day=first, last_day=last, key_id=name)

    return spent
