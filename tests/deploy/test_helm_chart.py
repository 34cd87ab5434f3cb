"""The Helm chart as `helm template` renders it (Helm's own engine, from the helm-python-sdk wheel:
no binary fetched at run time), every manifest validated against the Kubernetes API schemas
(kubernetes-validate, offline), and what a platform team checks first: probes, secrets by
reference, the migration hook, a config the gateway accepts, and wrong values refused by name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

from gateway.config.loader import parse_config
from tests.deploy import CHART, render

# The oldest Kubernetes the chart declares (Chart.yaml kubeVersion) and the newest schemas shipped.
KUBERNETES = ("1.27.0", "1.37.0")
# The part of the Prometheus Operator's ServiceMonitor CRD (monitoring.coreos.com/v1) the chart
# writes; kubernetes-validate has no CRD schemas.
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "properties": {"matchLabels": {"type": "object"}}},
                "namespaceSelector": {"type": "object"},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {
                                "type": "string",
                                "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
                            },
                            "scrapeTimeout": {
                                "type": "string",
                                "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
                            },
                            "authorization": {
                                "type": "object",
                                "properties": {
                                    "type": {"type": "string"},
                                    "credentials": {"type": "object", "required": ["name", "key"]},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
GATEWAY_ENV = {
    "TOLLGATE_DATABASE_URL": "postgresql+asyncpg://tollgate:pw@postgres:5432/tollgate",
    "TOLLGATE_REDIS_URL": "redis://redis:6379/0",
    "TOLLGATE_ADMIN_KEY": "admin-key",
}


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = {doc["kind"]: doc for doc in docs}
    assert len(kinds) == len(docs), "one manifest per kind expected"
    return kinds


def validate(doc: dict[str, Any]) -> None:
    if doc["kind"] == "ServiceMonitor":
        jsonschema.validate(doc, SERVICE_MONITOR)
        return
    for version in KUBERNETES:
        # strict: a misspelt or misplaced field is an error, not silently dropped by the API server.
        kubernetes_validate.validate(doc, version, strict=True)


def containers(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from doc["spec"]["template"]["spec"]["containers"]


def test_default_values_render_and_every_manifest_validates() -> None:
    docs = render()
    kinds = by_kind(docs)
    assert set(kinds) == {
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "Job",
        "PodDisruptionBudget",
        "Service",
    }
    for doc in docs:
        validate(doc)


def test_probes_selectors_and_autoscaling_fit_together() -> None:
    kinds = by_kind(render())
    deployment, service = kinds["Deployment"], kinds["Service"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    (gateway,) = containers(deployment)
    assert gateway["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert gateway["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert gateway["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert gateway["resources"]["requests"]["memory"] == "256Mi"
    assert gateway["securityContext"]["readOnlyRootFilesystem"] is True
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001  # the image's user
    assert [p["name"] for p in gateway["ports"]] == ["http"]
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    hpa = kinds["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
    fixed = by_kind(render({"autoscaling": {"enabled": False}, "replicaCount": 3}))
    assert "HorizontalPodAutoscaler" not in fixed and fixed["Deployment"]["spec"]["replicas"] == 3


def test_the_config_map_is_a_config_the_gateway_accepts_where_the_pod_looks_for_it() -> None:
    kinds = by_kind(render())
    deployment = kinds["Deployment"]
    (gateway,) = containers(deployment)
    env = {e["name"]: e for e in gateway["env"]}
    mounts = {m["name"]: m["mountPath"] for m in gateway["volumeMounts"]}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == kinds["ConfigMap"]["metadata"]["name"]
    (key,) = kinds["ConfigMap"]["data"]
    assert env["TOLLGATE_CONFIG"]["value"] == f"{mounts['config']}/{key}"
    config = parse_config(kinds["ConfigMap"]["data"][key], source="chart", environ=GATEWAY_ENV)
    assert config.database.auto_migrate is False, "the migration Job migrates, not every replica"
    assert config.state.backend == "redis" and config.ledger.spool_dir == mounts["spool"]
    assert "emptyDir" in volumes["spool"]


def test_secrets_are_only_referenced_never_written() -> None:
    docs = render()
    assert all(doc["kind"] != "Secret" for doc in docs)
    kinds = by_kind(docs)
    (gateway,) = containers(kinds["Deployment"])
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in gateway["env"] if "valueFrom" in e}
    assert refs == {
        "TOLLGATE_DATABASE_URL": {"name": "tollgate-database", "key": "url"},
        "TOLLGATE_REDIS_URL": {"name": "tollgate-redis", "key": "url"},
        "TOLLGATE_ADMIN_KEY": {"name": "tollgate-admin", "key": "admin-key"},
    }
    assert gateway["envFrom"] == [{"secretRef": {"name": "tollgate-providers", "optional": True}}]
    # A password-less Redis by plain URL: then it is a value, and the Secret is not needed.
    plain = by_kind(render({"externalRedis": {"existingSecret": "", "url": "redis://redis:6379/0"}}))
    (gateway,) = containers(plain["Deployment"])
    assert {"name": "TOLLGATE_REDIS_URL", "value": "redis://redis:6379/0"} in gateway["env"]


def test_the_migration_job_runs_before_install_and_upgrade_with_the_database_secret() -> None:
    job = by_kind(render())["Job"]
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    (migrate,) = containers(job)
    assert migrate["args"] == ["migrate"]  # `tollgate migrate`: Alembic to head
    (env,) = migrate["env"]
    assert (
        env["name"] == "TOLLGATE_DATABASE_URL"
        and env["valueFrom"]["secretKeyRef"]["name"] == "tollgate-database"
    )
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert "Job" not in by_kind(render({"migration": {"enabled": False}}))


@pytest.mark.parametrize("enabled", [False, True])
def test_the_service_monitor_is_optional_and_scrapes_the_service_port(enabled: bool) -> None:
    docs = render({"serviceMonitor": {"enabled": enabled, "labels": {"release": "prom"}}})
    for doc in docs:
        validate(doc)
    kinds = by_kind(docs)
    if not enabled:
        assert "ServiceMonitor" not in kinds
        return
    monitor, service = kinds["ServiceMonitor"], kinds["Service"]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert "authorization" not in endpoint
    token = {"enabled": True, "bearerTokenSecret": {"name": "tollgate-metrics", "key": "token"}}
    rendered = by_kind(render({"serviceMonitor": token}))
    (endpoint,) = rendered["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["authorization"]["credentials"] == {"name": "tollgate-metrics", "key": "token"}
    # The gateway checks what Prometheus sends: the same Secret, as TOLLGATE_METRICS_TOKEN.
    (container,) = rendered["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["TOLLGATE_METRICS_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "tollgate-metrics",
        "key": "token",
    }


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"replicaCount": "three"}, "/replicaCount': got string, want integer"),
        ({"autoscaling": {"enabled": "yes"}}, "/autoscaling/enabled': got string, want boolean"),
        ({"service": {"port": "http"}}, "/service/port': got string, want integer"),
        ({"resources": {"requests": {"memory": ["256Mi"]}}}, "/resources/requests/memory'"),
        (
            {"serviceMonitor": {"enabled": True, "interval": 30}},
            "/serviceMonitor/interval': got number, want string",
        ),
        ({"externalDatabase": {"existingSecret": ""}}, "/externalDatabase/existingSecret'"),
        ({"replicas": 3}, "additional properties 'replicas' not allowed"),
    ],
)
def test_a_wrong_value_fails_at_render_naming_the_setting(values: dict[str, Any], named: str) -> None:
    with pytest.raises(helm.HelmValuesError) as failure:
        render(values)
    assert named in str(failure.value)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"image": {"tag": "latest"}}, 'image.tag: "latest" is not allowed'),
        (
            {"externalRedis": {"existingSecret": "", "url": ""}},
            "externalRedis.url or externalRedis.existingSecret",
        ),
    ],
)
def test_values_the_schema_cannot_judge_fail_in_the_templates_by_name(
    values: dict[str, Any], named: str
) -> None:
    with pytest.raises(helm.HelmError) as failure:
        render(values)
    assert named in str(failure.value)


def test_images_are_pinned_by_version_or_digest() -> None:
    docs = render()
    images = {c["image"] for doc in docs if doc["kind"] in {"Deployment", "Job"} for c in containers(doc)}
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert images == {f"tollgate:{chart['appVersion']}"}
    digest = "sha256:" + "ab" * 32
    pinned = render({"image": {"repository": "registry.example/tollgate", "digest": digest}})
    assert {c["image"] for doc in pinned if doc["kind"] == "Deployment" for c in containers(doc)} == {
        f"registry.example/tollgate@{digest}"
    }


def test_a_config_change_rolls_the_pods_only_when_asked() -> None:
    def annotations(**values: Any) -> dict[str, str]:
        deployment = by_kind(render(values))["Deployment"]
        found: dict[str, str] = deployment["spec"]["template"]["metadata"].get("annotations", {})
        return found

    assert annotations() == {}  # by default the gateway reloads the mounted file itself
    one = annotations(rollOnConfigChange=True)["checksum/config"]
    other = annotations(rollOnConfigChange=True, config={"ledger": {"retention_days": 30}})["checksum/config"]
    assert one != other
