"""The self-hosted fleets the executor consults: for a model with several vLLM replicas, which of
its deployments to try first (least loaded; the same replica for prompts sharing a prefix) and
whether to spill to the model's fallbacks because every replica's queue is too deep; and the
leases that count each request against its replica until it ends (a stream: until its last chunk)."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from gateway.config.providers import OpenAICompatibleProvider
from gateway.config.schema import Config
from gateway.config.self_hosted import FleetConfig
from gateway.models import Deployment, Model
from local_backend.choice import rank
from local_backend.fleet import Fleet, Lease, Replica
from local_backend.spillover import should_spill
from providers.types import StreamChunk

if TYPE_CHECKING:
    import httpx

# The first chunk of a stream and the generator of the rest, as `Executor.open_stream` returns them.
Stream = tuple[StreamChunk, AsyncGenerator[StreamChunk, None]]
# Affinity reads about the first thousand characters of a prompt (16 blocks of 64).
_PREFIX_CHARS = 1024


class Fleets:
    def __init__(self, config: Config) -> None:
        self._fleets: dict[str, tuple[Fleet, FleetConfig]] = {}
        self._replicas: dict[str, Replica] = {}
        for name, spec in config.models.items():
            if spec.fleet is None:
                continue
            replicas = []
            for deployment in spec.deployments:
                provider = config.providers[deployment.provider]
                if isinstance(provider, OpenAICompatibleProvider) and provider.on_premises:
                    root = provider.base_url.rstrip("/").removesuffix("/v1")
                    replica = Replica(deployment.provider, root, capacity=spec.fleet.max_num_seqs)
                    replicas.append(replica)
                    self._replicas[deployment.provider] = replica
            self._fleets[name] = (
                Fleet(name, replicas, unhealthy_after=spec.fleet.unhealthy_after),
                spec.fleet,
            )
        self._probes: httpx.AsyncClient | None = None

    async def start(self) -> None:
        """Scrape every fleet once now and then on its interval, over a client of their own: probes
        are GETs off the request path, where httpx's conveniences cost nothing that matters."""
        if not self._fleets:
            return
        import httpx  # only a gateway with a fleet pays for it

        self._probes = httpx.AsyncClient(timeout=httpx.Timeout(5.0), follow_redirects=False, trust_env=False)
        for fleet, spec in self._fleets.values():
            await fleet.start(self._probes, spec.scrape_interval_seconds)

    async def stop(self) -> None:
        for fleet, _ in self._fleets.values():
            await fleet.stop()
        if self._probes is not None:
            await self._probes.aclose()
            self._probes = None

    def order(self, model: Model, prefix: str, *, spill: bool = True) -> list[Deployment] | None:
        """This model's deployments in the order to try them: its healthy replicas best first, then
        its deployments that are not replicas (a managed copy of the same model), alone when the
        fleet spills (only if `spill`). None when the model has no fleet (its configured order stands)."""
        entry = self._fleets.get(model.name)
        if entry is None:
            return None
        fleet, spec = entry
        others = [d for d in model.deployments if d.target.provider not in self._replicas]
        if (
            spill
            and spec.spillover is not None
            and should_spill(
                fleet,
                max_queue=spec.spillover.max_queue,
                ttft_target_ms=spec.spillover.ttft_target_ms,
                resume_ratio=spec.spillover.resume_ratio,
            )
        ):
            return others
        by_provider = {d.target.provider: d for d in model.deployments}
        ranked = rank(fleet, prefix, affinity=spec.affinity)
        return [*(by_provider[r.name] for r in ranked if r.name in by_provider), *others]

    def fleet(self, model: str) -> Fleet | None:
        """The fleet serving this model, if it has one."""
        entry = self._fleets.get(model)
        return None if entry is None else entry[0]

    def fleets(self) -> list[Fleet]:
        """Every fleet, by model name (for the Prometheus gauges)."""
        return [fleet for _, (fleet, _) in sorted(self._fleets.items())]

    def lease(self, deployment: Deployment) -> Lease | None:
        """Count a request against its replica from now (the load score sees it at once) until the
        lease is released; None when the deployment is not a fleet's replica."""
        replica = self._replicas.get(deployment.target.provider)
        return None if replica is None else replica.lease()


async def hold(stream: Stream, lease: Lease) -> Stream:
    """The stream with its replica kept leased until the stream ends, fails or is closed, feeding
    the replica's decode speed back when it ends (`_metered`).

    The wrapper is started here (it has yielded the first chunk, which the caller already holds), so
    that `aclose()` or the loop's finaliser for a collected generator runs its `finally` even when
    nobody reads past the first chunk: an async generator closed before its first step runs nothing.
    """
    first, chunks = stream
    metered = _metered(first, chunks, lease)
    await anext(metered)
    return first, metered


async def _metered(
    first: StreamChunk, chunks: AsyncGenerator[StreamChunk, None], lease: Lease
) -> AsyncGenerator[StreamChunk, None]:
    """`first`, then `chunks`; at the end the lease is released and, for a stream that finished,
    its decode speed observed: completion tokens over the time from the first chunk to the last.

    Tokens come from the final usage chunk, else (an upstream that sent none) from the chunks that
    carried generated text, about one token each on vLLM. The first chunk arrives with the first
    token, so N tokens span N - 1 gaps: short streams read a little fast (at most N / (N - 1)).
    A stream cut short (failed, or closed by the client) is not timed: its end says as much about
    the cut as about the replica. Chunks are timed as the client's relay reads them, so a client
    slower than the replica holds the lease longer and lowers the figure: vLLM's engine decodes on
    while its HTTP response waits, so read it as a lower bound.
    """
    first_ns = last_ns = time.perf_counter_ns()
    usage = first.usage
    texts = 1 if first.content_chars > 0 else 0
    finished = False
    try:
        yield first
        async for chunk in chunks:
            last_ns = time.perf_counter_ns()
            if chunk.usage is not None:
                usage = chunk.usage
            if chunk.content_chars > 0:
                texts += 1
            yield chunk
        finished = True
    finally:
        # Before any await: a cancelled relay may not get another step here.
        lease.release()
        if finished:
            tokens = usage.completion_tokens if usage is not None else texts
            lease.observe_decode(tokens, (last_ns - first_ns) / 1e9)
        await chunks.aclose()


def prompt_prefix(body: dict[str, Any]) -> str:
    """The start of the prompt as text, for prefix affinity: system prompt first, then the turns."""
    parts: list[str] = []
    size = 0
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        text = content if isinstance(content, str) else ""
        if isinstance(content, list):
            text = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
        parts.append(text)
        size += len(text)
        if size >= _PREFIX_CHARS:
            break
    return "".join(parts)[:_PREFIX_CHARS]
