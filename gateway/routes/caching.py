"""The caching step of the completion pipeline: look the request up in the response cache (or say
why not), and set up provider prompt caching for a request that has to go upstream."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import Headers

from gateway.cache_key import is_cacheable, response_cache_key
from gateway.config import TeamCacheConfig
from gateway.models import Model
from gateway.response_cache import CachedAnswer, ResponseCache
from providers.prompt_cache_key import prompt_cache_key
from providers.types import ChatRequest

HIT, MISS, BYPASS = "hit", "miss", "bypass"
# OpenAI caches prompts from 1,024 tokens; at about 4 bytes a token, smaller ones can't benefit.
_PROMPT_CACHE_MIN_BYTES = 4096
OPT_IN_HEADER = "x-tollgate-cache"


@dataclass(frozen=True, slots=True)
class CacheLookup:
    status: str
    key: str | None = None
    answer: CachedAnswer | None = None


async def look_up(
    cache: ResponseCache,
    headers: Headers,
    chat: ChatRequest,
    model: Model,
    *,
    team: str | None,
    policy: TeamCacheConfig,
) -> CacheLookup:
    """A stored answer for this team and request, or why it will go upstream (`miss`/`bypass`).

    `Cache-Control: no-store` bypasses; `x-tollgate-cache: use` opts a non-deterministic request in.
    Answers are namespaced per team: no team ever reads another's.
    """
    if not policy.response_cache or "no-store" in headers.get("cache-control", "").lower():
        return CacheLookup(BYPASS)
    if not is_cacheable(chat.body, opt_in=headers.get(OPT_IN_HEADER, "").lower() == "use"):
        return CacheLookup(BYPASS)
    key = response_cache_key(team or "", chat.body, model=model.name)
    answer = await cache.get(key)
    return CacheLookup(HIT, key, answer) if answer is not None else CacheLookup(MISS, key)


def prepare_prompt_caching(chat: ChatRequest, *, team: str | None, policy: TeamCacheConfig) -> None:
    """Ask the providers to cache the stable prefix: Anthropic breakpoints, OpenAI's cache key."""
    if not policy.prompt_cache:
        return
    chat.cache_ttl = policy.prompt_cache_ttl
    if len(chat.raw) >= _PROMPT_CACHE_MIN_BYTES:
        chat.prompt_cache_key = prompt_cache_key(team or "", chat.body)
