"""The gateway's upstream connections are reused, streams included: a new connection per request
would put a TCP (and, to a managed API, a TLS) handshake on every request's time to first token.
That a client leaving mid-stream still closes its upstream connection is tests/chaos/test_mid_stream.py."""

from __future__ import annotations

import httpx
import openai

from sandbox.server import SandboxServer
from tests.harness import GatewayServer


def upstream_clients(server: SandboxServer) -> list[tuple[str, int]]:
    """The client address of each chat completion the upstream received, in order."""
    log = httpx.get(server.base_url + "/_sandbox/requests").json()
    return [tuple(r["client"]) for r in log if r["path"] == "/v1/chat/completions"]


def test_sequential_streams_and_completions_share_one_upstream_connection(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    messages = [{"role": "user", "content": "Hi"}]
    for _ in range(4):
        chunks = list(client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True))
        assert chunks and any(c.choices and c.choices[0].delta.content for c in chunks)
        assert (
            client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content
        )
    seen = upstream_clients(openai_upstream)
    assert len(seen) == 8
    assert len(set(seen)) == 1, seen  # one kept-alive connection for all eight
