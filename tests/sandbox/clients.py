"""SDK clients and prompts shared by the sandbox tests."""

from __future__ import annotations

import openai

from sandbox.server import SandboxServer


def sdk(server: SandboxServer, **options: float) -> openai.OpenAI:
    """An official SDK client without retries, so every fault is visible."""
    return openai.OpenAI(
        base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0, **options
    )


def long_prompt(tokens: int, *, topic: str = "gateway") -> str:
    """A user message of about ``tokens`` tokens (one token a word)."""
    words = ("alpha", "beta", "gamma", "delta", topic[:6], "omega", "sigma", "kappa")
    return " ".join(words[i % len(words)] for i in range(tokens))
