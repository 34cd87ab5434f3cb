"""The one step that changes a request on its way upstream, and says what it changed.

Everything before it (policy, routing, the response-cache key) saw the body as the client sent it;
everything after it (the executor, escalation, shadow checks) sends this body. Each change is named
in the returned flags, which the ledger row keeps, so a row can say why the upstream saw something
other than what the client asked.
"""

from __future__ import annotations

from gateway.config.schema import TeamCacheConfig, TeamConfig
from gateway.models import Deployment
from providers.prompt_cache_key import prompt_cache_key
from providers.reasoning_params import to_reasoning_body
from providers.types import ChatRequest

# OpenAI caches prompts from 1,024 tokens; at about 4 bytes a token, smaller ones can't benefit.
_PROMPT_CACHE_MIN_BYTES = 4096


def rewrite_for_upstream(
    chat: ChatRequest, *, team_name: str | None, team: TeamConfig | None, cache: TeamCacheConfig
) -> list[str]:
    """Apply the team's temperature cap for machine-read answers and mark the prompt for provider
    caching (Anthropic breakpoints at `cache_ttl`, OpenAI's `prompt_cache_key`); return the flags."""
    changed: list[str] = []
    cap = team.max_temperature_structured if team is not None else None
    facts = chat.facts
    if cap is not None and facts.structured and facts.temperature is not None and facts.temperature > cap:
        # The body changes, so the bytes forwarded upstream are rebuilt from it.
        chat.body = {**chat.body, "temperature": cap}
        chat.raw = b""
        changed.append(f"temperature_capped:{cap:g}")
    if cache.prompt_cache:
        # Where breakpoints go is the Anthropic adapter's to decide; every request may have them.
        chat.cache_ttl = cache.prompt_cache_ttl
        if facts.prompt_bytes >= _PROMPT_CACHE_MIN_BYTES:
            chat.prompt_cache_key = prompt_cache_key(team_name or "", chat.body)
            changed.append("prompt_cache_key")
    return changed


def parameter_flags(chat: ChatRequest, deployment: Deployment | None) -> list[str]:
    """What the adapter changed for the deployment that answered (a reasoning model: `max_tokens`
    renamed, refused sampling parameters dropped), as flags; the adapter applies the same rule
    (`providers.reasoning_params`), this names it for the ledger and `x-tollgate-dropped-params`."""
    if deployment is None or not deployment.target.reasoning:
        return []
    source = chat.legacy if chat.legacy is not None else chat.body
    return to_reasoning_body(source)[1]
