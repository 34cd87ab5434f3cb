"""The README's admin `curl -d '{...}'` sends a form content type; its JSON body is still read."""

from __future__ import annotations

import httpx

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer


def test_a_json_body_is_read_whatever_the_content_type_says(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    config = gateway_config(
        sqlite_url, openai_upstream.base_url, vllm_upstream.base_url, auth={"admin_key": "adm"}
    )
    admin = {"authorization": "Bearer adm"}
    with GatewayServer(config) as server:
        url = server.base_url + "/admin/keys"
        as_curl_sends_it = httpx.post(
            url,
            content=b'{"team": "search", "name": "ci"}',
            headers={**admin, "content-type": "application/x-www-form-urlencoded"},
        )
        assert as_curl_sends_it.status_code == 201, as_curl_sends_it.text
        assert as_curl_sends_it.json()["team"] == "search"
        untyped = httpx.post(url, content=b'{"team": "search", "name": "untyped"}', headers=admin)
        assert untyped.status_code == 201
        not_json = httpx.post(
            url,
            content=b"team=search",
            headers={**admin, "content-type": "application/x-www-form-urlencoded"},
        )
        assert not_json.status_code == 400
        assert set(not_json.json()["error"]) >= {"message", "type", "code"}
