"""vLLM's /metrics text parsed into snapshots; throughput and prefix-cache hit rate between two."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from local_backend.metrics import (
    ModelStats,
    parse_metrics,
    prefix_cache_hit_rate,
    scrape,
    throughput,
)

MODEL = "llama-3.1-8b-instruct"


def vllm_metrics(*, prompt: float, generation: float, queries: float, hits: float) -> str:
    """A /metrics page as vLLM V1 serves it: two data-parallel engines of one model, counters with
    their `_created` samples, histograms and the process collector's own metrics around them."""
    half = {"prompt": prompt / 2, "generation": generation / 2, "queries": queries / 2, "hits": hits / 2}
    engines = []
    for engine, running, waiting, kv in (("0", 3, 1, 0.25), ("1", 2, 0, 0.35)):
        labels = f'engine="{engine}",model_name="{MODEL}"'
        engines.append(f"""\
vllm:num_requests_running{{{labels}}} {running}.0
vllm:num_requests_waiting{{{labels}}} {waiting}.0
vllm:kv_cache_usage_perc{{{labels}}} {kv}
vllm:prefix_cache_queries_total{{{labels}}} {half["queries"]}
vllm:prefix_cache_queries_created{{{labels}}} 1.7584e+09
vllm:prefix_cache_hits_total{{{labels}}} {half["hits"]}
vllm:prefix_cache_hits_created{{{labels}}} 1.7584e+09
vllm:prompt_tokens_total{{{labels}}} {half["prompt"]}
vllm:prompt_tokens_created{{{labels}}} 1.7584e+09
vllm:generation_tokens_total{{{labels}}} {half["generation"]}
vllm:generation_tokens_created{{{labels}}} 1.7584e+09
vllm:num_preemptions_total{{{labels}}} 0.0
vllm:time_to_first_token_seconds_bucket{{{labels},le="0.1"}} 40.0
vllm:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} 42.0
vllm:time_to_first_token_seconds_count{{{labels}}} 42.0
vllm:time_to_first_token_seconds_sum{{{labels}}} 3.2
""")
    return f"""\
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{{generation="0"}} 12345.0
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.1e+09
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
{"".join(engines)}"""


BEFORE = vllm_metrics(prompt=1_000_000, generation=80_000, queries=900_000, hits=300_000)
# 10 s later: +200,000 prompt and +15,000 generated tokens; +100,000 queried, +40,000 hit.
AFTER = vllm_metrics(prompt=1_200_000, generation=95_000, queries=1_000_000, hits=340_000)


def test_a_scrape_sums_engines_and_averages_kv_cache_usage() -> None:
    snapshot = parse_metrics(BEFORE, taken_at=100.0)
    assert set(snapshot.models) == {MODEL}
    stats = snapshot.stats(MODEL)
    assert stats.kv_cache_usage == pytest.approx(0.30)  # (0.25 + 0.35) / 2
    assert replace(stats, kv_cache_usage=0.0) == ModelStats(
        prompt_tokens=1_000_000,
        generation_tokens=80_000,
        requests_running=5,
        requests_waiting=1,
        prefix_cache_queries=900_000,
        prefix_cache_hits=300_000,
    )
    assert snapshot.stats() == snapshot.stats(MODEL)
    assert snapshot.stats("another-model") == ModelStats()


def test_throughput_between_two_scrapes() -> None:
    before, after = parse_metrics(BEFORE, taken_at=100.0), parse_metrics(AFTER, taken_at=110.0)
    # 200,000 prompt tokens / 10 s = 20,000/s; 15,000 generated / 10 s = 1,500/s.
    rate = throughput(before, after, model=MODEL)
    assert (rate.prompt_tokens_per_second, rate.generation_tokens_per_second, rate.seconds) == (
        20_000,
        1_500,
        10,
    )
    assert throughput(after, after).seconds == 0


def test_prefix_cache_hit_rate_between_two_scrapes() -> None:
    before, after = parse_metrics(BEFORE, taken_at=100.0), parse_metrics(AFTER, taken_at=110.0)
    # 40,000 of 100,000 queried tokens were cache hits.
    assert prefix_cache_hit_rate(before, after, model=MODEL) == pytest.approx(0.4)
    assert prefix_cache_hit_rate(after, after) is None


def test_a_restarted_server_counts_from_zero() -> None:
    before = parse_metrics(AFTER, taken_at=100.0)
    restarted = parse_metrics(
        vllm_metrics(prompt=50_000, generation=5_000, queries=50_000, hits=10_000), taken_at=110.0
    )
    assert throughput(before, restarted).prompt_tokens_per_second == 5_000
    assert prefix_cache_hit_rate(before, restarted) == pytest.approx(0.2)


def test_pre_0_11_metric_names_are_read_when_the_new_ones_are_missing() -> None:
    legacy = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="old"} 0.5
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{engine="0",model_name="old"} 1000.0
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{engine="0",model_name="old"} 250.0
"""
    stats = parse_metrics(legacy, taken_at=0.0).stats("old")
    assert (stats.kv_cache_usage, stats.prefix_cache_queries, stats.prefix_cache_hits) == (0.5, 1000, 250)


async def test_scrape_fetches_and_parses() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/metrics"
        return httpx.Response(200, text=BEFORE, headers={"content-type": "text/plain; version=0.0.4"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        snapshot = await scrape(client, "http://vllm:8000/metrics", clock=lambda: 42.0)
    assert snapshot.taken_at == 42.0
    assert snapshot.stats(MODEL).prompt_tokens == 1_000_000


async def test_scrape_raises_on_http_errors() -> None:
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(503))) as client:
        with pytest.raises(httpx.HTTPStatusError):
            await scrape(client, "http://vllm:8000/metrics")
