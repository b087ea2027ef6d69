"""`scanwatch backfill-prometheus`: the reconstructed past as Prometheus TSDB blocks.

Raw series go through `promtool tsdb create-blocks-from openmetrics`. The recording rules' past is
computed by a throw-away Prometheus serving only those new blocks, asked for each rule's expression at the
very instants of the raw samples, and written as blocks the same way. `promtool tsdb create-blocks-from
rules` is not used: it evaluates at the rule group's hashed offset within each interval, which misses
samples that are a day apart by far more than the 5-minute lookback, and on 2.42 it stops after its first
2-hour block once the interval is longer than that (see docs/backfill.md).

Nothing is written at or after the workspace's first sync (or `--end`): the exporter serves nothing before
it, so the blocks hold no sample of a series Prometheus scraped live. Blocks of other series over the same
time are fine: Prometheus (2.39 and later) queries and compacts overlapping blocks.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipelines import milestones
from pipelines.backfill import reconstruct as rc
from pipelines.backfill.openmetrics import (
    Spool,
    recording_rules,
    rule_pasts,
    sample_line,
    series_parameters,
    spool_rows,
)
from pipelines.sqlfiles import read_sql
from pipelines.vocabulary import history_days_params

# promtool cuts blocks at this size (a hidden flag of 2.42): a year of days is a few blocks, not 365.
MAX_BLOCK_DURATION = "1458h"


class BackfillError(RuntimeError):
    """Something the user can fix (a missing tool, a busy directory); the message is the whole output."""


@dataclass
class Plan:
    data_dir: Path
    step: timedelta = timedelta(days=1)
    end: datetime | None = None  # default: each workspace's first sync
    labels: dict[str, str] = field(default_factory=dict)  # the scrape's own labels: job, instance
    rule_files: list[Path] = field(default_factory=list)
    promtool: str = "promtool"
    prometheus: str = "prometheus"


@dataclass
class Outcome:
    samples: int = 0
    rule_samples: int = 0
    start: datetime | None = None
    end: datetime | None = None
    blocks: list[str] = field(default_factory=list)
    workspaces: int = 0


def find_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BackfillError(f"{name} not found on PATH: install Prometheus's tools "
                            "('sudo apt-get install prometheus' on Debian/Ubuntu) or pass --promtool/--prometheus")
    return path


def check_data_dir(path: Path) -> None:
    """Blocks go only into an empty (or new) directory or Prometheus's own data directory: never through a
    symbolic link, into a file's place, or among someone else's files (`--data-dir /etc`)."""
    if path.is_symlink():
        raise BackfillError(f"--data-dir {path} is a symbolic link: give the Prometheus data directory itself")
    if path.exists() and not path.is_dir():
        raise BackfillError(f"--data-dir {path} is not a directory: give Prometheus's --storage.tsdb.path")
    if not path.exists():
        return
    entries = list(path.iterdir())
    ours = (path / "wal").is_dir() or any((e / "meta.json").is_file() for e in entries if e.is_dir())
    if entries and not ours:
        raise BackfillError(f"--data-dir {path} is not empty and not a Prometheus data directory (no wal/ nor "
                            "blocks): give Prometheus's --storage.tsdb.path, or a new empty directory")


def _floor(moment: datetime, step: timedelta) -> datetime:
    seconds = int(step.total_seconds())
    return datetime.fromtimestamp(math.floor(moment.timestamp() / seconds) * seconds, tz=UTC)


def write_series(conn: Any, plan: Plan, path: Path) -> Outcome:
    """Every observed workspace's past, as one OpenMetrics file; holds one chunk of steps at a time."""
    outcome = Outcome()
    steps_per_chunk = max(168, math.ceil(timedelta(days=1) / plan.step))
    spool = Spool(path.parent)
    series_sql = read_sql("backfill/prometheus_series.sql")
    pasts = rule_pasts()
    try:
        for workspace_id, _ in rc.workspaces(conn):
            rc.prepare(conn, workspace_id)
            first_data, first_observed_at = conn.execute(
                read_sql("backfill/prometheus_bounds.sql"),
                {"workspace_id": workspace_id, **history_days_params()}).fetchall()[0]
            if first_data is None or first_observed_at is None:
                continue
            stop = min(plan.end, first_observed_at) if plan.end else first_observed_at
            start = _floor(first_data, plan.step) + plan.step
            outcome.workspaces += 1
            chunk = start
            while chunk < stop:
                chunk_end = min(stop, chunk + steps_per_chunk * plan.step)
                rc.set_instants(conn, chunk, chunk_end, plan.step)
                cursor = conn.execute(series_sql, series_parameters(workspace_id, pasts))
                columns = [d[0] for d in cursor.description]
                before = spool.samples
                spool_rows(spool, columns, cursor.fetchall(), plan.labels, pasts)
                if spool.samples > before:
                    outcome.start = min(filter(None, (outcome.start, chunk)))
                    outcome.end = max(filter(None, (outcome.end, chunk_end)))
                chunk = chunk_end
        rc.drop_temp(conn)
        outcome.samples = spool.samples
        spool.finish(path)
    finally:
        spool.close()
    return outcome


def create_blocks(promtool: str, openmetrics: Path, out_dir: Path) -> None:
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                           f"--max-block-duration={MAX_BLOCK_DURATION}", str(openmetrics), str(out_dir)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()
        raise BackfillError(f"promtool could not create blocks from {openmetrics.name}: "
                            f"{last[-1] if last else 'exit ' + str(done.returncode)}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def scratch_prometheus(binary: str, data_dir: Path, work: Path) -> Iterator[str]:
    """A Prometheus that serves `data_dir` (the new blocks only) and scrapes nothing; stopped on exit."""
    from pipelines.commands.processes import stop_process

    config = work / "prometheus.yml"
    config.write_text("global: {}\n", encoding="utf-8")
    port = _free_port()
    log = open(work / "prometheus.log", "w", encoding="utf-8")  # noqa: SIM115
    # A signal between the start and the `try` would leave a Prometheus with a 100-year retention running:
    # held until the `finally` that stops it is in place. (Prometheus, a Go program, installs its own
    # SIGTERM handler whatever mask it inherits: stop_process still stops it at once.)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
                                 "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        log.close()
        raise
    url = f"http://127.0.0.1:{port}"
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BackfillError(f"a scratch Prometheus over the new blocks did not start; log: {log.name}")
            time.sleep(0.2)
        milestones.reached("backfill.scratch_ready")
        yield url
    finally:
        stop_process(proc)
        log.close()


def query_range(url: str, expr: str, start: float, end: float, step: float) -> list[dict]:
    query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{query}", timeout=300) as resp:
        body = json.load(resp)
    if body.get("status") != "success":
        raise BackfillError(f"rule expression {expr!r} failed: {body.get('error')}")
    return body["data"]["result"]


def write_rules(url: str, plan: Plan, outcome: Outcome, path: Path) -> int:
    """Each recording rule's value at every raw sample instant, as OpenMetrics (chunks of 10,000 steps)."""
    assert outcome.start is not None and outcome.end is not None
    step = plan.step.total_seconds()
    first, last = outcome.start.timestamp(), outcome.end.timestamp() - 0.001
    spool = Spool(path.parent)
    try:
        for record, expr, extra in recording_rules(plan.rule_files):
            begin = first
            while begin <= last:
                stop = min(last, begin + 10_000 * step - step)
                lines = []
                for series in query_range(url, expr, begin, stop, step):
                    labels = {k: v for k, v in series["metric"].items() if k != "__name__"} | extra
                    lines += [sample_line(record, labels, float(ts), float(value)) for ts, value in series["values"]]
                spool.write(record, "gauge", lines)
                begin = stop + step
        samples = spool.samples
        spool.finish(path)
    finally:
        spool.close()
    return samples


def _move_blocks(source: Path, data_dir: Path) -> list[str]:
    """Move each new block into the data directory (a rename per block, so Prometheus sees whole blocks)."""
    moved = []
    data_dir.mkdir(parents=True, exist_ok=True)
    for block in sorted(source.iterdir()):
        if (block / "meta.json").is_file():
            os.replace(block, data_dir / block.name)
            moved.append(block.name)
    return moved


def backfill(conn: Any, plan: Plan) -> Outcome:
    """Write the past as blocks into `plan.data_dir`; returns what was written."""
    promtool = find_tool(plan.promtool)
    prometheus = find_tool(plan.prometheus) if plan.rule_files else None
    plan.data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".scanwatch-backfill-", dir=plan.data_dir.parent) as tmp:
        work = Path(tmp)
        raw_blocks, rule_blocks = work / "raw", work / "rules"
        raw_blocks.mkdir()
        rule_blocks.mkdir()
        outcome = write_series(conn, plan, work / "series.om")
        if outcome.samples == 0:
            return outcome
        create_blocks(promtool, work / "series.om", raw_blocks)
        (work / "series.om").unlink()
        if prometheus is not None:
            scratch = work / "scratch"
            shutil.copytree(raw_blocks, scratch)
            with scratch_prometheus(prometheus, scratch, work) as url:
                outcome.rule_samples = write_rules(url, plan, outcome, work / "rules.om")
            if outcome.rule_samples:
                create_blocks(promtool, work / "rules.om", rule_blocks)
        outcome.blocks = _move_blocks(raw_blocks, plan.data_dir) + _move_blocks(rule_blocks, plan.data_dir)
    return outcome
