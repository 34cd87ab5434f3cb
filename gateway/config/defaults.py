"""The embedded default: what `tollgate serve` runs with no config file — SQLite, in-memory state,
and real providers where their keys are set, sandbox emulators where they are not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.config.loader import build_config
from gateway.config.schema import Config
from gateway.routing.classifier import shipped_threshold

OPENAI_KEY_ENV = "OPENAI_API_KEY"
VLLM_URL_ENV = "TOLLGATE_VLLM_URL"
OPENAI_URL = "https://api.openai.com/v1"
LOCAL_MODEL = "llama-3.1-8b-instruct"


def sandboxes_needed(environ: Mapping[str, str]) -> list[str]:
    """Which emulator dialects to start: one for each upstream whose real address or key is missing."""
    needed = []
    if not environ.get(OPENAI_KEY_ENV):
        needed.append("openai")
    if not environ.get(VLLM_URL_ENV):
        needed.append("vllm")
    return needed


def embedded_config(environ: Mapping[str, str], sandbox_urls: Mapping[str, str]) -> Config:
    openai: dict[str, Any] = (
        {"type": "openai", "base_url": OPENAI_URL, "api_key": environ[OPENAI_KEY_ENV]}
        if environ.get(OPENAI_KEY_ENV)
        else {"type": "openai", "base_url": sandbox_urls["openai"] + "/v1"}
    )
    local: dict[str, Any] = {
        "type": "vllm",
        "base_url": environ.get(VLLM_URL_ENV) or sandbox_urls["vllm"] + "/v1",
    }
    raw = {
        "providers": {"openai": openai, "local": local},
        "models": {
            "gpt-4o-mini": {
                "provider": "openai",
                "tier": "managed",
                "context_window": 128_000,
                "price": {
                    "input_per_mtok": "0.15",
                    "output_per_mtok": "0.60",
                    "cached_input_per_mtok": "0.075",
                },
            },
            "gpt-4o": {
                "provider": "openai",
                "tier": "managed",
                "context_window": 128_000,
                "price": {"input_per_mtok": "2.50", "output_per_mtok": "10", "cached_input_per_mtok": "1.25"},
            },
            LOCAL_MODEL: {
                "provider": "local",
                "tier": "local",
                "context_window": 32_768,
                # One L4 at about $0.80/h serving about 4,000 tokens/s: roughly $0.06 per million.
                "price": {"input_per_mtok": "0.06", "output_per_mtok": "0.06"},
                # Text only: `auto` sends requests with images to a managed tier.
                "capabilities": ["tools", "json_schema"],
            },
        },
        "aliases": {"fast": LOCAL_MODEL, "smart": "gpt-4o"},
        # Savings are measured against sending everything to the frontier model, as without Tollgate.
        "pricing": {"baseline_model": "gpt-4o"},
        # `model: "auto"` works out of the box: the shipped default routes pick the tier. The
        # thresholds serve score-only routing (`routes: []`); the first is the shipped classifier's
        # balanced-accuracy one, from gateway/routing/weights.json.
        "routing": {
            "tiers": [
                {"name": "local", "models": [LOCAL_MODEL]},
                {"name": "standard", "models": ["gpt-4o-mini"]},
                {"name": "frontier", "models": ["gpt-4o"]},
            ],
            "thresholds": [shipped_threshold(), 0.6],
        },
    }
    return build_config(raw, source="embedded default", environ=environ)


def describe_upstreams(environ: Mapping[str, str], sandbox_urls: Mapping[str, str]) -> str:
    parts = []
    if "openai" in sandbox_urls:
        parts.append(f"openai → sandbox emulator at {sandbox_urls['openai']} ({OPENAI_KEY_ENV} not set)")
    else:
        parts.append(f"openai → {OPENAI_URL}")
    if "vllm" in sandbox_urls:
        parts.append(f"local → sandbox vLLM emulator at {sandbox_urls['vllm']} ({VLLM_URL_ENV} not set)")
    else:
        parts.append(f"local → vLLM at {environ[VLLM_URL_ENV]}")
    return "; ".join(parts)
