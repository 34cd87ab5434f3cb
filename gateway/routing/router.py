"""Routing for the public model `auto`: the request is matched to a route by task (`routing.routes`,
see `gateway.routing.routes`), whose tier its difficulty may move one step; with `routes: []` (or
for a team with its own `routing_thresholds`) the complexity score picks the tier. The tier's
cheapest model for the request answers (or its first listed, with `order: listed`), with the rest of
the tier and the tiers above as its fallbacks; a route may name its own models instead. Explicit
model names bypass the router; `x-tollgate-tier` forces a tier when the gateway and the team allow it.

Hard constraints come before cost: a model whose context window cannot hold the prompt and the
requested output is skipped, so is one that lacks what the request uses (tools, a JSON schema,
images: `gateway.routing.capabilities`), and so is a deployment outside the team's data policy (a
`local-only` team is routed to the first tier whose models are all self-hosted, and the executor
never tries a deployment that is not; see `Admitted.allows`). A context policy that trims
(`context.trim: middle-out`, `gateway.context.policy`) sizes a prompt by what trimming leaves of it:
with `on_overflow: trim` always, so the routed model keeps the request; otherwise only when no
window holds it whole. Health and load come after: the
executor passes over open circuits, and a fleet orders its replicas by load (`gateway.execution.fleets`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from gateway.config.context import ContextConfig
from gateway.config.schema import RoutingConfig, TeamConfig
from gateway.context.conversation import droppable_bytes
from gateway.context.policy import combine, route_context
from gateway.errors import InvalidRequest
from gateway.execution.latency import LatencyBook
from gateway.models import Model, ModelRegistry
from gateway.policy.principal import PermissionDenied
from gateway.routing.classifier import ComplexityClassifier
from gateway.routing.routes import Decision, MatcherFactory, RouteTable
from providers.facts import BYTES_PER_TOKEN
from providers.types import ChatRequest

TIER_HEADER = "x-tollgate-tier"
# How a forced route's reason begins: escalation reads it to leave a tier the client chose alone.
FORCED_REASON = f"forced by {TIER_HEADER}"
# Output tokens a request that sets no max_tokens is priced at when ranking a tier's models.
_TYPICAL_OUTPUT = 512


@dataclass(frozen=True, slots=True)
class Route:
    model: Model
    tier: str
    reason: str
    score: float | None = None  # the complexity score, or the difficulty within the route
    route: str | None = None  # the task route matched, when routes decided
    # Whether a verifiably bad answer on a lower tier may be retried one tier up (the route's switch).
    escalate: bool = True


class Router:
    def __init__(
        self,
        config: RoutingConfig,
        registry: ModelRegistry,
        classifier: ComplexityClassifier,
        latency: LatencyBook | None = None,
        *,
        matcher: MatcherFactory | None = None,
    ) -> None:
        self._config = config
        self._registry = registry
        self._classifier = classifier
        self._latency = latency
        self._tiers = {tier.name: tier for tier in config.tiers}
        self._models = {
            tier.name: tuple(m for name in tier.models if (m := registry.resolve(name)) is not None)
            for tier in config.tiers
        }
        self._order = [tier.name for tier in config.tiers]
        # Built once per config load: the semantic router embeds every route's examples here.
        self._routes = RouteTable.from_config(config, matcher=matcher)
        # Where a local-only team's requests go: the first tier whose models are all self-hosted.
        self._self_hosted_tier = next(
            (
                t
                for t in self._order
                if all(any(d.self_hosted for d in m.deployments) for m in self._models[t])
            ),
            None,
        )

    @property
    def blocking(self) -> bool:
        """Whether deciding a route computes long enough that it belongs off the event loop."""
        return self._classifier.blocking or (self._routes is not None and self._routes.blocking)

    def is_auto(self, name: str) -> bool:
        return bool(self._config.tiers) and name == self._config.auto_model

    def route(self, chat: ChatRequest, *, forced: str | None, team: TeamConfig | None) -> Route:
        """The tier and model for an `auto` request, with the reason the ledger keeps."""
        local_only = team is not None and team.data_policy == "local-only"
        context = team.context if team is not None else None
        if forced:
            if forced not in self._tiers:
                raise InvalidRequest(
                    f"unknown tier '{forced}'; tiers: {', '.join(self._order)}", param=TIER_HEADER
                )
            may_force = team.allow_forced_tier if team is not None else None
            if not (self._config.allow_forced_tier if may_force is None else may_force):
                raise PermissionDenied(
                    f"forcing a tier with {TIER_HEADER} is turned off for this team",
                    code="tier_forcing_disabled",
                )
            if team is not None and team.allowed_tiers is not None and forced not in team.allowed_tiers:
                raise PermissionDenied(f"this team may not use the '{forced}' tier", code="tier_not_allowed")
            model, note = self._tier_model(forced, chat, local_only, context)
            return Route(model, forced, f"{FORCED_REASON}{note}")
        if local_only and self._self_hosted_tier is not None:
            model, note = self._tier_model(self._self_hosted_tier, chat, local_only, context)
            return Route(model, self._self_hosted_tier, f"data policy: local-only{note}")
        own = team.routing_thresholds if team is not None else None
        if self._routes is not None and own is None:
            return self._by_task(self._routes.decide(chat.body), chat, local_only, context)
        assessment = self._classifier.assess(chat.body)
        thresholds = own or self._config.thresholds
        index = bisect.bisect_right(list(thresholds), assessment.score)
        tier = self._order[index]
        model, note = self._tier_model(tier, chat, local_only, context)
        reason = f"score {assessment.score:.2f} -> {tier}{note}" + (
            f" ({assessment.reason()})" if assessment.reasons else ""
        )
        return Route(model, tier, reason[:256], assessment.score)

    def tier_of(self, model: Model) -> str | None:
        """The routing tier `model` answers in: its own (a routed model carries it) or the first tier
        that lists it (a fallback the executor reached carries its config tier instead)."""
        listing = [t for t in self._order if any(m.name == model.name for m in self._models[t])]
        return model.tier if model.tier in listing else next(iter(listing), None)

    def tier_above(self, tier: str, chat: ChatRequest, team: TeamConfig | None) -> Model | None:
        """The model the next tier above `tier` would answer this request with, honouring what
        `route` honours (the team's allowed tiers and models, its data policy, the request's needs
        and context); None at the top or when no tier above may serve it. What an escalation and a
        shadow check ask."""
        if tier not in self._tiers:
            return None
        local_only = team is not None and team.data_policy == "local-only"
        allowed_models = team.allowed_models if team is not None else None
        for above in self._order[self._order.index(tier) + 1 :]:
            if team is not None and team.allowed_tiers is not None and above not in team.allowed_tiers:
                continue
            if local_only and not any(d.self_hosted for m in self._models[above] for d in m.deployments):
                continue
            try:
                model, _ = self._tier_model(above, chat, local_only)
            except InvalidRequest:
                return None  # nothing from here up fits: no tier further up would either
            if allowed_models is not None and not {self._config.auto_model, model.name} & set(allowed_models):
                continue
            return model
        return None

    def _by_task(
        self, decision: Decision, chat: ChatRequest, local_only: bool, team_context: ContextConfig | None
    ) -> Route:
        """The route's tier (moved by difficulty) or its own models, and the reason that says so."""
        route = decision.route
        context = combine(team_context, route_context(self._config, route.name))
        if decision.tier is None:
            model, note = self._fitted(
                lambda prompt: self._listed(route.models or (), chat, prompt), chat, context
            )
            tier = model.tier
        else:
            tier = self._order[decision.tier]
            model, note = self._tier_model(tier, chat, local_only, context)
        return Route(
            model,
            tier,
            decision.reason(tier + note),
            decision.match.difficulty,
            route=route.name,
            escalate=route.escalate,
        )

    def _fitted(
        self, pick: Callable[[int], tuple[Model, str]], chat: ChatRequest, context: ContextConfig | None
    ) -> tuple[Model, str]:
        """`pick` for the prompt as it is, or as small as middle-out trimming may make it: at once
        with `on_overflow: trim` (the routed model keeps the request), else only when no window holds
        the prompt as it is (`gateway.context.policy` trims it to the model chosen)."""
        prompt = chat.facts.prompt_tokens
        if context is None or context.trim != "middle-out":
            return pick(prompt)
        floor = max(0, prompt - droppable_bytes(chat.messages) // BYTES_PER_TOKEN)
        if context.on_overflow == "trim":
            return pick(floor)
        try:
            return pick(prompt)
        except InvalidRequest as exc:
            if exc.code != "context_length_exceeded" or floor == prompt:
                raise
            model, note = pick(floor)
            return model, f"{note}; trimmed to fit"

    def _listed(self, names: tuple[str, ...], chat: ChatRequest, prompt: int) -> tuple[Model, str]:
        """A route's own models: the first that can serve the request, the rest its fallbacks."""
        models = [m for name in names if (m := self._registry.resolve(name)) is not None]
        facts = chat.facts
        need, uses = prompt + facts.fitting_output, facts.uses
        fitting = [m for m in models if m.context_window >= need]
        able = [m for m in fitting if not m.lacks & uses]
        where = f"route models {', '.join(names)}"
        return self._settle(fitting, able, able[0].tier if able else "", need, uses, where)

    def _tier_model(
        self, tier: str, chat: ChatRequest, local_only: bool, context: ContextConfig | None = None
    ) -> tuple[Model, str]:
        """`_tier_fitting` for the prompt, or for its trimmed size when the context policy trims."""
        return self._fitted(lambda prompt: self._tier_fitting(tier, chat, local_only, prompt), chat, context)

    def _tier_fitting(self, tier: str, chat: ChatRequest, local_only: bool, prompt: int) -> tuple[Model, str]:
        """The tier's best model that can serve the request, falling back through the rest of the
        tier and then the tiers above it; and a note for the reason when a need skipped a model.
        Tiers are ranked by price until one holds a model that can serve the request; the tiers
        after it are only fallbacks and keep their configured order (ranking costs microseconds)."""
        start = self._order.index(tier)
        facts = chat.facts
        output = facts.fitting_output
        need = prompt + output
        uses = facts.uses
        fitting: list[Model] = []
        able: list[Model] = []
        answering_tier = tier  # the tier of the first able model: what the client and ledger are told
        for t in self._order[start:]:
            ranked = (
                self._models[t]
                if able
                else self._ranked(t, need - output, output or _TYPICAL_OUTPUT, local_only)
            )
            for m in ranked:
                if m.context_window >= need:
                    fitting.append(m)
                    if not m.lacks & uses:
                        if not able:
                            answering_tier = t
                        able.append(m)
        return self._settle(fitting, able, answering_tier, need, uses, f"tier '{tier}' or above")

    def _settle(
        self,
        fitting: list[Model],
        able: list[Model],
        answering_tier: str,
        need: int,
        uses: frozenset[str],
        where: str,
    ) -> tuple[Model, str]:
        """The first able model with every other able one as its fallback chain, or why none fits."""
        if not fitting:
            raise InvalidRequest(
                f"no model in {where} has a context window for about {need} tokens",
                code="context_length_exceeded",
            )
        if not able:
            raise InvalidRequest(
                f"no model in {where} serves a request with {' and '.join(sorted(uses))}",
                code="unsupported_capability",
            )
        first = able[0]
        # The chain the executor walks: this model, then every other able model, tier by tier.
        chain = [
            name
            for name in dict.fromkeys((*first.fallbacks, *(m.name for m in able[1:])))
            if (fallback := self._registry.resolve(name)) is not None and not fallback.lacks & uses
        ]
        skipped = len(able) < len(fitting) and fitting.index(first) > 0
        note = f"; needs {' and '.join(sorted(uses))}" if skipped else ""
        return replace(first, tier=answering_tier, fallbacks=tuple(chain)), note

    def _ranked(
        self, tier: str, prompt_tokens: int, output_tokens: int, local_only: bool
    ) -> tuple[Model, ...]:
        """The tier's models, cheapest for this request first, then the faster recent time to first
        token (`LatencyBook`); remaining ties and `order: listed` keep the configured order. A tier
        of one model costs nothing to rank."""
        models = self._models[tier]
        if len(models) < 2 or self._tiers[tier].order == "listed":
            return models
        costs = [_cost(m, prompt_tokens, output_tokens, local_only) for m in models]
        latency = self._latency
        if latency is None or len(set(costs)) == len(costs):  # no tie for latency to break
            return tuple(m for _, m in sorted(zip(costs, models, strict=True), key=lambda pair: pair[0]))

        def ttft(model: Model) -> float:
            return min(
                (t for d in model.deployments if (t := latency.ttft_ms(d.key)) is not None), default=math.inf
            )

        keyed = sorted(zip(costs, models, strict=True), key=lambda pair: (pair[0], ttft(pair[1])))
        return tuple(m for _, m in keyed)


def _cost(model: Model, prompt_tokens: int, output_tokens: int, local_only: bool) -> float:
    """What this request would cost on the deployment that will answer it: the model's first one
    its team may use (the executor tries them in order). A self-hosted deployment without a price
    costs nothing more (its GPUs are paid for); a managed one without a price ranks last."""
    deployment = next((d for d in model.deployments if not local_only or d.self_hosted), None)
    if deployment is None:
        return math.inf
    price = deployment.price
    if price is None:
        return 0.0 if deployment.self_hosted else math.inf
    rates = price.rates_for(prompt_tokens) if price.tiers else price
    return prompt_tokens * rates.input + output_tokens * rates.output
