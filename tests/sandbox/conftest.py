"""Fixtures: one instant sandbox per dialect for the session, reset before every test."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from sandbox.server import SandboxServer
from tests.sandbox.clients import anthropic_sdk, sdk


@pytest.fixture(scope="session")
def openai_sb() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="openai", profile="instant") as server:
        yield server


@pytest.fixture(scope="session")
def vllm_sb() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="vllm", profile="instant") as server:
        yield server


@pytest.fixture(scope="session")
def anthropic_sb() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="anthropic", profile="instant") as server:
        yield server


@pytest.fixture(scope="session")
def gemini_sb() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="gemini", profile="instant") as server:
        yield server


@pytest.fixture(autouse=True)
def _reset_sandboxes(request: pytest.FixtureRequest, http: httpx.Client) -> None:
    """Faults, logs and the prompt caches never leak from one test into the next."""
    for name in ("openai_sb", "vllm_sb", "anthropic_sb", "gemini_sb"):
        if name in request.fixturenames:
            server: SandboxServer = request.getfixturevalue(name)
            http.post(server.base_url + "/_sandbox/reset").raise_for_status()


@pytest.fixture
def client(openai_sb: SandboxServer) -> Iterator[openai.OpenAI]:
    with sdk(openai_sb) as c:
        yield c


@pytest.fixture
def vllm_client(vllm_sb: SandboxServer) -> Iterator[openai.OpenAI]:
    with sdk(vllm_sb) as c:
        yield c


@pytest.fixture(scope="session")
def http() -> Iterator[httpx.Client]:
    """One pooled HTTP client (a fresh ``httpx.post`` pays for a new client every call)."""
    with httpx.Client(timeout=10.0) as c:
        yield c


@pytest.fixture
def claude(anthropic_sb: SandboxServer) -> Iterator[anthropic.Anthropic]:
    with anthropic_sdk(anthropic_sb) as c:
        yield c
