"""`scanwatch backfill-prometheus`: the reconstructed past, streamed into one of the stores a platform runs.

The series come from the history a chunk of steps at a time (`past_chunks`) and go to an output (`Sink`): a
folder of blocks (here), remote write or the VictoriaMetrics import API (`remote.py`). Before any sample
leaves, the output is told the oldest and newest instant it will receive and refuses when it can tell the
store would drop them.

Blocks: `promtool tsdb create-blocks-from openmetrics --max-block-duration=24h` over documents of every
other day, so every block lies within one UTC day (promtool cuts at multiples of its 18 h range, which do not
fall on midnights; days two apart never share one), and the raw series and the recording rules of a day share
its blocks: no two new blocks overlap, and a day that a block already in the folder covers is left out, so a
second run adds nothing. Mimir's block upload asks the same (within its 24 h compaction range, no external
labels, nothing in the future).

The recording rules' past is computed by a Prometheus serving the raw samples (a throw-away one over
scratch blocks here; the receiver itself for remote write), asked for each rule's expression at the very
instants of the raw samples. `promtool tsdb create-blocks-from rules` is not used: it evaluates at the rule
group's hashed offset within each interval, which misses samples that are a day apart by far more than the
5-minute lookback, and on 2.42 it stops after its first 2-hour block once the interval is longer than that
(see docs/backfill.md).

Nothing is written at or after the workspace's first sync (or `--end`, or now): the exporter serves nothing
before it, so no sample belongs to a series the store scraped live.
"""

from __future__ import annotations

import contextlib
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pipelines.backfill import reconstruct as rc
from pipelines.backfill.openmetrics import (
    HELP,
    Sample,
    Spool,
    escape,
    om_line,
    recording_rules,
    row_samples,
    rule_pasts,
    rule_sample,
    series_parameters,
    spool_samples,
)
from pipelines.core import milestones
from pipelines.core.sqlfiles import read_sql
from pipelines.core.vocabulary import history_days_params

if TYPE_CHECKING:
    from pipelines.storage.destinations import Connection

# The longest block a production store takes: Mimir's largest compaction range, Prometheus's own
# recommendation for backfilled blocks. promtool rounds it down to its 18 h range.
MAX_BLOCK_DURATION = "24h"
# Blocks the throw-away Prometheus reads to answer the rules: never moved anywhere, so as long as promtool goes.
SCRATCH_BLOCK_DURATION = "1458h"
DAY_MS = 86_400_000
# Days per promtool document (every other one of them): see BlocksSink.finish.
GROUP_DAYS = 28
# promtool runs at once: most of a run is spent writing and syncing small block files, not computing.
PROMTOOL_JOBS = 4


class BackfillError(RuntimeError):
    """Something the user can fix (a missing tool, a busy directory); the message is the whole output."""


@dataclass
class Plan:
    data_dir: Path | None  # the blocks output's folder; None for the other outputs
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
    series: set[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=set)  # (name, labels)
    skipped_days: int = 0  # days a block already in the folder covers

    def note(self, chunk: datetime, chunk_end: datetime, samples: list[Sample]) -> None:
        if samples:
            self.start = min(filter(None, (self.start, chunk)))
            self.end = max(filter(None, (self.end, chunk_end)))
            self.series.update((s.name, s.labels) for s in samples)


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


@dataclass(frozen=True)
class Span:
    """One workspace's past: samples at start, start + step, ... before stop."""

    workspace_id: str
    start: datetime
    stop: datetime


def past_spans(conn: Connection, plan: Plan, now: datetime | None = None) -> list[Span]:
    """Every observed workspace's past, before any sample is written (the outputs check their receiver against
    the oldest). Never at or after the first sync, `--end`, or now."""
    now = now or datetime.now(UTC)
    spans = []
    for workspace_id, _ in rc.workspaces(conn):
        rc.prepare(conn, workspace_id)
        first_data, first_observed_at = conn.execute(
            read_sql("backfill/prometheus_bounds.sql"),
            {"workspace_id": workspace_id, **history_days_params()}).fetchall()[0]
        if first_data is None or first_observed_at is None:
            continue
        stop = min(filter(None, (plan.end, first_observed_at, now)))
        start = _floor(first_data, plan.step) + plan.step
        if start < stop:
            spans.append(Span(workspace_id, start, stop))
    return spans


def past_chunks(conn: Connection, plan: Plan, spans: list[Span]) -> Iterator[tuple[datetime, datetime, list[Sample]]]:
    """(chunk start, chunk end, samples) workspace by workspace, one chunk of steps at a time: each series's
    samples come in time order (the query sorts them), and memory holds one chunk, whatever the history's
    length."""
    steps_per_chunk = max(168, math.ceil(timedelta(days=1) / plan.step))
    series_sql = read_sql("backfill/prometheus_series.sql")
    pasts = rule_pasts()
    try:
        for span in spans:
            rc.prepare(conn, span.workspace_id)
            chunk = span.start
            while chunk < span.stop:
                chunk_end = min(span.stop, chunk + steps_per_chunk * plan.step)
                rc.set_instants(conn, chunk, chunk_end, plan.step)
                cursor = conn.execute(series_sql, series_parameters(span.workspace_id, pasts))
                columns = [d[0] for d in cursor.description]
                yield chunk, chunk_end, row_samples(columns, cursor.fetchall(), plan.labels, pasts)
                chunk = chunk_end
    finally:
        rc.drop_temp(conn)


def write_series(conn: Connection, plan: Plan, path: Path) -> Outcome:
    """Every observed workspace's past, as one OpenMetrics file; holds one chunk of steps at a time."""
    outcome = Outcome()
    spool = Spool(path.parent)
    try:
        spans = past_spans(conn, plan)
        outcome.workspaces = len(spans)
        for chunk, chunk_end, samples in past_chunks(conn, plan, spans):
            spool_samples(spool, samples)
            outcome.note(chunk, chunk_end, samples)
        outcome.samples = spool.samples
        spool.finish(path)
    finally:
        spool.close()
    return outcome


def create_blocks(promtool: str, openmetrics: Path, out_dir: Path, max_duration: str = MAX_BLOCK_DURATION) -> None:
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                           f"--max-block-duration={max_duration}", str(openmetrics), str(out_dir)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()
        raise BackfillError(f"promtool could not create blocks from {openmetrics.name}: "
                            f"{last[-1] if last else 'exit ' + str(done.returncode)}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def scratch_prometheus(binary: str, data_dir: Path, work: Path) -> Iterator[str]:
    """A Prometheus that serves `data_dir` (the new blocks only) and scrapes nothing; stopped on exit."""
    from pipelines.core.processes import stop_process

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


def query_range(url: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    """A Prometheus API's range query; a user and password in `url` go in a header, never in a message."""
    import base64

    parts = urllib.parse.urlsplit(url)
    headers = {}
    if parts.username is not None:
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        parts = parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else ""))
    query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    request = urllib.request.Request(f"{parts.geturl()}/api/v1/query_range?{query}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=300) as resp:
            body = json.load(resp)
    except (OSError, ValueError) as exc:
        raise BackfillError(f"{parts.geturl()} did not answer the recording rule {expr!r} ({type(exc).__name__}); "
                            "a store's raw samples are sent already: give its query API with --query-url, "
                            "or --no-rules") from None
    if body.get("status") != "success":
        raise BackfillError(f"rule expression {expr!r} failed: {body.get('error')}")
    result: list[dict[str, Any]] = body["data"]["result"]  # Prometheus's API: a matrix, one object per series
    return result


def rule_batches(url: str, plan: Plan, outcome: Outcome) -> Iterator[list[Sample]]:
    """Each recording rule's value at every raw sample instant, asked of a Prometheus holding the raw samples
    (10,000 steps a query); each rule's series in time order."""
    assert outcome.start is not None and outcome.end is not None
    step = plan.step.total_seconds()
    first, last = outcome.start.timestamp(), outcome.end.timestamp() - 0.001
    for record, expr, extra in recording_rules(plan.rule_files):
        begin = first
        while begin <= last:
            stop = min(last, begin + 10_000 * step - step)
            batch = []
            for series in query_range(url, expr, begin, stop, step):
                labels = {k: v for k, v in series["metric"].items() if k != "__name__"} | extra
                batch += [rule_sample(record, labels, float(ts), float(value)) for ts, value in series["values"]]
            yield batch
            begin = stop + step


class Sink(Protocol):
    """Where the past goes. `check` refuses, before anything is sent, a store that would drop the samples;
    `rule_source` gives a Prometheus API holding the raw samples sent so far, to answer the rules with."""

    def requirement(self, oldest: datetime, now: datetime) -> str: ...

    def check(self, oldest: datetime, stop: datetime, now: datetime) -> None: ...

    def add(self, samples: list[Sample]) -> list[Sample]: ...

    def rule_source(self, plan: Plan, outcome: Outcome) -> contextlib.AbstractContextManager[str]: ...

    def finish(self, outcome: Outcome) -> None: ...

    def close(self) -> None: ...


def existing_blocks(data_dir: Path) -> list[tuple[int, int]]:
    """(minTime, maxTime) in ms of every block already in the folder (maxTime exclusive, as meta.json has it)."""
    spans = []
    if data_dir.is_dir():
        for meta in data_dir.glob("*/meta.json"):
            try:
                doc = json.loads(meta.read_text(encoding="utf-8"))
                spans.append((int(doc["minTime"]), int(doc["maxTime"])))
            except (OSError, ValueError, KeyError, TypeError):
                raise BackfillError(f"{meta} is not a block's meta.json Prometheus could read: fix or remove "
                                    "that block first") from None
    return spans


class BlocksSink:
    """Day-aligned blocks of at most 24 h into a Prometheus (or Thanos sidecar's) data folder.

    Samples are spooled per UTC day and family (append, one chunk at a time), and, for the rules, into one
    OpenMetrics file a throw-away Prometheus reads as scratch blocks. At the end each day becomes one
    OpenMetrics document and its blocks, moved into the folder one whole block at a time."""

    def __init__(self, plan: Plan, work: Path) -> None:
        assert plan.data_dir is not None
        self.plan, self.work = plan, work
        self.data_dir = plan.data_dir
        self.promtool = find_tool(plan.promtool)
        self.prometheus = find_tool(plan.prometheus) if plan.rule_files else None
        self.days_dir = work / "days"
        self.days_dir.mkdir()
        self.scratch = Spool(work) if plan.rule_files else None
        self.existing = existing_blocks(self.data_dir)
        self.skipped: set[int] = set()
        self.kept: set[int] = set()
        self.stop_ms = 0

    def requirement(self, oldest: datetime, now: datetime) -> str:
        days = math.ceil((now - oldest) / timedelta(days=1))
        return (f"blocks: the Prometheus reading {self.plan.data_dir} must keep at least {days} days "
                f"(--storage.tsdb.retention.time={days + 30}d or more), or it deletes the oldest blocks at once")

    def check(self, oldest: datetime, stop: datetime, now: datetime) -> None:
        self.stop_ms = int(stop.timestamp() * 1000)

    def _day_free(self, day: int) -> bool:
        """A day is written only if no block already there overlaps the part of it the past can reach."""
        if day in self.kept:
            return True
        if day in self.skipped:
            return False
        lo, hi = day * DAY_MS, min((day + 1) * DAY_MS, self.stop_ms or (day + 1) * DAY_MS)
        if any(lo < max_t and min_t < hi for min_t, max_t in self.existing):
            self.skipped.add(day)
            return False
        self.kept.add(day)
        return True

    def add(self, samples: list[Sample]) -> list[Sample]:
        kept = [s for s in samples if self._day_free(int(s.ts * 1000) // DAY_MS)]
        by_part: dict[tuple[int, str], list[str]] = {}
        for sample in kept:
            by_part.setdefault((int(sample.ts * 1000) // DAY_MS, sample.name), []).append(om_line(sample))
        for (day, name), lines in by_part.items():
            folder = self.days_dir / str(day)
            folder.mkdir(exist_ok=True)
            with open(folder / f"{name.replace(':', '_')}.part", "a", encoding="utf-8") as fh:
                if fh.tell() == 0:
                    fh.write(f"{name}\n")  # the family's name, read back by `finish`
                fh.writelines(lines)
        if self.scratch is not None and kept:
            spool_samples(self.scratch, kept)
        return kept

    @contextmanager
    def rule_source(self, plan: Plan, outcome: Outcome) -> Iterator[str]:
        assert self.scratch is not None and self.prometheus is not None
        series, scratch = self.work / "series.om", self.work / "scratch"
        self.scratch.finish(series)
        scratch.mkdir()
        create_blocks(self.promtool, series, scratch, SCRATCH_BLOCK_DURATION)
        series.unlink()
        with scratch_prometheus(self.prometheus, scratch, self.work) as url:
            yield url
        shutil.rmtree(scratch, ignore_errors=True)

    def finish(self, outcome: Outcome) -> None:
        """One OpenMetrics document per group of days, its blocks moved into the folder as they are made.

        promtool cuts a document at multiples of 18 h (its range for 24 h), which do not fall on midnights, and
        reads the whole document again for each 18 h window. Days two apart are more than 18 h apart, so a
        document of every other day of a few weeks gives blocks that each hold one day, for a few dozen
        promtool runs a year instead of one per day and no document read more than a few dozen times."""
        outcome.skipped_days = len(self.skipped)
        groups: dict[tuple[int, int], list[Path]] = {}
        for folder in sorted(self.days_dir.iterdir(), key=lambda f: int(f.name)):
            day = int(folder.name)
            groups.setdefault((day // GROUP_DAYS, day % 2), []).append(folder)
        with ThreadPoolExecutor(max_workers=PROMTOOL_JOBS) as pool:
            for moved in pool.map(self._group_blocks, [groups[key] for key in sorted(groups)]):
                outcome.blocks += moved

    def _group_blocks(self, folders: list[Path]) -> list[str]:
        """One group of days: its OpenMetrics document, its blocks, moved into the folder."""
        document, out = self.work / f"{folders[0].name}.om", self.work / f"{folders[0].name}-blocks"
        out.mkdir()
        families: dict[str, list[Path]] = {}
        for folder in folders:
            for part in sorted(folder.iterdir()):
                families.setdefault(part.name, []).append(part)
        with open(document, "w", encoding="utf-8") as doc:
            for parts in families.values():
                for i, part in enumerate(parts):
                    with open(part, encoding="utf-8") as fh:
                        name = fh.readline().rstrip("\n")
                        if i == 0:
                            if name in HELP:
                                doc.write(f"# HELP {name} {escape(HELP[name])}\n")
                            doc.write(f"# TYPE {name} gauge\n")
                        shutil.copyfileobj(fh, doc)
            doc.write("# EOF\n")
        for folder in folders:
            shutil.rmtree(folder)
        create_blocks(self.promtool, document, out)
        document.unlink()
        moved = _move_blocks(out, self.data_dir)
        out.rmdir()
        return moved

    def close(self) -> None:
        if self.scratch is not None:
            self.scratch.close()


def _move_blocks(source: Path, data_dir: Path) -> list[str]:
    """Move each new block into the data directory (a rename per block, so Prometheus sees whole blocks)."""
    moved = []
    data_dir.mkdir(parents=True, exist_ok=True)
    for block in sorted(source.iterdir()):
        if (block / "meta.json").is_file():
            os.replace(block, data_dir / block.name)
            moved.append(block.name)
    return moved


def backfill(conn: Connection, plan: Plan, sink: Sink | None = None, *,
             announce: Any = None) -> Outcome:
    """Stream the past into `sink` (default: blocks into `plan.data_dir`); returns what was written.
    `announce` receives the one line saying what the store must allow, before anything is sent."""
    now = datetime.now(UTC)
    outcome = Outcome()
    with tempfile.TemporaryDirectory(prefix=".scanwatch-backfill-",
                                     dir=plan.data_dir.parent if plan.data_dir else None) as tmp:
        if sink is None:
            assert plan.data_dir is not None
            plan.data_dir.mkdir(parents=True, exist_ok=True)
            sink = BlocksSink(plan, Path(tmp))
        try:
            spans = past_spans(conn, plan, now)
            if not spans:
                return outcome
            outcome.workspaces = len(spans)
            oldest, stop = min(s.start for s in spans), max(s.stop for s in spans)
            if announce is not None:
                announce(sink.requirement(oldest, now))
            sink.check(oldest, stop, now)
            for chunk, chunk_end, samples in past_chunks(conn, plan, spans):
                kept = sink.add(samples)
                outcome.samples += len(kept)
                outcome.note(chunk, chunk_end, kept)
            if plan.rule_files and outcome.samples:
                with sink.rule_source(plan, outcome) as url:
                    for batch in rule_batches(url, plan, outcome):
                        kept = sink.add(batch)
                        outcome.rule_samples += len(kept)
                        outcome.series.update((s.name, s.labels) for s in kept)
            sink.finish(outcome)
        finally:
            sink.close()
    return outcome
