"""Provider adapters built from config over one shared, pooled HTTP client."""

from __future__ import annotations

import httpx

from gateway.config import Config, OpenAICompatibleProvider
from providers.adapter import Adapter
from providers.openai_compat import OpenAICompatAdapter


def create_http_client() -> httpx.AsyncClient:
    """One pool for every upstream; per-provider deadlines are applied per request."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=10.0),
        limits=httpx.Limits(max_connections=2000, max_keepalive_connections=200, keepalive_expiry=60),
        follow_redirects=False,
        trust_env=False,
    )


def build_adapters(config: Config, client: httpx.AsyncClient) -> dict[str, Adapter]:
    adapters: dict[str, Adapter] = {}
    for name, spec in config.providers.items():
        if isinstance(spec, OpenAICompatibleProvider):
            adapters[name] = OpenAICompatAdapter(
                name=name,
                base_url=spec.base_url,
                client=client,
                api_key=spec.api_key.get_secret_value() if spec.api_key else None,
                headers=spec.headers,
                timeout=spec.timeout_seconds,
            )
    return adapters
