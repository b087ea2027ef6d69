"""Pieces of the end-to-end stack: processes with logs, a webhook receiver, Prometheus and Alertmanager configs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from pipelines.core.processes import stop_process
from tests.reliability import forked

ROOT = Path(__file__).resolve().parents[2]


def poll(what: str, check: Callable[[], Any], timeout: float = 30.0, every: float = 0.2) -> Any:
    """Call `check` until it returns something truthy; fail naming `what` (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # a server still starting
            last_error = exc
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last error: {last_error})")


def get_json(url: str, params: dict | None = None, timeout: float = 5.0) -> Any:
    if params:
        url = f"{url}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return resp.status == 200


class Process:
    """A child process whose output goes to a log file the failure message can quote."""

    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._fh = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self._fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        stop_process(self.proc)
        self._fh.close()


class WebhookReceiver:
    """The Alertmanager webhook receiver: stores every notification body it is sent."""

    def __init__(self) -> None:
        self.notifications: list[dict] = []
        self.posts: list[tuple[str, dict]] = []  # (path, body) of every POST, Slack's included
        received, posts = self.notifications, self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                posts.append((self.path, body))
                if "alerts" in body:
                    received.append(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, name: str, status: str = "firing") -> list[dict]:
        return [a for n in list(self.notifications) for a in n.get("alerts", [])
                if a["labels"].get("alertname") == name and a["status"] == status]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def write_alertmanager_config(path: Path, webhook_url: str) -> None:
    path.write_text(yaml.safe_dump({
        "route": {"receiver": "test", "group_by": ["alertname", "project_id"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "test", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}],
    }))


def write_shipped_alertmanager_config(path: Path, webhook_base: str, source: Path | None = None) -> None:
    """`prometheus/alertmanager.yml` as shipped (or `source`, an exported one: routes, grouping, inhibition,
    templates), with every receiver
    pointed at the test's webhook (webhook URLs at /<receiver>, Slack at /slack/<receiver>), e-mail left out
    (no SMTP server here; its template is rendered by amtool instead) and the route timers cut to seconds."""
    source = source or ROOT / "prometheus" / "alertmanager.yml"
    config = yaml.safe_load(source.read_text())
    config["global"]["slack_api_url"] = f"{webhook_base}/slack/default"
    config["templates"] = [str(source.parent / t) for t in config["templates"]]

    def shorten(route: dict) -> None:
        for key in ("group_wait", "group_interval"):
            if key in route:
                route[key] = "1s"
        for child in route.get("routes", []):
            shorten(child)

    config["route"].update(group_wait="1s", group_interval="1s")
    shorten(config["route"])
    for receiver in config["receivers"]:
        name = receiver["name"]
        receiver.pop("email_configs", None)
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = f"{webhook_base}/{name}"
        for slack in receiver.get("slack_configs", []):
            slack["api_url"] = f"{webhook_base}/slack/{name}"
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def write_prometheus_config(path: Path, exporter: str, alertmanager: str, keep_firing_for: str | None = None) -> None:
    """The shipped rule files with 1 s scrape and evaluation intervals to keep the test short; with
    `keep_firing_for`, a copy of the rules where that hold is cut too (the shipped one is minutes)."""
    rules = sorted(str(p) for p in (ROOT / "prometheus" / "rules").glob("*.yml"))
    if keep_firing_for is not None:
        copies = []
        for rule_file in map(Path, rules):
            doc = yaml.safe_load(rule_file.read_text())
            for group in doc["groups"]:
                for rule in group["rules"]:
                    if "keep_firing_for" in rule:
                        rule["keep_firing_for"] = keep_firing_for
            copy = path.parent / f"rules-{rule_file.name}"
            copy.write_text(yaml.safe_dump(doc, sort_keys=False))
            copies.append(str(copy))
        rules = copies
    path.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": rules,
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": [{"job_name": "scanwatch", "static_configs": [{"targets": [exporter]}]}],
    }))


class LiveStack:
    """A synced history served by `scanwatch exporter`, scraped by Prometheus with the shipped rules, which
    sends to Alertmanager, which posts to this test's webhook. Built once per module by `running_stack`."""

    def __init__(self, tmp: Path, sim: Any, webhook: WebhookReceiver) -> None:
        self.tmp, self.sim, self.webhook = tmp, sim, webhook
        self.env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
        self.env.update({"SCANWATCH_BASE_URL": sim.base_url, "SCANWATCH_API_KEY": sim.api_key,
                         "SCANWATCH_DB": str(tmp / "history.duckdb"), "SCANWATCH_SNAPSHOT": str(tmp / "metrics.json")})
        self.processes: list[Process] = []
        self.prom_url = self.exporter_url = ""

    def sync(self) -> None:
        result = forked.run(["sync", "--quiet"], self.env, timeout=180, cwd=ROOT)
        assert result.returncode == 0, result.stdout + result.stderr

    def snapshot(self) -> dict:
        """Every workspace's part as one document."""
        from pipelines.snapshot.format import read_snapshot

        return read_snapshot(Path(self.env["SCANWATCH_SNAPSHOT"]))

    def start(self, name: str, args: list[str], env: dict | None = None) -> Process:
        proc = Process(name, args, self.tmp, env)
        self.processes.append(proc)
        return proc

    def query(self, expr: str) -> list[dict]:
        body = get_json(f"{self.prom_url}/api/v1/query", {"query": expr})
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def query_range(self, expr: str, seconds: int = 60) -> list[dict]:
        end = time.time()
        body = get_json(f"{self.prom_url}/api/v1/query_range",
                        {"query": expr, "start": end - seconds, "end": end, "step": 5})
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def diagnostics(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.tail()}" for p in self.processes)


@contextmanager
def running_stack(stack: LiveStack, *, shipped_routes: bool, exporter_args: tuple[str, ...] = (),
                  keep_firing_for: str | None = None,
                  alertmanager_config: Callable[[Path], None] | None = None) -> Iterator[LiveStack]:
    """Sync once, then start the exporter, Alertmanager (the shipped routes and templates, one route to the
    webhook, or the file `alertmanager_config` writes at the path it is given) and Prometheus; yield once
    Prometheus scrapes the exporter; stop everything whatever happens."""
    from tests.prometheus.tools import ALERTMANAGER_NAMES, free_port, require

    prometheus, alertmanager = require("prometheus"), require(*ALERTMANAGER_NAMES)
    tmp = stack.tmp
    try:
        stack.sync()
        exp_port, am_port, prom_port = free_port(), free_port(), free_port()
        stack.start("exporter", [sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                                 "--port", str(exp_port), *exporter_args], stack.env)
        if alertmanager_config is not None:
            alertmanager_config(tmp / "alertmanager.yml")
        elif shipped_routes:
            write_shipped_alertmanager_config(tmp / "alertmanager.yml", stack.webhook.url.rsplit("/", 1)[0])
        else:
            write_alertmanager_config(tmp / "alertmanager.yml", stack.webhook.url)
        stack.start("alertmanager", [alertmanager, f"--config.file={tmp / 'alertmanager.yml'}",
                                     f"--storage.path={tmp / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
                                     "--cluster.listen-address=", "--data.retention=192h"])
        write_prometheus_config(tmp / "prometheus.yml", f"127.0.0.1:{exp_port}", f"127.0.0.1:{am_port}",
                                keep_firing_for=keep_firing_for)
        stack.start("prometheus", [prometheus, f"--config.file={tmp / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={tmp / 'prom'}",
                                   f"--web.listen-address=127.0.0.1:{prom_port}"])
        stack.prom_url = f"http://127.0.0.1:{prom_port}"
        stack.exporter_url = f"http://127.0.0.1:{exp_port}/metrics"
        poll("the exporter", lambda: http_ok(stack.exporter_url))
        poll("Alertmanager ready", lambda: http_ok(f"http://127.0.0.1:{am_port}/-/ready"))
        poll("Prometheus scraping the exporter", lambda: stack.query('up{job="scanwatch"} == 1'), timeout=60)
        yield stack
    except BaseException:
        print(stack.diagnostics())
        raise
    finally:
        for proc in reversed(stack.processes):
            proc.stop()
        stack.webhook.stop()
