"""Exporter memory per snapshot part: what decoding, building and encoding a part of N MiB costs, and what the
part cap saves.

`python -m benchmarks.part_memory [--sizes 1,4,16] [--cap BYTES]`. For each size, a synthetic part of that
size (the known history's part with its per-project rows repeated under new project ids, so it is a valid
part whose series grow with it) is written to a folder, and a fresh process runs the exporter's whole path
on it (SnapshotSource, the collector, both text formats through the library's encoders) and reports its
peak RSS: once
with the cap raised above the part (what it costs when read), once with the given cap (default: the
exporter's, 4 MiB; a part over it is refused before it is read). Prints a table; the figures are the ones in
docs/exporter.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import sys
from pathlib import Path
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from exporters.app import registry_of
from exporters.collector import SecscanCollector
from pipelines.snapshot.format import Limits
from exporters.source import SnapshotSource
cap = int(sys.argv[2])
collector = SecscanCollector(SnapshotSource(Path(sys.argv[1]), Limits(cap, cap)))
registry = registry_of(collector)
generate_latest(registry)
generate_openmetrics(registry)
state = collector.source.get()
# VmHWM, not ru_maxrss: Linux carries the parent's ru_maxrss across fork and exec
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(int(all(p.readable for p in state.parts.values())), hwm // 1024)
"""


def make_part(mib: float, folder: Path) -> int:
    """A valid part of about `mib` MiB at folder/ws-1.json; its size in bytes."""
    from pipelines.snapshot.format import encode_snapshot
    from pipelines.sync.snapshot import build_part
    from tests.exporter.history import NOW, fresh_db, load_history

    conn = fresh_db()
    load_history(conn)
    doc = build_part(conn, workspace_id="ws-1", label=None, now=NOW)
    base = {k: list(v) for k, v in doc["tables"].items()}
    start = len(json.dumps(doc))

    def add(i: int) -> None:
        for table in ("issue_severity", "projects", "targets", "time_to_fix", "issue_status"):
            for row in base[table]:
                copy = dict(row)
                for field in ("project_id", "target_id"):
                    if field in copy:
                        copy[field] = f"{copy[field]}-{i}"
                doc["tables"][table].append(copy)

    add(0)
    per = len(json.dumps(doc)) - start
    for i in range(1, max(1, int(mib * 1024 * 1024 - start) // per)):
        add(i)
    data = encode_snapshot(doc)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ws-1.json").write_bytes(data)
    return len(data)


def measure(folder: Path, cap: int) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(cap)], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=600).stdout.split()
    return out[0] == "1", int(out[1])


def main() -> int:
    from pipelines.snapshot.format import EXPORTER_PART_BYTES

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,4,16", help="part sizes in MiB, comma-separated")
    parser.add_argument("--cap", type=int, default=EXPORTER_PART_BYTES)
    args = parser.parse_args()
    print(f"{'part':>10} {'read: peak RSS':>16} {f'cap {args.cap:,} B':>22}")
    with tempfile.TemporaryDirectory() as tmp:
        for mib in (float(x) for x in args.sizes.split(",")):
            folder = Path(tmp) / f"part-{mib}"
            size = make_part(mib, folder)
            _, read_mb = measure(folder, 1 << 40)
            served, capped_mb = measure(folder, args.cap)
            print(f"{size / 2**20:>7.1f} MiB {read_mb:>12} MiB {capped_mb:>10} MiB "
                  f"{'(served)' if served else '(refused)':>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
