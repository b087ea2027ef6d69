"""`scanwatch config export DIR`: the installed package's monitoring files, written out for provisioning.

A wheel carries `prometheus/` and `grafana/` inside the package (pyproject force-includes them), where no
one should have to look; this writes them into DIR in the layout the README's provisioning steps copy from:

    DIR/prometheus/prometheus.yml, alertmanager.yml, rules/, templates/, tests/
    DIR/grafana/provisioning/{datasources,dashboards,alerting}/, DIR/grafana/dashboards/

The folder keeps the checkout's relative paths (Alertmanager's `templates/*.tmpl` beside its config, the
`promtool test rules` files' `../rules/`), so each file works where it lands. A file already in DIR that
differs is never replaced silently: the export names it and writes nothing unless told `--overwrite`.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from pipelines.commands.demo_files import project_file

DEFAULT_PROMETHEUS_URL = "http://localhost:9090"
DATASOURCE = Path("grafana/provisioning/datasources/scanwatch.yml")
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


def contents(prometheus_url: str) -> dict[Path, bytes]:
    """What each exported file holds: the package's bytes, the data source with the given Prometheus url."""
    if not re.fullmatch(r"https?://\S+", prometheus_url):
        raise ExportError(f"--prometheus-url {prometheus_url!r} is not an http(s) URL; give one such as "
                          f"{DEFAULT_PROMETHEUS_URL}")
    out = {rel: src.read_bytes() for rel, src in package_files().items()}
    text = out[DATASOURCE].decode("utf-8")
    new, count = _URL_LINE.subn(lambda m: m.group(1) + prometheus_url, text)
    if count != 1:
        raise ExportError(f"{DATASOURCE} does not hold exactly one url line; reinstall scanwatch")
    out[DATASOURCE] = new.encode("utf-8")
    return out


def export(target: Path, *, prometheus_url: str = DEFAULT_PROMETHEUS_URL, overwrite: bool = False) -> Outcome:
    """Write every file, or none: a file in the way (differing, or not a file) stops the export before any write."""
    wanted = contents(prometheus_url)
    if target.exists() and not target.is_dir():
        raise ExportError(f"{target} is a file; give a folder")
    written, unchanged, replaced, blocked = [], [], [], []
    for rel, data in wanted.items():
        path = target / rel
        if path.is_file() and path.read_bytes() == data:
            unchanged.append(rel)
        elif path.exists() or path.is_symlink():
            (replaced if overwrite and path.is_file() and not path.is_symlink() else blocked).append(rel)
        else:
            written.append(rel)
    if blocked:
        names = ", ".join(str(p) for p in blocked[:5]) + (f" and {len(blocked) - 5} more" if len(blocked) > 5 else "")
        how = "move them away" if overwrite else "compare them, then move them away or pass --overwrite"
        raise ExportError(f"{len(blocked)} file(s) in {target} differ from this version's and were left as "
                          f"they are: {names}; {how} (nothing was written)")
    for rel in [*written, *replaced]:
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.scanwatch-tmp")
        temp.write_bytes(wanted[rel])
        temp.replace(path)
    return Outcome(written, unchanged, replaced)


def run(args: argparse.Namespace) -> int:
    try:
        outcome = export(args.dir, prometheus_url=args.prometheus_url, overwrite=args.overwrite)
    except (ExportError, OSError) as exc:
        reason = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"scanwatch config export: {reason}", file=sys.stderr)
        return 1
    print(f"scanwatch config export: {args.dir}: {len(outcome.written)} written, {len(outcome.replaced)} replaced, "
          f"{len(outcome.unchanged)} unchanged (prometheus/ and grafana/; the README's provisioning steps copy "
          "from there)")
    return 0
