"""Reproducible deployments: every image docker-compose.yml, the Dockerfile and the Helm chart name is
an exact version (or a digest), never `:latest` or a bare name, and no password has a default."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.deploy import ROOT, render

# name:1.2.3, name:v0.11.0, name:3.11.13-slim-bookworm: a full version (major.minor.patch) in the tag.
EXACT = re.compile(r"^[a-z0-9./_-]+:v?\d+\.\d+\.\d+(?:-[A-Za-z0-9.-]+)?$")
# Images whose releases are numbered major.minor (16.10 is PostgreSQL's patch release of 16).
TWO_PART = re.compile(r"^postgres:\d+\.\d+(?:-[A-Za-z0-9.-]+)?$")
VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*)|:\?[^}]*)?\}")


def pinned(image: str) -> bool:
    """A digest, or a tag naming one release (postgres:16.10 is one; postgres:16 and nginx:1.27 move)."""
    if re.search(r"@sha256:[0-9a-f]{64}$", image):
        return True
    return EXACT.match(image) is not None or TWO_PART.match(image) is not None


def resolved(image: str) -> str:
    """`${VAR:-default}` as compose runs it when VAR is unset; a variable with no default is unpinned."""

    def default(match: re.Match[str]) -> str:
        if match.group(2) is None:
            raise AssertionError(f"{image}: ${{{match.group(1)}}} has no pinned default")
        return match.group(2)

    return VARIABLE.sub(default, image)


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        ("postgres:16.10-alpine", True),
        ("vllm/vllm-openai:v0.11.0", True),
        ("python:3.11.13-slim-bookworm", True),
        ("tollgate@sha256:" + "0" * 64, True),
        ("vllm/vllm-openai:latest", False),
        ("postgres:16-alpine", False),
        ("nginx:1.27-alpine", False),
        ("redis", False),
        ("registry:5000/redis", False),
    ],
)
def test_the_pin_rule_itself(image: str, ok: bool) -> None:
    assert pinned(image) is ok


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_every_compose_image_is_pinned() -> None:
    services = compose()["services"]
    images = {name: resolved(service["image"]) for name, service in services.items()}
    assert set(images) == set(services), "a service without an image runs whatever was built last"
    assert {name: image for name, image in images.items() if not pinned(image)} == {}
    assert images["vllm"] == "vllm/vllm-openai:v0.11.0"


def test_no_password_in_compose_has_a_default() -> None:
    for name, service in compose()["services"].items():
        for key, value in (service.get("environment") or {}).items():
            for match in VARIABLE.finditer(str(value)):
                if "PASSWORD" in match.group(1) or ("KEY" in key and "ADMIN" in key):
                    assert match.group(0).startswith(f"${{{match.group(1)}:?"), (
                        f"{name}: {key} falls back to a default instead of requiring {match.group(1)}"
                    )
    grafana = compose()["services"]["grafana"]["environment"]
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")


def test_the_dockerfile_builds_both_stages_from_one_exact_base() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    (base,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, re.M)
    assert pinned(base), base
    assert re.findall(r"^FROM (\S+)", dockerfile, re.M) == ["${PYTHON_IMAGE}"] * 2


def test_every_chart_image_is_pinned() -> None:
    docs = render({"serviceMonitor": {"enabled": True}})
    images = [
        container["image"]
        for doc in docs
        if "template" in doc.get("spec", {})
        for container in doc["spec"]["template"]["spec"]["containers"]
    ]
    assert images and all(pinned(image) for image in images), images
