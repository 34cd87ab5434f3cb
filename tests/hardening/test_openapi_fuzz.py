"""Schemathesis against Tollgate's own OpenAPI document: every documented route (public, spend,
admin, dashboard API), each generated request sent as the admin, as a team key and with no key.

Whatever comes back is a success in JSON or an OpenAI-shaped error, never a 5xx or a traceback.
`make test` runs a few examples per route; `make fuzz` a random, longer search (see profiles.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import BaseSchema, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.hardening.profiles import fuzz_settings
from tests.hardening.shapes import (
    assert_anthropic_error,
    assert_no_traceback,
    assert_openai_error,
    media_type,
)
from tests.harness import GatewayServer

ADMIN_KEY = "tollgate-admin-fuzz-4c1f9a7e2b"
fuzz = fuzz_settings(ci_examples=20)


@pytest.fixture(scope="module")
def admin_gateway(
    database_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[GatewayServer]:
    config = gateway_config(
        database_url, openai_upstream.base_url, vllm_upstream.base_url, auth={"admin_key": ADMIN_KEY}
    )
    with GatewayServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def team_key(admin_gateway: GatewayServer) -> str:
    response = httpx.post(
        admin_gateway.base_url + "/admin/keys",
        json={"team": "fuzzers", "name": "schemathesis"},
        headers={"authorization": f"Bearer {ADMIN_KEY}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


@pytest.fixture(scope="module")
def tollgate_schema(admin_gateway: GatewayServer) -> BaseSchema:
    # An explicit (default) config: a schemathesis.toml lying around must not change this test.
    config = SchemathesisConfig.from_dict({})
    document = httpx.get(admin_gateway.base_url + "/openapi.json", timeout=10).json()
    # The document says `model: string`; random strings would all be 404s. Most generated bodies
    # name a configured model instead, so they get past routing to the upstream and back.
    for path, models in SERVED_MODELS.items():
        body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        body["properties"]["model"] = {"enum": models}
    return schemathesis.openapi.from_dict(document, config=config)


SERVED_MODELS = {
    "/v1/chat/completions": ["gpt-4o-mini", "llama", "resilient"],
    "/v1/messages": ["gpt-4o-mini", "llama"],
    "/v1/embeddings": ["gpt-4o-mini"],
    "/v1/completions": ["llama", "gpt-4o-mini"],
    "/v1/messages/count_tokens": ["gpt-4o-mini", "llama"],
    "/v1/responses": ["gpt-4o-mini", "llama"],
}


def test_the_document_lists_every_public_and_admin_route(admin_gateway: GatewayServer) -> None:
    document = httpx.get(admin_gateway.base_url + "/openapi.json", timeout=10).json()
    routes = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert {
        ("GET", "/v1/models"),
        ("GET", "/v1/spend"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("POST", "/admin/keys"),
        ("GET", "/admin/keys"),
        ("DELETE", "/admin/keys/{key_id}"),
        ("GET", "/dashboard/api/summary"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/messages"),
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/models/{model_id}"),
        ("POST", "/v1/responses"),
        ("GET", "/v1/responses/{response_id}"),
        ("DELETE", "/v1/responses/{response_id}"),
        ("GET", "/v1/responses/{response_id}/input_items"),
    } <= routes


def test_every_documented_route_answers_well_formed(
    tollgate_schema: BaseSchema, admin_gateway: GatewayServer, team_key: str, subtests: pytest.Subtests
) -> None:
    # schemathesis' own pytest plumbing (`from_fixture`) writes `Node._nodeid`, which pytest 9.2 no
    # longer has; its strategies under plain hypothesis do the same generation.
    operations = [result.ok() for result in tollgate_schema.get_all_operations()]
    assert len(operations) >= 10
    credentials = (ADMIN_KEY, team_key, None)
    for operation in operations:
        with subtests.test(route=operation.label):
            cases = st.one_of(
                operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE)
            )

            @fuzz
            @given(case=cases)
            def call(case: Case) -> None:
                for credential in credentials:
                    headers = {"authorization": f"Bearer {credential}"} if credential else {}
                    response = case.call(base_url=admin_gateway.base_url, headers=headers, timeout=10)
                    case.validate_response(response, checks=[not_a_server_error], headers=headers)
                    assert_well_formed(
                        response.status_code,
                        response.headers,
                        response.content,
                        anthropic=case.path.startswith("/v1/messages"),
                    )

            call()
    # The completion routes were reached, not only refused: some generated bodies were answered.
    answered = {(row["endpoint"], row["status"]) for row in admin_gateway.ledger_rows()}
    assert {
        ("chat.completions", 200),
        ("messages", 200),
        ("completions", 200),
        ("messages.count_tokens", 200),
        ("responses", 200),
    } <= answered, answered


def assert_well_formed(status: int, headers: Any, body: bytes, *, anthropic: bool = False) -> None:
    assert status < 500, body[:500]
    if status >= 400:
        (assert_anthropic_error if anthropic else assert_openai_error)(status, headers, body)
        return
    assert_no_traceback(body.decode("utf-8", "replace"))
    if media_type(headers) == "text/event-stream":
        last_event = body.rstrip().rsplit(b"\n\n", 1)[-1]
        responses_end = last_event.startswith((b"event: response.completed", b"event: response.incomplete"))
        assert responses_end or body.rstrip().endswith((b"data: [DONE]", b'"message_stop"}')), body[-300:]
        return  # a completion asked with `stream: true`
    # No documented route answers anything but JSON unless the client asks for CSV (it does not here).
    assert media_type(headers) == "application/json", headers.get("content-type")
    orjson.loads(body)


# Every one of these was a 500 before its fix (the NUL ones on PostgreSQL only), or, for the chart
# over centuries, seconds of a blocked event loop.
REGRESSIONS = [
    # gateway/accounting/spend.py parse_time: int('²') after '²'.isdigit(); timedelta overflow.
    ("GET", "/v1/spend?since=%C2%B2d", None, 400),
    ("GET", "/v1/spend?since=99999999999d", None, 400),
    ("GET", "/dashboard/api/summary?since=9999999d", None, 400),
    # gateway/dashboard/figures.py: one label per day from year 1 (1.5 s) or to year 9999 (7 s).
    ("GET", "/dashboard/api/spend-over-time?since=0001-01-01", None, 400),
    ("GET", "/dashboard/api/spend-over-time?until=9999-12-31T23:59:59-23:59", None, 400),
    # gateway/policy/key_store.py: rate limits beyond the 32-bit column.
    ("POST", "/admin/keys", {"team": "t", "name": "n", "rpm": 11133974358315776000}, 400),
    ("POST", "/admin/keys", {"team": "t", "name": "n", "tpm": 2**31}, 400),
    # NUL in text PostgreSQL stores or filters on.
    ("POST", "/admin/keys", {"team": "a\u0000", "name": "n"}, 400),
    ("POST", "/admin/keys", {"team": "t", "name": "n", "metadata": {"k": "\u0000"}}, 400),
    ("GET", "/v1/spend?team=a%00", None, 400),
    ("GET", "/dashboard/api/top?model=a%00", None, 400),
    ("GET", "/dashboard/api/budgets?tag=a%00", None, 400),
    ("GET", "/admin/keys?team=a%00", None, 200),
    ("DELETE", "/admin/keys/key%00", None, 404),
    # gateway/accounting/stored_responses.py: an id PostgreSQL cannot even compare.
    ("GET", "/v1/responses/resp%00", None, 404),
    ("DELETE", "/v1/responses/resp%00", None, 404),
    ("GET", "/v1/responses/resp%00/input_items", None, 404),
    ("POST", "/v1/responses", {"model": "gpt-4o-mini", "input": "x", "previous_response_id": "r\u0000"}, 404),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"), REGRESSIONS, ids=[f"{m} {p}" for m, p, _, _ in REGRESSIONS]
)
def test_inputs_that_were_server_errors(
    admin_gateway: GatewayServer, method: str, path: str, body: Any, status: int
) -> None:
    response = httpx.request(
        method,
        admin_gateway.base_url + path,
        json=body,
        headers={"authorization": f"Bearer {ADMIN_KEY}"},
        timeout=10,
    )
    assert_well_formed(response.status_code, response.headers, response.content)
    assert response.status_code == status, response.text[:300]
