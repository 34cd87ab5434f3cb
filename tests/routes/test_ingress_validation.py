"""[reliability-2] part 5: malformed tools, response formats, duplicate keys and Anthropic's
max_tokens are refused at the gateway in the dialect's own error shape, and nothing goes upstream."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from sandbox.server import SandboxServer
from tests.execution.test_retries import upstream_calls
from tests.harness import GatewayServer
from tests.routes.test_errors import assert_openai_error, post

HI = [{"role": "user", "content": "hi"}]


def chat(**fields: Any) -> bytes:
    return orjson.dumps({"model": "gpt-4o-mini", "messages": HI, **fields})


def tool(function: Any) -> dict[str, Any]:
    return {"type": "function", "function": function}


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        (chat(tools="lookup"), "invalid_type", "tools"),
        (chat(tools=["lookup"]), "invalid_type", "tools[0]"),
        (chat(tools=[{"type": "function", "function": "lookup"}]), "invalid_type", "tools[0].function"),
        (
            chat(tools=[tool({"name": "ok"}), tool({"parameters": {}})]),
            "missing_required_parameter",
            "tools[1].function.name",
        ),
        (chat(tools=[tool({"name": 7})]), "invalid_type", "tools[0].function.name"),
        (
            chat(tools=[tool({"name": "f", "parameters": "object"})]),
            "invalid_type",
            "tools[0].function.parameters",
        ),
        (chat(response_format={"type": "xml"}), "invalid_value", "response_format.type"),
        (chat(response_format={}), "invalid_value", "response_format.type"),
        (
            chat(response_format={"type": "json_schema"}),
            "missing_required_parameter",
            "response_format.json_schema",
        ),
        (
            chat(response_format={"type": "json_schema", "json_schema": {"schema": {}}}),
            "missing_required_parameter",
            "response_format.json_schema.name",
        ),
        (
            chat(response_format={"type": "json_schema", "json_schema": {"name": "r"}}),
            "missing_required_parameter",
            "response_format.json_schema.schema",
        ),
    ],
)
def test_malformed_tools_and_response_formats_are_400s_that_never_reach_the_upstream(
    gateway: GatewayServer, openai_upstream: SandboxServer, body: bytes, code: str, param: str
) -> None:
    response = post(gateway, body)
    error = assert_openai_error(response, 400, code)
    assert error["param"] == param
    assert upstream_calls(openai_upstream) == []


def test_well_formed_tools_and_formats_still_pass(gateway: GatewayServer) -> None:
    body = chat(
        tools=[tool({"name": "lookup", "parameters": {"type": "object", "properties": {}}})],
        response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}},
    )
    assert post(gateway, body).status_code == 200


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (
            b'{"model": "gpt-4o-mini", "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}',
            "model",
        ),
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "role": "system", "content": "hi"}]}',
            "role",
        ),
        # Colons inside strings do not hide one, nor does a key split by whitespace.
        (
            b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a: b: c"}],'
            b' "max_tokens" : 5, "max_tokens":9}',
            "max_tokens",
        ),
    ],
)
def test_a_key_given_twice_is_refused_by_name(
    gateway: GatewayServer, openai_upstream: SandboxServer, body: bytes, key: str
) -> None:
    response = post(gateway, body)
    error = assert_openai_error(response, 400, "invalid_json")
    assert f"'{key}'" in error["message"]
    assert upstream_calls(openai_upstream) == []


def test_colons_and_escapes_in_strings_are_not_duplicates(gateway: GatewayServer) -> None:
    content = 'time: 10:30, json: {\\"a\\": 1, \\"a\\": 2}, path: C:\\\\dir, \\"quoted\\": caf\\u00e9'
    body = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"' + content.encode() + b'"}]}'
    assert orjson.loads(body)["messages"][0]["content"].startswith("time: 10:30")
    assert post(gateway, body).status_code == 200


@pytest.mark.parametrize(
    ("max_tokens", "message"),
    [
        (None, "max_tokens: Field required"),
        ("1e30", "max_tokens: Input should be a valid integer"),
        ('"16"', "max_tokens: Input should be a valid integer"),
        ("0", "max_tokens: Input should be greater than or equal to 1"),
    ],
)
def test_anthropic_max_tokens_errors_say_what_is_wrong_in_anthropics_shape(
    gateway: GatewayServer, max_tokens: str | None, message: str
) -> None:
    field = b"" if max_tokens is None else b'"max_tokens": ' + max_tokens.encode() + b", "
    body = b'{"model": "gpt-4o-mini", ' + field + b'"messages": [{"role": "user", "content": "hi"}]}'
    response = httpx.post(
        gateway.base_url + "/v1/messages",
        content=body,
        headers={"content-type": "application/json", "anthropic-version": "2023-06-01"},
        timeout=10,
    )
    assert response.status_code == 400
    assert response.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
    }
