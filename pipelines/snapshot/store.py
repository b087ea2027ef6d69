"""Where the metrics snapshot lives: one part per workspace, written by that workspace's run, read together.

A workspace's run rebuilds and replaces its own part only, so a tick of K workspaces costs K builds the
size of one workspace each, and a workspace whose part cannot be built or read keeps its last good part
while the others stay fresh. The pipeline writes parts through `SnapshotStore.write`; the exporter lists
them (`keys`, a cheap look at each part's identity) and re-reads only the parts whose identity moved.

`FileStore` keeps them as files in the folder `SCANWATCH_SNAPSHOT` names, each replaced atomically. Another
store (the history's own database) implements the same four methods. A single snapshot file written by an
older scanwatch at that path is read as one part (`WHOLE`) until the pipeline's next run replaces it by the
folder.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, unquote

from pipelines.snapshot import format as fmt

WHOLE = ""  # the part name of a single-file snapshot (every workspace in one document)
_PART = re.compile(r"^[^.].*\.json$")


class SnapshotStore(Protocol):
    """Parts by name (a followed workspace's name, or the service's workspace id)."""

    def keys(self) -> Mapping[str, object]:
        """Each part's name and identity now, without reading any; SnapshotError when nothing can be listed."""
        ...

    def read(self, name: str, known: object | None = None) -> tuple[object, bytes | None]:
        """A part's identity and bytes (None when its identity is still `known`); SnapshotError on failure."""
        ...

    def write(self, name: str, data: bytes) -> None:
        """Replace one part atomically: a reader sees the old part or the new one, never half."""
        ...

    def replace_all(self, parts: dict[str, bytes], own: str | None = None) -> None:
        """The first build, from a store found empty (`needs_all`): every part it does not hold yet, and `own`
        (the building run's workspace) whatever it holds. A part another run wrote meanwhile is kept: on a
        history many runs write at once (PostgreSQL), that run built it after its own writes committed, where
        this build may have read them half done (a workspace's owners not yet recorded). A single-file
        snapshot of an older scanwatch is replaced whole."""
        ...

    def remove(self, name: str) -> None:
        """Drop a part that no longer stands for a workspace (if it is there)."""
        ...

    def location(self, name: str) -> str:
        """Where a part is, for a person reading a log."""
        ...

    def needs_all(self) -> bool:
        """Whether the next write must be `replace_all`: no part yet, or a single-file snapshot."""
        ...


def _file_name(name: str) -> str:
    if not name:
        raise ValueError("a snapshot part needs a name")
    return quote(name, safe="-_").replace(".", "%2E") + ".json"


def _remove_stale_temp_files(folder: Path, pattern: str, *, older_than_seconds: float = 600.0) -> None:
    """A writer killed mid-write leaves its temp file (or folder), named as `pattern` matches; a live writer's
    is recent, so it stays.

    A folder is swept at most once per half that age in a process: a thousand workspaces' parts share one,
    and listing it at each part's write cost each write the folder's size. A leftover is gone within one and a
    half times that age of its writer's death."""
    now = time.time()
    if now - _SWEPT.get((folder, pattern), -math.inf) < older_than_seconds / 2:
        return
    _SWEPT[(folder, pattern)] = now
    cutoff = now - older_than_seconds
    for leftover in folder.glob(pattern):
        try:
            if leftover.stat().st_mtime < cutoff:
                if leftover.is_dir():
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    leftover.unlink()
        except OSError:  # another writer removed it first
            continue


_SWEPT: dict[tuple[Path, str], float] = {}  # (folder, pattern) -> when this process last swept it


def _fsync_dir(folder: Path) -> None:
    try:  # make a rename durable; not every filesystem allows opening a directory
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def place_if_absent(made: Path, path: Path) -> bool:
    """Put the finished file `made` at `path` unless a file is already there, which is then left as it is;
    whether `made` is now at `path`. A hard link fails where a file is, so two processes racing for the place
    never overwrite each other and no reader ever finds a half-written file. A filesystem without hard links
    (a network share) gets a rename if the place is still empty: a window of a few instructions, not a
    failure at every attempt. `made` stays where it was (a link) or is gone (a rename); the caller removes
    what is left of it."""
    try:
        os.link(made, path)
    except FileExistsError:
        return False
    except OSError:  # no hard links on this filesystem
        if path.exists():
            return False
        os.replace(made, path)
    return True


def write_file(path: Path, data: bytes, milestone: object = None, *, keep: bool = False) -> None:
    """Replace one file atomically: a temp file in the same folder, fsync, then os.replace (`keep`: linked
    into place only if no file is there, which is then left as it is).

    `milestone(name)` is told the moments the crash tests stop a writer at (half written, before and after
    the replace)."""
    reached = milestone if callable(milestone) else (lambda _name: None)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_files(path.parent, f".*{path.suffix}.*.tmp")  # the leftovers of any file like it
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data[: len(data) // 2])
            reached("snapshot.mid_write")
            fh.write(data[len(data) // 2 :])
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        reached("snapshot.before_replace")
        if keep:
            place_if_absent(Path(tmp), path)
            Path(tmp).unlink(missing_ok=True)
        else:
            os.replace(tmp, path)
        reached("snapshot.replaced")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


class FileStore:
    """Parts as `<name>.json` files in the folder at `path` (or, from an older scanwatch, one file at `path`)."""

    def __init__(self, path: Path, milestone: object = None, limits: fmt.Limits | None = None) -> None:
        self.path = Path(path)
        self.milestone = milestone
        self.limits = limits  # the exporter's; None: the pipeline's own use, up to the format's cap

    def __repr__(self) -> str:
        return f"FileStore({str(self.path)!r})"

    def keys(self) -> dict[str, object]:
        try:
            if self.path.is_file():
                return {WHOLE: fmt.file_key(os.stat(self.path))}
            entries = list(os.scandir(self.path))
        except FileNotFoundError:
            raise fmt.SnapshotError(f"no snapshot at {self.path} yet: run scanwatch sync") from None
        except OSError as exc:
            raise fmt.SnapshotError(f"cannot read snapshot {self.path}: {exc.strerror or exc}") from None
        found: dict[str, object] = {}
        for entry in entries:
            if _PART.match(entry.name):
                try:
                    found[unquote(entry.name[: -len(".json")])] = fmt.file_key(entry.stat())
                except OSError:  # replaced or removed while listed: the next look finds it
                    continue
        return found

    def read(self, name: str, known: object | None = None) -> tuple[object, bytes | None]:
        return fmt.read_snapshot_bytes(self.path if name == WHOLE else self.path / _file_name(name), known,
                                       self.limits.part_bytes if self.limits is not None else None)

    def needs_all(self) -> bool:
        return not self.path.is_dir() or not any(_PART.match(p.name) for p in self.path.iterdir())

    def write(self, name: str, data: bytes) -> None:
        if not self.path.is_dir():
            raise fmt.SnapshotError(f"snapshot {self.path} is not a folder of parts: write every part at once")
        write_file(self.path / _file_name(name), data, self.milestone)

    def remove(self, name: str) -> None:
        (self.path / _file_name(name)).unlink(missing_ok=True)

    def location(self, name: str) -> str:
        return str(self.path if name == WHOLE else self.path / _file_name(name))

    def replace_all(self, parts: dict[str, bytes], own: str | None = None) -> None:
        """A new folder beside the path, filled and fsynced, then renamed into place: a reader, and a run killed
        meanwhile, find every part or none. It takes the place of a missing or empty folder only; where another
        run's parts arrived meanwhile (`SnapshotStore.replace_all`), the parts are written among them instead,
        each kept where it is there, `own` replaced. A single file of an older scanwatch is moved aside first
        and removed after, so a reader meanwhile finds the path missing for an instant, and keeps serving what
        it last read."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temp_files(self.path.parent, f".{self.path.name}.*.tmp")
        staging = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent))
        old = None
        try:
            for name, data in parts.items():
                write_file(staging / _file_name(name), data)
            os.chmod(staging, 0o755)
            if self.path.exists() and not self.path.is_dir():
                old = staging.with_name(f"{staging.name[: -len('.tmp')]}-old.tmp")
                os.replace(self.path, old)
            try:
                os.rename(staging, self.path)  # takes the place of a missing or empty folder, never of parts
            except OSError:
                if old is not None or not self.path.is_dir():
                    raise
                for name, data in parts.items():
                    write_file(self.path / _file_name(name), data, keep=name != own)
                shutil.rmtree(staging, ignore_errors=True)
                return
            _fsync_dir(self.path.parent)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if old is not None and not self.path.exists():  # the older snapshot back, rather than none
                os.replace(old, self.path)
            raise
        if old is not None:
            old.unlink(missing_ok=True)
