"""One definition per rule: change a rule in its one file of the views layer, and the snapshot (/metrics), the
cookbook and the backfilled series all follow, with nothing else edited: the values each reader gives (how
many issues are open), not only the labels.

The test copies scanwatch's SQL folder, edits two views there (what a project is called, and what counts as
visible), installs scanwatch with the copy as its own SQL (as a wheel carries it) and opens the history: the
writer sees the layer's digest moved and recreates the views, and every reader reads the new rule.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from datetime import timedelta
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from pipelines.backfill import tsdb
from pipelines.core import sqlfiles
from pipelines.storage import connect
from pipelines.storage.read_only import execute_read_only
from tests.backfill.handmade import FIRST_SYNC, at, history
from tests.helpers import build_snapshot

ROOT = Path(__file__).resolve().parents[2]
ISSUES = [("i1", "p", "high", "open", at(-30), None), ("i2", "p", "high", "open", at(-20), None),
          ("i3", "p", "critical", "fixed", at(-25), at(-9))]


def _readers(db: Path, tmp: Path) -> dict[str, object]:
    """What the snapshot, the cookbook and the backfill say about project `p` and its open issues."""
    conn = connect(db)
    try:
        snap = build_snapshot(conn, now=FIRST_SYNC + timedelta(hours=1))
        outcome = tsdb.write_series(conn, tsdb.Plan(tmp, labels={"job": "scanwatch"}), tmp / "series.om")
    finally:
        conn.close()
    assert outcome.samples
    columns, rows = execute_read_only(db, sqlfiles.cookbook()["open_issues_by_project"].sql)
    listed = [dict(zip(columns, row, strict=True)) for row in rows]
    samples = [s for f in text_string_to_metric_families((tmp / "series.om").read_text().replace("# EOF\n", ""))
               for s in f.samples]
    backfilled = {s.labels["project"] for s in samples if "project" in s.labels}
    open_series = [s for s in samples if s.name == "secscan_issues_open"]
    last = max(s.timestamp for s in open_series)
    return {
        "snapshot project": {r["project"] for r in snap["tables"]["projects"]},
        "snapshot open": sum(r["open"] for r in snap["tables"]["issue_severity"]),
        "cookbook project": {r["project"] for r in listed},
        "cookbook open": sum(r["total"] for r in listed),
        "backfill project": backfilled,
        "backfill open": sum(s.value for s in open_series if s.timestamp == last),
    }


def _installed(site: Path, sql: Path) -> Path:
    """scanwatch as a wheel installs it (pyproject's force-include: the package carries its own copy of the
    project's files, which wins over a checkout's), with `sql` as its SQL."""
    shutil.copytree(ROOT / "pipelines", site / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    carried = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    for source, inside in {**carried["force-include"], str(sql): carried["force-include"]["sql"]}.items():
        if source != "sql":
            (shutil.copytree if (ROOT / source).is_dir() else shutil.copy)(ROOT / source, site / inside)
    return site


def _readers_of(site: Path, db: Path, tmp: Path) -> dict[str, object]:
    """`_readers` in a process that imports scanwatch from `site`, this checkout's tests beside it."""
    code = ("import sys; from pathlib import Path; from pipelines.core import sqlfiles; "
            "from tests.workspaces.test_one_rule import _readers; "
            "print(repr((str(sqlfiles.sql_dir()), _readers(Path(sys.argv[1]), Path(sys.argv[2])))))")
    done = subprocess.run([sys.executable, "-c", code, str(db), str(tmp)], cwd=site, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    where, readers = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert where == str(site / "pipelines" / "_sql")  # the edited copy, not this checkout's
    return readers


def test_a_rule_changed_in_its_one_file_is_followed_by_the_snapshot_the_cookbook_and_the_backfill(
        tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    conn = history(db, projects=["p"], targets=[("t1", "p")],
                   scans=[("s1", "t1", at(-20), 70, "done"), ("s2", "t1", at(-5), 80, "done")], issues=ISSUES)
    conn.execute("UPDATE issues SET hidden_reason = 'unverified', hidden_at = first_observed_at WHERE id = 'i2'")
    conn.close()
    (tmp_path / "before").mkdir()
    before = _readers(db, tmp_path / "before")
    assert before == {"snapshot project": {"P"}, "snapshot open": 1, "cookbook project": {"P"}, "cookbook open": 1,
                      "backfill project": {"P"}, "backfill open": 1}

    edited = tmp_path / "sql"
    shutil.copytree(sqlfiles.sql_dir(), edited)
    labels = edited / "views" / "project_labels.sql"
    labels.write_text(labels.read_text().replace("coalesce(p.name, p.id) AS project",
                                                 "'project ' || coalesce(p.name, p.id) AS project"))
    visible = edited / "views" / "visible_issues.sql"  # an unproved site's issues count as visible now
    visible.write_text(visible.read_text().replace("WHERE i.hidden_reason IS NULL",
                                                   "WHERE coalesce(i.hidden_reason, 'unverified') = 'unverified'"))
    (tmp_path / "after").mkdir()
    after = _readers_of(_installed(tmp_path / "site", edited), db, tmp_path / "after")
    assert after == {"snapshot project": {"project P"}, "snapshot open": 2, "cookbook project": {"project P"},
                     "cookbook open": 2, "backfill project": {"project P"}, "backfill open": 2}
