"""`/docs` and `/redoc` work on a host without internet: every script, style and icon they load is
served by the gateway itself, with the content type a browser needs to run it."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.harness import GatewayServer

# Every URL a page names in a src= or href= attribute, or as a string in its inline script.
_REFERENCE = re.compile(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']|url:\s*["']([^"']+)["']""")
_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png", ".json": "application/json"}


def references(html: str) -> list[str]:
    return [a or b for a, b in _REFERENCE.findall(html)]


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("/docs", {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css", "/openapi.json"}),
        ("/redoc", {"/docs/assets/redoc.standalone.js", "/openapi.json"}),
    ],
)
def test_the_page_loads_only_what_the_gateway_serves(
    gateway: GatewayServer, page: str, expected: set[str]
) -> None:
    response = httpx.get(gateway.base_url + page)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    html = response.text
    assert re.search(r"https?://", html) is None, "the page names an outside host"
    named = set(references(html))
    assert expected <= named, named
    for url in named:
        asset = httpx.get(gateway.base_url + url)
        assert asset.status_code == 200, url
        kind = _TYPES[url[url.rindex(".") :]]
        assert asset.headers["content-type"].split(";")[0] == kind, url
        assert len(asset.content) > 1000, url  # the real bundle, not an empty placeholder


def test_the_swagger_bundle_is_swagger_ui(gateway: GatewayServer) -> None:
    bundle = httpx.get(gateway.base_url + "/docs/assets/swagger-ui-bundle.js")
    assert "SwaggerUIBundle" in bundle.text[:2000]
    assert bundle.headers["x-content-type-options"] == "nosniff"


def test_an_unknown_asset_is_an_openai_shaped_404(gateway: GatewayServer) -> None:
    for name in ("nope.js", "..%2F..%2Fpyproject.toml", "core.py"):
        response = httpx.get(gateway.base_url + "/docs/assets/" + name)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
