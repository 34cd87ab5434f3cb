"""The caching step of the completion pipeline: look the request up in the response cache (or say
why not). Provider prompt caching is marked in the one body-rewriting step, `gateway.routes.rewrite`."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gateway.accounting.closing import Books, attribute, bill, close_record
from gateway.accounting.record import RequestRecord
from gateway.caching.keys import is_cacheable, response_cache_key
from gateway.caching.response_cache import CachedAnswer
from gateway.caching.semantic import Vector, question_text, vector_from
from gateway.config.schema import TeamCacheConfig
from gateway.errors import describe
from gateway.execution.executor import Trace
from gateway.models import Allow, Model, usable
from gateway.policy.principal import Principal
from providers.types import ChatRequest, EmbeddingRequest

if TYPE_CHECKING:
    from gateway.caching.response_cache import ResponseCache
    from gateway.caching.semantic import SemanticIndex
    from gateway.config.schema import Config
    from gateway.execution.executor import Executor
    from gateway.models import ModelRegistry

HIT, MISS, BYPASS, SEMANTIC_HIT = "hit", "miss", "bypass", "semantic_hit"
OPT_IN_HEADER = "x-tollgate-cache"


@dataclass(frozen=True, slots=True)
class CacheLookup:
    status: str
    key: str | None = None
    answer: CachedAnswer | None = None
    # The question's embedding, remembered in the semantic index once the answer is stored.
    vector: Vector | None = None


class Caches(Books, Protocol):
    """What a lookup needs: the stores, and (for the semantic cache's embedding call, which is a
    metered request of its own) the executor and the books."""

    config: Config
    registry: ModelRegistry
    executor: Executor
    response_cache: ResponseCache
    semantic_index: SemanticIndex | None


async def look_up(
    runtime: Caches,
    headers: Mapping[str, str],
    chat: ChatRequest,
    model: Model,
    *,
    principal: Principal,
    policy: TeamCacheConfig,
    allow: Allow = None,
) -> CacheLookup:
    """A stored answer for this team and request, or why it will go upstream (`miss`/`bypass`).

    `Cache-Control: no-store` bypasses; `x-tollgate-cache: use` opts a non-deterministic request in.
    Answers are namespaced per team: no team ever reads another's. `allow` is the team's data
    policy: the semantic cache's embedding call sends the question upstream too.
    """
    if not policy.response_cache or "no-store" in headers.get("cache-control", "").lower():
        return CacheLookup(BYPASS)
    if chat.legacy is not None:
        return CacheLookup(BYPASS)  # stored answers are chat completions, replayed as chat chunks
    if not is_cacheable(chat.body, opt_in=headers.get(OPT_IN_HEADER, "").lower() == "use"):
        return CacheLookup(BYPASS)
    team = principal.team or ""
    key = response_cache_key(team, chat.body, model=model.name)
    answer = await runtime.response_cache.get(key)
    if answer is not None:
        return CacheLookup(HIT, key, answer)
    vector = (
        await _question_vector(runtime, chat, principal, allow)
        if runtime.config.cache.semantic.enabled
        else None
    )
    if vector is not None and runtime.semantic_index is not None:
        near = runtime.semantic_index.nearest(f"{team}\x00{model.name}", vector)
        if near is not None and (answer := await runtime.response_cache.get(near[0])) is not None:
            return CacheLookup(SEMANTIC_HIT, key, answer, vector)
    return CacheLookup(MISS, key, None, vector)


def remember(runtime: Caches, lookup: CacheLookup, *, team: str | None, model: Model) -> None:
    """After a miss was answered and stored: let later questions close in meaning find it."""
    if lookup.vector is not None and lookup.key is not None and runtime.semantic_index is not None:
        runtime.semantic_index.remember(f"{team or ''}\x00{model.name}", lookup.vector, lookup.key)


async def _question_vector(
    runtime: Caches, chat: ChatRequest, principal: Principal, allow: Allow
) -> Vector | None:
    """Embed the question with the configured model. That call costs money too, so it leaves a
    ledger row of its own (endpoint `embeddings`, tag `semantic-cache`)."""
    text = question_text(chat.body)
    name = runtime.config.cache.semantic.embedding_model
    model = runtime.registry.resolve(name) if name else None
    if not text or model is None or not usable(runtime.registry.chain(model), allow):
        return None  # nothing to embed with, or nowhere this team's question may go
    record = RequestRecord.begin(id=os.urandom(16).hex(), client_request_id=None, endpoint="embeddings")
    record.requested_model, record.team, record.key_id = model.name, principal.team, principal.key_id
    record.tags = ("semantic-cache",)
    trace = Trace()
    request = EmbeddingRequest(body={"model": model.name, "input": text}, raw=b"", model=model.name)
    try:
        answer = await runtime.executor.embed(
            request, model, deadline=time.monotonic() + 10, trace=trace, allow=allow
        )
    except Exception as exc:  # no semantic lookup is better than no answer
        status, _, error_type = describe(exc)
        record.fail(status=status, error_type=error_type, message=str(exc))
        return None
    else:
        attribute(record, trace)
        bill(runtime, record, answer.usage, trace)
        record.status = 200
        return vector_from(answer.body)
    finally:
        close_record(runtime, record)
