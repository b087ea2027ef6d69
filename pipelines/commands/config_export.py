"""`scanwatch config export DIR`: the installed package's monitoring files, written out for provisioning.

A wheel carries `prometheus/` and `grafana/` inside the package (pyproject force-includes them), where no
one should have to look; this writes them into DIR in the layout the README's provisioning steps copy from:

    DIR/prometheus/prometheus.yml, alertmanager.yml, rules/, templates/, tests/
    DIR/grafana/provisioning/{datasources,dashboards,alerting}/, DIR/grafana/dashboards/

With an ownership map (`--ownership FILE`, or `SCANWATCH_OWNERSHIP_FILE`), DIR/prometheus/alertmanager.yml
is the shipped file with a route and two receivers per team before the shipped routes
(`pipelines.core.alert_routes`, docs/ownership.md); without one it is the shipped file as it is.

The folder keeps the checkout's relative paths (Alertmanager's `templates/*.tmpl` beside its config, the
`promtool test rules` files' `../rules/`), so each file works where it lands. A file already in DIR that
differs is never replaced silently: the export names it and writes nothing unless told `--overwrite`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipelines.core.alert_routes import RouteError, render
from pipelines.core.credentials import ConfigError
from pipelines.core.ownership import OWNERSHIP_VARIABLE, read_ownership
from pipelines.core.package_files import project_file

DEFAULT_PROMETHEUS_URL = "http://localhost:9090"
DATASOURCE = Path("grafana/provisioning/datasources/scanwatch.yml")
ALERTMANAGER = Path("prometheus/alertmanager.yml")
# The data source's one `url:` line; Grafana reads the file as it is (it expands $VAR, never a default).
_URL_LINE = re.compile(r"^(\s*url:\s*)\S+\s*$", re.MULTILINE)
# What a folder carries besides configuration: dev scripts and notes for the checkout, never provisioned.
_NOT_EXPORTED = {".py", ".pyc", ".md"}


class ExportError(RuntimeError):
    """The export cannot be done as asked; the message says what to do."""


@dataclass(frozen=True)
class Outcome:
    written: list[Path]
    unchanged: list[Path]
    replaced: list[Path]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    export = actions.add_parser("export", help="write the rules, Alertmanager file and templates, dashboards and "
                                "Grafana provisioning into DIR")
    export.add_argument("dir", type=Path, metavar="DIR", help="folder to write into (created if missing)")
    export.add_argument("--prometheus-url", default=DEFAULT_PROMETHEUS_URL, metavar="URL",
                        help=f"the Grafana data source's url (default {DEFAULT_PROMETHEUS_URL})")
    export.add_argument("--ownership", type=Path, metavar="FILE", default=None,
                        help=f"the ownership map whose teams get an Alertmanager route each (default: "
                        f"${OWNERSHIP_VARIABLE}; unset: the shipped routes only)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace files in DIR that differ from this version's (default: stop and name them)")


def package_files() -> dict[Path, Path]:
    """Every exported file: its path under DIR -> the installed (or checkout) copy it comes from."""
    files: dict[Path, Path] = {}
    for name in ("prometheus", "grafana"):
        folder = project_file(f"_{name}", name)
        if folder is None or not folder.is_dir():
            raise ExportError(f"the package's {name}/ files are missing (neither pipelines/_{name} nor a "
                              "checkout's); reinstall scanwatch")
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if path.is_file() and path.suffix not in _NOT_EXPORTED and "__pycache__" not in rel.parts:
                files[Path(name) / rel] = path
    return files


def contents(prometheus_url: str, ownership: Path | None = None) -> dict[Path, bytes]:
    """What each exported file holds: the package's bytes, the data source with the given Prometheus url, the
    Alertmanager file with a route per team of the ownership map."""
    if not re.fullmatch(r"https?://\S+", prometheus_url):
        raise ExportError(f"--prometheus-url {prometheus_url!r} is not an http(s) URL; give one such as "
                          f"{DEFAULT_PROMETHEUS_URL}")
    out = {rel: src.read_bytes() for rel, src in package_files().items()}
    text = out[DATASOURCE].decode("utf-8")
    new, count = _URL_LINE.subn(lambda m: m.group(1) + prometheus_url, text)
    if count != 1:
        raise ExportError(f"{DATASOURCE} does not hold exactly one url line; reinstall scanwatch")
    out[DATASOURCE] = new.encode("utf-8")
    if ownership is not None:
        try:
            owners = read_ownership(ownership)
            text = render(out[ALERTMANAGER].decode("utf-8"), owners.teams, owners.default_team, ownership.name)
        except (ConfigError, RouteError) as exc:
            raise ExportError(f"{exc} (nothing was written)") from None
        out[ALERTMANAGER] = text.encode("utf-8")
    return out


def export(target: Path, *, prometheus_url: str = DEFAULT_PROMETHEUS_URL, overwrite: bool = False,
           ownership: Path | None = None) -> Outcome:
    """Write every file, or none, and none through a symbolic link.

    Everything in the way (a differing file, a file where a folder goes, a link anywhere below DIR on the paths
    written) stops the export before any write. The files are then written into a fresh private folder inside
    DIR (a random name, created exclusively: no name there can be planted) and each renamed into place
    through folder descriptors opened without following links, so a link swapped in meanwhile fails the
    rename rather than redirecting it; a rename replaces the name itself, never what it points to.
    """
    wanted = contents(prometheus_url, ownership)
    if target.exists() and not target.is_dir():
        raise ExportError(f"{target} is a file; give a folder")
    written, unchanged, replaced, blocked, links = [], [], [], [], []
    for rel, data in wanted.items():
        state = _state(target, rel)
        if state == "link":
            links.append(rel)
        elif state == "absent":
            written.append(rel)
        elif state == "file" and (target / rel).read_bytes() == data:
            unchanged.append(rel)
        elif state == "file" and overwrite:
            replaced.append(rel)
        else:
            blocked.append(rel)
    if links:
        where = sorted({str(_first_link(target, rel)) for rel in links})
        raise ExportError(f"{', '.join(where[:5])} in {target} is a symbolic link, and the export writes through "
                          "none: remove it, or export into another folder (nothing was written)")
    if blocked:
        names = ", ".join(str(p) for p in blocked[:5]) + (f" and {len(blocked) - 5} more" if len(blocked) > 5 else "")
        how = "move them away" if overwrite else "compare them, then move them away or pass --overwrite"
        raise ExportError(f"{len(blocked)} file(s) in {target} differ from this version's or are not files and were "
                          f"left as they are: {names}; {how} (nothing was written)")
    todo = [*written, *replaced]
    if todo:
        _write_all(target, {rel: wanted[rel] for rel in todo})
    return Outcome(written, unchanged, replaced)


def _state(target: Path, rel: Path) -> str:
    """What is at `target/rel`, links not followed: `absent`, `file`, `link` (itself or a folder on the way),
    or `other` (a folder where the file goes, a file where a folder goes)."""
    path = target
    for i, part in enumerate(rel.parts):
        path = path / part
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            return "absent"
        if stat.S_ISLNK(mode):
            return "link"
        last = i == len(rel.parts) - 1
        if (last and not stat.S_ISREG(mode)) or (not last and not stat.S_ISDIR(mode)):
            return "other"
    return "file"


def _first_link(target: Path, rel: Path) -> Path:
    path = Path()
    for part in rel.parts:
        path = path / part
        if (target / path).is_symlink():
            return path
    return rel


_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _write_all(target: Path, files: dict[Path, bytes]) -> None:
    """Every file into a private folder first (a full disk fails here, before any name in DIR changes), then
    each renamed into place."""
    target.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".scanwatch-export-", dir=target))
    try:
        staged = {}
        for i, (rel, data) in enumerate(files.items()):
            fd = os.open(staging / str(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            staged[rel] = str(i)
        root = os.open(target, _NOFOLLOW_DIR)
        source = os.open(staging, _NOFOLLOW_DIR)
        try:
            for rel, name in staged.items():
                folder = _open_folders(root, rel.parts[:-1])
                try:
                    os.replace(name, rel.parts[-1], src_dir_fd=source, dst_dir_fd=folder)
                finally:
                    if folder != root:
                        os.close(folder)
        finally:
            os.close(source)
            os.close(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _open_folders(root: int, parts: tuple[str, ...]) -> int:
    """The folder `parts` below `root`, each made if missing and opened without following a link (a link
    there is ELOOP or ENOTDIR, never a way out of DIR)."""
    fd = root
    for part in parts:
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o755, dir_fd=fd)
        try:
            child = os.open(part, _NOFOLLOW_DIR, dir_fd=fd)
        finally:
            if fd != root:
                os.close(fd)
        fd = child
    return fd


def run(args: argparse.Namespace) -> int:
    try:
        ownership = args.ownership or (Path(os.environ[OWNERSHIP_VARIABLE]) if os.environ.get(OWNERSHIP_VARIABLE)
                                       else None)
        outcome = export(args.dir, prometheus_url=args.prometheus_url, overwrite=args.overwrite, ownership=ownership)
    except (ExportError, OSError) as exc:
        reason = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"scanwatch config export: {reason}", file=sys.stderr)
        return 1
    print(f"scanwatch config export: {args.dir}: {len(outcome.written)} written, {len(outcome.replaced)} replaced, "
          f"{len(outcome.unchanged)} unchanged (prometheus/ and grafana/; the README's provisioning steps copy "
          "from there)")
    return 0
