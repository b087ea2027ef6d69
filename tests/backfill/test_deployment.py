"""The day-one backfill in the deployment files: the chart's Job (rendered by Helm's own Go SDK, checked against
Kubernetes' schemas) and the compose file's one-shot services (checked against the Compose specification by
tests/deploy/test_compose.py). No cluster or container engine runs here."""

from __future__ import annotations

import argparse
import re

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from pipelines.commands import backfill_prometheus
from tests.deploy.conftest import ROOT
from tests.deploy.test_chart import CHART, K8S_VERSION, render

URL = "http://prometheus-operated.monitoring:9090/api/v1/write"
ON = {"secret": {"name": "scanwatch"}, "backfill": {"enabled": True, "url": URL}}


def _job(values: dict) -> dict:
    (job,) = [d for d in render(values) if d["kind"] == "Job"]
    return job


def _parsed(command: list[str]) -> argparse.Namespace:
    """The Job's command line read by the CLI's own parser: a flag it does not know fails here, not in a pod."""
    assert command[:2] == ["scanwatch", "backfill-prometheus"]
    parser = argparse.ArgumentParser()
    backfill_prometheus.add_arguments(parser)
    return parser.parse_args(command[2:])


def test_the_job_is_off_by_default() -> None:
    assert "Job" not in {d["kind"] for d in render({"secret": {"name": "s"}})}


def test_the_job_is_a_post_install_and_post_upgrade_hook_that_passes_kubernetes_schemas() -> None:
    job = _job(ON)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    hooks = job["metadata"]["annotations"]
    assert set(hooks["helm.sh/hook"].split(",")) == {"post-install", "post-upgrade"}
    assert hooks["helm.sh/hook-delete-policy"] == "before-hook-creation"  # a run again replaces the last Job
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    args = _parsed(container["command"])
    assert (args.output, args.url, args.data_dir) == ("remote-write", URL, None)
    assert args.wait_for_first_sync.total_seconds() == 240  # within Helm's default 5 min wait for hooks
    assert args.instance == "sw-scanwatch.monitoring.svc:9817"
    assert container["env"] == [{"name": "SCANWATCH_DB", "valueFrom": {"secretKeyRef": {
        "name": "scanwatch", "key": "SCANWATCH_DB"}}}]
    assert not re.search(r"postgres(?:ql)?://|\b(?:rst|rat)_[0-9A-Za-z]{8,}", yaml.safe_dump(job))


def test_victoriametrics_and_mimir_take_their_urls() -> None:
    job = _job({**ON, "backfill": {"enabled": True, "output": "victoriametrics",
                                   "url": "http://vm:8428/api/v1/import/prometheus", "instance": "exporter:9817"}})
    args = _parsed(job["spec"]["template"]["spec"]["containers"][0]["command"])
    assert (args.output, args.instance) == ("victoriametrics", "exporter:9817")
    job = _job({**ON, "backfill": {"enabled": True, "url": "http://mimir/api/v1/push",
                                   "queryUrl": "http://mimir/prometheus"}})
    assert _parsed(job["spec"]["template"]["spec"]["containers"][0]["command"]).query_url == "http://mimir/prometheus"


@pytest.mark.parametrize(("backfill", "says"), [
    ({"enabled": True}, r"backfill\.url"),
    ({"enabled": True, "url": URL, "output": "blocks"}, r"backfill\.output"),
])
def test_a_job_that_could_not_work_stops_the_render_with_what_to_set(backfill: dict, says: str) -> None:
    with pytest.raises(helm.HelmError, match=says):
        render({"secret": {"name": "s"}, "backfill": backfill})


def test_helm_lints_the_chart_with_the_job() -> None:
    report = helm.lint(str(CHART), values=ON, strict=True, kube_version=K8S_VERSION)
    assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] > 1] == [], report


def test_compose_runs_the_first_sync_then_the_backfill_into_its_prometheus() -> None:
    services = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    sync, backfill = services["first-sync"], services["backfill"]
    assert sync["command"] == ["scanwatch", "sync"] and sync["restart"] == backfill["restart"] == "no"
    assert backfill["depends_on"]["first-sync"] == {"condition": "service_completed_successfully"}
    args = _parsed(backfill["command"])
    assert args.output == "remote-write" and args.url == "http://prometheus:9090/api/v1/write"
    scrape = yaml.safe_load((ROOT / "deploy" / "compose" / "prometheus.yml").read_text())["scrape_configs"][0]
    assert args.instance in scrape["static_configs"][0]["targets"]  # the past and the live scrape: one series
    assert "prometheus" in backfill["depends_on"]
