"""The model registry: public names and aliases resolved once to their deployments and prices."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.config.schema import Config, DeploymentConfig
from gateway.routing.capabilities import lacking
from pricing.book import PriceBook
from pricing.catalog import PriceCatalog
from pricing.price import Price
from providers.reasoning_params import is_reasoning_model
from providers.types import Target


@dataclass(frozen=True, slots=True)
class Deployment:
    target: Target
    price: Price | None
    # On infrastructure the operator runs (the provider's `self_hosted`): where `local-only` data may go.
    self_hosted: bool = False

    @property
    def key(self) -> str:
        """Names this deployment in breaker state and in the ledger: `provider/upstream-model`."""
        return self.target.key


@dataclass(frozen=True, slots=True)
class Model:
    name: str
    tier: str
    context_window: int
    deployments: tuple[Deployment, ...]
    owned_by: str
    fallbacks: tuple[str, ...] = ()
    deadline_seconds: float | None = None
    # Of tools, json_schema and vision, what it is known not to serve (see `gateway.routing.capabilities`).
    lacks: frozenset[str] = frozenset()


# Which deployments a request may be answered by (its team's data policy: `Admitted.allows`); None: any.
Allow = Callable[[Model, Deployment], bool] | None


def usable(chain: list[tuple[Model, Deployment]], allow: Allow) -> bool:
    """Whether any deployment of this chain may answer."""
    return any(allow is None or allow(m, d) for m, d in chain)


class ModelRegistry:
    """Looks a requested name up in O(1); built from config, never changed afterwards.

    Every deployment's price is settled here, once: its own config price, else its model's, else
    the price book (config overrides over LiteLLM's table) by upstream id, then by public name.
    None means unknown: such rows are flagged `price_unknown` in the ledger.
    """

    def __init__(self, config: Config, *, prices: PriceBook | None = None) -> None:
        self._models: dict[str, Model] = {}
        for name, spec in config.models.items():
            deployments = spec.deployments or (
                DeploymentConfig(provider=spec.provider or "", model=spec.upstream_model or name),
            )
            default_price = spec.price.to_price() if spec.price else None
            self._models[name] = Model(
                name=name,
                tier=spec.tier,
                context_window=spec.context_window,
                deployments=tuple(
                    Deployment(
                        target=Target(
                            provider=d.provider,
                            upstream_model=d.model,
                            reasoning=_reasoning(config, d, spec.reasoning),
                        ),
                        price=_price(config, prices, d, default=default_price, public=name),
                        self_hosted=config.self_hosted(d.provider),
                    )
                    for d in deployments
                ),
                owned_by=deployments[0].provider,
                fallbacks=spec.fallbacks,
                deadline_seconds=spec.deadline_seconds,
                lacks=lacking(
                    spec.capabilities,
                    (_table_entry(config, prices, d) for d in deployments) if prices is not None else (),
                ),
            )
        self._lookup = dict(self._models)
        for alias, target in config.aliases.items():
            self._lookup[alias] = self._models[target]
        self.aliases = dict(config.aliases)
        reference = self.resolve(config.pricing.baseline_model) if config.pricing.baseline_model else None
        self.baseline: Price | None = reference.deployments[0].price if reference else None

    def resolve(self, name: str) -> Model | None:
        return self._lookup.get(name)

    def chain(self, model: Model) -> list[tuple[Model, Deployment]]:
        """Every deployment to try, in order: the model's own, then each fallback model's."""
        models = [model, *(self._models[name] for name in model.fallbacks)]
        return [(m, d) for m in models for d in m.deployments]

    def self_hosted(self, model: Model) -> bool:
        """Whether this model, or a model it falls back to, has a self-hosted deployment."""
        return any(d.self_hosted for _, d in self.chain(model))

    def public_names(self) -> list[tuple[str, Model]]:
        """Every name a client may ask for: the models, then the aliases."""
        return [*self._models.items(), *((a, self._models[t]) for a, t in self.aliases.items())]


def _reasoning(config: Config, deployment: DeploymentConfig, model_says: bool | None) -> bool:
    """Config first (the deployment's word, then its model's); else OpenAI's own naming, for
    `type: openai` providers only (a vLLM or compatible server takes `max_tokens` whatever it serves)."""
    said = deployment.reasoning if deployment.reasoning is not None else model_says
    if said is not None:
        return said
    spec = config.providers.get(deployment.provider)
    return spec is not None and spec.type == "openai" and is_reasoning_model(deployment.model)


def _table_entry(config: Config, prices: PriceBook, deployment: DeploymentConfig) -> dict[str, Any] | None:
    spec = config.providers.get(deployment.provider)
    return prices.catalog.entry(deployment.model, provider=spec.type if spec is not None else None)


def _price(
    config: Config,
    prices: PriceBook | None,
    deployment: DeploymentConfig,
    *,
    default: Price | None,
    public: str,
) -> Price | None:
    if deployment.price is not None:
        return deployment.price.to_price()
    if deployment.gpu is not None:
        return deployment.gpu.to_deployment().price()
    if default is not None or prices is None:
        return default
    kind = config.providers[deployment.provider].type
    return prices.lookup(deployment.model, provider=kind) or prices.lookup(public, provider=kind)


def price_book(config: Config, *, catalog: PriceCatalog | None = None) -> PriceBook:
    """Config overrides over LiteLLM's table (or over nothing, when the table is switched off)."""
    if not config.pricing.use_catalog:
        catalog = PriceCatalog({}, version="catalog-disabled")
    elif catalog is None:
        catalog = PriceCatalog.load()
    return PriceBook(catalog, {model: spec.to_price() for model, spec in config.pricing.overrides.items()})
