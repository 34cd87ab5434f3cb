"""SDK clients and prompts shared by the sandbox tests."""

from __future__ import annotations

import anthropic
import openai
from openai.types.chat import ChatCompletionMessageParam

from sandbox.server import SandboxServer


def sdk(server: SandboxServer, *, timeout: float = 10.0) -> openai.OpenAI:
    """An official SDK client without retries, so every fault is visible."""
    url = server.base_url + "/v1"
    return openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=timeout)


def anthropic_sdk(server: SandboxServer, *, timeout: float = 10.0) -> anthropic.Anthropic:
    """The official Anthropic SDK without retries."""
    return anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0, timeout=timeout)


def long_prompt(tokens: int, *, topic: str = "gateway") -> str:
    """A user message of about ``tokens`` tokens (one token a word)."""
    words = ("alpha", "beta", "gamma", "delta", topic[:6], "omega", "sigma", "kappa")
    return " ".join(words[i % len(words)] for i in range(tokens))


def user(content: str) -> list[ChatCompletionMessageParam]:
    """A one-message conversation."""
    return [{"role": "user", "content": content}]
