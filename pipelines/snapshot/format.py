"""The metrics snapshot's format: the one contract between the pipeline that writes it and the exporter.

The pipeline (`pipelines/sync/snapshot.py`) builds and writes the document; the exporter only reads it. Both
take the schema version, the table names and the size cap from here, so the exporter depends on this
format alone and never on the pipeline's internals (nor on DuckDB or Dagster).

Reading is defensive because the path comes from the environment: it must be a regular file (a FIFO
would block the reader until a writer appears, `/dev/zero` would never end) no larger than the cap, and
nothing here ever blocks on it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# 2: one part per workspace, every row labelled with its `workspace` (1: one file, labels resolved by the reader)
SCHEMA_VERSION = 2
TABLES: tuple[str, ...] = (
    "workspaces", "quotas", "projects", "targets", "issue_severity", "issue_status", "issue_family",
    "lifecycle", "time_to_fix", "scans", "pipeline", "critical_issues", "critical_arrivals",
    "issues_not_visible",
)
# Far above any real snapshot (the large world's is about 200 KiB: rows are bounded by projects x
# severities, never by issues): what the pipeline refuses to write, the format's own bound.
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
# What the exporter decodes, lower: a part costs the exporter about 30 times its size in memory once decoded,
# built into families and encoded in two formats (benchmarks/part_memory.py: 3.6 MiB -> 137 MiB peak RSS,
# 14.5 MiB -> 474 MiB), so with a part re-rendered beside the rest the defaults stay inside the chart's 512Mi.
# Both are settable (`scanwatch exporter --max-part-bytes/--max-total-bytes`, docs/exporter.md).
EXPORTER_PART_BYTES = 4 * 1024 * 1024
# The total: a small workspace's part is about 49 KiB (3 projects) and costs the exporter about 0.7 MiB once
# served, so 24 MiB holds about 500 such workspaces, near 400 MiB, inside 512Mi with a part re-rendered.
EXPORTER_TOTAL_BYTES = 24 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What the exporter reads: a part over `part_bytes` is never fetched, and a part that would take the parts
    served together over `total_bytes` is refused; either is that part unreadable."""

    part_bytes: int = EXPORTER_PART_BYTES
    total_bytes: int = EXPORTER_TOTAL_BYTES

FileKey = tuple[int, int, int]  # (inode, mtime ns, size): a new key means a new file to read


class SnapshotError(RuntimeError):
    """The snapshot is missing, not a regular file, too large, unreadable, or of another schema version."""


def file_key(st: os.stat_result) -> FileKey:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def read_snapshot_bytes(path: Path, known: object | None = None,
                        cap: int | None = None) -> tuple[FileKey, bytes | None]:
    """The file's key and bytes, or None for the bytes when the key is still `known` (nothing new to parse).

    Opened non-blocking and checked with fstat on the same descriptor, so the key and the bytes come from
    one file even if the pipeline swaps the path meanwhile, and a FIFO or device fails at once. `cap` (default
    the format's MAX_SNAPSHOT_BYTES) bounds what is read: a larger file is refused before any byte of it.
    """
    cap = MAX_SNAPSHOT_BYTES if cap is None else cap
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SnapshotError(f"snapshot {path} is not a regular file: point SCANWATCH_SNAPSHOT at the file "
                                "`scanwatch sync` writes")
        key = file_key(st)
        if key == known:
            return key, None
        if st.st_size > cap:
            raise SnapshotError(over_cap(str(path), st.st_size, cap))
        chunks, size = [], 0
        while size <= cap:  # read to the end, but never past the cap if the file grows
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:
            raise SnapshotError(f"snapshot {path} grew over the {cap:,}-byte cap while read")
        return key, b"".join(chunks)
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def over_cap(where: str, size: int, cap: int) -> str:
    if cap < MAX_SNAPSHOT_BYTES:
        return (f"snapshot part {where} is {size:,} bytes, over the exporter's {cap:,}-byte cap (--max-part-bytes, "
                "SCANWATCH_EXPORTER_MAX_PART_BYTES): raise it, with the exporter's memory limit, if the part is real")
    return f"snapshot {where} is {size:,} bytes, over the {cap:,}-byte cap: it is not a scanwatch snapshot"


def parse_snapshot(raw: bytes, name: str = "snapshot") -> dict[str, Any]:
    """Validate bytes already read: refuse a document this version cannot interpret rather than export nonsense.

    Any failure to decode is a SnapshotError, whatever its cause: a document nested deeper than the decoder's
    recursion limit raises RecursionError, bytes that are no UTF-8 UnicodeDecodeError, and a caller that lets
    either through would stop serving every part, not only this one.
    """
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise SnapshotError(f"snapshot {name} nests too deep to decode: it is not a scanwatch snapshot") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise SnapshotError(f"snapshot {name} is not valid JSON: {str(exc)[:200]}") from None
    except MemoryError:
        raise SnapshotError(f"snapshot {name} does not fit in the exporter's memory") from None
    if not isinstance(doc, dict):
        raise SnapshotError(f"snapshot {name} is not a JSON object")
    if doc.get("schema") == 1:
        raise SnapshotError(f"snapshot {name} was written by an older scanwatch (schema 1): run `scanwatch sync` "
                            "once, it replaces it with one part per workspace")
    if doc.get("schema") != SCHEMA_VERSION:
        raise SnapshotError(f"snapshot {name} has schema {doc.get('schema')!r}, this version reads {SCHEMA_VERSION}")
    tables = doc.get("tables")
    if not isinstance(tables, dict) or not all(isinstance(tables.get(t, []), list) for t in TABLES):
        raise SnapshotError(f"snapshot {name} has no valid 'tables' object")
    return doc


def read_snapshot(path: Path) -> dict[str, Any]:
    """Load and validate a snapshot file, or every part of a snapshot folder as one document (each row keeps
    its `workspace`); SnapshotError with one line saying what is wrong."""
    path = Path(path)
    if path.is_dir():
        return merge_documents([read_snapshot(p) for p in sorted(path.glob("[!.]*.json"))])
    _key, raw = read_snapshot_bytes(path)
    return parse_snapshot(raw or b"", str(path))


def merge_documents(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Parts as one document, each row keeping its `workspace`: what a single-file snapshot holds. The
    settings (SLA, buckets) are the newest part's."""
    newest = max(parts, key=lambda p: p.get("generated_at_seconds") or 0, default={})
    head = {k: v for k, v in newest.items() if k not in ("tables", "workspace", "workspace_id")}
    return {**head, "schema": SCHEMA_VERSION,
            "tables": {name: [row for p in parts for row in p.get("tables", {}).get(name, [])] for name in TABLES}}


def encode_snapshot(doc: dict[str, Any]) -> bytes:
    """The bytes the pipeline writes: compact JSON, refused over the cap so the exporter never has to."""
    data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"the metrics snapshot would be {len(data):,} bytes, over the exporter's "
                            f"{MAX_SNAPSHOT_BYTES:,}-byte cap")
    return data
