"""vLLM's operational endpoints: /health, /ping, /version and Prometheus /metrics (V1 names).

Metric names, types and labels follow vLLM V1 (vllm/v1/metrics/loggers.py):
every series has ``model_name`` and ``engine="0"``; counters are exposed with
a ``_total`` suffix. Each app owns its CollectorRegistry, so several sandboxes
can share one process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from sandbox.core.asgi import Exchange
from sandbox.core.prefix_cache import PrefixCache
from sandbox.core.stats import EngineStats, Histogram, ModelStats

__all__ = ["VLLM_VERSION", "VllmCollector", "VllmOps"]

VLLM_VERSION = "0.11.0"
_LABELS = ("model_name", "engine")
_ENGINE = "0"

Handler = Callable[[Exchange], Awaitable[None]]

_GAUGES: tuple[tuple[str, str, Callable[[ModelStats], float]], ...] = (
    ("vllm:num_requests_running", "Number of requests in model execution batches.",
     lambda s: s.running),
    ("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
     lambda s: s.waiting),
)  # fmt: skip
_COUNTERS: tuple[tuple[str, str, Callable[[ModelStats], float]], ...] = (
    ("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
     lambda s: s.preemptions),
    ("vllm:prompt_tokens", "Number of prefill tokens processed.", lambda s: s.prompt_tokens),
    ("vllm:generation_tokens", "Number of generation tokens processed.",
     lambda s: s.generation_tokens),
    ("vllm:prefix_cache_queries",
     "Prefix cache queries, in terms of number of queried tokens.", lambda s: s.cache_queries),
    ("vllm:prefix_cache_hits",
     "Prefix cache hits, in terms of number of cached tokens.", lambda s: s.cache_hits),
)  # fmt: skip
_HISTOGRAMS: tuple[tuple[str, str, Callable[[ModelStats], Histogram]], ...] = (
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
     lambda s: s.ttft),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
     lambda s: s.inter_token),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
     lambda s: s.e2e),
    ("vllm:request_queue_time_seconds",
     "Histogram of time spent in WAITING phase for request.", lambda s: s.queue),
)  # fmt: skip


class VllmCollector:
    """Turns EngineStats and the prefix cache into vLLM-named metric families at scrape time."""

    def __init__(self, stats: EngineStats, cache: PrefixCache) -> None:
        self._stats = stats
        self._cache = cache

    def collect(self) -> Iterable[Metric]:
        """Yield every family (prometheus_client calls this on each scrape)."""
        models = sorted(self._stats.models.items())
        for name, doc, gauge_value in _GAUGES:
            gauge = GaugeMetricFamily(name, doc, labels=_LABELS)
            for model, stats in models:
                gauge.add_metric((model, _ENGINE), gauge_value(stats))
            yield gauge
        usage = GaugeMetricFamily(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels=_LABELS
        )
        for model, _ in models:
            usage.add_metric((model, _ENGINE), self._cache.usage)
        yield usage
        for name, doc, counter_value in _COUNTERS:
            counter = CounterMetricFamily(name, doc, labels=_LABELS)
            for model, stats in models:
                counter.add_metric((model, _ENGINE), counter_value(stats))
            yield counter
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=(*_LABELS, "finished_reason"),
        )
        for model, stats in models:
            for reason in sorted({"stop", "length", "abort", *stats.finished}):
                success.add_metric((model, _ENGINE, reason), stats.finished.get(reason, 0))
        yield success
        for name, doc, histogram_of in _HISTOGRAMS:
            family = HistogramMetricFamily(name, doc, labels=_LABELS)
            for model, stats in models:
                histogram = histogram_of(stats)
                family.add_metric((model, _ENGINE), histogram.cumulative(), histogram.total)
            yield family


class VllmOps:
    """The non-OpenAI endpoints of ``vllm serve``."""

    def __init__(self, stats: EngineStats, cache: PrefixCache) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(VllmCollector(stats, cache))

    def routes(self) -> dict[tuple[str, str], Handler]:
        """The endpoints, by (method, path)."""
        return {
            ("GET", "/health"): self.empty,
            ("GET", "/ping"): self.empty,
            ("POST", "/ping"): self.empty,
            ("GET", "/version"): self.version,
            ("GET", "/metrics"): self.metrics,
        }

    async def empty(self, ex: Exchange) -> None:
        """``/health`` and ``/ping``: 200 with an empty body."""
        await ex.respond(200, b"", content_type=b"application/json")

    async def version(self, ex: Exchange) -> None:
        """``GET /version``."""
        await ex.respond(200, b'{"version":"' + VLLM_VERSION.encode() + b'"}')

    async def metrics(self, ex: Exchange) -> None:
        """``GET /metrics`` in the Prometheus text format."""
        body = generate_latest(self.registry)
        await ex.respond(200, body, content_type=CONTENT_TYPE_PLAIN_0_0_4.encode())
