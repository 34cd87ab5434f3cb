"""`/docs` and `/redoc` render in real Chromium with every outside host unreachable, as on a server
without internet: the pages, their scripts and the OpenAPI document all come from the gateway."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.harness import GatewayServer


@pytest.fixture
def offline_page(browser: Any) -> Any:
    """A page whose requests to any host but the gateway's are refused, and recorded."""
    context = browser.new_context()
    page = context.new_page()
    page.outside = []

    def only_local(route: Any) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            page.outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    yield page
    context.close()


def test_swagger_ui_renders_offline(gateway: GatewayServer, offline_page: Any) -> None:
    offline_page.goto(gateway.base_url + "/docs")
    title = offline_page.wait_for_selector(".swagger-ui .info .title", timeout=20_000)
    assert "Tollgate" in title.inner_text()
    # The operations are listed from /openapi.json: the spend endpoint is one of them.
    offline_page.wait_for_selector("[data-path='/v1/spend']", timeout=20_000)
    assert offline_page.outside == []


# ReDoc's "powered by" badge is an <img> from its CDN, built into its bundle: offline it is a
# missing 16px logo, nothing else.
REDOC_BADGE = "https://cdn.redoc.ly/redoc/logo-mini.svg"


def test_redoc_renders_offline(gateway: GatewayServer, offline_page: Any) -> None:
    offline_page.goto(gateway.base_url + "/redoc")
    heading = offline_page.wait_for_selector("h1", timeout=20_000)
    assert "Tollgate" in heading.inner_text()
    offline_page.wait_for_selector("[data-section-id^='operation/']", timeout=20_000)  # from the spec
    assert [url for url in offline_page.outside if url != REDOC_BADGE] == []
