"""How a chat or messages request is closed, in one place, whichever way it ends: answered, answered
from the cache, refused or failed, or streamed to its end (or until the client left).

A `Settlement` is opened once the handler knows who is calling and carries what the request took
on along the way (a held idempotency key, a budget reservation, a cache miss to fill). Its closing
methods undo or settle each of those exactly once, and `close` writes the one ledger row, so no exit
can forget a step or take it twice.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass

from starlette.responses import Response

from gateway.accounting.closing import bill, close_record
from gateway.accounting.record import RequestRecord
from gateway.caching.lookup import MISS, CacheLookup, remember
from gateway.caching.response_cache import CachedAnswer
from gateway.execution.executor import Trace
from gateway.execution.idempotency import StoredResponse
from gateway.models import Model
from gateway.policy.gate import Admitted, PolicyGate
from gateway.routes.dialects import Dialect
from gateway.routes.outcome import error_response, response_headers
from gateway.runtime import Runtime
from usage import Usage


@dataclass(slots=True)
class HeldKey:
    """The idempotency key a request holds while it runs, so its answer can be stored or the key
    released."""

    key: str
    digest: str
    team: str | None


@dataclass(slots=True)
class Settlement:
    runtime: Runtime
    gate: PolicyGate  # one policy for the whole request, even if the config reloads meanwhile
    record: RequestRecord
    trace: Trace
    held: HeldKey | None = None
    admitted: Admitted | None = None
    model: Model | None = None
    # A cacheable miss: where to store the answer once it is complete.
    miss: CacheLookup | None = None
    # Set once a stream has been handed to the relay: from then on the relay settles.
    streaming: bool = False
    _closed: bool = False

    def keeps_bodies(self) -> bool:
        """Whether this request's prompt and answer go into its ledger row."""
        return self.runtime.config.ledger.store_bodies or self.gate.stores_bodies(self.record.team)

    def looked_up(self, lookup: CacheLookup) -> None:
        self.record.cache_status = lookup.status
        self.miss = lookup if lookup.status == MISS and lookup.key is not None else None

    def bill(self, usage: Usage) -> None:
        """Price what the request used at the deployment that answered."""
        bill(self.runtime, self.record, usage, self.trace)

    async def answered(
        self,
        *,
        stored: StoredResponse | None,
        answer: CachedAnswer | None,
        prompt: bytes,
        response: bytes | None,
    ) -> None:
        """The end of a billed request (`record.status` says whether it succeeded): the bodies kept
        where the team asked, the budget settled with what it cost, a good answer cached and kept
        for the idempotency key's repeats, and the key released otherwise. The caller closes the
        row after this, in a `finally`: at c=1 a row handed to the writer before these awaits gets
        flushed ahead of the client's answer (+0.16 ms p50, measured)."""
        record = self.record
        if response is not None and self.keeps_bodies():
            record.keep_bodies(prompt, response, limit=self.runtime.config.ledger.body_max_bytes)
        await self._finish()
        if record.status == 200:
            await self._store(answer)
            if self.held is not None and stored is not None:
                held, self.held = self.held, None
                await self.runtime.idempotency.complete(held.key, held.digest, stored, team=held.team)
        await self._release()

    async def answered_from_cache(self, answer: CachedAnswer, model: Model) -> None:
        """A response-cache hit: nothing went upstream, nothing is charged, the reservation freed."""
        record = self.record
        record.model, record.tier, record.attempts = model.name, model.tier, 0
        record.bill_cache_hit(
            answer.usage,
            price=model.deployments[0].price,
            baseline=self.runtime.registry.baseline,
            version=self.runtime.prices.version,
        )
        record.status = 200
        if self.admitted is not None:
            admitted, self.admitted = self.admitted, None
            await self.gate.finish(admitted, cost_nano=0, tokens=0)

    async def failed(self, exc: Exception, dialect: Dialect) -> Response:
        """The request ends in an error before any stream began: everything it held is given back."""
        await self._release()
        if self.admitted is not None and self.record.status != 200:
            admitted, self.admitted = self.admitted, None
            await self.gate.abandon(admitted)
        return error_response(self.record, self.trace, exc, dialect)

    def close(self) -> Awaitable[None] | None:
        """The ledger row, metrics and span: once, whatever happened. What it returns (power
        durability: the journal's fsync) is awaited before the answer's last byte leaves."""
        if not self._closed:
            self._closed = True
            return close_record(self.runtime, self.record)
        return None

    async def _finish(self) -> None:
        if self.admitted is not None:
            admitted, self.admitted = self.admitted, None
            record = self.record
            await self.gate.finish(
                admitted, cost_nano=record.cost_nano, tokens=record.prompt_tokens + record.completion_tokens
            )

    async def _store(self, answer: CachedAnswer | None) -> None:
        miss = self.miss
        if answer is not None and miss is not None and miss.key is not None and self.model is not None:
            if await self.runtime.response_cache.put(miss.key, answer):
                remember(self.runtime, miss, team=self.record.team, model=self.model)

    async def _release(self) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            await self.runtime.idempotency.release(held.key, team=held.team)

    def headers(self) -> dict[str, str]:
        """What every answer tells the client: the gate's limit headers, then model, tier, attempts."""
        admitted = self.admitted
        return {**(admitted.headers if admitted else {}), **response_headers(self.record, self.trace)}
