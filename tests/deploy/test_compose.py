"""deploy/compose.yaml, checked without an engine: the Compose specification's JSON schema (vendored in
compose-spec/ with its licence) and `docker-compose config` (Debian's Compose, which needs no engine to
interpolate and validate), the services and what each runs, every mounted file present, the mounted
Prometheus and Alertmanager files accepted by promtool and amtool as the containers would see them, no
credential written in the file, and the ports on 127.0.0.1 unless the operator opens them.

The roles the file's PostgreSQL makes (compose/initdb) are made for real on a scratch PostgreSQL server by the
same script, then used as the services use them: a sync as the writer, the exporter as the reader, Grafana's
panels as its role, Dagster's instance as its own; none is a superuser and none reaches what it must not."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from tests.deploy.conftest import ROOT

COMPOSE = ROOT / "deploy" / "compose.yaml"
SCHEMA = Path(__file__).parent / "compose-spec" / "compose-spec.json"
SERVICES = {"postgres", "scanwatch-code", "dagster-webserver", "dagster-daemon", "exporter", "prometheus",
            "alertmanager", "grafana", "first-sync", "backfill"}


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
    # PostgreSQL is healthy only once its real server listens on TCP (not the initdb phase's socket-only one).
    check = services["postgres"]["healthcheck"]["test"]
    assert check[:2] == ["CMD", "pg_isready"] and check[check.index("-h") + 1] == "127.0.0.1"
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
    # The webserver and the daemon run no scanwatch code: neither the history's password nor the API key.
    for name in ("dagster-webserver", "dagster-daemon"):
        assert not {"SCANWATCH_DB", "PGPASSWORD", "SCANWATCH_API_KEY"} & set(services[name]["environment"]), name


def test_the_exporter_shares_no_disk_with_the_code_location_and_reads_the_snapshot_from_the_history(compose):
    services = compose["services"]
    exporter = services["exporter"]
    assert "volumes" not in exporter and exporter["read_only"] is True  # a tmpfs of its own, nothing shared
    assert exporter["environment"]["SCANWATCH_DB"].startswith("postgresql://")
    assert "--snapshot" not in exporter["command"]
    for name, service in services.items():
        assert "SCANWATCH_SNAPSHOT" not in service.get("environment", {}), name  # the snapshot is in the history
    writer, reader = (urlsplit(services[n]["environment"]["SCANWATCH_DB"]) for n in ("scanwatch-code", "exporter"))
    assert (writer.hostname, writer.port, writer.path) == (reader.hostname, reader.port, reader.path)  # one database


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


# ---- docker-compose config: what Compose itself makes of the file ----

ENV_EXAMPLE = ROOT / "deploy" / "compose.env.example"


def _filled_env() -> dict[str, str]:
    """deploy/.env as an operator fills it in: every variable the example lists, given a value."""
    names = re.findall(r"^([A-Z_]+)=", ENV_EXAMPLE.read_text(), re.M)
    return {name: f"value-of-{name.lower()}" for name in names} | {"SCANWATCH_BASE_URL": "https://api.example/v1"}


def _compose_config(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([_tool("docker-compose"), "-f", str(COMPOSE), "config"], cwd=COMPOSE.parent,
                          env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, timeout=60)


def _published(rendered: dict) -> dict[str, list[str]]:
    return {name: [str(p) for p in service.get("ports", [])] for name, service in rendered["services"].items()
            if service.get("ports")}


def test_compose_accepts_the_file_with_the_examples_variables_and_publishes_on_localhost_only():
    done = _compose_config(_filled_env())
    assert done.returncode == 0, done.stderr
    published = _published(yaml.safe_load(done.stdout))
    assert set(published) == {"dagster-webserver", "exporter", "prometheus", "alertmanager", "grafana"}
    for name, ports in published.items():
        assert ports and all(p.startswith("127.0.0.1:") for p in ports), (name, ports)

    opened = _compose_config({**_filled_env(), "SCANWATCH_PUBLISH_ADDRESS": "0.0.0.0"})
    assert opened.returncode == 0, opened.stderr
    assert all(p.startswith("0.0.0.0:") for ports in _published(yaml.safe_load(opened.stdout)).values()
               for p in ports)


def test_compose_refuses_the_file_while_a_password_is_missing_and_names_it():
    env = _filled_env()
    for name in ("SCANWATCH_READER_PASSWORD", "GRAFANA_ADMIN_PASSWORD"):
        done = _compose_config({k: v for k, v in env.items() if k != name})
        assert done.returncode != 0 and f"set {name} in deploy/.env" in done.stderr, (name, done.stderr)


# ---- the roles: who logs in as whom ----

def _login(service: dict) -> str:
    return urlsplit(service["environment"]["SCANWATCH_DB"]).username


ROLES_SQL = ROOT / "deploy" / "compose" / "initdb" / "roles.psql"


def test_each_service_logs_in_as_its_own_role_and_none_as_the_superuser(compose):
    services = compose["services"]
    made = set(re.findall(r"^CREATE ROLE (\w+) LOGIN", ROLES_SQL.read_text(), re.M))
    superuser = services["postgres"]["environment"]["POSTGRES_USER"]
    assert superuser not in made
    assert _login(services["scanwatch-code"]) == "scanwatch_writer"
    assert _login(services["exporter"]) == "scanwatch_reader"
    dagster = {services[n]["environment"]["DAGSTER_PG_USER"] for n in ("scanwatch-code", "dagster-webserver",
                                                                        "dagster-daemon")}
    assert dagster == {"dagster"}
    assert {"scanwatch_writer", "scanwatch_reader", "dagster", "scanwatch_grafana"} <= made
    # Each password variable reaches only the services that log in with it (and the initdb step).
    passwords = {"scanwatch-code": "SCANWATCH_WRITER_PASSWORD", "exporter": "SCANWATCH_READER_PASSWORD"}
    for name, var in passwords.items():
        assert services[name]["environment"]["PGPASSWORD"].startswith("${" + var + ":?"), name
    for name, service in services.items():
        text = yaml.safe_dump(service.get("environment", {}))
        assert "POSTGRES_PASSWORD" not in text or name == "postgres", name
    grafana = yaml.safe_load((COMPOSE.parent / "compose/grafana/datasources.yml").read_text())["datasources"]
    (history,) = [d for d in grafana if d["type"] == "grafana-postgresql-datasource"]
    assert history["user"] == "scanwatch_grafana" and history["jsonData"]["database"] == "scanwatch"


# ---- Grafana: the three dashboards and both data sources ----

def test_grafana_gets_the_repositorys_dashboards_provisioning_and_the_same_data_sources(compose):
    mounts = _mounts(compose["services"]["grafana"])
    provider = yaml.safe_load(mounts["/etc/grafana/provisioning/dashboards/scanwatch.yml"].read_text())
    dashboards = mounts[provider["providers"][0]["options"]["path"]]
    assert dashboards == (ROOT / "grafana" / "dashboards").resolve()
    assert len(list(dashboards.glob("*.json"))) == 3
    assert mounts["/etc/grafana/provisioning/alerting/scanwatch-alerts.yml"] == \
        (ROOT / "grafana/provisioning/alerting/scanwatch-alerts.yml").resolve()
    compose_sources = yaml.safe_load(mounts["/etc/grafana/provisioning/datasources/scanwatch.yml"].read_text())
    repo_sources = [d for p in sorted((ROOT / "grafana/provisioning/datasources").glob("*.yml"))
                    for d in yaml.safe_load(p.read_text())["datasources"]]
    same = ("name", "uid", "type")
    assert sorted(tuple(d[k] for k in same) for d in compose_sources["datasources"]) == \
        sorted(tuple(d[k] for k in same) for d in repo_sources)
    by_uid = {d["uid"]: d for d in compose_sources["datasources"]}
    assert by_uid["scanwatch-prometheus"]["url"] == "http://prometheus:9090"
    assert by_uid["scanwatch-history"]["url"].split(":")[0] == "postgres"
    # Every data source a dashboard or the alert rule names by uid is provisioned.
    text = "".join(p.read_text() for p in dashboards.glob("*.json"))
    text += mounts["/etc/grafana/provisioning/alerting/scanwatch-alerts.yml"].read_text()
    named = set(re.findall(r'"uid": "(scanwatch-[a-z]+)"', text)) | set(re.findall(r"datasourceUid: (\S+)", text))
    assert named - {"scanwatch-overview", "scanwatch-project", "scanwatch-history", "__expr__"} <= set(by_uid)
    assert "scanwatch-history" in by_uid
    grafana_env = compose["services"]["grafana"]["environment"]
    assert by_uid["scanwatch-history"]["secureJsonData"]["password"].lstrip("$").strip("{}") in grafana_env


# ---- the code location's address and its stop ----

def test_the_workspace_file_reads_the_code_locations_address_that_the_server_listens_on(compose):
    services = compose["services"]
    grpc = yaml.safe_load((COMPOSE.parent / "dagster/workspace.yaml").read_text())["load_from"][0]["grpc_server"]
    assert grpc["host"] == {"env": "SCANWATCH_CODE_HOST"} and grpc["port"] == {"env": "SCANWATCH_CODE_PORT"}
    for name in ("dagster-webserver", "dagster-daemon"):
        env = services[name]["environment"]
        assert env["SCANWATCH_CODE_HOST"] in services  # the code location's service name
        assert env["SCANWATCH_CODE_HOST"] == "scanwatch-code"
        assert env["SCANWATCH_CODE_PORT"] == services["scanwatch-code"]["environment"]["DAGSTER_GRPC_PORT"]
    assert "-p" not in services["scanwatch-code"]["command"]  # the port is DAGSTER_GRPC_PORT, said once


def _seconds(duration: str) -> float:
    value, unit = re.fullmatch(r"(\d+)(s|m)", duration).groups()
    return int(value) * (60 if unit == "m" else 1)


def test_the_code_location_stops_on_sigterm_within_its_grace_period_under_dockers_init(compose, tmp_path):
    """What `docker compose stop` does to the code location, without an engine: Docker's init (tini, Debian's
    build of the same program) as PID 1 of a new PID namespace, the service's command and environment under
    it, SIGTERM to PID 1. The server must be gone well within stop_grace_period, not SIGKILLed at its end."""
    import signal

    code = compose["services"]["scanwatch-code"]
    assert code["init"] is True and code.get("stop_signal", "SIGTERM") == "SIGTERM"
    assert code["environment"]["TINI_KILL_PROCESS_GROUP"] == "1"
    grace = _seconds(code["stop_grace_period"])
    assert grace >= 30
    from tests.deploy.conftest import BIN

    port = str(_free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCANWATCH_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(tmp_path), SCANWATCH_BASE_URL="http://127.0.0.1:9/v1", SCANWATCH_API_KEY="rst_x",
               SCANWATCH_DB=str(tmp_path / "h.duckdb"), DAGSTER_GRPC_PORT=port, TINI_KILL_PROCESS_GROUP="1")
    command = [str(BIN / code["command"][0]), *code["command"][1:]]
    command[command.index("0.0.0.0")] = "127.0.0.1"
    proc = subprocess.Popen([_tool("unshare"), "--pid", "--fork", "--kill-child", _tool("tini"), "--", *command],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not _listening(int(port)):  # the server binds its port once the definitions have loaded
            assert proc.poll() is None and time.monotonic() < deadline, "the code server never listened"
            time.sleep(0.2)
        (init,) = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        status = Path(f"/proc/{init}/status").read_text()
        assert re.search(r"^NSpid:\s+\d+\s+1$", status, re.M), "tini is not PID 1 of its namespace"
        started = time.monotonic()
        os.kill(int(init), signal.SIGTERM)
        proc.wait(timeout=grace)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert took < grace, f"stopped after {took:.1f} s of a {grace} s grace period"  # about 4 s on a quiet host


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


SPAWNS_A_RUN = """
import multiprocessing, signal, sys, time

def run(log):
    signal.signal(signal.SIGTERM, lambda *_: (open(log, "w").write("interrupted"), sys.exit(0)))
    time.sleep(120)

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=run, args=(sys.argv[1],))
    child.start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    child.join()
"""


def test_a_run_the_code_location_started_gets_the_stop_signal_too(compose, tmp_path):
    """Dagster's code server starts each run as a child process (multiprocessing, spawn) in its own process
    group. Under the service's init settings, SIGTERM to PID 1 reaches that child as well, so a run under way
    is interrupted rather than left to SIGKILL at the end of the grace period."""
    import signal

    code = compose["services"]["scanwatch-code"]
    script, log = tmp_path / "server.py", tmp_path / "run.log"
    script.write_text(SPAWNS_A_RUN)
    env = {**os.environ, **{k: v for k, v in code["environment"].items() if k.startswith("TINI_")}}
    proc = subprocess.Popen([_tool("unshare"), "--pid", "--fork", "--kill-child", _tool("tini"), "--",
                             sys.executable, str(script), str(log)], env=env)
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        deadline = time.monotonic() + 30
        while not children.read_text().split():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        (init,) = children.read_text().split()
        time.sleep(3)  # the spawned child is up and has its handler
        os.kill(int(init), signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert log.read_text() == "interrupted"
