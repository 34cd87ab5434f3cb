"""The self-hosted fleets the executor consults: for a model with several vLLM replicas, which of
its deployments to try first (least loaded; the same replica for prompts sharing a prefix) and
whether to spill to the model's fallbacks because every replica's queue is too deep."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gateway.config import Config, FleetConfig, OpenAICompatibleProvider
from gateway.models import Deployment, Model
from local_backend.choice import rank
from local_backend.fleet import Fleet, Replica
from local_backend.spillover import should_spill

if TYPE_CHECKING:
    import httpx

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

    @contextlib.contextmanager
    def lease(self, deployment: Deployment) -> Iterator[Any]:
        """Count the request against its replica while it runs (the load score sees it at once)."""
        replica = self._replicas.get(deployment.target.provider)
        if replica is None:
            yield None
            return
        with replica.lease() as lease:
            yield lease


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
