"""`SCANWATCH_OWNERSHIP_FILE`: which team owns each project, and on which SLA profile (docs/ownership.md).

The service has no owner field, so the operator keeps a map beside the workspaces file:

```yaml
default_team: unowned
sla_profiles:
  tier1: {critical: 2, high: 7}
teams:
  payments: {sla_profile: tier1}
rules:                    # the first rule that matches a project wins
  - team: payments
    workspace: acme
    project: "shop-*"
  - team: web
    address: "https://*.example.com/*"
```

The map is checked whole before anything runs: every problem is one line naming the file, the rule and the
field, all of them raised together (an operator fixing a map wants every bad line at once, not one per run).
It is read bounded and without anchors, as the workspaces file is, and parsed once per text of the file, so
an edit is picked up by the next run that asks, while scanwatch runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Any

from pipelines.core.credentials import ConfigError, shown
from pipelines.core.vocabulary import MAX_SLA_DAYS, SEVERITIES

OWNERSHIP_VARIABLE = "SCANWATCH_OWNERSHIP_FILE"
DEFAULT_TEAM = "unowned"
DEFAULT_PROFILE = "default"  # the profile of SCANWATCH_SLA_DAYS
# A team or profile name becomes a label value and an Alertmanager receiver's name.
TEAM = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
MAX_FILE_BYTES = 1 << 20
MAX_PATTERN = 500
SLA_SEVERITIES: tuple[str, ...] = tuple(s for s in SEVERITIES if s != "info")
_TOP = {"default_team", "sla_profiles", "teams", "rules"}
_MATCHERS = ("workspace", "project_id", "project", "address")
_RULE_FIELDS = {"team", "sla_profile", *_MATCHERS}


@dataclass(frozen=True)
class Owner:
    """What the map gives one project: its team, its SLA profile and the rule that said so (None: no rule)."""

    team: str
    sla_profile: str
    rule: int | None


@dataclass(frozen=True)
class Rule:
    index: int
    team: str
    sla_profile: str | None = None
    workspace: str | None = None
    project_ids: tuple[str, ...] | None = None
    project: str | None = None
    address: str | None = None

    def aims_at(self, workspace_names: Iterable[str]) -> bool:
        """Whether this rule can claim projects of a workspace known by these names (its name, its label)."""
        return self.workspace is None or any(fnmatchcase(n, self.workspace) for n in workspace_names if n)

    def matches(self, workspace_names: Iterable[str], project_id: str, project: str | None,
                addresses: Iterable[str]) -> bool:
        return (self.aims_at(workspace_names)
                and (self.project_ids is None or project_id in self.project_ids)
                and (self.project is None or fnmatchcase(project or "", self.project))
                and (self.address is None or any(fnmatchcase(a or "", self.address) for a in addresses)))


@dataclass(frozen=True)
class Ownership:
    """The map: rules, the default team and the named SLA profiles (the default profile is not among them)."""

    path: Path | None = None
    default_team: str = DEFAULT_TEAM
    profiles: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    team_profiles: Mapping[str, str] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()

    @property
    def teams(self) -> tuple[str, ...]:
        """Every team the map names (rules, `teams:` and the default team), sorted: one route per team."""
        return tuple(sorted({self.default_team, *self.team_profiles, *(r.team for r in self.rules)}))

    def owner(self, workspace_names: Iterable[str], project_id: str, project: str | None,
              addresses: Iterable[str]) -> Owner:
        """The first matching rule's team and profile, else the default team's."""
        names, found = tuple(workspace_names), tuple(addresses)
        for rule in self.rules:
            if rule.matches(names, project_id, project, found):
                return Owner(rule.team, rule.sla_profile or self.team_profiles.get(rule.team, DEFAULT_PROFILE),
                             rule.index)
        return Owner(self.default_team, self.team_profiles.get(self.default_team, DEFAULT_PROFILE), None)

    def unaimed(self, workspace_names: Iterable[Iterable[str]]) -> list[str]:
        """Warning lines: rules whose `workspace` matches none of the followed workspaces."""
        followed = [tuple(names) for names in workspace_names]
        return [f"{self.path}: rules[{r.index}] (team {r.team}): field 'workspace' {shown(r.workspace)} matches "
                "no followed workspace; the rule claims nothing" for r in self.rules
                if r.workspace is not None and not any(r.aims_at(names) for names in followed)]

    def unmatched(self, workspace_names: Iterable[str], claimed: Iterable[int]) -> list[str]:
        """Warning lines: rules aimed at this workspace by name that claimed none of its projects."""
        names, used = tuple(workspace_names), set(claimed)
        shown_name = next((n for n in names if n), "?")
        return [f"{self.path}: rules[{r.index}] (team {r.team}) matches no project of workspace {shown_name}"
                for r in self.rules if r.workspace is not None and r.aims_at(names) and r.index not in used]


NO_MAP = Ownership()


def read_ownership(path: Path | None) -> Ownership:
    """The map of `path` checked whole (no map: every project `unowned`, one SLA policy). Raises ConfigError
    whose message is one line per problem."""
    if path is None:
        return NO_MAP
    from pipelines.core.workspaces_file import _read_file

    text = _read_file(path, MAX_FILE_BYTES, f"{OWNERSHIP_VARIABLE} names {{path}}, which does not exist",
                      f"{{path}} is not a regular file: point {OWNERSHIP_VARIABLE} at the ownership map",
                      "{path} is larger than 1 MiB: it is not an ownership map")
    return _checked(str(path), text)


@lru_cache(maxsize=8)
def _checked(path: str, text: str) -> Ownership:
    """One text of the map, parsed and checked once (keyed on the text, so an edit is read at once)."""
    from pipelines.core.workspaces_file import parse_yaml

    problems: list[str] = []
    doc = parse_yaml(path, text, "the ownership map", "rule")
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping with rules (and optionally default_team, sla_profiles, "
                          "teams)")
    for key in sorted(set(map(str, doc)) - _TOP):
        problems.append(f"{path}: unknown field {shown(key, 40)} (fields: default_team, sla_profiles, teams, rules)")
    default_team = doc.get("default_team", DEFAULT_TEAM)
    if not _is_name(default_team):
        problems.append(f"{path}: field 'default_team' {_name_rule(default_team)}")
        default_team = DEFAULT_TEAM
    profiles = _profiles(path, doc.get("sla_profiles"), problems)
    team_profiles = _teams(path, doc.get("teams"), profiles, problems)
    raw_rules = doc.get("rules") or []
    rules: list[Rule] = []
    if not isinstance(raw_rules, list):
        problems.append(f"{path}: field 'rules' must be a list of rules (team and matchers)")
        raw_rules = []
    for index, entry in enumerate(raw_rules):
        rule = _rule(path, index, entry, profiles, problems)
        if rule is not None:
            rules.append(rule)
    if problems:
        raise ConfigError("\n".join(problems))
    return Ownership(Path(path), default_team, profiles, team_profiles, tuple(rules))




def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(TEAM.fullmatch(value))


def _name_rule(value: Any) -> str:
    return ("must be lower-case letters, digits, '-' or '_' (at most 40, starting with a letter or digit), "
            f"got {shown(value, 40)}")


def _profiles(path: str, raw: Any, problems: list[str]) -> dict[str, dict[str, int]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{path}: field 'sla_profiles' must map profile names to days per severity")
        return {}
    found: dict[str, dict[str, int]] = {}
    for name, days in raw.items():
        where = f"{path}: sla_profiles.{shown(name, 40)}"
        if not _is_name(name) or name == DEFAULT_PROFILE:
            problems.append(f"{where}: a profile's name {_name_rule(name)}" if name != DEFAULT_PROFILE else
                            f"{where}: {DEFAULT_PROFILE!r} is SCANWATCH_SLA_DAYS: give this profile another name")
            continue
        if not isinstance(days, dict) or not days:
            problems.append(f"{where}: expected days per severity, e.g. {{critical: 2, high: 7}}")
            continue
        bad = [f"{shown(k, 20)}: {shown(v, 20)}" for k, v in days.items()
               if k not in SLA_SEVERITIES or isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_SLA_DAYS]
        if bad:
            problems.append(f"{where}: {bad[0]} is not severity: days with severity in {', '.join(SLA_SEVERITIES)} "
                            f"and days a whole number from 1 to {MAX_SLA_DAYS}")
            continue
        found[name] = {s: int(days[s]) for s in SLA_SEVERITIES if s in days}
    return found


def _profile_ok(value: Any, profiles: Mapping[str, Any]) -> bool:
    return value == DEFAULT_PROFILE or (isinstance(value, str) and value in profiles)


def _unknown_profile(value: Any, profiles: Mapping[str, Any]) -> str:
    known = ", ".join([DEFAULT_PROFILE, *sorted(profiles)])
    return f"field 'sla_profile' {shown(value, 40)} is no profile of sla_profiles (profiles: {known})"


def _teams(path: str, raw: Any, profiles: Mapping[str, Any], problems: list[str]) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{path}: field 'teams' must map team names to {{sla_profile: NAME}}")
        return {}
    found: dict[str, str] = {}
    for team, entry in raw.items():
        where = f"{path}: teams.{shown(team, 40)}"
        entry = {} if entry is None else entry
        if not _is_name(team):
            problems.append(f"{where}: a team's name {_name_rule(team)}")
        elif not isinstance(entry, dict) or set(map(str, entry)) - {"sla_profile"}:
            problems.append(f"{where}: expected {{sla_profile: NAME}} or nothing")
        elif "sla_profile" in entry and not _profile_ok(entry["sla_profile"], profiles):
            problems.append(f"{where}: {_unknown_profile(entry['sla_profile'], profiles)}")
        else:
            found[team] = entry.get("sla_profile", DEFAULT_PROFILE)
    return found


def _pattern(where: str, key: str, value: Any, problems: list[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_PATTERN or not value.isprintable():
        problems.append(f"{where}: field '{key}' must be a non-empty glob (* any run of characters, ? one), "
                        f"got {shown(value, 40)}")
        return None
    return value


def _rule(path: str, index: int, entry: Any, profiles: Mapping[str, Any], problems: list[str]) -> Rule | None:
    where = f"{path}: rules[{index}]"
    if not isinstance(entry, dict):
        problems.append(f"{where}: expected a mapping with team and at least one of {', '.join(_MATCHERS)}")
        return None
    unknown = sorted(set(map(str, entry)) - _RULE_FIELDS)
    if unknown:
        problems.append(f"{where}: unknown field {shown(unknown[0], 40)} (fields: team, sla_profile, "
                        f"{', '.join(_MATCHERS)})")
        return None
    team = entry.get("team")
    if team is None:
        problems.append(f"{where}: field 'team' is missing")
        return None
    if not _is_name(team):
        problems.append(f"{where}: field 'team' {_name_rule(team)}")
        return None
    where = f"{where} (team {team})"
    if not any(entry.get(m) is not None for m in _MATCHERS):
        problems.append(f"{where}: no matcher: give at least one of {', '.join(_MATCHERS)} (a rule for every "
                        "project is default_team)")
        return None
    profile = entry.get("sla_profile")
    if profile is not None and not _profile_ok(profile, profiles):
        problems.append(f"{where}: {_unknown_profile(profile, profiles)}")
        return None
    ids = entry.get("project_id")
    if ids is not None:
        ids = [ids] if isinstance(ids, str) else ids
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and 0 < len(i) <= 64
                                                           and i.isprintable() for i in ids):
            problems.append(f"{where}: field 'project_id' must be a project id or a list of them")
            return None
        ids = tuple(ids)
    before = len(problems)
    patterns = {key: _pattern(where, key, entry.get(key), problems) for key in ("workspace", "project", "address")}
    if len(problems) > before:
        return None
    return Rule(index, team, profile, patterns["workspace"], ids, patterns["project"], patterns["address"])
