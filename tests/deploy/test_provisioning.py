"""`scanwatch config export` and the README's provisioning steps, run as written against a scratch root.

The scratch root stands in for `/` on a stock Debian host: Debian's own `prometheus.yml` and
`alertmanager.yml` (the packages' files, from this machine's packages), a Grafana provisioning folder whose
`alerting/` and the dashboards folder do not exist yet. The README's shell block runs with every `/etc/` and
`/var/lib/` path moved under the scratch root; then the files are checked with the tools that will read them
(promtool, amtool) and against the package's own copies.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pipelines.commands import config_export
from tests.deploy.conftest import BIN, ROOT

README = ROOT / "README.md"
DEBIAN = Path("/etc/prometheus")


def _block(marker: str, lang: str) -> str:
    text = README.read_text()
    at = text.index(f"<!-- {marker}")
    match = re.compile(rf"```{lang}\n(.*?)```", re.DOTALL).search(text, at)
    assert match, f"no ```{lang} block after the {marker} marker in README.md"
    return match.group(1)


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} not found: run `make test-tools`"
    return found


@pytest.fixture
def debian_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for name in ("prometheus.yml", "alertmanager.yml"):
        assert (DEBIAN / name).is_file(), f"Debian's {DEBIAN / name} not found: run `make test-tools`"
        (root / "etc/prometheus").mkdir(parents=True, exist_ok=True)
        shutil.copy2(DEBIAN / name, root / "etc/prometheus" / name)
    for kind in ("datasources", "dashboards"):  # an older Grafana package: no alerting/ folder yet
        (root / "etc/grafana/provisioning" / kind).mkdir(parents=True)
        (root / "etc/grafana/provisioning" / kind / "sample.yaml").write_text("apiVersion: 1\n")
    (root / "var/lib/grafana").mkdir(parents=True)
    return root


def _run_steps(root: Path, workdir: Path, marker: str = "provisioning-steps",
               **env_extra: str) -> subprocess.CompletedProcess:
    script = _block(marker, "sh")
    script = re.sub(r"(?<![\w.$-])/(etc|var/lib)/", lambda m: f'"$ROOT"/{m.group(1)}/', script)
    env = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "ROOT": str(root), "HOME": str(workdir), **env_extra}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=120)


HISTORY_DATASOURCE = "datasources/scanwatch-history.yml"
HISTORY_DASHBOARD = "scanwatch-history.json"


def test_the_readme_steps_work_on_a_stock_debian_host(debian_root, tmp_path):
    stock_prometheus = (debian_root / "etc/prometheus/prometheus.yml").read_bytes()
    stock_alertmanager = (debian_root / "etc/prometheus/alertmanager.yml").read_bytes()
    done = _run_steps(debian_root, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    etc = debian_root / "etc"

    # Prometheus: the distro's file untouched; the rules installed, checked by promtool, equal to the package's.
    assert (etc / "prometheus/prometheus.yml").read_bytes() == stock_prometheus
    installed = sorted((etc / "prometheus/rules").glob("*.yml"))
    assert [p.name for p in installed] == sorted(p.name for p in (ROOT / "prometheus/rules").glob("*.yml"))
    assert all(p.read_bytes() == (ROOT / "prometheus/rules" / p.name).read_bytes() for p in installed)
    subprocess.run([_tool("promtool"), "check", "rules", *map(str, installed)], check=True, capture_output=True)

    # The README's additions to Debian's prometheus.yml give a config promtool accepts, loading those rules.
    config = yaml.safe_load(stock_prometheus)
    additions = yaml.safe_load(_block("prometheus-additions", "yaml"))
    config["rule_files"] = [*(config.get("rule_files") or []),
                            *(str(debian_root) + r for r in additions["rule_files"])]
    config["scrape_configs"] = [*config["scrape_configs"], *additions["scrape_configs"]]
    merged = tmp_path / "prometheus-merged.yml"
    merged.write_text(yaml.safe_dump(config))
    checked = subprocess.run([_tool("promtool"), "check", "config", str(merged)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(installed)} rule files found" in checked.stdout + checked.stderr
    assert {"job_name": "scanwatch", "static_configs": [{"targets": ["localhost:9817"]}]} in config["scrape_configs"]

    # Alertmanager: Debian's example kept as .orig, scanwatch's config in place, its templates beside it.
    assert (etc / "prometheus/alertmanager.yml.orig").read_bytes() == stock_alertmanager
    assert (etc / "prometheus/alertmanager.yml").read_bytes() == (ROOT / "prometheus/alertmanager.yml").read_bytes()
    amtool = subprocess.run([_tool("amtool"), "check-config", str(etc / "prometheus/alertmanager.yml")],
                            capture_output=True, text=True)
    assert amtool.returncode == 0 and "1 templates" in amtool.stdout, amtool.stdout + amtool.stderr

    # Grafana: the distro's samples kept, scanwatch's files beside them, the provider pointing at the dashboards.
    provisioning = etc / "grafana/provisioning"
    assert (provisioning / "datasources/sample.yaml").read_text() == "apiVersion: 1\n"
    for rel in ("datasources/scanwatch.yml", "dashboards/scanwatch.yml", "alerting/scanwatch-alerts.yml"):
        assert (provisioning / rel).read_bytes() == (ROOT / "grafana/provisioning" / rel).read_bytes(), rel
    provider = yaml.safe_load((provisioning / "dashboards/scanwatch.yml").read_text())["providers"][0]
    dashboards = debian_root / provider["options"]["path"].lstrip("/")
    assert sorted(p.name for p in dashboards.glob("*.json")) == sorted(
        p.name for p in (ROOT / "grafana/dashboards").glob("*.json") if p.name != HISTORY_DASHBOARD)
    # A DuckDB host: no PostgreSQL data source for Grafana to fail on, and no dashboard that would need it.
    assert not (provisioning / HISTORY_DATASOURCE).exists()
    datasource = yaml.safe_load((provisioning / "datasources/scanwatch.yml").read_text())["datasources"][0]
    assert datasource["url"] == "http://localhost:9090" and datasource["uid"] == "scanwatch-prometheus"

    # A second run (an upgrade) finds the same exported files and keeps the operator's Alertmanager edits.
    edited = (etc / "prometheus/alertmanager.yml").read_text().replace("YOURS/YOURS/YOURS", "T0/B0/XX")
    (etc / "prometheus/alertmanager.yml").write_text(edited)
    again = _run_steps(debian_root, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{len(config_export.package_files())} unchanged" in again.stdout
    assert (etc / "prometheus/alertmanager.yml.orig").read_bytes() == stock_alertmanager
    assert (etc / "prometheus/alertmanager.yml").read_text() == edited


def test_export_writes_every_file_of_the_package_and_the_data_source_url(tmp_path):
    outcome = config_export.export(tmp_path / "out", prometheus_url="https://prom.example:9443/")
    expected = {Path("prometheus") / p.relative_to(ROOT / "prometheus") for p in (ROOT / "prometheus").rglob("*")
                if p.is_file()}
    expected |= {Path("grafana") / p.relative_to(ROOT / "grafana") for p in (ROOT / "grafana").rglob("*")
                 if p.is_file() and p.suffix not in (".py", ".md") and "__pycache__" not in p.parts}
    assert set(outcome.written) == expected and not outcome.unchanged and not outcome.replaced
    for rel in expected - {config_export.DATASOURCE}:
        assert (tmp_path / "out" / rel).read_bytes() == (ROOT / rel).read_bytes(), rel
    datasource = yaml.safe_load((tmp_path / "out" / config_export.DATASOURCE).read_text())["datasources"][0]
    assert datasource["url"] == "https://prom.example:9443/"
    done = subprocess.run([_tool("promtool"), "test", "rules",
                           *map(str, sorted((tmp_path / "out/prometheus/tests").glob("*.yml")))],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_export_never_replaces_a_differing_file_silently(tmp_path):
    out = tmp_path / "out"
    (out / "prometheus/rules").mkdir(parents=True)
    mine = out / "prometheus/rules/secscan-alerts.yml"
    mine.write_text("groups: []  # edited by the operator\n")
    done = subprocess.run([str(BIN / "scanwatch"), "config", "export", str(out)], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "prometheus/rules/secscan-alerts.yml" in done.stderr
    assert "--overwrite" in done.stderr and "nothing was written" in done.stderr
    assert mine.read_text() == "groups: []  # edited by the operator\n"
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["secscan-alerts.yml"]

    done = subprocess.run([str(BIN / "scanwatch"), "config", "export", str(out), "--overwrite"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "1 replaced" in done.stdout, done.stdout + done.stderr
    assert mine.read_bytes() == (ROOT / "prometheus/rules/secscan-alerts.yml").read_bytes()


def test_a_bad_url_or_a_file_for_a_folder_is_one_line(tmp_path):
    for args in (["--prometheus-url", "localhost:9090"], []):
        target = tmp_path / "afile"
        target.write_text("x")
        done = subprocess.run([str(BIN / "scanwatch"), "config", "export", str(target), *args],
                              capture_output=True, text=True)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("scanwatch config export: ")


def test_the_history_dashboard_and_its_data_source_come_only_with_a_postgresql_history(debian_root, tmp_path):
    done = _run_steps(debian_root, tmp_path, SCANWATCH_DB="postgresql://scanwatch_writer@db.internal:5432/scanwatch")
    assert done.returncode == 0, done.stdout + done.stderr
    provisioning = debian_root / "etc/grafana/provisioning"
    assert (provisioning / HISTORY_DATASOURCE).read_bytes() == (ROOT / "grafana/provisioning" / HISTORY_DATASOURCE
                                                                 ).read_bytes()
    dashboards = debian_root / "var/lib/grafana/dashboards/scanwatch"
    assert sorted(p.name for p in dashboards.glob("*.json")) == sorted(
        p.name for p in (ROOT / "grafana/dashboards").glob("*.json"))


def test_the_reload_steps_check_the_files_and_reload_the_services_that_read_them(debian_root, tmp_path):
    assert _run_steps(debian_root, tmp_path).returncode == 0
    config = yaml.safe_load((debian_root / "etc/prometheus/prometheus.yml").read_text())
    additions = yaml.safe_load(_block("prometheus-additions", "yaml"))
    config["rule_files"] = [*(config.get("rule_files") or []), *(str(debian_root) + r for r in additions["rule_files"])]
    config["scrape_configs"] = [*config["scrape_configs"], *additions["scrape_configs"]]
    (debian_root / "etc/prometheus/prometheus.yml").write_text(yaml.safe_dump(config))
    # systemctl itself cannot run here (no systemd as PID 1): a stand-in on PATH records what it was asked.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "systemctl").write_text('#!/bin/sh\necho "$*" >> "$ROOT/systemctl.log"\n')
    (fake / "systemctl").chmod(0o755)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", re.sub(
        r"(?<![\w.$-])/(etc|var/lib)/", lambda m: f'"$ROOT"/{m.group(1)}/', _block("reload-steps", "sh"))],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": f"{fake}:{BIN}:/usr/local/bin:/usr/bin:/bin", "ROOT": str(debian_root)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (debian_root / "systemctl.log").read_text().splitlines() == [
        "reload prometheus prometheus-alertmanager", "restart grafana-server"]
    # Debian's own units for Prometheus and Alertmanager do reload (SIGHUP), so `reload` is not refused.
    for unit in ("prometheus", "prometheus-alertmanager"):
        text = Path(f"/lib/systemd/system/{unit}.service").read_text()
        assert re.search(r"^ExecReload=.*-HUP", text, re.M), unit
