"""The hardening suite runs every gateway twice: on SQLite (the embedded default) and on PostgreSQL
(production), whose text columns refuse what SQLite takes (a NUL character)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url
