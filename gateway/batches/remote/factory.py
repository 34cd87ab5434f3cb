"""The provider Batch API, if any, for a configured provider: OpenAI's and Anthropic's own (half the
price); every other type (vLLM, compatible servers, Gemini, LiteLLM) is run by the gateway itself."""

from __future__ import annotations

from gateway.batches.remote.anthropic import AnthropicBatchAPI
from gateway.batches.remote.openai import OpenAIBatchAPI
from gateway.batches.remote.types import RemoteBatchAPI
from gateway.config.providers import AnthropicProvider, OpenAICompatibleProvider, ProviderConfig
from gateway.config.schema import Config
from gateway.execution.upstreams import client_for
from providers.http import UpstreamHTTP

__all__ = ["remote_batch_api", "remote_batch_apis"]


def remote_batch_api(name: str, spec: ProviderConfig, client: UpstreamHTTP) -> RemoteBatchAPI | None:
    """`client` should already carry the provider's network settings (`client_for`, as
    `remote_batch_apis` does), the same client its chat adapter uses."""
    key = spec.api_key.get_secret_value() if spec.api_key else None
    if isinstance(spec, OpenAICompatibleProvider) and spec.type == "openai":
        return OpenAIBatchAPI(
            name=name,
            base_url=spec.base_url,
            client=client,
            api_key=key,
            headers=spec.headers,
            timeout=spec.timeout_seconds,
        )
    if isinstance(spec, AnthropicProvider):
        return AnthropicBatchAPI(
            name=name,
            client=client,
            base_url=spec.base_url,
            api_key=key,
            headers=spec.headers,
            timeout=spec.timeout_seconds,
            default_max_tokens=spec.default_max_tokens,
        )
    return None


def remote_batch_apis(config: Config, client: UpstreamHTTP) -> dict[str, RemoteBatchAPI]:
    """Every provider that has its own Batch API, by name, over its own network settings."""
    apis: dict[str, RemoteBatchAPI] = {}
    for name, spec in config.providers.items():
        api = remote_batch_api(name, spec, client_for(config, name, spec, client))
        if api is not None:
            apis[name] = api
    return apis
