"""The sandbox's settings: dialect, latency profile, seed, served models and engine sizes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sandbox.core.latency import PROFILES, LatencyProfile, ProfileName

__all__ = ["DIALECTS", "Dialect", "SandboxConfig"]

Dialect = Literal["openai", "vllm", "anthropic", "gemini"]
DIALECTS: tuple[Dialect, ...] = ("openai", "vllm", "anthropic", "gemini")

_DEFAULT_PROFILE: dict[str, ProfileName] = {
    "openai": "managed",
    "vllm": "local",
    "anthropic": "managed",
    "gemini": "managed",
}
# vLLM's --max-num-seqs default; a managed API has no queue we can see.
_DEFAULT_MAX_NUM_SEQS: dict[str, int | None] = {"vllm": 256}
_DEFAULT_MAX_MODEL_LEN = {"openai": 128_000, "vllm": 32_768, "anthropic": 200_000, "gemini": 1_048_576}
# The shortest prompt (prefix) that is cached: vLLM caches every block; OpenAI and
# Anthropic (Sonnet 4.x, Opus 4/4.1) need 1,024 tokens; Gemini 2.5's implicit
# cache 2,048.
_DEFAULT_CACHE_MIN_TOKENS = {"openai": 1024, "vllm": 0, "anthropic": 1024, "gemini": 2048}


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """Everything that shapes one sandbox; ``None`` fields take the dialect's default."""

    dialect: Dialect = "openai"
    profile: ProfileName | None = None
    seed: int = 0
    models: tuple[str, ...] = ()
    fault_rate: float = 0.0
    prompt_tokens_details: bool = True
    cache_blocks: int = 16_384
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    embedding_dims: int = 256
    request_log_size: int = 1000
    cache_min_tokens: int | None = None
    # The batch APIs' clock: how long a batch validates before it runs, and its completion window
    # (24 hours on the real APIs); a batch still running when the window closes expires.
    batch_delay_seconds: float = 0.5
    batch_window_seconds: float = 86_400.0

    def __post_init__(self) -> None:
        if self.dialect not in DIALECTS:
            raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}")
        if self.profile is not None and self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}")
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError("fault_rate must be between 0 and 1")
        if self.cache_blocks < 1 or self.embedding_dims < 1 or self.request_log_size < 1:
            raise ValueError("cache_blocks, embedding_dims and request_log_size must be positive")
        if self.cache_min_tokens is not None and self.cache_min_tokens < 0:
            raise ValueError("cache_min_tokens must not be negative")
        if self.batch_delay_seconds < 0 or self.batch_window_seconds <= 0:
            raise ValueError("batch_delay_seconds must not be negative and batch_window_seconds positive")
        object.__setattr__(self, "models", tuple(self.models))

    @property
    def profile_name(self) -> ProfileName:
        """The latency profile in effect (local for vllm, managed for the managed APIs by default)."""
        return self.profile or _DEFAULT_PROFILE[self.dialect]

    @property
    def latency(self) -> LatencyProfile:
        """The latency profile object in effect."""
        return PROFILES[self.profile_name]

    @property
    def num_seqs(self) -> int | None:
        """Concurrent requests before queueing (None: unlimited)."""
        if self.max_num_seqs is not None:
            return self.max_num_seqs or None
        return _DEFAULT_MAX_NUM_SEQS.get(self.dialect)

    @property
    def model_len(self) -> int:
        """Context window: prompt plus completion tokens allowed per request."""
        return self.max_model_len or _DEFAULT_MAX_MODEL_LEN[self.dialect]

    @property
    def cache_minimum(self) -> int:
        """The shortest prompt prefix, in tokens, that the dialect's prompt cache keeps."""
        if self.cache_min_tokens is not None:
            return self.cache_min_tokens
        return _DEFAULT_CACHE_MIN_TOKENS[self.dialect]
