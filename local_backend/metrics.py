"""vLLM's Prometheus `/metrics` text as a typed snapshot, and the rates between two snapshots.

Parsing and arithmetic are pure functions; `scrape` is the one place that does HTTP. Counters are
summed over vLLM's `engine` label (data-parallel engines of one server); the KV-cache gauge is
the mean of the engines' usage. Names follow vLLM V1; the pre-0.11 `gpu_`-prefixed names are read
when the current ones are absent (vLLM renamed them in 0.10 and removed the old ones later).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    import httpx

# field -> sample names, current first
_SAMPLES: dict[str, tuple[str, ...]] = {
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
_MEAN_FIELDS = {"kv_cache_usage"}
_SAMPLE_FIELD = {name: field for field, names in _SAMPLES.items() for name in names}


@dataclass(frozen=True, slots=True)
class ModelStats:
    """One served model's counters (cumulative since the server started) and gauges."""

    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    requests_running: float = 0.0
    requests_waiting: float = 0.0
    kv_cache_usage: float = 0.0  # 0-1
    prefix_cache_queries: float = 0.0  # in tokens
    prefix_cache_hits: float = 0.0  # in tokens


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one scrape said, by `model_name`; `taken_at` is a monotonic clock in seconds."""

    taken_at: float
    models: Mapping[str, ModelStats]

    def stats(self, model: str | None = None) -> ModelStats:
        """One model's stats, or the whole server's (counters summed, KV usage averaged)."""
        if model is not None:
            return self.models.get(model, ModelStats())
        return _combine(list(self.models.values()))


@dataclass(frozen=True, slots=True)
class Throughput:
    prompt_tokens_per_second: float
    generation_tokens_per_second: float
    seconds: float


def parse_metrics(text: str, *, taken_at: float) -> Snapshot:
    """A `/metrics` page -> a snapshot; unknown metrics and histograms are ignored."""
    # (model, field) -> (current name?, values per engine)
    found: dict[tuple[str, str], dict[str, list[float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            field = _SAMPLE_FIELD.get(sample.name)
            if field is not None:
                model = sample.labels.get("model_name", "")
                found.setdefault((model, field), {}).setdefault(sample.name, []).append(sample.value)
    per_model: dict[str, dict[str, float]] = {}
    for (model, field), by_name in found.items():
        values = next(by_name[name] for name in _SAMPLES[field] if name in by_name)
        combined = sum(values) / len(values) if field in _MEAN_FIELDS else sum(values)
        per_model.setdefault(model, {})[field] = combined
    return Snapshot(
        taken_at=taken_at, models={model: ModelStats(**fields) for model, fields in per_model.items()}
    )


def throughput(before: Snapshot, after: Snapshot, *, model: str | None = None) -> Throughput:
    """Prompt and generation tokens per second between two snapshots (0 over an empty interval)."""
    seconds = after.taken_at - before.taken_at
    old, new = before.stats(model), after.stats(model)
    if seconds <= 0:
        return Throughput(0.0, 0.0, 0.0)
    return Throughput(
        prompt_tokens_per_second=_delta(old.prompt_tokens, new.prompt_tokens) / seconds,
        generation_tokens_per_second=_delta(old.generation_tokens, new.generation_tokens) / seconds,
        seconds=seconds,
    )


def prefix_cache_hit_rate(before: Snapshot, after: Snapshot, *, model: str | None = None) -> float | None:
    """Share of prompt tokens served from the prefix cache in between; None with no queries."""
    old, new = before.stats(model), after.stats(model)
    queries = _delta(old.prefix_cache_queries, new.prefix_cache_queries)
    if queries <= 0:
        return None
    return _delta(old.prefix_cache_hits, new.prefix_cache_hits) / queries


async def scrape(
    client: httpx.AsyncClient, url: str, *, clock: Callable[[], float] = time.monotonic
) -> Snapshot:
    """GET a vLLM `/metrics` page and parse it; HTTP errors propagate as httpx exceptions."""
    response = await client.get(url)
    response.raise_for_status()
    return parse_metrics(response.text, taken_at=clock())


def _delta(old: float, new: float) -> float:
    # A counter that went down means the server restarted: it counted `new` since then.
    return new - old if new >= old else new


def _combine(stats: Iterable[ModelStats]) -> ModelStats:
    items = list(stats)
    if not items:
        return ModelStats()
    return ModelStats(
        prompt_tokens=sum(s.prompt_tokens for s in items),
        generation_tokens=sum(s.generation_tokens for s in items),
        requests_running=sum(s.requests_running for s in items),
        requests_waiting=sum(s.requests_waiting for s in items),
        kv_cache_usage=sum(s.kv_cache_usage for s in items) / len(items),
        prefix_cache_queries=sum(s.prefix_cache_queries for s in items),
        prefix_cache_hits=sum(s.prefix_cache_hits for s in items),
    )


__all__ = [
    "ModelStats",
    "Snapshot",
    "Throughput",
    "parse_metrics",
    "prefix_cache_hit_rate",
    "scrape",
    "throughput",
]
