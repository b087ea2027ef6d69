"""`scanwatch exporter --shard I/N`: N real exporters over one snapshot split the workspaces between them, each
workspace served by exactly one, and together they serve what one exporter serves."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporters.server import serve
from exporters.source import Shard
from pipelines.snapshot.format import encode_snapshot
from pipelines.snapshot.store import FileStore
from pipelines.sync.snapshot import build_parts
from tests.exporter.history import NOW
from tests.helpers import build_registry

ROOT = Path(__file__).resolve().parents[2]
WORKSPACES = 12
SHARDS = 3
PER_EXPORTER = {"secscan_snapshot_load_errors_total"}  # each exporter's own count, told apart by `instance`
MOVING = {"secscan_snapshot_age_seconds"}  # computed at each scrape


def _parts(conn, folder: Path) -> None:
    """The known history's two real parts, copied under WORKSPACES workspace names and ids."""
    real = list(build_parts(conn, now=NOW).values())
    parts = {}
    for n in range(WORKSPACES):
        doc = real[n % len(real)]
        label, ident = f"{doc['workspace']}-{n}", f"ws-copy-{n}"
        tables = {t: [{**r, "workspace": label} for r in rows] for t, rows in doc["tables"].items()}
        parts[ident] = encode_snapshot({**doc, "workspace": label, "workspace_id": ident, "tables": tables})
    FileStore(folder).replace_all(parts)


def _samples(text: str) -> Counter:
    return Counter((s.name, tuple(sorted(s.labels.items())), s.value)
                   for f in text_string_to_metric_families(text) if not f.name.startswith("process_")
                   for s in f.samples if s.name not in MOVING)


def _workspaces(samples: Counter) -> set[str]:
    return {dict(labels)["workspace"] for _, labels, _ in samples if "workspace" in dict(labels)}


def test_each_workspace_is_served_by_exactly_one_shard_and_together_they_serve_everything(history_conn, tmp_path):
    folder = tmp_path / "snapshot"
    _parts(history_conn, folder)
    exporters = [serve(folder, address="127.0.0.1", port=0, shard=shard)[0]
                 for shard in (None, *(Shard(i, SHARDS) for i in range(SHARDS)))]
    try:
        texts = [httpx.get(f"http://127.0.0.1:{e.server_port}/metrics", timeout=20).text for e in exporters]
    finally:
        for e in exporters:
            e.shutdown()
    whole, *shards = (_samples(t) for t in texts)
    assert len(_workspaces(whole)) == WORKSPACES
    served = [_workspaces(s) for s in shards]
    assert all(served), f"a shard served no workspace: {served}"
    assert sum(len(w) for w in served) == WORKSPACES and set().union(*served) == _workspaces(whole)
    for shard in shards:
        assert {name for name, _, _ in shard if name in PER_EXPORTER} == PER_EXPORTER
    union = sum((Counter({k: v for k, v in s.items() if k[0] not in PER_EXPORTER}) for s in shards), Counter())
    assert union == Counter({k: v for k, v in whole.items() if k[0] not in PER_EXPORTER})
    shared = [{labels for name, labels, _ in s if name == "secscan_sla_seconds"} for s in shards]
    assert shared[0] and not any(shared[1:]), "the series of no workspace are served once, by shard 0"


def test_before_the_first_sync_only_shard_0_says_nothing_can_be_read(tmp_path):
    missing = tmp_path / "snapshot"

    def readable(shard: Shard) -> list:
        text = generate_latest(build_registry(missing, shard=shard)).decode()
        return [s for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == "secscan_snapshot_readable"]

    assert [s.value for s in readable(Shard(0, SHARDS))] == [0]
    assert readable(Shard(1, SHARDS)) == [] == readable(Shard(2, SHARDS))  # one alert, not one per shard


@pytest.mark.parametrize("given", ["3/3", "1", "a/2", "-1/2", "1/0"])
def test_a_shard_that_is_not_i_of_n_is_one_line(given):
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "exporter", f"--shard={given}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--shard" in done.stderr and "I/N" in done.stderr, done.stderr


def test_a_shard_with_no_workspace_of_its_own_is_ready_once_the_store_has_parts(history_conn, tmp_path):
    from exporters.collector import SecscanCollector
    from exporters.source import SnapshotSource

    folder = tmp_path / "snapshot"
    collectors = [SecscanCollector(SnapshotSource(folder, shard=Shard(i, SHARDS))) for i in range(SHARDS)]
    assert not any(c.ready() for c in collectors)  # before the first sync: nothing anywhere
    real = build_parts(history_conn, now=NOW)
    name = next(iter(real))
    FileStore(folder).replace_all({name: encode_snapshot(real[name])})
    owners = [c for c in collectors if c.source.shard.owns(name)]
    assert len(owners) == 1 and all(c.ready() for c in collectors)
    assert owners[0].view().parts[name].doc is not None  # the owner's readiness means its part has loaded
