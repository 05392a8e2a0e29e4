"""helm/cairn with the real helm (the pinned release the bootstrap builds): it lints
strictly and renders for each value set in ci/, the manifests pass Kubernetes' own schemas,
every container is probed, limited and non-root, the database is migrated before anything
runs, no secret reaches a ConfigMap, monitoring objects appear only with the Prometheus
Operator, bad values are refused by values.schema.json, and the ConfigMap is settings
Cairn itself accepts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from services.settings import Settings
from tests.support.stack import BIN, REPO

CHART = REPO / "helm" / "cairn"
VALUE_SETS = sorted(path.stem.removesuffix("-values") for path in (CHART / "ci").glob("*.yaml"))
KUBERNETES = "1.30"
OPERATOR = "monitoring.coreos.com/v1"
CRDS = {"ServiceMonitor", "PrometheusRule"}


def _helm() -> str:
    found = BIN / "helm" if (BIN / "helm").exists() else shutil.which("helm")
    assert found, "helm is missing: `make test` builds it (go install helm.sh/helm/v3/cmd/helm)"
    return str(found)


def _render(*value_files: Path, operator: bool = False, check: bool = True,
            sets: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    argv = [_helm(), "template", "cairn", str(CHART), "--namespace", "openstack"]
    for path in value_files:
        argv += ["-f", str(path)]
    for item in sets:
        argv += ["--set-json", item]
    if operator:
        argv += ["--api-versions", OPERATOR]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _objects(name: str, *, operator: bool = False) -> list[dict[str, Any]]:
    out = _render(CHART / "ci" / f"{name}-values.yaml", operator=operator).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return list(spec.get("initContainers", [])) + list(spec["containers"])


def test_the_value_sets_exist() -> None:
    assert {"minimal", "production", "monitoring"} <= set(VALUE_SETS)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_lint_strict(name: str) -> None:
    done = subprocess.run([_helm(), "lint", "--strict", str(CHART), "-f",
                           str(CHART / "ci" / f"{name}-values.yaml")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", VALUE_SETS)
def test_manifests_pass_kubernetes_schemas(name: str) -> None:
    objects = _objects(name, operator=True)
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "ConfigMap", "Service", "Job", "PodDisruptionBudget",
            "NetworkPolicy", "ServiceAccount"} <= kinds, kinds
    for obj in objects:
        if obj["kind"] in CRDS:
            assert obj["apiVersion"] == OPERATOR
            continue
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_container_is_probed_limited_and_non_root(name: str) -> None:
    workloads = [obj for obj in _objects(name) if obj["kind"] in ("Deployment", "Job")]
    assert {obj["metadata"]["name"] for obj in workloads} >= {
        "cairn-cairn-api", "cairn-cairn-scheduler", "cairn-cairn-worker",
        "cairn-cairn-db-sync"}
    for obj in workloads:
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        for container in _containers(obj):
            where = f"{obj['metadata']['name']}/{container['name']}"
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert {"cpu", "memory"} <= set(container["resources"]["limits"]), where
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), where
            if obj["kind"] == "Deployment":
                assert "livenessProbe" in container, where
                assert "readinessProbe" in container, where
    worker = next(obj for obj in workloads if obj["metadata"]["name"].endswith("-worker"))
    # Time for running copies to checkpoint before the pod is killed.
    assert worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 300


def test_the_database_is_migrated_before_anything_runs() -> None:
    hooks = {obj["metadata"]["name"]: obj["metadata"]["annotations"]
             for obj in _objects("production") if obj["kind"] == "Job"}
    sync, register = hooks["cairn-cairn-db-sync"], hooks["cairn-cairn-ks-register"]
    for hook in (sync, register):
        # pre-*: before the release's Deployments are created or rolled.
        assert set(hook["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert int(sync["helm.sh/hook-weight"]) < int(register["helm.sh/hook-weight"])
    scheduler = next(obj for obj in _objects("production") if obj["kind"] == "Deployment"
                     and obj["metadata"]["name"] == "cairn-cairn-scheduler")
    assert scheduler["spec"]["replicas"] == 2
    disruption = {obj["metadata"]["name"] for obj in _objects("production")
                  if obj["kind"] == "PodDisruptionBudget"}
    assert disruption == {f"cairn-cairn-{c}" for c in ("api", "scheduler", "worker")}


@pytest.mark.parametrize("name", VALUE_SETS)
def test_no_secret_reaches_a_config_map(name: str) -> None:
    objects = _objects(name, operator=True)
    data = "\n".join(str(value) for obj in objects if obj["kind"] == "ConfigMap"
                     for value in obj["data"].values())
    for secret in ("password", "rabbit://", "postgresql", "redis://", "transport_url",
                   "keyring\":\"AQ"):
        assert secret not in data.lower(), secret
    for obj in objects:
        if obj["kind"] != "Deployment":
            continue
        for container in _containers(obj):
            env = {item["name"]: item for item in container["env"]}
            for name_ in ("CAIRN_DATABASE_URL", "CAIRN_REDIS_URL", "CAIRN_KEYSTONE__PASSWORD"):
                assert "secretKeyRef" in env[name_]["valueFrom"], name_
                assert "value" not in env[name_], name_


def test_an_autoscaler_owns_the_workers_replicas_when_asked() -> None:
    objects = _objects("production")
    [hpa] = [obj for obj in objects if obj["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == "cairn-cairn-worker"
    worker = next(obj for obj in objects if obj["kind"] == "Deployment"
                  and obj["metadata"]["name"] == "cairn-cairn-worker")
    assert "replicas" not in worker["spec"]  # the autoscaler's, not the chart's
    assert not [obj for obj in _objects("minimal") if obj["kind"] == "HorizontalPodAutoscaler"]


def test_monitoring_objects_only_with_the_prometheus_operator() -> None:
    plain = {obj["kind"] for obj in _objects("monitoring")}
    assert not plain & CRDS
    objects = _objects("monitoring", operator=True)
    monitor = next(obj for obj in objects if obj["kind"] == "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"api", "metrics"}
    rule = next(obj for obj in objects if obj["kind"] == "PrometheusRule")
    alerts = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    assert rule["spec"] == alerts  # the chart's copy is the rules promtool tests


def test_the_charts_alert_rules_are_deploys() -> None:
    assert (CHART / "files" / "alerts.yml").read_text() == (
        REPO / "deploy" / "prometheus" / "alerts.yml").read_text()


@pytest.mark.parametrize("bad", [
    'pod.replicas.worker=-1', 'pod.user.uid=0', 'images.tags.cairn=""',
    'conf.cairn.copy_window="big"', 'replica=3', 'conf.clusters={"Bad_Name": {"secret": "x"}}',
    'manifests.ingress_api="yes"', 'conf.keystone.password="hunter2"',
    'conf.cairn.database_url="postgresql://u:p@db/cairn"',
    'secrets.database_url={"name": ""}', 'monitoring.scrape_interval="often"',
    'pod.resources.worker.limits.memory="2GB"', 'conf.cairn.auth_strategy="none"'])
def test_the_schema_refuses_bad_values(bad: str) -> None:
    done = _render(CHART / "ci" / "minimal-values.yaml", sets=(bad,), check=False)
    assert done.returncode != 0, f"accepted {bad}"
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_config_map_is_settings_cairn_accepts(name: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    objects = _objects(name)
    [config] = [obj for obj in objects if obj["kind"] == "ConfigMap"]
    for key, value in config["data"].items():
        monkeypatch.setenv(key, value)
    # What the Secrets give the pods.
    monkeypatch.setenv("CAIRN_DATABASE_URL", "postgresql+psycopg://cairn:secret@db/cairn")
    monkeypatch.setenv("CAIRN_REDIS_URL", "redis://redis:6379/0")
    monkeypatch.setenv("CAIRN_KEYSTONE__PASSWORD", "secret")
    if "notification_transport_url" in str(yaml.safe_load(
            (CHART / "ci" / f"{name}-values.yaml").read_text())):
        monkeypatch.setenv("CAIRN_NOTIFICATION_TRANSPORT_URL", "rabbit://u:p@rabbit:5672/")
    settings = Settings()
    assert settings.environment == "production"
    assert settings.keystone is not None
    assert settings.keystone.password.get_secret_value() == "secret"
    assert set(settings.backup_targets) >= {"local"}
    for cluster in settings.clusters.values():
        assert str(cluster.conf).startswith("/etc/ceph/")
    assert settings.worker_metrics_port > 0
