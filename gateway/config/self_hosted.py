"""How a self-hosted model runs: what its GPUs cost, the fleet of vLLM replicas behind it (scraping,
affinity, spillover) and how `tollgate local launch-cmd` starts its `vllm serve`. Part of a model's
entry in `gateway.config.schema`."""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field

from gateway.config.base import Strict
from local_backend.cost_model import GpuDeployment


class GpuConfig(Strict):
    """A self-hosted deployment priced by its GPUs: $/GPU-hour over measured throughput."""

    gpu_hour_usd: Decimal = Field(ge=0)
    gpus: int = Field(default=1, ge=1)
    input_tokens_per_second: Decimal = Field(gt=0)
    output_tokens_per_second: Decimal = Field(gt=0)
    # GPUs are not busy all the time; idle time is paid for by the tokens that are served.
    utilisation: Decimal = Field(default=Decimal("0.6"), gt=0, le=1)

    def to_deployment(self) -> GpuDeployment:
        return GpuDeployment.of(**self.model_dump())


class SpilloverConfig(Strict):
    """When the self-hosted replicas are too busy, send new work to the model's fallbacks instead."""

    max_queue: int = Field(default=8, ge=0)
    ttft_target_ms: float | None = Field(default=None, gt=0)
    resume_ratio: float = Field(default=0.5, ge=0, le=1)


class FleetConfig(Strict):
    """A self-hosted model served by several vLLM replicas (one provider each): scrape their
    /metrics, prefer the least loaded, keep prompts that share a prefix on one replica."""

    affinity: bool = True
    scrape_interval_seconds: float = Field(default=1.0, gt=0)
    unhealthy_after: int = Field(default=3, ge=1)
    max_num_seqs: int = Field(default=256, ge=1)
    spillover: SpilloverConfig | None = SpilloverConfig()


class SpeculativeConfig(Strict):
    """Speculative decoding for a self-hosted model: a draft model (or EAGLE/MTP/n-gram speculator)."""

    model: str = Field(min_length=1)
    num_speculative_tokens: int = Field(default=5, ge=1)
    # draft_model, eagle, eagle3, mtp, ngram, ...; None lets vLLM infer it from the draft model.
    method: str | None = None


class LaunchConfig(Strict):
    """How `tollgate local launch-cmd MODEL` starts this self-hosted model's `vllm serve`.

    Unset fields come from the rest of the model's entry, so the server serves what the gateway asks
    for: the served name is the deployments' upstream model id, the context length the model's
    `context_window`, tensor parallelism its `gpu.gpus`, batch slots its `fleet.max_num_seqs`.
    """

    model: str | None = None  # Hugging Face id or local path of the weights (default: the upstream id)
    served_model_name: str | None = None
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)  # default: the replica's provider URL
    max_model_len: int | None = Field(default=None, gt=0)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    tensor_parallel_size: int | None = Field(default=None, ge=1)
    max_num_seqs: int | None = Field(default=None, ge=1)
    prefix_caching: bool = True
    api_key_env: str | None = Field(default="VLLM_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    speculative: SpeculativeConfig | None = None
    extra_args: tuple[str, ...] = ()
