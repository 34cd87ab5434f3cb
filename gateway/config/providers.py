"""Where requests go and how they get there: the provider types a config may name (OpenAI-compatible,
Anthropic, Gemini, LiteLLM) and the upstream network every provider's connections use (proxies,
TLS trust, client certificates, keep-alive), globally and per provider.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, model_validator

from gateway.config.base import Strict

# -- upstream network (proxies, TLS, keep-alive): see docs/operations.md "Corporate networks" ------


class TLSConfig(Strict):
    """Whom upstream TLS trusts and who the gateway is to the upstream (providers/tls.py)."""

    # A PEM bundle trusted besides the system store and certifi's roots (`add`) or instead (`replace`).
    ca_file: str | None = None
    ca_mode: Literal["add", "replace"] = "add"
    # A client certificate for mTLS; `key_file` may be left out when `cert_file` holds the key too.
    cert_file: str | None = None
    key_file: str | None = None

    @model_validator(mode="after")
    def _pairs(self) -> TLSConfig:
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("'key_file' needs 'cert_file'")
        if self.ca_mode == "replace" and self.ca_file is None:
            raise ValueError("ca_mode 'replace' needs 'ca_file'")
        return self


class UpstreamConfig(Strict):
    """What every provider's connections use unless the provider says otherwise."""

    # A forward proxy for every provider; unset: HTTPS_PROXY/HTTP_PROXY/NO_PROXY; `none`: direct.
    proxy: str | None = None
    tls: TLSConfig = TLSConfig()
    # Idle keep-alive connections are closed after this, before the upstream's own timeout closes
    # them under a request. Unset: 4 s for `type: vllm` (uvicorn's is 5 s), 15 s for the rest.
    keepalive_expiry_seconds: float | None = Field(default=None, gt=0)


class _Provider(Strict):
    api_key: SecretStr | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=600.0, gt=0)
    # Over `upstream.*` for this provider: `proxy: none` (or empty) goes direct; `tls` fields given
    # here replace the global ones one by one.
    proxy: str | None = None
    tls: TLSConfig | None = None
    keepalive_expiry_seconds: float | None = Field(default=None, gt=0)
    # Whether prompts sent here stay on infrastructure you run: the only deployments a `local-only`
    # team may reach, and the only ones a fleet scrapes and `local launch-cmd` starts. Unset: yes
    # for `type: vllm`, no for every other type (set it for an on-premises Ollama or TGI server).
    self_hosted: bool | None = None

    @property
    def on_premises(self) -> bool:
        if self.self_hosted is not None:
            return self.self_hosted
        return getattr(self, "type", None) == "vllm"


class OpenAICompatibleProvider(_Provider):
    """Any upstream speaking OpenAI's API: OpenAI itself, vLLM, Together, Groq, Ollama, …"""

    type: Literal["openai", "vllm", "openai_compatible"]
    base_url: str = Field(pattern=r"^https?://")


class AnthropicProvider(_Provider):
    """Anthropic's Messages API; `headers` is where `anthropic-beta` flags go."""

    type: Literal["anthropic"]
    base_url: str = Field(default="https://api.anthropic.com", pattern=r"^https?://")
    # Sent as max_tokens when a client gives none (Anthropic requires one).
    default_max_tokens: int = Field(default=4096, gt=0)


class GeminiProvider(_Provider):
    """Google's Gemini API (generateContent / streamGenerateContent)."""

    type: Literal["gemini"]
    base_url: str = Field(default="https://generativelanguage.googleapis.com", pattern=r"^https?://")


class LiteLLMProvider(_Provider):
    """The long tail (Bedrock, Vertex, Cohere, …) through LiteLLM, imported only when used."""

    type: Literal["litellm"]
    # LiteLLM's provider prefix, e.g. "bedrock": a model `claude-x` is sent as `bedrock/claude-x`.
    model_prefix: str | None = None
    base_url: str | None = None
    # Passed to every litellm call, e.g. {aws_region_name: us-east-1}.
    extra: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _own_client(self) -> LiteLLMProvider:
        # LiteLLM calls out through its own httpx client (which reads HTTPS_PROXY itself).
        if self.model_fields_set & {"proxy", "tls", "keepalive_expiry_seconds"}:
            raise ValueError("'proxy', 'tls' and 'keepalive_expiry_seconds' do not apply to type litellm")
        return self


ProviderConfig = Annotated[
    OpenAICompatibleProvider | AnthropicProvider | GeminiProvider | LiteLLMProvider,
    Field(discriminator="type"),
]
