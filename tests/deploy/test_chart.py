"""The Helm chart, rendered by Helm itself (its Go SDK through helm-python-sdk, no helm binary or cluster).

What a cluster would receive is checked the way it would be: every manifest against Kubernetes' own
schemas (kubernetes-validate, a current version); the PrometheusRule's groups equal prometheus/rules and pass
`promtool test rules`; the dashboards' ConfigMaps carry grafana/dashboards byte for byte with the sidecar's
label; no credential is ever written in values or manifests.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from tests.deploy.conftest import ROOT

CHART = ROOT / "deploy" / "helm" / "scanwatch"
DAGSTER_VALUES = ROOT / "deploy" / "helm" / "dagster-values.yaml"
K8S_VERSION = kubernetes_validate.latest_version()
ALL_ON = {"secret": {"name": "scanwatch"}, "serviceMonitor": {"enabled": True},
          "prometheusRule": {"enabled": True}}
CRDS = {("monitoring.coreos.com/v1", "PrometheusRule"), ("monitoring.coreos.com/v1", "ServiceMonitor")}


def render(values: dict) -> list[dict]:
    with helm.Chart.load(str(CHART)) as chart:
        out = chart.render(values, name="sw", namespace="monitoring", is_install=True)
    docs = []
    for name, text in out.items():
        if name.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def one(docs: list[dict], kind: str) -> dict:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool not found: run `make test-tools`"
    return found


def test_the_charts_copies_of_rules_and_dashboards_are_current():
    done = subprocess.run([sys.executable, str(ROOT / "deploy" / "generate.py"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def test_helm_lints_the_chart():
    report = helm.lint(str(CHART), values={"secret": {"name": "scanwatch"}}, strict=True, kube_version=K8S_VERSION)
    assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] > 1] == [], report


DASHBOARDS = len(list((ROOT / "grafana" / "dashboards").glob("*.json")))  # one ConfigMap each


EVERYTHING = {**ALL_ON, "podDisruptionBudget": {"enabled": True}, "networkPolicy": {"enabled": True}}


def test_every_manifest_passes_kubernetes_schemas():
    docs = render(EVERYTHING)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == [*["ConfigMap"] * DASHBOARDS, "Deployment", "NetworkPolicy", "PodDisruptionBudget",
                     "PrometheusRule", "Service", "ServiceAccount", "ServiceMonitor"]
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRDS:
            continue  # no schema offline for prometheus-operator's kinds: checked field by field below
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_missing_secret_name_stops_the_render_with_what_to_set():
    with pytest.raises(helm.HelmError, match=r"secret\.name"):
        render({})


def test_by_default_no_operator_kinds_and_the_dashboards_on():
    kinds = sorted(d["kind"] for d in render({"secret": {"name": "s"}}))
    assert kinds == [*["ConfigMap"] * DASHBOARDS, "Deployment", "Service", "ServiceAccount"]


def test_the_exporter_probes_and_reads_the_history_from_the_secret_only():
    docs = render(ALL_ON)
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/-/healthy", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/-/healthy", "port": "metrics"}  # test_readiness.py
    assert container["command"][:2] == ["scanwatch", "exporter"]
    assert container["env"] == [{"name": "SCANWATCH_DB", "valueFrom": {"secretKeyRef": {
        "name": "scanwatch", "key": "SCANWATCH_DB"}}}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert "Secret" not in {d["kind"] for d in docs}
    credential = re.compile(r"postgres(?:ql)?://|\b(?:rst|rat)_[0-9A-Za-z]{8,}|[Pp]assword\W*:\s*[^\s{]")
    assert not credential.search(yaml.safe_dump_all(docs))
    for values in (CHART / "values.yaml", DAGSTER_VALUES):  # the values themselves, their comments aside
        assert not credential.search(yaml.safe_dump(yaml.safe_load(values.read_text()))), values


def test_the_service_monitor_scrapes_the_job_the_rules_select():
    docs = render(ALL_ON)
    monitor, service = one(docs, "ServiceMonitor"), one(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["monitoring"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] == "metrics" and endpoint["path"] == "/metrics"
    job = service["metadata"]["labels"][monitor["spec"]["jobLabel"]]  # what the operator sets `job` to
    alerts = (ROOT / "prometheus" / "rules" / "secscan-alerts.yml").read_text()
    assert f'job="{job}"' in alerts
    assert yaml.safe_load((ROOT / "prometheus" / "prometheus.yml").read_text())["scrape_configs"][0]["job_name"] == job


def test_the_prometheus_rule_is_prometheus_rules_and_passes_promtool(tmp_path):
    rule = one(render(ALL_ON), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and set(rule["spec"]) == {"groups"}
    expected = [g for path in sorted((ROOT / "prometheus" / "rules").glob("*.yml"))
                for g in yaml.safe_load(path.read_text())["groups"]]
    assert rule["spec"]["groups"] == expected
    rules_file = tmp_path / "from-chart.yml"
    rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    checked = subprocess.run([_promtool(), "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tests = []
    for path in sorted((ROOT / "prometheus" / "tests").glob("*.test.yml")):
        suite = yaml.safe_load(path.read_text())
        suite["rule_files"] = [str(rules_file)]
        tests.append(tmp_path / path.name)
        tests[-1].write_text(yaml.safe_dump(suite, sort_keys=False))
    tested = subprocess.run([_promtool(), "test", "rules", *map(str, tests)], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_dashboards_configmaps_are_grafanas_dashboards_for_the_sidecar():
    maps = [d for d in render(ALL_ON) if d["kind"] == "ConfigMap"]
    files = {p.name: p.read_text() for p in (ROOT / "grafana" / "dashboards").glob("*.json")}
    assert {k: v for m in maps for k, v in m["data"].items()} == files
    for m in maps:
        assert m["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert m["metadata"]["annotations"] == {"grafana_folder": "scanwatch"}
    relabelled = render({**ALL_ON, "dashboards": {"label": "team_dashboards", "labelValue": "yes"}})
    assert all(m["metadata"]["labels"]["team_dashboards"] == "yes" for m in relabelled if m["kind"] == "ConfigMap")


# The keys Dagster's chart (dagster/dagster, 1.13 line) takes for a user deployment, for its run launcher and
# its PostgreSQL: a value under another name would be ignored or refused by its schema.
USER_DEPLOYMENT_KEYS = {
    "name", "image", "dagsterApiGrpcArgs", "codeServerArgs", "port", "includeConfigInLaunchedRuns", "volumes",
    "volumeMounts", "env", "envConfigMaps", "envSecrets", "initContainers", "sidecarContainers", "annotations",
    "nodeSelector", "affinity", "tolerations", "podSecurityContext", "securityContext", "resources", "labels",
    "schedulerName", "readinessProbe", "livenessProbe", "startupProbe", "service"}
K8S_RUN_LAUNCHER_KEYS = {
    "image", "imagePullPolicy", "jobNamespace", "loadInclusterConfig", "kubeconfigFile", "envConfigMaps",
    "envSecrets", "envVars", "volumeMounts", "volumes", "labels", "failPodOnRunFailure", "resources",
    "schedulerName", "securityContext", "runK8sConfig"}


def test_the_dagster_chart_values_run_the_code_location_with_secrets_from_a_secret():
    values = yaml.safe_load(DAGSTER_VALUES.read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert set(deployment) <= USER_DEPLOYMENT_KEYS
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "pipelines.definitions"]
    assert deployment["envSecrets"] == [{"name": "scanwatch"}]
    assert not any(e["name"] in ("SCANWATCH_DB", "SCANWATCH_API_KEY") for e in deployment["env"])
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher" and set(launcher["config"]["k8sRunLauncher"]) <= K8S_RUN_LAUNCHER_KEYS
    assert launcher["config"]["k8sRunLauncher"]["envSecrets"] == [{"name": "scanwatch"}]
    assert values["dagsterDaemon"]["runCoordinator"]["type"] == "QueuedRunCoordinator"
    # The instance's driver, as the instance file this repository runs on PostgreSQL says.
    instance = yaml.safe_load((ROOT / "deploy" / "dagster" / "dagster.yaml").read_text())
    assert values["postgresql"]["postgresqlScheme"] == instance["storage"]["postgres"]["postgres_db"]["scheme"]
    image = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert deployment["image"]["tag"] == image


def test_the_exporter_shares_no_volume_with_the_runs_and_reads_the_snapshot_from_the_history():
    pod = one(render(ALL_ON), "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # Its only volume is its own scratch space: the snapshot is the history's snapshot_parts table.
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}]
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert "--snapshot" not in container["command"]
    assert not any(e["name"] == "SCANWATCH_SNAPSHOT" for e in container["env"])
    values = yaml.safe_load(DAGSTER_VALUES.read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert not {"volumes", "volumeMounts"} & set(deployment)  # the code location and its runs need no disk either
    assert not {"volumes", "volumeMounts"} & set(values["runLauncher"]["config"]["k8sRunLauncher"])
    assert not any(e["name"] == "SCANWATCH_SNAPSHOT" for e in deployment["env"])


def test_the_exporter_can_take_a_readers_url_and_a_password_kept_apart_from_the_secret():
    docs = render({**ALL_ON, "secret": {"name": "scanwatch", "passwordKey": "PGPASSWORD"},
                   "exporter": {"databaseUrlKey": "SCANWATCH_READER_DB"}})
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["env"] == [
        {"name": "SCANWATCH_DB", "valueFrom": {"secretKeyRef": {"name": "scanwatch", "key": "SCANWATCH_READER_DB"}}},
        {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "scanwatch", "key": "PGPASSWORD"}}}]
    kubernetes_validate.validate(one(docs, "Deployment"), K8S_VERSION, strict=True)


# ---- values.schema.json: Helm refuses what would render a broken or injected manifest ----

BAD_VALUES = {
    "a blank secret name": ({"secret": {"name": " "}}, "/secret/name"),
    "a secret name with capitals": ({"secret": {"name": "Scanwatch"}}, "/secret/name"),
    "a secret key with a space": ({"secret": {"name": "s", "databaseUrlKey": "SCANWATCH DB"}},
                                  "/secret/databaseUrlKey"),
    "a huge replica count": ({"exporter": {"replicas": 1e12}}, "/exporter/replicas"),
    "a fractional replica count": ({"exporter": {"replicas": 1.5}}, "/exporter/replicas"),
    "replicas as text": ({"exporter": {"replicas": "2"}}, "/exporter/replicas"),
    "a port out of range": ({"exporter": {"port": 70000}}, "/exporter/port"),
    "YAML through the dashboards label": ({"dashboards": {"label": "x: y\n  evil: true\n  z"}}, "/dashboards/label"),
    "a blank dashboards label": ({"dashboards": {"label": ""}}, "/dashboards/label"),
    "a label value too long": ({"dashboards": {"labelValue": "v" * 64}}, "/dashboards/labelValue"),
    "a misspelt key": ({"exporter": {"replica": 2}}, "replica"),
    "an unknown top-level key": ({"exportr": {}}, "exportr"),
    "a scrape interval that is no duration": ({"serviceMonitor": {"interval": "30 seconds"}},
                                              "/serviceMonitor/interval"),
    "a pull policy Kubernetes does not know": ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    "both budgets": ({"podDisruptionBudget": {"enabled": True, "minAvailable": 1, "maxUnavailable": 1}},
                     "/podDisruptionBudget"),
    "a readiness path the exporter does not serve": ({"exporter": {"readinessProbe": {"path": "/metrics"}}},
                                                     "/exporter/readinessProbe/path"),
    "more critical issues than the snapshot keeps": ({"exporter": {"criticalIssueInfo": 51}},
                                                      "/exporter/criticalIssueInfo"),
    "no shard at all": ({"exporter": {"shards": 0}}, "/exporter/shards"),
    "shards as text": ({"exporter": {"shards": "4"}}, "/exporter/shards"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_are_refused_by_the_schema_naming_the_value(case):
    values, where = BAD_VALUES[case]
    merged = {**values, "secret": {"name": "scanwatch", **values.get("secret", {})}}
    with pytest.raises(helm.HelmValuesError, match="schema") as refused:
        render(merged)
    assert where in str(refused.value), str(refused.value)


def test_the_values_shipped_and_the_documented_options_pass_the_schema():
    report = helm.lint(str(CHART), values=EVERYTHING, strict=True, kube_version=K8S_VERSION)
    assert report["errors"] == [], report
    render({**ALL_ON, "backfill": {"enabled": False}})  # room for the backfill Job's values
    render({**ALL_ON, "exporter": {"replicas": 3, "readinessProbe": {"path": "/-/ready"}},
            "dashboards": {"label": "example.com/grafana-dashboard", "labelValue": "scanwatch_v1"},
            "podDisruptionBudget": {"enabled": True, "minAvailable": "50%"}})


# ---- security context, identity, network and disruption ----

def _pod(docs: list[dict]) -> dict:
    return one(docs, "Deployment")["spec"]["template"]["spec"]


def test_no_uid_is_hard_coded_and_the_security_contexts_are_the_operators():
    pod = _pod(render(ALL_ON))
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert "runAsUser" not in yaml.safe_dump(pod)
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}

    docs = render({**ALL_ON, "exporter": {
        "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 1000680000, "fsGroup": 1000680000},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}, "runAsGroup": 1000680000}}})
    pod = _pod(docs)
    assert pod["securityContext"]["runAsUser"] == 1000680000 and pod["securityContext"]["fsGroup"] == 1000680000
    assert pod["containers"][0]["securityContext"]["runAsGroup"] == 1000680000
    kubernetes_validate.validate(one(docs, "Deployment"), K8S_VERSION, strict=True)


def test_the_exporter_runs_as_its_own_service_account_without_a_token():
    docs = render(ALL_ON)
    account = one(docs, "ServiceAccount")
    assert account["automountServiceAccountToken"] is False
    pod = _pod(docs)
    assert pod["serviceAccountName"] == account["metadata"]["name"] and pod["automountServiceAccountToken"] is False
    mine = render({**ALL_ON, "serviceAccount": {"create": False, "name": "monitoring-reader"}})
    assert "ServiceAccount" not in {d["kind"] for d in mine} and _pod(mine)["serviceAccountName"] == "monitoring-reader"


def test_the_network_policy_lets_in_the_scrapers_and_out_dns_and_the_database_only():
    scrapers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    database = [{"ipBlock": {"cidr": "10.20.0.0/16"}}]
    docs = render({**ALL_ON, "networkPolicy": {"enabled": True, "scrapers": scrapers, "database": database,
                                               "databasePort": 6432}})
    policy = one(docs, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= _pod_labels(docs).items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    (ingress,) = policy["ingress"]
    assert ingress == {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": scrapers}
    dns, db = policy["egress"]
    assert {p["port"] for p in dns["ports"]} == {53} and "to" not in dns
    assert db == {"ports": [{"port": 6432, "protocol": "TCP"}], "to": database}
    kubernetes_validate.validate(one(docs, "NetworkPolicy"), K8S_VERSION, strict=True)


def _pod_labels(docs: list[dict]) -> dict:
    return one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]


def test_the_disruption_budget_selects_the_exporters_pods_and_is_opt_in():
    assert "PodDisruptionBudget" not in {d["kind"] for d in render(ALL_ON)}
    docs = render({**ALL_ON, "exporter": {"replicas": 2}, "podDisruptionBudget": {"enabled": True}})
    budget = one(docs, "PodDisruptionBudget")["spec"]
    assert budget["maxUnavailable"] == 1 and "minAvailable" not in budget
    assert budget["selector"]["matchLabels"].items() <= _pod_labels(docs).items()
    budget = one(render({**ALL_ON, "podDisruptionBudget": {"enabled": True, "minAvailable": "50%"}}),
                 "PodDisruptionBudget")["spec"]
    assert budget["minAvailable"] == "50%" and "maxUnavailable" not in budget


def test_the_dagster_chart_is_pinned_to_the_images_dagster_and_run_pods_get_resources_and_disk():
    text = DAGSTER_VALUES.read_text()
    (pinned,) = set(re.findall(r"helm install \S+ dagster/dagster --version (\S+)", text))
    (dagster,) = re.findall(r"^dagster==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert pinned == dagster
    assert "dagster/dagster --version" in (ROOT / "docs" / "operations.md").read_text()
    values = yaml.safe_load(text)
    run = values["runLauncher"]["config"]["k8sRunLauncher"]["resources"]
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    for resources in (run, deployment["resources"]):
        for kind in ("requests", "limits"):
            assert {"memory", "ephemeral-storage"} <= set(resources[kind]), (kind, resources)
    assert "runAsUser" not in text


def test_shards_are_one_deployment_each_and_one_scrape_job_covers_them_all():
    docs = render({**EVERYTHING, "exporter": {"shards": 3, "replicas": 2}})
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert sorted(d["metadata"]["name"] for d in deployments) == [f"sw-scanwatch-exporter-{i}" for i in range(3)]
    service, monitor = one(docs, "Service"), one(docs, "ServiceMonitor")
    budget, policy = one(docs, "PodDisruptionBudget"), one(docs, "NetworkPolicy")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    shards = []
    for deployment in deployments:
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
        pod = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pod.items()
        for selector in (service["spec"]["selector"], budget["spec"]["selector"]["matchLabels"],
                         policy["spec"]["podSelector"]["matchLabels"]):  # every shard's pods behind one Service
            assert selector.items() <= pod.items()
        assert deployment["spec"]["replicas"] == 2
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        command = container["command"]
        shards.append(command[command.index("--shard") + 1])
        assert pod["scanwatch.io/shard"] == shards[-1].split("/")[0]
    assert shards == ["0/3", "1/3", "2/3"]
    selectors = [tuple(sorted(d["spec"]["selector"]["matchLabels"].items())) for d in deployments]
    assert len(set(selectors)) == 3  # no Deployment adopts another shard's pods
    (unsharded,) = [d for d in render(ALL_ON) if d["kind"] == "Deployment"]
    assert unsharded["metadata"]["name"] == "sw-scanwatch-exporter"
    assert "--shard" not in unsharded["spec"]["template"]["spec"]["containers"][0]["command"]
