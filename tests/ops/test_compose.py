"""The deployment files: docker-compose.yml parses (no Docker engine needed) and everything it
references exists; the image is small, unprivileged and health-checked; the Grafana dashboard and
the alert rules only use metrics the gateway and vLLM really expose."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.config.loader import load_config
from sandbox.server import SandboxServer
from tests.harness import GatewayServer
from tests.ops.scrape import exposed_names, scrape

ROOT = Path(__file__).resolve().parents[2]
GATEWAYS = ("gateway-1", "gateway-2")
SERVICES = {*GATEWAYS, "proxy", "postgres", "redis", "vllm", "prometheus", "grafana"}
METRIC = re.compile(r"\b(?:tollgate_[a-z0-9_]+|vllm:[a-z0-9_:]+)")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def bind_mounts(service: dict[str, Any]) -> list[tuple[Path, str]]:
    """(host path, container path) of every `./…:/…` volume."""
    mounts = []
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("."):
            mounts.append((ROOT / source, target))
    return mounts


def test_compose_has_every_service_and_every_file_it_mounts(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == SERVICES
    for name, service in services.items():
        for host, _ in bind_mounts(service):
            assert host.exists(), f"{name} mounts {host}, which does not exist"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source.startswith(".") or source in compose["volumes"], (
                f"{name}: undeclared volume {source}"
            )
        if "build" in service:
            assert (ROOT / service["build"] / "Dockerfile").exists()


def test_two_stateless_gateway_replicas_behind_a_round_robin_proxy(compose: dict[str, Any]) -> None:
    services = compose["services"]
    spools = set()
    for name in GATEWAYS:
        gateway = services[name]
        assert gateway["healthcheck"]["test"][-1].count("/healthz") == 1
        env = gateway["environment"]
        assert {"TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL", "TOLLGATE_CONFIG"} <= set(env)
        assert (
            env["TOLLGATE_DATABASE_URL"].startswith("postgresql+asyncpg://")
            and "@postgres:" in env["TOLLGATE_DATABASE_URL"]
        )
        assert env["TOLLGATE_REDIS_URL"].startswith("redis://redis:")
        config_mount = [host for host, target in bind_mounts(gateway) if target == env["TOLLGATE_CONFIG"]]
        assert config_mount == [ROOT / "deploy/tollgate.yaml"]
        assert gateway["depends_on"]["postgres"]["condition"] == "service_healthy"
        spools |= {v for v in gateway["volumes"] if v.endswith(":/var/lib/tollgate/spool")}
    assert len(spools) == len(GATEWAYS)  # each replica its own spool
    nginx = (ROOT / "deploy/nginx.conf").read_text()
    assert sorted(re.findall(r"server (gateway-\d):8080", nginx)) == list(GATEWAYS)
    (proxy_config,) = [host for host, _ in bind_mounts(services["proxy"])]
    assert proxy_config == ROOT / "deploy/nginx.conf"


def test_the_gateway_config_it_mounts_is_valid() -> None:
    environ = {
        "TOLLGATE_DATABASE_URL": "postgresql+asyncpg://tollgate:pw@postgres:5432/tollgate",
        "TOLLGATE_REDIS_URL": "redis://redis:6379/0",
        "TOLLGATE_ADMIN_KEY": "admin-key",
    }
    config = load_config(ROOT / "deploy/tollgate.yaml", environ=environ)
    assert config.state.backend == "redis" and config.server.host == "0.0.0.0"
    assert any(model.tier == "local" for model in config.models.values())


def test_vllm_gets_a_gpu_and_its_model_from_the_environment(compose: dict[str, Any]) -> None:
    vllm = compose["services"]["vllm"]
    assert "vllm/vllm-openai" in vllm["image"]
    (device,) = vllm["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert "${VLLM_MODEL" in vllm["command"] and "${VLLM_EXTRA_ARGS" in vllm["command"]


def test_prometheus_scrapes_every_gateway_and_vllm(compose: dict[str, Any]) -> None:
    mounts = dict((target, host) for host, target in bind_mounts(compose["services"]["prometheus"]))
    prometheus = yaml.safe_load(mounts["/etc/prometheus/prometheus.yml"].read_text())
    targets = {
        job["job_name"]: {t for c in job["static_configs"] for t in c["targets"]}
        for job in prometheus["scrape_configs"]
    }
    assert targets["tollgate"] == {f"{name}:8080" for name in GATEWAYS}
    assert targets["vllm"] == {"vllm:8000"}
    for rule_file in prometheus["rule_files"]:
        assert rule_file in mounts


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard(compose: dict[str, Any]) -> None:
    mounts = dict((target, host) for host, target in bind_mounts(compose["services"]["grafana"]))
    provisioning = mounts["/etc/grafana/provisioning"]
    (datasource,) = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())["datasources"]
    assert datasource["type"] == "prometheus" and datasource["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards/tollgate.yml").read_text())["providers"]
    dashboards = mounts[provider["options"]["path"]]
    # The panels read the ${DS_PROMETHEUS} variable (tests/deploy/test_dashboard.py), which resolves
    # to the default Prometheus data source: the provisioned one.
    assert datasource["isDefault"] is True
    for name, least in (("tollgate.json", 10), ("tollgate-health.json", 5)):
        dashboard = json.loads((dashboards / name).read_text())
        panels = [p for p in dashboard["panels"] if p["type"] != "row"]
        assert len(panels) >= least
        for panel in panels:
            assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
            assert panel["targets"] and all(t["expr"] for t in panel["targets"])


def test_the_image_is_small_unprivileged_and_health_checked() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    assert stages == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]  # build, then a clean runtime, one base
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11\.\d+-slim", dockerfile, re.M)
    assert re.search(r"^USER tollgate$", dockerfile, re.M)
    assert re.search(r"^HEALTHCHECK .*\n?.*/healthz", dockerfile, re.M)
    assert '"--host", "0.0.0.0"' in dockerfile
    copied = [
        source
        for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, re.M)
        for source in line.split()[:-1]
    ]
    assert "gateway" in copied and "migrations" in copied
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for source in copied:
        assert (ROOT / source).exists()
        assert source.rstrip("/") in allowed, f"{source} is excluded by .dockerignore"


def test_dashboard_and_alerts_use_only_metrics_that_exist(
    gateway: GatewayServer, vllm_upstream: SandboxServer
) -> None:
    httpx.post(
        gateway.base_url + "/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    ).raise_for_status()
    exposed = exposed_names(scrape(gateway)) | exposed_names(
        httpx.get(vllm_upstream.base_url + "/metrics").text
    )
    exprs = []
    for name in ("tollgate.json", "tollgate-health.json"):
        dashboard = json.loads((ROOT / "deploy/grafana/dashboards" / name).read_text())
        exprs += [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
        exprs += [v.get("definition", "") for v in dashboard["templating"]["list"]]
    alerts = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    exprs += [rule["expr"] for group in alerts["groups"] for rule in group["rules"]]
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert used, "no metric found in the dashboard"
    assert used - exposed == set()
    # The panels that matter most are there.
    assert {"tollgate_cost_usd_total", "tollgate_request_duration_seconds_bucket"} <= used
