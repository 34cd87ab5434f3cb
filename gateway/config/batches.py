"""The Batch API's settings (`batches:` in the YAML): how often the background runner looks at work,
how long a replica's claim on a batch lasts, and how much of a self-hosted fleet a batch may use."""

from __future__ import annotations

from pydantic import Field

from gateway.config.base import Strict


class BatchConfig(Strict):
    # How long a batch may take before it expires (OpenAI and Anthropic: 24 hours). Tests shrink it.
    window_seconds: float = Field(default=86_400.0, gt=0)
    # How often the runner claims new work and polls the providers' batch APIs.
    poll_seconds: float = Field(default=5.0, gt=0)
    # A replica's claim on a batch: renewed while it works, taken over by another once it lapses.
    lease_seconds: float = Field(default=60.0, gt=0)
    # Self-hosted batches run in the fleet's idle capacity: an item is sent only while some healthy
    # replica has nothing queued and its KV cache is below this share.
    max_kv_cache_usage: float = Field(default=0.8, gt=0, le=1)
    # Items in flight per batch on a self-hosted model (also the cap when the fleet has more headroom).
    local_concurrency: int = Field(default=8, ge=1)
    # The most items one batch may hold (OpenAI's limit is 50,000; Anthropic's 100,000).
    max_items: int = Field(default=50_000, ge=1)
    # The largest input file `POST /v1/files` takes (OpenAI's limit: 200 MB).
    max_file_bytes: int = Field(default=200 * 1024 * 1024, gt=0)
