"""Self-hosted fleet next to the managed models: each deployment's effective $/MTok from the model
registry (GPU-priced ones from the GPU cost model), what its traffic actually cost per MTok over
the range, and for GPU deployments the share of time their GPUs were busy serving it."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.config.schema import Config
from gateway.config.self_hosted import GpuConfig
from gateway.dashboard.figures import spend_rows
from gateway.dashboard.scope import Scope
from gateway.models import Deployment, ModelRegistry
from pricing.money import TOKENS_PER_MTOK

# The input:output token mix a single "blended" price assumes (the GPU cost model's break-even mix).
INPUT_SHARE, OUTPUT_SHARE = 3, 1


async def fleet(
    engine: AsyncEngine, scope: Scope, *, registry: ModelRegistry, config: Config
) -> dict[str, Any]:
    """One row per deployment of every model (aliases skipped); the range and team filters apply to
    the measured columns, the model and tag filters do not (this is a price comparison)."""
    served = {
        (row["model"], row["provider"]): row
        for row in await spend_rows(engine, scope.unfiltered(), ("model", "provider"))
    }
    span = (scope.until - scope.since).total_seconds()
    rows = []
    for name, model in registry.public_names():
        if name != model.name:
            continue
        pairs = [(d.target.provider, d.target.upstream_model) for d in model.deployments]
        for deployment in model.deployments:
            provider = deployment.target.provider
            usage = served.get((name, provider))
            shared = sum(1 for p, _ in pairs if p == provider) > 1
            gpu = _gpu(config, name, deployment)
            rows.append(
                {
                    "model": name,
                    "provider": provider,
                    "upstream_model": deployment.target.upstream_model,
                    "tier": model.tier,
                    "self_hosted": gpu is not None or model.tier == "local",
                    **_price(deployment),
                    **_served(usage),
                    "utilisation_assumed": None if gpu is None else float(gpu.utilisation),
                    "utilisation_measured": None
                    if gpu is None or shared or span <= 0
                    else _busy_seconds(gpu, usage) / span,
                }
            )
    rows.sort(
        key=lambda r: (
            not r["self_hosted"],
            r["blended_nano_per_mtok"] is None,
            r["blended_nano_per_mtok"] or 0,
        )
    )
    return {"mix": {"input": INPUT_SHARE, "output": OUTPUT_SHARE}, "deployments": rows}


def _price(deployment: Deployment) -> dict[str, Any]:
    price = deployment.price
    if price is None:
        return {
            "source": None,
            "input_nano_per_mtok": None,
            "output_nano_per_mtok": None,
            "blended_nano_per_mtok": None,
        }
    blended = (INPUT_SHARE * price.input + OUTPUT_SHARE * price.output) // (INPUT_SHARE + OUTPUT_SHARE)
    return {
        "source": price.source,
        "input_nano_per_mtok": price.input,
        "output_nano_per_mtok": price.output,
        "blended_nano_per_mtok": blended,
    }


def _served(usage: dict[str, Any] | None) -> dict[str, Any]:
    """What the deployment's model on this provider served in the range, and its realised $/MTok."""
    if usage is None:
        return {"requests": 0, "tokens": 0, "cost_nano": 0, "realised_nano_per_mtok": None}
    tokens = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "requests": usage["requests"],
        "tokens": tokens,
        "cost_nano": usage["cost_nano"],
        "realised_nano_per_mtok": usage["cost_nano"] * TOKENS_PER_MTOK // tokens if tokens else None,
    }


def _gpu(config: Config, name: str, deployment: Deployment) -> GpuConfig | None:
    spec = config.models.get(name)
    for candidate in spec.deployments if spec is not None else ():
        if (candidate.provider, candidate.model) == (
            deployment.target.provider,
            deployment.target.upstream_model,
        ):
            return candidate.gpu
    return None


def _busy_seconds(gpu: GpuConfig, usage: dict[str, Any] | None) -> float:
    """GPU time the served tokens took at the deployment's measured full-speed throughput."""
    if usage is None:
        return 0.0
    return float(
        usage["prompt_tokens"] / gpu.input_tokens_per_second
        + usage["completion_tokens"] / gpu.output_tokens_per_second
    )
