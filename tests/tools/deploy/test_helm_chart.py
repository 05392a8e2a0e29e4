"""helm/cairn with the real helm (the pinned release the bootstrap builds): it lints
strictly and renders for each value set in ci/, the manifests pass Kubernetes' own schemas,
every container is probed, limited and non-root, the database is migrated before anything
runs, no secret reaches a ConfigMap, monitoring objects appear only with the Prometheus
Operator, bad values are refused by values.schema.json, and the ConfigMap is settings
Cairn itself accepts. And what an operator's mistake must not open: the chart refuses
noauth outside development, an empty or name-based cloud admin list, a project limit not
below the target's, missing shared keys and an Ingress whose controller the API does not
trust for X-Forwarded-For, each with the fix; metrics are served and
scraped on ports of their own that no Service of the Ingress names and that only the
monitoring namespace reaches; and the pods' egress stays within what Cairn uses, the
worker's webhooks reaching public addresses only."""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from api.peers import client_address
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
        "cairn-cairn-files", "cairn-cairn-db-sync"}
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
    assert disruption == {f"cairn-cairn-{c}" for c in ("api", "scheduler", "worker", "files")}


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
            if "CAIRN_FILES_TOKEN" in env:
                assert "secretKeyRef" in env["CAIRN_FILES_TOKEN"]["valueFrom"]
                assert "value" not in env["CAIRN_FILES_TOKEN"]


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
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics"}
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
    'pod.resources.worker.limits.memory="2GB"', 'conf.cairn.auth_strategy="none"',
    # Cloud admins by Keystone id only: a name is unique only within its domain.
    'conf.cairn.admin_projects=["admin"]',
    'conf.cairn.admin_projects=["4F1B8C0E2D7A4E5F9A3B6C1D0E2F4A5B"]',
    'conf.cairn.environment=null', 'conf.cairn.metrics_allowed_networks=["10.0.0.0/8"]',
    'conf.cairn.api_metrics_port=8787', 'endpoints.metrics.api_port=0',
    'conf.cairn.api_trusted_proxies=["ingress-nginx"]',
    'network_policy.egress.ceph.to=[{"ipBlock": {"cidr": "10.0.0.0/8"}, "from": "x"}]',
    'endpoints.files.port=0', 'pod.replicas.files=-1', 'secrets.files_token={"name": "x"}'])
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
    assert settings.files_url == "http://cairn-cairn-files:8790"


MINIMAL = CHART / "ci" / "minimal-values.yaml"
ADMIN_ID = "4f1b8c0e2d7a4e5f9a3b6c1d0e2f4a5b"


def _objects_with(*sets: str, values: Path = MINIMAL) -> list[dict[str, Any]]:
    out = _render(values, sets=sets, operator=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(obj for obj in objects
                if obj["kind"] == kind and obj["metadata"]["name"] == f"cairn-cairn-{name}")


@pytest.mark.parametrize(("sets", "says"), [
    # Fail closed: never a configuration without authentication by accident.
    (('conf.cairn.auth_strategy="noauth"',),
     "renders only with conf.cairn.environment set to development"),
    (('conf.cairn.auth_strategy="noauth"', 'conf.cairn.environment="production"'),
     "renders only with conf.cairn.environment set to development"),
    # Cloud admins by Keystone id, and none by default.
    (('conf.cairn.admin_projects=[]',),
     "conf.cairn.admin_projects is empty: list the Keystone project ID (not its name: names "
     "are unique only within a domain) of the cloud's admin project, e.g. from `openstack "
     "project show admin -f value -c id`"),
    # One project never holds every slot of a target.
    (('conf.cairn.max_jobs_per_project=4',),
     "conf.cairn.max_jobs_per_project (4) must be below conf.cairn.max_jobs_per_target (4)"),
    (('conf.cairn.max_jobs_per_target=2', 'conf.cairn.max_jobs_per_project=3'),
     "conf.cairn.max_jobs_per_project (3) must be below conf.cairn.max_jobs_per_target (2)"),
    # Keys every replica must share.
    (('secrets.portal_session_key=null',),
     "pod.replicas.api is 2: set secrets.portal_session_key"),
    (('secrets.webhook_secret_key=null',), "set secrets.webhook_secret_key"),
    (('secrets.files_token=null',), "set secrets.files_token"),
    # The file service's sessions at their fullest, above its pod's memory limit.
    (('conf.cairn.files_sessions=16',),
     "cairn-files may need 7936 MiB: conf.cairn.files_sessions (16) x "
     "(files_parser_memory_bytes 320 MiB"),
    (('conf.cairn.files_cache_bytes=134217728',), "cairn-files may need 4608 MiB"),
    (('pod.resources.files.limits.memory="3Gi"',), "above pod.resources.files.limits.memory"),
    # An egress policy that would cut the pods off Ceph.
    (('network_policy.egress.ceph.to=[]',), "network_policy.egress.ceph.to is empty"),
    # Behind an Ingress, the API must know the controller's pods, or every tenant is one.
    (('manifests.ingress_api=true',),
     "manifests.ingress_api is on but conf.cairn.api_trusted_proxies is empty"),
])
def test_values_that_do_not_fit_together_are_refused_with_the_fix(sets: tuple[str, ...],
                                                                   says: str) -> None:
    done = _render(MINIMAL, sets=sets, check=False)
    assert done.returncode != 0, f"rendered with {sets}"
    assert says in done.stderr, done.stderr


def test_the_chart_fails_closed_on_authentication() -> None:
    # Every process is told its auth strategy and environment explicitly.
    for name in VALUE_SETS:
        [config] = [obj for obj in _objects(name) if obj["kind"] == "ConfigMap"]
        assert config["data"]["CAIRN_AUTH_STRATEGY"] == "keystone", name
        assert config["data"]["CAIRN_ENVIRONMENT"] == "production", name
        assert json.loads(config["data"]["CAIRN_ADMIN_PROJECTS"]) == [ADMIN_ID], name
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["conf"]["cairn"]["admin_projects"] == []
    # noauth only where development is asked for by name; then no Keystone at all.
    objects = _objects_with('conf.cairn.auth_strategy="noauth"',
                            'conf.cairn.environment="development"')
    [config] = [obj for obj in objects if obj["kind"] == "ConfigMap"]
    assert (config["data"]["CAIRN_AUTH_STRATEGY"], config["data"]["CAIRN_ENVIRONMENT"]) == (
        "noauth", "development")
    assert "CAIRN_KEYSTONE" not in config["data"]


def test_a_target_with_one_slot_renders() -> None:
    objects = _objects_with('conf.cairn.max_jobs_per_target=1',
                            'conf.cairn.max_jobs_per_project=1')
    [config] = [obj for obj in objects if obj["kind"] == "ConfigMap"]
    assert config["data"]["CAIRN_MAX_JOBS_PER_TARGET"] == "1"


def test_a_destination_without_ports_opens_every_port_of_its_peers() -> None:
    # For a network plugin that ignores endPort: the Ceph networks on every port.
    objects = _objects_with('network_policy.egress.ceph.ports=[]')
    ceph = [{"ipBlock": {"cidr": "10.20.0.0/24"}}]
    for component, spec in _policies(objects).items():
        rules = [rule for rule in spec["egress"] if rule.get("to") == ceph]
        assert rules == [{"to": ceph}], component


def test_dns_is_reachable_on_the_common_layouts() -> None:
    # kube-dns/CoreDNS pods, NodeLocal DNSCache (upstream's and kubespray's address),
    # OpenShift's DNS pods, which listen on 5353.
    for component, spec in _policies(_objects_with()).items():
        [dns] = [rule for rule in spec["egress"]
                 if {"port": 53, "protocol": "UDP"} in rule.get("ports", [])]
        peers = [peer.get("ipBlock", {}).get("cidr") for peer in dns["to"]]
        assert {"169.254.20.10/32", "169.254.25.10/32"} <= set(peers), component
        assert {"kubernetes.io/metadata.name": "openshift-dns"} in [
            peer.get("namespaceSelector", {}).get("matchLabels") for peer in dns["to"]]
        assert {"port": 5353, "protocol": "UDP"} in dns["ports"], component



def test_behind_the_ingress_the_api_trusts_the_controllers_forwarded_for_only() -> None:
    # Before: nothing rendered CAIRN_API_TRUSTED_PROXIES, so behind the Ingress every
    # tenant was the controller's address: one client's garbage tokens got everyone's new
    # tokens a 429, and 30 failed sign-ins locked the portal for all users for 15 minutes.
    production = yaml.safe_load((CHART / "ci" / "production-values.yaml").read_text())
    assert production["manifests"]["ingress_api"]
    [config] = [obj for obj in _objects("production") if obj["kind"] == "ConfigMap"]
    trusted = json.loads(config["data"]["CAIRN_API_TRUSTED_PROXIES"])
    assert trusted == production["conf"]["cairn"]["api_trusted_proxies"] == ["10.244.0.0/16"]
    # What the API makes of it: a tenant behind the controller is its own client.
    scope = {"client": ("10.244.3.7", 40000),
             "headers": [(b"x-forwarded-for", b"198.51.100.7, 203.0.113.9")]}
    networks = [ipaddress.ip_network(cidr) for cidr in trusted]
    assert client_address(scope, networks) == "203.0.113.9"
    # Without an Ingress the default trusts nobody: every client is its TCP peer.
    [config] = [obj for obj in _objects("minimal") if obj["kind"] == "ConfigMap"]
    assert json.loads(config["data"]["CAIRN_API_TRUSTED_PROXIES"]) == []
    # With the controller's range given, the Ingress renders.
    objects = _objects_with('manifests.ingress_api=true',
                            'conf.cairn.api_trusted_proxies=["10.42.0.0/16", "fd00:42::/56"]')
    assert any(obj["kind"] == "Ingress" for obj in objects)


def test_one_api_replica_needs_no_portal_key() -> None:
    objects = _objects_with('pod.replicas.api=1', 'secrets.portal_session_key=null')
    api = _named(objects, "Deployment", "api")
    [container] = _containers(api)
    assert "CAIRN_PORTAL_SESSION_KEY_FILE" not in {e["name"] for e in container["env"]}


def test_by_default_a_project_runs_fewer_jobs_than_a_target_takes() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["conf"]["cairn"]
    assert values["max_jobs_per_project"] < values["max_jobs_per_target"]
    code = Settings.model_fields
    assert code["max_jobs_per_project"].default < code["max_jobs_per_target"].default
    for name in VALUE_SETS:
        [config] = [obj for obj in _objects(name) if obj["kind"] == "ConfigMap"]
        data = config["data"]
        per_project = int(data.get("CAIRN_MAX_JOBS_PER_PROJECT",
                                   code["max_jobs_per_project"].default))
        assert per_project < int(data.get("CAIRN_MAX_JOBS_PER_TARGET",
                                          code["max_jobs_per_target"].default)), name


@pytest.mark.parametrize("name", VALUE_SETS)
def test_metrics_are_served_and_scraped_on_ports_no_ingress_reaches(name: str) -> None:
    objects = _objects(name, operator=True)
    [config] = [obj for obj in objects if obj["kind"] == "ConfigMap"]
    assert config["data"]["CAIRN_API_METRICS_PORT"] == "9103"
    assert "CAIRN_METRICS_ALLOWED_NETWORKS" not in config["data"]
    [api] = _containers(_named(objects, "Deployment", "api"))
    assert {(p["name"], p["containerPort"]) for p in api["ports"]} == {
        ("api", 8787), ("metrics", 9103)}
    # The API's Service and its Ingress carry the REST port only.
    service = _named(objects, "Service", "api")
    assert [(p["name"], p["targetPort"]) for p in service["spec"]["ports"]] == [("api", "api")]
    for ingress in (obj for obj in objects if obj["kind"] == "Ingress"):
        backends = [path["backend"]["service"] for rule in ingress["spec"]["rules"]
                    for path in rule["http"]["paths"]]
        assert backends
        assert all(b == {"name": "cairn-cairn-api", "port": {"name": "api"}}
                   for b in backends), backends
    # Prometheus scrapes each pod's own metrics port, never the REST port.
    if name == "monitoring":
        monitor = next(obj for obj in objects if obj["kind"] == "ServiceMonitor")
        assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
        scraped = _named(objects, "Service", "metrics")
        assert [p["targetPort"] for p in scraped["spec"]["ports"]] == ["metrics"]


def _policies(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"].removeprefix("cairn-cairn-"): obj["spec"]
            for obj in objects if obj["kind"] == "NetworkPolicy"}


def _ports(rule: dict[str, Any]) -> set[int]:
    return {p["port"] for p in rule.get("ports", [])}


MONITORING_PEER = {"namespaceSelector": {"matchLabels": {
    "kubernetes.io/metadata.name": "monitoring"}}}
NOT_PUBLIC_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8",
                 "169.254.0.0/16", "100.64.0.0/10", "0.0.0.0/8", "224.0.0.0/4"]
NOT_PUBLIC_V6 = ["::/96", "::ffff:0:0/96", "64:ff9b::/96", "2002::/16", "fc00::/7",
                 "fe80::/10", "fec0::/10", "ff00::/8"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_network_policies_open_each_port_to_its_peers_only(name: str) -> None:
    values = yaml.safe_load((CHART / "ci" / f"{name}-values.yaml").read_text())
    policies = _policies(_objects(name))
    assert set(policies) == {"api", "scheduler", "worker", "files"}
    metrics = {"api": 9103, "scheduler": 9102, "worker": 9101}
    for component, spec in policies.items():
        assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == component
        assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
        if component == "files":
            # No metrics port; its own port from the API's pods alone.
            [rule] = spec["ingress"]
            assert rule["from"] == [{"podSelector": {"matchLabels": {
                "app.kubernetes.io/name": "cairn", "app.kubernetes.io/instance": "cairn",
                "app.kubernetes.io/component": "api"}}}]
            assert _ports(rule) == {8790}
            continue
        # Metrics: from the monitoring namespace only, in a rule of their own.
        [scrape] = [rule for rule in spec["ingress"] if metrics[component] in _ports(rule)]
        assert scrape["from"] == [MONITORING_PEER]
        assert _ports(scrape) == {metrics[component]}
        others = [rule for rule in spec["ingress"] if rule is not scrape]
        if component != "api":
            assert others == [], component
            continue
        # The REST port: from network_policy.api_from (anywhere when it is empty).
        [rest] = others
        assert _ports(rest) == {8787}
        api_from = values.get("network_policy", {}).get("api_from", [])
        assert rest.get("from", []) == api_from
    # Production names the ingress controller; the other sets leave the API public.
    assert name != "production" or policies["api"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_egress_reaches_the_services_cairn_uses_and_the_public_internet_for_webhooks(
        name: str) -> None:
    values = yaml.safe_load((CHART / "ci" / f"{name}-values.yaml").read_text())
    policies = _policies(_objects(name))
    ceph = values["network_policy"]["egress"]["ceph"]["to"]
    allowed = values.get("conf", {}).get("cairn", {}).get("webhook_allowed_networks", [])
    for component, spec in policies.items():
        rules = spec["egress"]
        # A rule without `to` would be "anywhere": there is none.
        assert all(rule.get("to") for rule in rules), component
        by_port: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for rule in rules:
            for port in rule.get("ports", []):
                by_port.setdefault((port["port"], port["protocol"]), []).extend(rule["to"])
        assert ("UDP" in {p for (n, p) in by_port if n == 53}), component  # DNS
        assert by_port[(3300, "TCP")] == ceph
        assert by_port[(6789, "TCP")] == ceph
        [osds] = [port for rule in rules for port in rule.get("ports", [])
                  if port["port"] == 6800]
        assert osds["endPort"] == 7568
        for port in (5432, 6379, 5000, 8776):  # database, Redis, Keystone, Cinder
            assert by_port[(port, "TCP")], (component, port)
        # RabbitMQ only when notifications are sent on it.
        messaging = values.get("conf", {}).get("cairn", {}).get("notification_driver")
        assert ((5672, "TCP") in by_port) == (messaging == "messagingv2"), component
        public = [rule for rule in rules if not rule.get("ports")]
        if component != "worker":
            # The API and the scheduler never reach the internet.
            assert public == [], component
            continue
        [webhooks] = public
        blocks = [peer["ipBlock"] for peer in webhooks["to"]]
        v4 = next(b for b in blocks if b["cidr"] == "0.0.0.0/0")
        v6 = next(b for b in blocks if b["cidr"] == "::/0")
        assert set(NOT_PUBLIC_V4) <= set(v4["except"])
        assert set(NOT_PUBLIC_V6) <= set(v6["except"])
        for block in (v4, v6):  # what the API server checks: every exception inside
            whole = ipaddress.ip_network(block["cidr"])
            assert all(ipaddress.ip_network(e).subnet_of(whole)  # type: ignore[arg-type]
                       for e in block["except"])
        # The private networks webhooks may reach (conf.cairn.webhook_allowed_networks).
        assert [b["cidr"] for b in blocks if b not in (v4, v6)] == allowed
        assert all("except" not in b for b in blocks if b not in (v4, v6))


def test_webhooks_can_be_kept_off_the_internet() -> None:
    policies = _policies(_objects_with('network_policy.worker_webhooks_to_public_internet=false'))
    assert all(rule.get("ports") for rule in policies["worker"]["egress"])


def test_without_network_policies_no_ceph_network_is_needed() -> None:
    objects = _objects_with('manifests.network_policy=false', 'network_policy.egress.ceph.to=[]')
    assert not [obj for obj in objects if obj["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_keys_are_files_in_the_pods_that_use_them(name: str) -> None:
    """Each shared key where it is used: the webhook secrets' key ring in the API (which
    seals), the workers (which open) and the migration job (0017 seals what exists)."""
    objects = _objects(name)
    for kind, component, keys in (("Deployment", "api", {"portal", "webhooks"}),
                                  ("Deployment", "worker", {"webhooks"}),
                                  ("Deployment", "scheduler", set()),
                                  ("Job", "db-sync", {"webhooks"})):
        deployment = _named(objects, kind, component)
        [container] = _containers(deployment)
        env = {e["name"]: e.get("value") for e in container["env"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        files = {"portal": ("CAIRN_PORTAL_SESSION_KEY_FILE", "/etc/cairn/portal",
                            "session.key", "cairn-portal"),
                 "webhooks": ("CAIRN_WEBHOOK_SECRET_KEY_FILE", "/etc/cairn/webhooks",
                              "secret.key", "cairn-webhooks")}
        for key, (setting, directory, file, secret) in files.items():
            if key not in keys:
                assert setting not in env, (component, key)
                assert directory not in mounts, (component, key)
                continue
            assert env[setting] == f"{directory}/{file}", (component, key)
            volume = volumes[mounts[directory]]["secret"]
            assert volume["secretName"] == secret
            assert [item["path"] for item in volume["items"]] == [file]
            assert volume["defaultMode"] == 0o440


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_file_service_reads_like_a_worker_and_answers_the_api_alone(name: str) -> None:
    """cairn-files (issue 34): the worker's Ceph keyrings, the database, a token from a
    Secret shared with the API; a Service on its own port, which the API's egress reaches
    and nothing else's ingress rule opens."""
    objects = _objects(name)
    files, worker, api = (_named(objects, "Deployment", c) for c in ("files", "worker", "api"))
    [container] = _containers(files)
    assert container["command"] == ["cairn-files"]
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [("files", 8790)]
    env = {e["name"]: e for e in container["env"]}
    assert env["CAIRN_FILES_BIND"]["value"] == "0.0.0.0:8790"
    assert "CAIRN_WEBHOOK_SECRET_KEY_FILE" not in env  # it signs nothing
    [api_container] = _containers(api)
    api_env = {e["name"]: e for e in api_container["env"]}
    token = {"secretKeyRef": {"name": "cairn-files", "key": "token"}}
    assert env["CAIRN_FILES_TOKEN"]["valueFrom"] == api_env["CAIRN_FILES_TOKEN"]["valueFrom"]
    assert env["CAIRN_FILES_TOKEN"]["valueFrom"] == token
    [worker_container] = _containers(worker)
    ceph = {m["mountPath"] for m in worker_container["volumeMounts"]
            if m["mountPath"].startswith("/etc/ceph/")}
    assert ceph
    assert ceph <= {m["mountPath"] for m in container["volumeMounts"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "files"}
    service = _named(objects, "Service", "files")
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(8790, "files")]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "files"
    [config] = [obj for obj in objects if obj["kind"] == "ConfigMap"]
    assert config["data"]["CAIRN_FILES_URL"] == "http://cairn-cairn-files:8790"
    policies = _policies(objects)
    to_files = [rule for rule in policies["api"]["egress"]
                if 8790 in _ports(rule)]
    assert [r["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
            for r in to_files] == ["files"]
    for component in ("worker", "scheduler"):
        assert not [rule for rule in policies[component]["egress"] if 8790 in _ports(rule)]


def test_without_the_file_service_nothing_of_it_renders() -> None:
    objects = _objects_with('manifests.deployment_files=false', 'secrets.files_token=null')
    assert not [obj for obj in objects if obj["metadata"]["name"] == "cairn-cairn-files"]
    [config] = [obj for obj in objects if obj["kind"] == "ConfigMap"]
    assert "CAIRN_FILES_URL" not in config["data"]
    [api] = _containers(_named(objects, "Deployment", "api"))
    assert "CAIRN_FILES_TOKEN" not in {e["name"] for e in api["env"]}


def test_the_file_services_sessions_fit_its_memory_limit_by_default() -> None:
    # The chart's defaults pass the check, and tell cairn-files what the check counted.
    [config] = [obj for obj in _objects("minimal") if obj["kind"] == "ConfigMap"]
    sessions = int(config["data"]["CAIRN_FILES_SESSIONS"])
    parser = int(config["data"]["CAIRN_FILES_PARSER_MEMORY_BYTES"])
    cache = Settings.model_fields["files_cache_bytes"].default
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    limit = values["pod"]["resources"]["files"]["limits"]["memory"]
    assert limit.endswith("Gi")
    assert sessions * (parser + cache + (32 << 20)) + (256 << 20) <= int(limit[:-2]) << 30
    # A bigger limit takes more sessions.
    objects = _objects_with("conf.cairn.files_sessions=16",
                            'pod.resources.files.limits.memory="8Gi"')
    assert any(obj["kind"] == "Deployment" for obj in objects)
