"""The policy gate every request passes before it costs anything: which models and tiers its team
and key may use, where its data may go, its rate limits and its budgets. `admit` reserves; `finish`
settles with what the request really cost; `abandon` gives everything back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.config.schema import Config, TeamCacheConfig, TeamConfig
from gateway.models import Allow, Deployment, Model, ModelRegistry
from gateway.policy.budgets import DAY, MONTH, Budget, Budgets, Reservation
from gateway.policy.limits import Admission, Limit, RateLimits
from gateway.policy.principal import PermissionDenied, Principal
from pricing.cost import cost_nano
from pricing.money import usd_to_nano
from providers.facts import RequestFacts
from usage import Usage

_DEFAULT_CACHE = TeamCacheConfig()


@dataclass(slots=True)
class Admitted:
    team: str | None
    key_id: str | None
    tags: tuple[str, ...]
    local_only: bool
    reservation: Reservation | None = None
    admission: Admission | None = None
    flags: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    def allows(self, model: Model, deployment: Deployment) -> bool:
        """Whether this deployment may answer: a `local-only` team's requests go only to self-hosted
        ones, whatever the model's tier (a `local` model may also have a managed-cloud deployment)."""
        return not self.local_only or deployment.self_hosted


class PolicyGate:
    def __init__(self, config: Config, registry: ModelRegistry, budgets: Budgets, limits: RateLimits) -> None:
        self._config = config
        self._registry = registry
        self._budgets = budgets
        self._limits = limits

    def team(self, principal: Principal) -> TeamConfig | None:
        return self._config.teams.get(principal.team) if principal.team else None

    def cache_policy(self, team: str | None) -> TeamCacheConfig:
        spec = self._config.teams.get(team) if team else None
        return spec.cache if spec is not None else _DEFAULT_CACHE

    def stores_bodies(self, team: str | None) -> bool:
        """Whether this team opted in to keeping prompts and answers in the ledger."""
        spec = self._config.teams.get(team) if team else None
        return spec is not None and spec.store_bodies

    async def admit(
        self, principal: Principal, facts: RequestFacts, model: Model, *, tags: tuple[str, ...]
    ) -> Admitted:
        """Check the request against its team's and key's policy, then take its rate-limit share
        and reserve its worst-case cost. The body is not changed here (`gateway.routes.rewrite`)."""
        team = self.team(principal)
        key = principal.key
        admitted = Admitted(
            team=principal.team,
            key_id=principal.key_id,
            tags=tuple(dict.fromkeys((*(team.default_tags if team else ()), *tags))),
            local_only=team is not None and team.data_policy == "local-only",
        )
        self._check_model(facts.model, model, team, key.allowed_models if key else None, principal)
        if admitted.local_only and not self._registry.self_hosted(model):
            raise PermissionDenied(
                f"team '{principal.team}' keeps its data on the self-hosted fleet, "
                f"which does not serve '{facts.model}'",
                code="data_policy",
            )
        estimated = facts.prompt_tokens
        limits = _limits(principal, team)
        budgets = _budgets(principal, team)
        if not limits and not budgets:
            return admitted
        # One store call takes the rate-limit share and reserves the worst case, both or neither.
        tokens = estimated + facts.worst_case_output
        takes = self._limits.takes(limits, estimated_tokens=tokens) if limits else []
        worst = self.worst_case_cost(facts, model, estimated, allow=admitted.allows) if budgets else 0
        reservation, result = await self._budgets.admit(budgets, worst, takes)
        if limits:
            # Raises RateLimited when a bucket was short (nothing was taken or held then).
            admitted.admission = self._limits.admitted(limits, takes, result, tokens)
            admitted.headers = admitted.admission.headers
        if budgets and reservation is not None:
            admitted.reservation = reservation
            admitted.flags += [f"budget_exceeded:{name}" for name in reservation.exceeded_soft]
        return admitted

    async def finish(self, admitted: Admitted, *, cost_nano: int, tokens: int) -> None:
        """Settle the reservation and correct the token buckets: one store call."""
        admission = admitted.admission
        corrections = self._limits.corrections(admission, actual_tokens=tokens) if admission else []
        if admitted.reservation is not None:
            await self._budgets.settle(admitted.reservation, cost_nano, corrections)
        elif corrections:
            await self._limits.correct(corrections)

    async def abandon(self, admitted: Admitted) -> None:
        admission = admitted.admission
        corrections = self._limits.corrections(admission, actual_tokens=0) if admission else []
        if admitted.reservation is not None:
            await self._budgets.release(admitted.reservation, corrections)
        elif corrections:
            await self._limits.correct(corrections)

    def worst_case_cost(
        self,
        facts: RequestFacts,
        model: Model,
        prompt_tokens: int,
        *,
        allow: Allow = None,
    ) -> int:
        """The most this request could cost on any deployment it might reach (fallbacks included,
        those its team's data policy rules out not)."""
        output = facts.worst_case_output
        costs = [
            cost_nano(Usage(prompt_tokens=prompt_tokens, completion_tokens=output), d.price)
            for m, d in self._registry.chain(model)
            if d.price is not None and (allow is None or allow(m, d))
        ]
        return max(costs, default=0)

    def _check_model(
        self,
        asked: str,
        model: Model,
        team: TeamConfig | None,
        key_models: tuple[str, ...] | None,
        principal: Principal,
    ) -> None:
        for allowed, whose in ((team.allowed_models if team else None, "team"), (key_models, "key")):
            if allowed is not None and asked not in allowed and model.name not in allowed:
                raise PermissionDenied(
                    f"this {whose} may not use '{asked}'", param="model", code="model_not_allowed"
                )
        if team is not None and team.allowed_tiers is not None and model.tier not in team.allowed_tiers:
            raise PermissionDenied(
                f"team '{principal.team}' may not use the '{model.tier}' tier",
                param="model",
                code="tier_not_allowed",
            )


def _limits(principal: Principal, team: TeamConfig | None) -> list[Limit]:
    limits = []
    key = principal.key
    if key is not None:
        if key.rpm:
            limits.append(Limit(f"key:{key.id}", "requests", key.rpm))
        if key.tpm:
            limits.append(Limit(f"key:{key.id}", "tokens", key.tpm))
    if team is not None:
        if team.rpm:
            limits.append(Limit(f"team:{principal.team}", "requests", team.rpm))
        if team.tpm:
            limits.append(Limit(f"team:{principal.team}", "tokens", team.tpm))
    return limits


def _budgets(principal: Principal, team: TeamConfig | None) -> list[Budget]:
    budgets = []
    if team is not None:
        hard = team.budget_mode == "hard"
        if team.budget_daily_usd is not None:
            budgets.append(Budget(f"team:{principal.team}", DAY, usd_to_nano(team.budget_daily_usd), hard))
        if team.budget_monthly_usd is not None:
            budgets.append(
                Budget(f"team:{principal.team}", MONTH, usd_to_nano(team.budget_monthly_usd), hard)
            )
    key = principal.key
    if key is not None:
        if key.budget_daily_nano is not None:
            budgets.append(Budget(f"key:{key.id}", DAY, key.budget_daily_nano))
        if key.budget_monthly_nano is not None:
            budgets.append(Budget(f"key:{key.id}", MONTH, key.budget_monthly_nano))
    return budgets
