"""Every rule the history's readers share has one home: a view of the views layer (`sql/views/`), or an entry of
the vocabulary, the settings or the snapshot contract that SQL receives as a table or a parameter. Each rule below
is a pattern that spells it; exactly one file may match it, its home, so a second spelling (a query restating
"still listed", a grid built again, a cap or a metric name copied into SQL) fails here. docs/history.md lists
the homes ("Where each rule lives").

The migrations are left out: they are the schema's past, applied once, never read by a query. Tests are left
out: they state rules to check them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# rule -> (pattern, home). A pattern is searched in every SQL file and every Python file of the product.
RULES: dict[str, tuple[str, str]] = {
    # GET /projects still lists a target / a project (the merge marks `removed_at`).
    "target still listed": (r"\bt\.removed_at\s+IS\b", "sql/views/target_states.sql"),
    "project still listed": (r"\bp\.removed_at\s+IS\b", "sql/views/project_states.sql"),
    "still listed, spelled on a table of its own": (r"(?<![pt]\.)\bremoved_at\s+IS\s+(NOT\s+)?NULL", ""),
    # A site whose ownership is not proved (its issues hidden by the service).
    "site not proved": (r"\bNOT\s+(\w+\.)?verified\b|(\w+\.)?verified\s*(=|IS)\s*(false|true|NOT)|"
                        r"coalesce\(\s*(\w+\.)?verified\b|hidden_issues\s+IS\s+NOT\s+NULL",
                        "sql/views/target_states.sql"),
    # A scan still pending: an unfinished status, not settled as gone.
    "scan still pending": (r"(?-i:NOT)\s+(\w+\.)?finished\b", "sql/views/pending_scans.sql"),
    # Why an issue is set aside: the hidden reasons' words.
    "hidden reasons": (r"""['"](unverified|target_removed|project_removed)['"]""", "pipelines/core/vocabulary.py"),
    # Leaving `fixed` is a regression, recorded as `reopened`.
    "fixed/reopened transitions": (r"\bevent\s*(=|<>|IN\s*\()[^)\n]*'reopened'|CASE\s+event\s+WHEN\s+'reopened'|"
                                   r"THEN\s+'reopened'\s+ELSE|"
                                   r"\b(from_value|from_status|old_status)\s*(=|IN\s*\()[^)\n]*'fixed'",
                                   "sql/views/status_moves.sql"),
    # What a label may keep (characters), for /metrics, the pages and the backfilled series.
    "label caps": (r"""\b\d+\)\s+AS\s+(title|location|address|project|workspace)\b|"""
                   r"""['"](title|location|address)['"]\s*:\s*\d+""", "pipelines/snapshot/labels.py"),
    # The severities a grid lists: the vocabulary's, then any other seen.
    "severity grid": (r"SELECT\s+(\w+\.)?severity\s+FROM\s+severities\s+UNION|"
                      r"\bseverities\s+AS\s+\w+\s+LEFT\s+JOIN\s+sla_policy|"
                      r"unnest\(CAST\(\$severities\s+AS\s+VARCHAR\[\]\)\)\s+AS\s+severity\s+UNION",
                      "sql/views/severity_grid.sql"),
    # The followed name of the one workspace of the two variables.
    # (The SLA profile of SCANWATCH_SLA_DAYS is also called "default": its own home is `DEFAULT_PROFILE`.)
    "default workspace name": (r"""'default'|(?<!DEFAULT_PROFILE )(=|==)\s*"default"(?!\w)""",
                               "pipelines/core/credentials.py"),
    # A metric's name.
    "metric names": (r"""['"]secscan_[a-z_]+['"]""", "pipelines/snapshot/catalogue.py"),
}


def product_files(root: Path = ROOT) -> list[Path]:
    sql = [p for p in (root / "sql").rglob("*.sql") if "migrations" not in p.relative_to(root / "sql").parts]
    return sorted(sql + list((root / "pipelines").rglob("*.py")))


def spelling_files(pattern: str, root: Path = ROOT) -> list[str]:
    """The product files that spell the rule (comments included: a rule restated in words is a copy too,
    except in SQL comments, which name rules to point at their homes)."""
    found = []
    for path in product_files(root):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".sql":
            text = re.sub(r"--[^\n]*", "", text)
        if re.search(pattern, text, re.IGNORECASE):
            found.append(path.relative_to(root).as_posix())
    return found


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_is_spelled_in_its_home_alone(rule: str) -> None:
    pattern, home = RULES[rule]
    assert spelling_files(pattern) == ([home] if home else []), rule


def test_a_second_spelling_is_caught(tmp_path: Path) -> None:
    """The count can fail: a query that restates "still listed" on its own is found beside the view."""
    for part in ("sql/views", "sql/queries", "pipelines"):
        (tmp_path / part).mkdir(parents=True)
    (tmp_path / "sql/views/target_states.sql").write_text("SELECT t.removed_at IS NULL AS listed FROM targets AS t")
    (tmp_path / "sql/queries/mine.sql").write_text("SELECT * FROM targets AS t WHERE t.removed_at IS NULL")
    assert spelling_files(RULES["target still listed"][0], tmp_path) == ["sql/queries/mine.sql",
                                                                        "sql/views/target_states.sql"]
