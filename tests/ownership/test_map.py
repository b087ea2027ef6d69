"""The ownership map read and checked (pipelines/core/ownership.py): which rule claims a project, which profile
it gets, and every bad line of a map told at once, one line each, before `scanwatch sync` sends a request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.core.credentials import ConfigError
from pipelines.core.ownership import read_ownership
from pipelines.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
default_team: nobody
sla_profiles:
  tier1: {critical: 2, high: 7}
teams:
  payments: {sla_profile: tier1}
  web:
rules:
  - team: payments
    workspace: acme
    project: "shop-*"
  - team: web
    workspace: "acme"
    project: "shop-front"
  - team: web
    address: "https://*.web.example/*"
    sla_profile: default
  - team: platform
    project_id: [p9, p10]
    sla_profile: tier1
"""


def _map(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ownership.yml"
    path.write_text(text)
    return path


def test_the_first_matching_rule_wins_and_the_profile_comes_from_the_rule_then_the_team(tmp_path: Path) -> None:
    owners = read_ownership(_map(tmp_path, GOOD))
    assert owners.teams == ("nobody", "payments", "platform", "web")
    # rules[0] and rules[1] both match shop-front: the first one's team, on its team's profile
    front = owners.owner(("acme",), "p1", "shop-front", [])
    assert (front.team, front.sla_profile, front.rule) == ("payments", "tier1", 0)
    # the workspace matcher holds: the same name in another workspace is not claimed by rules 0 and 1
    other = owners.owner(("globex", "Globex Corp"), "p1", "shop-front", ["https://x.web.example/a"])
    assert (other.team, other.sla_profile, other.rule) == ("web", "default", 2)
    # a rule's own profile before its team's
    assert owners.owner(("globex",), "p10", "api", []).sla_profile == "tier1"
    # no rule: the default team, on the default profile
    nobody = owners.owner(("globex",), "p3", "blog", ["https://blog.example/"])
    assert (nobody.team, nobody.sla_profile, nobody.rule) == ("nobody", "default", None)
    # a workspace is named by its name or by its label
    assert owners.owner(("acme-x", "acme"), "p4", "shop-back", []).team == "payments"


def test_every_bad_line_is_one_line_naming_the_rule_and_the_field(tmp_path: Path) -> None:
    path = _map(tmp_path, """
default_team: Not A Team
sla_profiles:
  tier1: {critical: 0}
  default: {critical: 3}
owners: []
rules:
  - team: payments
  - project: shop
  - team: web
    project: shop
    sla_profile: gold
  - team: web
    projekt: shop
  - team: ok
    project: "shop-*"
""")
    with pytest.raises(ConfigError) as caught:
        read_ownership(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 8, lines
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    expected = ["unknown field 'owners'", "field 'default_team'", "sla_profiles.'tier1'", "sla_profiles.'default'",
                "rules[0] (team payments): no matcher", "rules[1]: field 'team' is missing",
                "rules[2] (team web): field 'sla_profile' 'gold' is no profile",
                "rules[3]: unknown field 'projekt'"]
    for line, part in zip(lines, expected, strict=True):
        assert part in line, (part, line)


def test_a_rule_aimed_at_no_followed_workspace_is_a_warning(tmp_path: Path) -> None:
    owners = read_ownership(_map(tmp_path, GOOD.replace("workspace: acme", "workspace: acmee")))
    [warning] = owners.unaimed([("acme", "Acme Corp"), ("globex", None)])
    assert "rules[0] (team payments): field 'workspace' 'acmee' matches no followed workspace" in warning


def test_the_map_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = _map(tmp_path, GOOD)
    settings = Settings.load({"SCANWATCH_OWNERSHIP_FILE": str(path)})
    assert settings.ownership.owner(("acme",), "p1", "shop-front", []).team == "payments"
    path.write_text(GOOD.replace("team: payments\n    workspace", "team: checkout\n    workspace"))
    assert settings.ownership.owner(("acme",), "p1", "shop-front", []).team == "checkout"
    assert Settings.load({}).ownership.teams == ("unowned",)


def test_sync_refuses_a_bad_map_in_one_line_per_problem_before_any_request(tmp_path: Path) -> None:
    path = _map(tmp_path, "rules:\n  - team: Payments\n    project: shop\n  - team: web\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_") and k != "DAGSTER_HOME"}
    env.update({"SCANWATCH_BASE_URL": "http://127.0.0.1:9/v1", "SCANWATCH_API_KEY": "rst_not_used",
                "SCANWATCH_DB": str(tmp_path / "history.duckdb"), "SCANWATCH_OWNERSHIP_FILE": str(path)})
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"scanwatch sync: {path}: rules[0]: field 'team' must be lower-case"), lines
    assert lines[1] == f"scanwatch sync: {path}: rules[1] (team web): no matcher: give at least one of workspace, " \
                       "project_id, project, address (a rule for every project is default_team)"
    assert not (tmp_path / "history.duckdb").exists()
