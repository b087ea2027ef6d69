"""Copies the rules and dashboards into the Helm chart, which can read only files inside itself (a dev-only
script, standard library only).

prometheus/ and grafana/dashboards stay the one home of each rule, route and dashboard; the chart's
`files/` holds generated copies that its PrometheusRule and ConfigMaps read. Edit the originals, run
`python deploy/generate.py`, commit the output; the suite fails when the copies are stale (`--check`),
and a file left in `files/` whose original is gone counts as stale too.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ROOT / "deploy" / "helm" / "scanwatch" / "files"
SOURCES = {"rules": (ROOT / "prometheus" / "rules", "*.yml"), "dashboards": (ROOT / "grafana" / "dashboards", "*.json"),
           # The Alertmanager file, the team route (prometheus/routes/team.yml) and the templates: the chart's
           # alertmanager-config.yaml builds the same per-team routes as `scanwatch config export` from them.
           "alertmanager": (ROOT / "prometheus", "alertmanager.yml"),
           "routes": (ROOT / "prometheus" / "routes", "*.yml"),
           "templates": (ROOT / "prometheus" / "templates", "*.tmpl")}


def outputs() -> dict[Path, bytes]:
    return {FILES / kind / src.name: src.read_bytes()
            for kind, (folder, pattern) in SOURCES.items() for src in sorted(folder.glob(pattern))}


def main(argv: list[str]) -> int:
    wanted = outputs()
    present = {p for kind in SOURCES for p in (FILES / kind).glob("*") if p.is_file()}
    if "--check" in argv:
        stale = sorted(str(p.relative_to(ROOT)) for p in set(wanted) | present
                       if p not in wanted or not p.is_file() or p.read_bytes() != wanted[p])
        if stale:
            print("out of date (run python deploy/generate.py): " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    for path in present - set(wanted):
        path.unlink()
    for path, data in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
