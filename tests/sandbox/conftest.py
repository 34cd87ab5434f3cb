"""Fixtures: one instant sandbox per dialect for the session, reset before every test."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from sandbox.server import SandboxServer
from tests.sandbox.clients import sdk


@pytest.fixture(scope="session")
def openai_sb() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="openai", profile="instant") as server:
        yield server


@pytest.fixture(scope="session")
def vllm_sb() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="vllm", profile="instant") as server:
        yield server


@pytest.fixture(autouse=True)
def _reset_sandboxes(request: pytest.FixtureRequest) -> None:
    """Faults, logs and the prefix cache never leak from one test into the next."""
    for name in ("openai_sb", "vllm_sb"):
        if name in request.fixturenames:
            server: SandboxServer = request.getfixturevalue(name)
            httpx.post(server.base_url + "/_sandbox/reset").raise_for_status()


@pytest.fixture
def client(openai_sb: SandboxServer) -> Iterator[openai.OpenAI]:
    with sdk(openai_sb) as c:
        yield c


@pytest.fixture
def vllm_client(vllm_sb: SandboxServer) -> Iterator[openai.OpenAI]:
    with sdk(vllm_sb) as c:
        yield c
