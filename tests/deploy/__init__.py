"""Deployment artefacts: the Helm chart, the image, docker-compose.yml and the Grafana dashboards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy/helm/tollgate"


def render(
    values: dict[str, Any] | None = None, *, release: str = "tg", namespace: str = "llm"
) -> list[dict[str, Any]]:
    """Every manifest `helm template` would print for these values (NOTES.txt left out)."""
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values or {}, name=release, namespace=namespace)
    return [
        doc
        for name, text in sorted(rendered.items())
        if name.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(text)
        if doc
    ]
