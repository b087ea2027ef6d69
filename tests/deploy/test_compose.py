"""deploy/compose.yaml, checked without an engine: the Compose specification's JSON schema (vendored in
compose-spec/ with its licence), the services and what each runs, every mounted file present, the mounted
Prometheus and Alertmanager files accepted by promtool and amtool as the containers would see them, and no
credential written in the file."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.deploy.conftest import ROOT

COMPOSE = ROOT / "deploy" / "compose.yaml"
SCHEMA = Path(__file__).parent / "compose-spec" / "compose-spec.json"
SERVICES = {"postgres", "scanwatch-code", "dagster-webserver", "dagster-daemon", "exporter", "prometheus",
            "alertmanager", "first-sync", "backfill"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())  # YAML anchors and merge keys resolved, as Compose does


def _mounts(service: dict) -> dict[str, Path]:
    """container path -> host path of each bind mount (relative to deploy/, as Compose reads them)."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            out[target] = (COMPOSE.parent / source).resolve()
    return out


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} not found: run `make test-tools`"
    return found


def test_the_file_validates_against_the_compose_specification(compose):
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft201909Validator.check_schema(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft201909Validator(schema).iter_errors(compose)]
    assert errors == []
    broken = {**compose, "services": {**compose["services"], "exporter": {**compose["services"]["exporter"],
                                                                           "command": {"not": "a command"}}}}
    assert list(jsonschema.Draft201909Validator(schema).iter_errors(broken))  # the schema does refuse


def test_each_service_runs_its_part(compose):
    services = compose["services"]
    assert set(services) == SERVICES
    code = services["scanwatch-code"]["command"]
    assert code[:3] == ["dagster", "api", "grpc"] and code[code.index("-m") + 1] == "pipelines.definitions"
    workspace = yaml.safe_load((ROOT / "deploy/compose/workspace.yaml").read_text())["load_from"][0]["grpc_server"]
    assert workspace["host"] == "scanwatch-code" and str(workspace["port"]) == code[code.index("-p") + 1]
    assert services["dagster-webserver"]["command"][0] == "dagster-webserver"
    assert services["dagster-daemon"]["command"][:2] == ["dagster-daemon", "run"]
    assert services["exporter"]["command"][:2] == ["scanwatch", "exporter"]
    for name in ("scanwatch-code", "dagster-webserver", "dagster-daemon", "exporter"):
        assert services[name]["build"] == {"context": "..", "dockerfile": "Dockerfile"}
        assert (COMPOSE.parent / services[name]["build"]["context"] / "Dockerfile").is_file()
    instance = yaml.safe_load((ROOT / "deploy" / "dagster" / "dagster.yaml").read_text())
    wanted = {v["env"] for v in instance["storage"]["postgres"]["postgres_db"].values() if isinstance(v, dict)}
    assert len(wanted) == 5
    for name in ("scanwatch-code", "dagster-webserver", "dagster-daemon"):
        env = services[name]["environment"]
        assert wanted <= set(env), wanted - set(env)
        assert env["DAGSTER_HOME"] == "/opt/dagster/dagster_home"  # where the image put deploy/dagster/dagster.yaml
    # The exporter gets the history's address and nothing of the service's credentials.
    assert set(services["exporter"]["environment"]) == {"SCANWATCH_DB", "PGPASSWORD"}


def test_the_exporter_shares_no_disk_with_the_code_location_and_reads_the_snapshot_from_the_history(compose):
    services = compose["services"]
    exporter = services["exporter"]
    assert "volumes" not in exporter and exporter["read_only"] is True  # a tmpfs of its own, nothing shared
    assert exporter["environment"]["SCANWATCH_DB"].startswith("postgresql://")
    assert "--snapshot" not in exporter["command"]
    for name, service in services.items():
        assert "SCANWATCH_SNAPSHOT" not in service.get("environment", {}), name  # the snapshot is in the history
    assert compose["services"]["scanwatch-code"]["environment"]["SCANWATCH_DB"] == \
        exporter["environment"]["SCANWATCH_DB"]  # the database the runs write the parts into


def test_no_credential_is_written_in_the_file(compose):
    text = COMPOSE.read_text()
    for service in compose["services"].values():
        for key, value in service.get("environment", {}).items():
            if re.search(r"PASSWORD|API_KEY", key):
                assert re.fullmatch(r"\$\{[A-Z_]+:\?[^}]+\}", value), (key, value)
            if key == "SCANWATCH_DB":
                assert "@" in value and ":" not in value.split("@")[0].removeprefix("postgresql://"), value
    assert not re.search(r"\b(?:rst|rat)_[0-9A-Za-z]{8,}", text)
    example = (ROOT / "deploy" / "compose.env.example").read_text()
    assert re.search(r"^POSTGRES_PASSWORD=$", example, re.M) and re.search(r"^SCANWATCH_API_KEY=$", example, re.M)
    assert "deploy/.env" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_mounted_files_are_the_repositorys_and_their_tools_accept_them(compose, tmp_path):
    for service in compose["services"].values():
        for target, source in _mounts(service).items():
            assert source.exists(), f"{source} (mounted at {target}) missing"
    prometheus = _mounts(compose["services"]["prometheus"])
    assert prometheus["/etc/prometheus/rules"] == (ROOT / "prometheus" / "rules").resolve()
    config = yaml.safe_load(prometheus["/etc/prometheus/prometheus.yml"].read_text())
    config["rule_files"] = [r.replace("/etc/prometheus/rules", str(prometheus["/etc/prometheus/rules"]))
                            for r in config["rule_files"]]
    assert config["scrape_configs"][0]["job_name"] == "scanwatch"
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == ["exporter:9817"]
    seen = tmp_path / "prometheus.yml"
    seen.write_text(yaml.safe_dump(config))
    checked = subprocess.run([_tool("promtool"), "check", "config", str(seen)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "2 rule files found" in checked.stdout + checked.stderr

    alertmanager = _mounts(compose["services"]["alertmanager"])
    etc = tmp_path / "etc-alertmanager"  # the container's /etc/alertmanager, laid out from the mounts
    for target, source in alertmanager.items():
        if target.startswith("/etc/alertmanager"):
            dest = etc / Path(target).relative_to("/etc/alertmanager")
            dest.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if source.is_dir() else shutil.copy)(source, dest)
    checked = subprocess.run([_tool("amtool"), "check-config", str(etc / "alertmanager.yml")], capture_output=True,
                             text=True)
    assert checked.returncode == 0 and "1 templates" in checked.stdout, checked.stdout + checked.stderr
