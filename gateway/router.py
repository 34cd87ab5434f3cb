"""Complexity routing: for the public model `auto`, the classifier's score picks a tier and the tier's
first model answers, with the rest of the tier and the tiers above as its fallbacks. Explicit model
names bypass the classifier; `x-tollgate-tier` forces a tier when the team may use it.

Hard constraints come before cost: a model whose context window cannot hold the prompt and the
requested output is skipped, and so is a deployment outside the team's data policy (a `local-only`
team is routed to the first tier whose models are all self-hosted, and the executor never tries a
deployment that is not; see `Admitted.allows`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from gateway.config import RoutingConfig, TeamConfig
from gateway.errors import InvalidRequest
from gateway.models import Model, ModelRegistry
from gateway.policy.principal import PermissionDenied
from gateway.routing.classifier import ComplexityClassifier
from providers.types import ChatRequest

TIER_HEADER = "x-tollgate-tier"
_BYTES_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Route:
    model: Model
    tier: str
    reason: str
    score: float | None = None


class Router:
    def __init__(
        self, config: RoutingConfig, registry: ModelRegistry, classifier: ComplexityClassifier
    ) -> None:
        self._config = config
        self._registry = registry
        self._classifier = classifier
        self._tiers = {tier.name: tier for tier in config.tiers}
        self._order = [tier.name for tier in config.tiers]

    def is_auto(self, name: str) -> bool:
        return bool(self._config.tiers) and name == self._config.auto_model

    def route(self, chat: ChatRequest, *, forced: str | None, team: TeamConfig | None) -> Route:
        """The tier and model for an `auto` request, with the reason the ledger keeps."""
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
            return Route(self._tier_model(forced, chat), forced, f"forced by {TIER_HEADER}")
        if team is not None and team.data_policy == "local-only":
            local = [t for t in self._order if all(self._self_hosted(m) for m in self._tiers[t].models)]
            if local:
                return Route(self._tier_model(local[0], chat), local[0], "data policy: local-only")
        assessment = self._classifier.assess(chat.body)
        thresholds = (team.routing_thresholds if team and team.routing_thresholds is not None else None) or (
            self._config.thresholds
        )
        index = bisect.bisect_right(list(thresholds), assessment.score)
        tier = self._order[index]
        reason = f"score {assessment.score:.2f} -> {tier}" + (
            f" ({assessment.reason()})" if assessment.reasons else ""
        )
        return Route(self._tier_model(tier, chat), tier, reason[:256], assessment.score)

    def _self_hosted(self, name: str) -> bool:
        model = self._registry.resolve(name)
        return model is not None and any(d.self_hosted for d in model.deployments)

    def _tier_model(self, tier: str, chat: ChatRequest) -> Model:
        """The tier's first model that can hold the request, falling back through the rest of the tier
        and then the tiers above it."""
        start = self._order.index(tier)
        names = [name for t in self._order[start:] for name in self._tiers[t].models]
        need = len(chat.raw) // _BYTES_PER_TOKEN + _requested_output(chat)
        fitting = [name for name in names if (m := self._registry.resolve(name)) and m.context_window >= need]
        if not fitting:
            raise InvalidRequest(
                f"no model in tier '{tier}' or above has a context window for about {need} tokens",
                code="context_length_exceeded",
            )
        first = self._registry.resolve(fitting[0])
        assert first is not None
        # The chain the executor walks: this model, then every other fitting model, in tier order.
        # It answers as the routing tier, which is what the client and the ledger are told.
        routed_tier = tier if first.name in self._tiers[tier].models else first.tier
        return replace(
            first, tier=routed_tier, fallbacks=tuple(dict.fromkeys((*first.fallbacks, *fitting[1:])))
        )


def _requested_output(chat: ChatRequest) -> int:
    for name in ("max_completion_tokens", "max_tokens"):
        value = chat.body.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0
