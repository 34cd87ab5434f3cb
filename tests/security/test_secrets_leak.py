"""No provider key, admin key or virtual key leaves the gateway: one run drives it through successes,
upstream failures (including an upstream that echoes its credential), auth failures with keys in odd
places, admin calls, streams, the dashboard, a scrape and a database outage, then every sink the run
wrote to is searched. A key's visible prefix (`tg-ab12cd34`) may appear; nothing after it may."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox.server import SandboxServer
from tests.security.conftest import (
    ADMIN,
    ADMIN_KEY,
    CANARIES,
    LoggedGateway,
    OtlpCollector,
    bearer,
    every_value,
    fault,
    read_tree,
    sandbox_requests,
    security_config,
    wait_for_revocation,
)

CHAT_MODELS = ("gpt-4o-mini", "claude", "gemini", "tail")
PROMPT = [{"role": "user", "content": "Say something short about lighthouses."}]


@dataclass
class Run:
    """Everything one gateway run produced, by sink."""

    provider_keys: dict[str, str]
    virtual_keys: list[str]
    responses: list[str] = field(default_factory=list)
    logs: str = ""
    metrics: str = ""
    database: list[str] = field(default_factory=list)
    spool: str = ""
    traces: list[bytes] = field(default_factory=list)
    upstream_saw: str = ""
    prefixes: list[str] = field(default_factory=list)

    def needles(self) -> dict[str, str]:
        """What must never appear: each whole secret and, for virtual keys, the part after the prefix."""
        found = {f"provider key {name}": value for name, value in self.provider_keys.items()}
        for n, key in enumerate(self.virtual_keys):
            found[f"virtual key #{n}"] = key
            found[f"virtual key #{n} (secret part)"] = key.split("_", 1)[1]
        return found

    def leaks(self, text: str) -> list[str]:
        return [what for what, needle in self.needles().items() if needle in text]


class Client:
    """An HTTP client that keeps the status line, headers and body of every answer it gets."""

    def __init__(self, base_url: str, run: Run) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=30)
        self._run = run

    def send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        with self._http.stream(method, url, **kwargs) as response:
            response.read()
        self._keep(response)
        return response

    def keep_out(self, response: httpx.Response) -> None:
        """The one answer allowed to carry a key: the admin API's creation response, shown once."""
        self._run.responses.remove(_render(response))

    def _keep(self, response: httpx.Response) -> None:
        self._run.responses.append(_render(response))

    def close(self) -> None:
        self._http.close()


def _render(response: httpx.Response) -> str:
    head = "\n".join(f"{k}: {v}" for k, v in response.headers.multi_items())
    # The path only: the query string is what the test sent, not what the gateway answered.
    return f"{response.request.method} {response.request.url.path} -> {response.status_code}\n{head}\n\n{response.text}"


def chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": PROMPT, "max_tokens": 16, **extra}


def drive(client: Client, gateway: LoggedGateway, run: Run, upstreams: dict[str, SandboxServer]) -> None:
    base = gateway.base_url
    # Keys, minted through the admin API (their one response is the only place a key may appear).
    made = {}
    for team, name in (("alpha", "app"), ("beta", "app"), ("alpha", "to-revoke")):
        response = client.send("POST", "/admin/keys", headers=ADMIN, json={"team": team, "name": name})
        assert response.status_code == 201
        client.keep_out(response)
        made[name if name == "to-revoke" else team] = response.json()
    alpha, beta, doomed = made["alpha"]["key"], made["beta"]["key"], made["to-revoke"]["key"]
    run.virtual_keys += [alpha, beta, doomed]
    run.prefixes += [made[n]["prefix"] for n in made]
    assert client.send("DELETE", f"/admin/keys/{made['to-revoke']['id']}", headers=ADMIN).status_code == 200
    wait_for_revocation(base, doomed)

    # Successes on every provider, plain and streamed, on both teams (beta keeps bodies).
    for model in CHAT_MODELS:
        for key in (alpha, beta):
            assert (
                client.send("POST", "/v1/chat/completions", headers=bearer(key), json=chat(model)).status_code
                == 200
            )
            streamed = client.send(
                "POST", "/v1/chat/completions", headers=bearer(key), json=chat(model, stream=True)
            )
            assert streamed.status_code == 200 and "[DONE]" in streamed.text
    messages = {"model": "claude", "max_tokens": 16, "messages": PROMPT}
    assert client.send("POST", "/v1/messages", headers={"x-api-key": beta}, json=messages).status_code == 200
    embedding = {"model": "text-embedding-3-small", "input": "lighthouses"}
    assert client.send("POST", "/v1/embeddings", headers=bearer(alpha), json=embedding).status_code == 200
    cached = chat("gpt-4o-mini", temperature=0)
    for _ in range(2):  # a response-cache miss, then a hit
        client.send("POST", "/v1/chat/completions", headers=bearer(beta), json=cached)
    idempotent = {**bearer(alpha), "Idempotency-Key": "order-42"}
    for _ in range(2):
        client.send("POST", "/v1/chat/completions", headers=idempotent, json=chat("gpt-4o-mini"))

    # Upstream failures. A compromised or buggy upstream echoes the credential it was sent.
    echoes = {
        "openai": CANARIES["TG_SEC_OPENAI_KEY"],
        "anthropic": CANARIES["TG_SEC_ANTHROPIC_KEY"],
        "gemini": CANARIES["TG_SEC_GEMINI_KEY"],
    }
    for upstream, model in (
        ("openai", "gpt-4o-mini"),
        ("anthropic", "claude"),
        ("gemini", "gemini"),
        ("openai", "tail"),
    ):
        key = echoes[upstream]
        for status in (401, 400, 500, 429):
            message = f"Incorrect API key provided: {key} (Authorization: Bearer {key})"
            fault(upstreams[upstream], {"kind": "status", "status": status, "message": message, "count": 2})
            response = client.send("POST", "/v1/chat/completions", headers=bearer(alpha), json=chat(model))
            assert response.status_code >= 400
        fault(upstreams[upstream], {"kind": "stream_error", "after_chunks": 1, "message": f"boom {key}"})
        client.send("POST", "/v1/chat/completions", headers=bearer(beta), json=chat(model, stream=True))
        fault(upstreams[upstream], {"kind": "reset", "count": 2})
        client.send("POST", "/v1/chat/completions", headers=bearer(alpha), json=chat(model))
    fault(upstreams["openai"], {"kind": "status", "status": 401, "message": f"bad key {echoes['openai']}"})
    client.send("POST", "/v1/embeddings", headers=bearer(alpha), json=embedding)

    # Authentication failures, with keys sent where they do not belong.
    stranger = f"tg-{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"
    run.virtual_keys.append(stranger)
    chat_body = chat("gpt-4o-mini")
    for headers, params in (
        (bearer(stranger), {}),
        (bearer(doomed), {}),
        ({"x-api-key": doomed}, {}),
        ({}, {"key": alpha}),
        ({}, {"api_key": beta}),
        ({"api-key": alpha}, {}),
        ({"Authorization": alpha}, {}),
        ({"Authorization": "Basic " + base64.b64encode(f"user:{alpha}".encode()).decode()}, {}),
        ({"Authorization": f"Token {beta}"}, {}),
        ({"Authorization": f"Bearer {alpha}x"}, {}),
        ({"Authorization": f"Bearer {CANARIES['TG_SEC_OPENAI_KEY']}"}, {}),
        ({"Authorization": f"Bearer {ADMIN_KEY}"[:-1]}, {}),
        ({**bearer(stranger), "x-request-id": alpha}, {}),
        ({**bearer(doomed), "x-tollgate-tags": beta, "Idempotency-Key": alpha}, {}),
    ):
        for path in ("/v1/chat/completions", "/v1/messages", "/v1/embeddings"):
            response = client.send("POST", path, headers=headers, params=params, json=chat_body)
            assert response.status_code == 401, (path, headers, response.text)
        for path in ("/v1/spend", "/admin/keys", "/dashboard/api/summary"):
            assert client.send("GET", path, headers=headers, params=params).status_code == 401
    body_with_key = {**chat_body, "api_key": alpha, "user": "someone"}
    assert (
        client.send("POST", "/v1/chat/completions", headers=bearer(stranger), json=body_with_key).status_code
        == 401
    )

    # Admin calls: right key, team keys (403) and a near miss (401).
    assert client.send("GET", "/admin/keys", headers=ADMIN).status_code == 200
    assert client.send("GET", "/admin/keys", headers=bearer(alpha)).status_code == 403
    assert client.send("DELETE", "/admin/keys/key_nope", headers=ADMIN).status_code == 404
    assert (
        client.send(
            "POST", "/admin/keys", headers=bearer(beta), json={"team": "beta", "name": "x"}
        ).status_code
        == 403
    )

    # What operators read: spend, the dashboard, health and metrics.
    for key in (alpha, ADMIN_KEY):
        assert (
            client.send("GET", "/v1/spend", headers=bearer(key), params={"group_by": "key,team"}).status_code
            == 200
        )
        assert (
            client.send(
                "GET", "/v1/spend", headers={**bearer(key), "accept": "text/csv"}, params={"group_by": "key"}
            ).status_code
            == 200
        )
        for path in ("me", "summary", "spend-over-time", "budgets", "top", "fleet"):
            assert client.send("GET", f"/dashboard/api/{path}", headers=bearer(key)).status_code == 200
    for path in ("/dashboard", "/v1/models", "/healthz", "/readyz", "/openapi.json", "/docs"):
        client.send("GET", path)
    # Keys exist, so /metrics wants the admin key (or observability.metrics_token).
    run.metrics = client.send("GET", "/metrics", headers=ADMIN).text

    # A database outage: rows go to the spool, which is read before it is replayed.
    gateway.call(_database_down(gateway, True))
    client.send("POST", "/v1/chat/completions", headers=bearer(beta), json=chat("gpt-4o-mini"))
    fault(
        upstreams["openai"],
        {"kind": "status", "status": 500, "message": f"down {echoes['openai']}", "count": 2},
    )
    client.send("POST", "/v1/chat/completions", headers=bearer(alpha), json=chat("gpt-4o-mini"))
    client.send("POST", "/v1/chat/completions", headers=bearer(stranger), json=chat("gpt-4o-mini"))
    gateway.call(gateway.runtime.ledger.flush())
    spool_dir = Path(gateway.runtime.config.ledger.spool_dir)
    run.spool = read_tree(spool_dir)
    assert run.spool.count("\n") >= 3, "the outage should have spooled three rows"
    gateway.call(_database_down(gateway, False))
    gateway.call(gateway.runtime.ledger.settle())


async def _database_down(gateway: LoggedGateway, down: bool) -> None:
    # What the writer concludes after a failed insert: the database is unreachable, spool instead.
    gateway.runtime.ledger._db_down = down


@pytest.fixture(scope="module")
def run(upstreams: dict[str, SandboxServer], fresh_sqlite_url: str) -> Iterator[Run]:
    result = Run(provider_keys=dict(CANARIES), virtual_keys=[])
    config = security_config(upstreams, fresh_sqlite_url)
    with OtlpCollector() as collector:
        environ = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url + "/v1/traces"}
        gateway = LoggedGateway(config, environ=environ)
        with gateway:
            assert gateway.runtime.tracing.enabled
            client = Client(gateway.base_url, result)
            try:
                drive(client, gateway, result, upstreams)
            finally:
                client.close()
            result.database = every_value(gateway)
        # Leaving the gateway flushes the span exporter and the last log lines.
        result.logs = gateway.logs.text()
        result.traces = list(collector.bodies)
    result.upstream_saw = "\n".join(
        str(entry) for server in upstreams.values() for entry in sandbox_requests(server)
    )
    yield result


def test_the_run_produced_something_to_search(run: Run) -> None:
    """Guards the greps below: each sink holds data, and the keys' prefixes do show up."""
    assert len(run.responses) > 150
    access = [line for line in run.logs.splitlines() if line.startswith("INFO uvicorn.access")]
    assert len(access) >= len(run.responses)  # every request of the run is in the access log
    assert any("?key=[redacted]" in line for line in access)  # with its query string
    assert "tollgate_requests_total" in run.metrics
    assert len(run.database) > 500 and "Say something short about lighthouses" in "\n".join(run.database)
    assert run.traces and b"tollgate" in b"".join(run.traces)
    assert all(prefix in "\n".join(run.database) for prefix in run.prefixes)


def test_no_secret_in_any_response(run: Run) -> None:
    leaked = {what: r.splitlines()[0] for r in run.responses for what in run.leaks(r)}
    assert not leaked, leaked


def test_no_secret_in_any_log_line(run: Run) -> None:
    lines = [line for line in run.logs.splitlines() if run.leaks(line)]
    assert not lines, lines[:5]


def test_no_secret_in_metrics(run: Run) -> None:
    assert run.leaks(run.metrics) == []


def test_no_secret_in_any_table(run: Run) -> None:
    values = [v for v in run.database if run.leaks(v)]
    assert not values, values[:5]


def test_no_secret_in_the_spool(run: Run) -> None:
    assert run.leaks(run.spool) == []


def test_no_secret_in_traces(run: Run) -> None:
    leaked = [what for body in run.traces for what in run.leaks(body.decode("utf-8", "replace"))]
    assert leaked == []


def test_upstreams_never_see_a_virtual_or_admin_key(run: Run) -> None:
    """Provider keys go to their own upstream, by design; the client's credentials never do."""
    client_secrets = Run(provider_keys={"admin": ADMIN_KEY}, virtual_keys=run.virtual_keys)
    assert client_secrets.leaks(run.upstream_saw) == []
    assert CANARIES["TG_SEC_OPENAI_KEY"] in run.upstream_saw  # the upstream log is really searched
