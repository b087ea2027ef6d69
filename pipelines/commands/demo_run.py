"""The steps of `scanwatch demo`, in the order a newcomer's first minute needs them.

Everything the demo starts runs as a child process in its own session with its output in
`<data dir>/logs/`, so the terminal shows only the demo's own lines and one Ctrl-C stops it all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from pipelines.core.credentials import mask_key
from pipelines.core.package_files import (
    DemoDirs,
    DemoSetupError,
    instance_initialised,
    prepare,
    write_prometheus_config,
)
from pipelines.core.processes import Child, ChildFailed, Children, http_status, port_in_use, wait_until

DEMO_REFRESH_CRON = "*/2 * * * *"
DEMO_SCANS_EVERY_MINUTES = 5
# The scans schedule settles a finished scan as well as the scan-finished sensor does, and then the sensor has no
# scan to see finish: its first run comes this many minutes after the demo starts, not at whatever multiple of
# five comes first, so the scan the demo requests is seen by the sensor, as the banner promises.
DEMO_SCANS_FIRST_AFTER_MINUTES = 3
# Scans last a minute: the scan the demo requests at start is still queued when the first sync reads it, so
# the scan-finished sensor has something to see finish once Dagster is up.
DEMO_SCAN_SECONDS = 60
# The ingestion group's page in the code location `scanwatch` (repository `__repository__` of a Definitions).
DAGSTER_GROUP_PAGE = "locations/__repository__@scanwatch/asset-groups/service"
_BASE_URL = re.compile(r"https?://[^\s'\"<>]+/v1\b")
_API_KEY = re.compile(r"\b(?:rst|rat)_[0-9A-Za-z]{8,}")
# The demo follows two of the simulator's workspaces: (name in the workspaces file, variable of its key).
DEMO_WORKSPACES = (("acme", "SCANWATCH_KEY_ACME"), ("globex", "SCANWATCH_KEY_GLOBEX"))


def demo_scans_cron(started: float) -> str:
    """Every DEMO_SCANS_EVERY_MINUTES minutes (UTC), the first of them DEMO_SCANS_FIRST_AFTER_MINUTES to one
    minute more after `started` (Unix seconds)."""
    every = DEMO_SCANS_EVERY_MINUTES
    first = (time.gmtime(started).tm_min + DEMO_SCANS_FIRST_AFTER_MINUTES + 1) % every
    return f"{first}-59/{every} * * * *"


class _Stop(Exception):
    """Ctrl-C, SIGTERM or SIGHUP: unwind to the single place that stops the children."""


def say(message: str = "") -> None:
    # After SIGHUP the terminal is gone; a failed print must not get in the way of stopping the children.
    with contextlib.suppress(OSError):
        print(message, flush=True)


def _stopped_line(children: Children, root: Path) -> str:
    """The demo's last line, after Ctrl-C as after --duration: what it started, and that none of it runs on,
    so the user knows the ports are free and nothing is left in the background."""
    names = ", ".join(dict.fromkeys(c.name for c in children.items)) or "nothing was started"
    left = [c.name for c in children.items if c.alive()]
    if left:
        return f"scanwatch demo: stopped, but {', '.join(left)} did not exit; history kept in {root}"
    return (f"scanwatch demo: everything stopped ({names}); no process of the demo is left; history kept in "
            f"{root} until the next demo starts")


class Demo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.python = sys.executable
        self.prometheus_bin = None if args.no_prometheus else shutil.which("prometheus")
        self.children: Children | None = None
        self._critical = False
        self._pending_stop = False
        self.started = time.monotonic()

    # ------------------------------------------------------------------ signals
    def _on_signal(self, signum: int, _frame: object) -> None:
        # Never unwind between a Popen and its registration: the child would escape the shutdown.
        if self._critical:
            self._pending_stop = True
            return
        raise _Stop(signal.Signals(signum).name)

    def _start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path | None = None) -> Child:
        assert self.children is not None
        self._critical = True
        try:
            return self.children.start(name, argv, env, cwd=cwd)
        finally:
            self._critical = False
            if self._pending_stop:
                raise _Stop("signal")

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        busy = self._busy_port()
        if busy:
            say(f"scanwatch demo: {busy}")
            return 2
        try:
            dirs = prepare(self.args.data_dir)
        except (DemoSetupError, OSError) as exc:
            say(f"scanwatch demo: {exc}")
            return 2
        self.children = Children(dirs.logs)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        code = 0
        try:
            code = self._bring_up_and_wait(dirs)
        except _Stop:
            say("\nscanwatch demo: stopping…")
        except ChildFailed as exc:
            say(f"scanwatch demo: {exc}")
            code = 1
        finally:
            # A second Ctrl-C must not interrupt the shutdown and leave children behind.
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            killed = self.children.stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if killed:
            say(f"scanwatch demo: killed {', '.join(killed)} (did not stop within 15 s)")
        say(_stopped_line(self.children, dirs.root))
        return code

    def _busy_port(self) -> str | None:
        """Fail before starting anything: a half-started demo is worse than none."""
        wanted = [("simulator", "--simulator-port"), ("exporter", "--exporter-port")]
        if not self.args.no_dagster:
            wanted.append(("dagster", "--dagster-port"))
        if self.prometheus_bin:
            wanted.append(("prometheus", "--prometheus-port"))
        seen: dict[int, str] = {}
        for name, flag in wanted:
            port = getattr(self.args, flag[2:].replace("-", "_"))
            if port in seen:
                return f"port {port} is given to both {seen[port]} and {name}; change {flag}"
            seen[port] = name
            if port_in_use(port):
                return f"port {port} ({name}) is already in use; pick another with {flag} {port + 1}"
        return None

    def _env(self, dirs: DemoDirs, base_url: str, keys: list[str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "SCANWATCH_API_KEY"}
        # Two workspaces, as a team following several would configure them: names in a file, keys in variables.
        lines = ["workspaces:"]
        for (name, variable), key in zip(DEMO_WORKSPACES, keys, strict=True):
            lines += [f"  - name: {name}", f"    api_key_env: {variable}"]
            env[variable] = key
        (dirs.root / "workspaces.yml").write_text("\n".join(lines) + "\n")
        env.update({
            "SCANWATCH_BASE_URL": base_url,
            "SCANWATCH_WORKSPACES_FILE": str(dirs.root / "workspaces.yml"),
            "SCANWATCH_DB": str(dirs.db),
            "SCANWATCH_SNAPSHOT": str(dirs.snapshot),
            "DAGSTER_HOME": str(dirs.dagster_home),
            "SCANWATCH_REFRESH_CRON": DEMO_REFRESH_CRON,
            "SCANWATCH_SCANS_CRON": demo_scans_cron(time.time()),
            "PYTHONUNBUFFERED": "1",
            # Names the demo that owns a process, so a leftover can always be traced to its demo.
            "SCANWATCH_DEMO_DIR": str(dirs.root),
            # Children find dagster, uvicorn and scanwatch beside this interpreter even without an activated venv.
            "PATH": os.pathsep.join([str(Path(self.python).parent), env.get("PATH", "")]),
        })
        return env

    def _bring_up_and_wait(self, dirs: DemoDirs) -> int:
        a = self.args
        say(f"scanwatch demo: data in {dirs.root}, logs in {dirs.logs}")
        base_url, keys = self._simulator(dirs)
        env = self._env(dirs, base_url, keys)
        # dg dev takes 10 to 30 s to answer: it boots while the first sync runs, as soon as the sync has
        # created the instance's storage (both creating it at once breaks it).
        dagster: list[Child] = []

        def start_dagster_when_ready(sync_done: bool) -> None:
            if not a.no_dagster and not dagster and (sync_done or instance_initialised(dirs.dagster_home)):
                dagster.append(self._start_dagster(dirs, env))

        self._request_a_scan(base_url, keys[0])
        if not self._first_sync(env, start_dagster_when_ready):
            return 1
        start_dagster_when_ready(True)
        metrics_url = f"http://127.0.0.1:{a.exporter_port}/metrics"
        exporter = self._start("exporter", [self.python, "-m", "pipelines.cli", "exporter", "--port",
                                            str(a.exporter_port), "--listen-address", "127.0.0.1"], env)
        wait_until(lambda: http_status(metrics_url) == 200, exporter, "/metrics", timeout=30)
        say(f"  exporter    {metrics_url}")
        self._backfill_prometheus(dirs, env)
        prometheus_url = self._prometheus(dirs, env)
        dagster_url = None
        if dagster:
            dagster_url = f"http://127.0.0.1:{a.dagster_port}"
            wait_until(lambda: http_status(f"{dagster_url}/server_info") == 200, dagster[0], "/server_info",
                       timeout=120)
            say(f"  dagster     {dagster_url}")
        self._print_guide(dirs, base_url, keys[0], metrics_url, dagster_url, prometheus_url)
        return self._watch()

    def _start_dagster(self, dirs: DemoDirs, env: dict[str, str]) -> Child:
        say("  dagster     starting the UI, daemon and code server in the background…")
        # Run from the data folder so a dagster.yaml in the caller's folder does not draw a warning; the package
        # stays importable from there through PYTHONPATH even when scanwatch runs from an uninstalled checkout.
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(env, PYTHONPATH=os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p))
        # `dg dev` (Dagster's project CLI; `dagster dev` is superseded by it and says so) on the workspace file,
        # which names the code location `scanwatch`.
        return self._start("dagster", [self.python, "-m", "dagster_dg_cli.cli", "dev", "-w", "workspace.yaml",
                                       "-p", str(self.args.dagster_port), "-h", "127.0.0.1"], env, cwd=dirs.root)

    def _simulator(self, dirs: DemoDirs) -> tuple[str, list[str]]:
        a = self.args
        argv = [self.python, "-m", "pipelines.cli", "simulator", "--host", "127.0.0.1", "--port", str(a.simulator_port),
                "--seed", str(a.seed), "--scale", "small", "--clock", "real", "--control",
                "--scan-seconds", f"{DEMO_SCAN_SECONDS:g}", "--workspaces", str(len(DEMO_WORKSPACES))]
        if a.autopilot and a.autopilot > 0:
            argv += ["--autopilot", f"{a.autopilot:g}"]
        # The simulator needs none of the caller's SCANWATCH_* settings, least of all a real workspace's key.
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}
        env.update(PYTHONUNBUFFERED="1", SCANWATCH_DEMO_DIR=str(dirs.root))
        child = self._start("simulator", argv, env)
        found: dict[str, str] = {}
        keys: list[str] = []

        def announced() -> bool:
            # The simulator prints its base URL and a working key per workspace; all are read from its log.
            text = child.log.read_text(errors="replace") if child.log.exists() else ""
            match = _BASE_URL.search(text)
            if match:
                found["url"] = match.group(0)
            keys[:] = [m.group(0) for line in text.splitlines() if line.startswith("API key")
                       for m in [_API_KEY.search(line)] if m]
            return "url" in found and len(keys) >= len(DEMO_WORKSPACES)

        wait_until(announced, child, "base URL and API keys in its output", timeout=60)
        base_url = found["url"].rstrip("/")
        wait_until(lambda: http_status(f"{base_url}/account") is not None, child, "HTTP answer", timeout=30)
        say(f"  simulator   {base_url}  ({len(keys)} workspaces: "
            f"{', '.join(f'{n} key {mask_key(k)}' for (n, _), k in zip(DEMO_WORKSPACES, keys, strict=False))}, "
            f"scale small, seed {a.seed})")
        return base_url, keys[: len(DEMO_WORKSPACES)]

    def _first_sync(self, env: dict[str, str], on_tick: Callable[[bool], None]) -> bool:
        """Through Dagster with DAGSTER_HOME set, so this run is the first one listed in the UI."""
        say("  sync        first sync of the two simulated workspaces…")
        child = self._start("sync", [self.python, "-m", "pipelines.cli", "sync"], env)
        shown = 0
        summary = ""
        last = ""
        traceback = False
        while True:
            done = not child.alive()
            lines = child.log.read_text(errors="replace").splitlines() if child.log.exists() else []
            for line in lines[shown:]:
                # Progress lines are echoed; a traceback is left in the log and only its last line reported.
                traceback = traceback or line.startswith("Traceback")
                if line.startswith("scanwatch sync:"):
                    summary = line
                elif line.strip() and not traceback:
                    say(f"              {line.strip()}")
                last = line.strip() or last
            shown = len(lines)
            if done:
                break
            on_tick(False)
            time.sleep(0.25)
        assert self.children is not None
        self.children.items.remove(child)
        if child.proc.returncode != 0:
            reason = summary or last or f"exited with code {child.proc.returncode}"
            say(f"scanwatch demo: the first sync failed: {reason}")
            say(f"  full output: {child.log}")
            return False
        say(f"  sync        {summary.removeprefix('scanwatch sync: ')}")
        return True

    def _backfill_prometheus(self, dirs: DemoDirs, env: dict[str, str]) -> None:
        """The year the service already holds, as blocks in Prometheus's empty data folder before it starts."""
        if self.args.no_prometheus or not self.prometheus_bin:
            return
        log = dirs.logs / "backfill-prometheus.log"
        with open(log, "w", encoding="utf-8") as out:
            done = subprocess.run([self.python, "-m", "pipelines.cli", "backfill-prometheus", "--data-dir",
                                   str(dirs.prometheus_data), "--instance", f"127.0.0.1:{self.args.exporter_port}"],
                                  env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
        lines = log.read_text(errors="replace").strip().splitlines()
        last = lines[-1].removeprefix("scanwatch backfill-prometheus: ") if lines else f"exit {done.returncode}"
        say(f"  backfill    {last}" if done.returncode == 0 else
            f"  backfill    skipped, Prometheus starts with live data only: {last} (log: {log})")

    def _prometheus(self, dirs: DemoDirs, env: dict[str, str]) -> str | None:
        if self.args.no_prometheus:
            return None
        if not self.prometheus_bin:
            say("  prometheus  not installed: `sudo apt-get install prometheus` (Debian/Ubuntu) to get the "
                "alert rules and queries; continuing without it")
            return None
        rules = write_prometheus_config(dirs, self.args.exporter_port)
        url = f"http://127.0.0.1:{self.args.prometheus_port}"
        child = self._start("prometheus", [
            self.prometheus_bin, f"--config.file={dirs.prometheus_config}",
            f"--storage.tsdb.path={dirs.prometheus_data}",
            # The backfilled year stays (the default 15 days would drop it at once), and one sample a day
            # answers an instant query at any time of that day.
            "--storage.tsdb.retention.time=2y", "--query.lookback-delta=1d",
            f"--web.listen-address=127.0.0.1:{self.args.prometheus_port}",
        ], env)
        wait_until(lambda: http_status(f"{url}/-/ready") == 200, child, "/-/ready", timeout=30)
        say(f"  prometheus  {url}  ({len(rules)} rule files, scraping the exporter every 15 s)")
        return url

    def _print_guide(self, dirs: DemoDirs, base_url: str, api_key: str, metrics_url: str,
                     dagster_url: str | None, prometheus_url: str | None) -> None:
        elapsed = time.monotonic() - self.started
        say()
        say(f"scanwatch demo is up ({elapsed:.0f} s). Where to look:")
        say(f"  simulated service  {base_url}   key {mask_key(api_key)} "
            "(a fake key; the full one is in the simulator log)")
        if dagster_url:
            # A group's own page draws its assets; the global graph starts with each group folded into a box.
            say(f"  Dagster UI         {dagster_url}/{DAGSTER_GROUP_PAGE}   the asset graph: each asset and "
                "its checks")
            say(f"                     {dagster_url}/runs           the first sync, then a refresh every 2 min")
            say(f"                     {dagster_url}/automation     schedules (2 and 5 min) and the scan sensor")
            say("                     the sensor's runs carry the tag scanwatch/trigger=scan_finished")
        say(f"  metrics            {metrics_url}   secscan_project_score, secscan_issues_open, quotas")
        if prometheus_url:
            # The classic UI's paths: Debian's Prometheus 2.42 serves only those (and upstream 2.x serves both).
            expr = urllib.parse.quote("sum by (severity) (secscan_issues_open)")
            say(f"  Prometheus         {prometheus_url}/classic/graph?g0.expr={expr}&g0.tab=0")
            say(f"                     alerts: {prometheus_url}/classic/alerts   "
                f"scrape target: {prometheus_url}/classic/targets")
        say(f"  SQL cookbook       {self.sql_command(dirs)}   (lists the queries; run one by name, "
            f"--workspace {DEMO_WORKSPACES[0][0]} for one workspace)")
        if self.args.autopilot:
            say(f"The simulator starts a round of scans every {self.args.autopilot:g} s, so scores and issues move.")
        duration = self.args.duration
        say("Ctrl-C to stop." if duration is None else f"Stopping in {duration:g} s (Ctrl-C sooner).")

    def _request_a_scan(self, base_url: str, api_key: str) -> None:
        """Start one quick scan of a proved site before the first sync, as a user would from the application:
        the sync records it queued, and Dagster's scan-finished sensor refreshes its project once it is done."""
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"}
        try:
            with httpx.Client(base_url=base_url.rstrip("/") + "/", headers=headers, timeout=10) as http:
                projects = http.get("projects", params={"limit": 100}).raise_for_status().json()["data"]
                site = next(t for p in projects if not p.get("paused") for t in p.get("targets") or []
                            if t.get("kind") == "domain" and t.get("verified"))
                http.post(f"targets/{site['id']}/scans", json={"kind": "quick"},
                          headers={"Idempotency-Key": "scanwatch-demo-first-scan"}).raise_for_status()
        except (httpx.HTTPError, KeyError, StopIteration) as exc:
            say(f"  scan        not requested ({type(exc).__name__}); the sensor will wait for the autopilot's")
            return
        say(f"  scan        requested on {site['address']}: the scan sensor refreshes its project when it is done")

    def sql_command(self, dirs: DemoDirs) -> str:
        """The cookbook command as a user can paste it: this installation's `scanwatch`, not one on the PATH."""
        scanwatch = Path(self.python).with_name("scanwatch")
        program = shlex.quote(str(scanwatch)) if scanwatch.exists() else f"{shlex.quote(self.python)} -m pipelines.cli"
        return f"SCANWATCH_DB={shlex.quote(str(dirs.db))} {program} sql"

    def _watch(self) -> int:
        """Wait for Ctrl-C or the end of --duration; a child that dies takes the demo down with a reason."""
        assert self.children is not None
        deadline = None if self.args.duration is None else time.monotonic() + self.args.duration
        while deadline is None or time.monotonic() < deadline:
            dead = self.children.first_dead()
            if dead is not None:
                say(f"scanwatch demo: {dead.name} exited unexpectedly (code {dead.proc.returncode}); stopping the rest."
                    f" Log: {dead.log}\n{dead.tail()}")
                return 1
            time.sleep(0.5)
        say(f"scanwatch demo: {self.args.duration:g} s are up, stopping…")
        return 0
