"""What a browser is allowed: no cross-origin calls unless origins are configured (and then only
those), and dashboard responses that cannot be framed, sniffed, cached or made to run inline code."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from gateway.config.schema import Config
from gateway.dashboard.routes import ASSETS
from sandbox.server import SandboxServer
from tests.harness import GatewayServer
from tests.security.conftest import ADMIN, bearer, create_key, security_config

EVIL_ORIGIN = "https://evil.example"
APP_ORIGIN = "https://app.example"


def with_cors(config: Config, *origins: str) -> Config:
    return config.model_copy(
        update={"server": config.server.model_copy(update={"cors_allow_origins": origins})}
    )


@pytest.fixture(scope="module")
def gateway(upstreams: dict[str, SandboxServer], fresh_sqlite_url: str) -> Iterator[GatewayServer]:
    with GatewayServer(security_config(upstreams, fresh_sqlite_url)) as server:
        yield server


@pytest.fixture(scope="module")
def key(gateway: GatewayServer) -> str:
    created: str = create_key(gateway.base_url, "alpha")["key"]
    return created


def concrete_paths(gateway: GatewayServer) -> list[tuple[str, str]]:
    """Every route the app serves, with its path parameters filled in."""
    routes = []
    for route in iter_route_contexts(gateway.app.routes):
        path = route.path.replace("{name}", "dashboard.js").replace("{key_id}", "key_nope")
        routes += [(method, path) for method in sorted(route.methods or ()) if method != "HEAD"]
    assert len(routes) > 20
    return routes


def test_cors_is_off_by_default_on_every_route(gateway: GatewayServer, key: str) -> None:
    assert gateway.runtime.config.server.cors_allow_origins == ()
    for method, path in concrete_paths(gateway):
        headers = {**bearer(key), "origin": EVIL_ORIGIN}
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        actual = httpx.request(
            method,
            gateway.base_url + path,
            headers=headers,
            json=body if method == "POST" else None,
            timeout=30,
        )
        preflight = httpx.options(
            gateway.base_url + path,
            headers={
                "origin": EVIL_ORIGIN,
                "access-control-request-method": method,
                "access-control-request-headers": "authorization, content-type",
            },
        )
        for response in (actual, preflight):
            granted = [h for h in response.headers if h.startswith("access-control-")]
            assert granted == [], f"{response.request.method} {path}: {granted}"
        assert preflight.status_code >= 400, f"a preflight to {path} was answered {preflight.status_code}"


def test_configured_origins_get_cors_on_the_fast_lane_too(
    upstreams: dict[str, SandboxServer], fresh_sqlite_url: str
) -> None:
    config = with_cors(security_config(upstreams, fresh_sqlite_url), APP_ORIGIN)
    with GatewayServer(config) as gateway:
        key = create_key(gateway.base_url, "alpha")["key"]
        url = gateway.base_url + "/v1/chat/completions"
        ask = {
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization,content-type",
        }
        allowed = httpx.options(url, headers={"origin": APP_ORIGIN, **ask})
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == APP_ORIGIN
        assert "access-control-allow-credentials" not in allowed.headers
        refused = httpx.options(url, headers={"origin": EVIL_ORIGIN, **ask})
        assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        answered = httpx.post(url, json=body, headers={**bearer(key), "origin": APP_ORIGIN}, timeout=30)
        assert answered.status_code == 200
        assert answered.headers["access-control-allow-origin"] == APP_ORIGIN
        assert "x-request-id" in answered.headers["access-control-expose-headers"]
        other = httpx.post(url, json=body, headers={**bearer(key), "origin": EVIL_ORIGIN}, timeout=30)
        assert "access-control-allow-origin" not in other.headers
        spend = httpx.get(gateway.base_url + "/v1/spend", headers={**bearer(key), "origin": APP_ORIGIN})
        assert spend.headers["access-control-allow-origin"] == APP_ORIGIN


def test_an_origin_must_be_an_origin() -> None:
    from pydantic import ValidationError

    from gateway.config.schema import ServerConfig

    assert ServerConfig(cors_allow_origins=("https://a.example:8443", "*")).cors_allow_origins
    for bad in ("https://a.example/path", "a.example", "javascript:alert(1)", ""):
        with pytest.raises(ValidationError):
            ServerConfig(cors_allow_origins=(bad,))


def assert_locked_down(response: httpx.Response) -> None:
    headers = response.headers
    where = response.request.url.path
    assert headers["x-content-type-options"] == "nosniff", where
    assert headers["x-frame-options"] == "DENY", where
    assert headers["referrer-policy"] == "no-referrer", where
    assert "frame-ancestors 'none'" in headers["content-security-policy"], where


def test_the_dashboard_page_has_a_strict_csp(gateway: GatewayServer) -> None:
    page = httpx.get(gateway.base_url + "/dashboard")
    assert page.status_code == 200
    assert_locked_down(page)
    csp = dict(
        [*part.strip().split(" ", 1), ""][:2]
        for part in page.headers["content-security-policy"].split(";")
        if part.strip()
    )
    assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
    assert csp["default-src"] == "'self'" and csp["base-uri"] == "'none'"
    assert "unsafe" not in page.headers["content-security-policy"]


class _Inline(HTMLParser):
    """Finds what a `script-src 'self'; style-src 'self'` policy would block in the built page."""

    def __init__(self) -> None:
        super().__init__()
        self.blocked: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "script" and "src" not in names:
            self.blocked.append("inline <script>")
        if tag == "style":
            self.blocked.append("<style> element")
        if "style" in names:
            self.blocked.append(f"style attribute on <{tag}>")
        self.blocked += [f"{name} handler on <{tag}>" for name in names if name.startswith("on")]
        for name, value in attrs:
            if name in ("src", "href") and value and re.match(r"^(https?:)?//", value):
                self.blocked.append(f"off-origin {name}={value}")


def test_the_built_dashboard_needs_nothing_the_csp_blocks() -> None:
    parser = _Inline()
    parser.feed((ASSETS / "index.html").read_text())
    assert parser.blocked == []
    script = (ASSETS / "dashboard.js").read_text()
    # No eval-like code (the CSP has no 'unsafe-eval') and no stylesheet injected at run time.
    assert "new Function(" not in script and not re.search(r"\beval\(", script)
    assert "insertRule" not in script and 'createElement("style")' not in script


@pytest.mark.parametrize("name", sorted(p.name for p in Path(ASSETS).iterdir()))
def test_every_asset_is_locked_down(gateway: GatewayServer, name: str) -> None:
    response = httpx.get(f"{gateway.base_url}/dashboard/assets/{name}")
    if name == "index.html":
        assert response.status_code == 404  # served only as the page itself
        return
    assert response.status_code == 200
    assert_locked_down(response)


@pytest.mark.parametrize("figure", ["me", "summary", "spend-over-time", "budgets", "top", "fleet"])
def test_dashboard_data_is_never_cached_nor_framed(gateway: GatewayServer, key: str, figure: str) -> None:
    url = f"{gateway.base_url}/dashboard/api/{figure}"
    for response in (httpx.get(url, headers=bearer(key)), httpx.get(url)):
        assert response.status_code in (200, 401)
        assert_locked_down(response)
        assert response.headers["cache-control"] == "no-store"


def test_admin_and_spend_answers_are_never_cached(gateway: GatewayServer, key: str) -> None:
    for path, headers in (
        ("/admin/keys", ADMIN),
        ("/admin/keys", bearer(key)),
        ("/v1/spend", bearer(key)),
        ("/v1/spend", {}),
    ):
        response = httpx.get(gateway.base_url + path, headers=headers)
        assert response.headers["cache-control"] == "no-store", path
        assert response.headers["x-content-type-options"] == "nosniff", path
