"""The ownership map's effect, recorded in the history (docs/ownership.md).

Each sync of a workspace asks the map which team owns each of its listed projects and writes what changed to
`project_owners` as periods (valid_from, valid_to): the views layer reads the current period (every series,
alert and cookbook row of a project names its team, and its issues' SLA deadlines follow its profile), and
readers of the past read the periods, so a project that moved carries its issues to the new team from the
sync that read the changed map, while its past stays with the team that owned it then.

The rules are matched here, in Python, because they are the operator's globs over a few hundred projects per
workspace; the database computes everything that follows from the answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pipelines.core.ownership import Owner, Ownership
from pipelines.core.sqlfiles import execute_file, read_sql, transaction


def write_sla_profiles(conn: Any, profiles: Mapping[str, Mapping[str, int]]) -> bool:
    """Make `sla_profiles` hold exactly these named profiles; returns whether it had to write (the usual sync
    finds them as they are and writes nothing)."""
    wanted = sorted((p, s, int(d)) for p, days in profiles.items() for s, d in days.items())
    held = sorted((p, s, int(d)) for p, s, d in conn.execute(read_sql("reference/sla_profiles_in_force.sql")
                                                           ).fetchall())
    if held == wanted:
        return False
    with transaction(conn):
        execute_file(conn, "reference/sla_profiles.sql", {
            "keys": [f"{p}/{s}" for p, s, _ in wanted], "profiles": [p for p, _, _ in wanted],
            "severities": [s for _, s, _ in wanted], "days": [d for _, _, d in wanted]})
    return True


def record_owners(conn: Any, *, workspace_id: str | None, names: Iterable[str | None], ownership: Ownership,
                  now: datetime) -> list[str]:
    """Give the workspace's listed projects their owners from the map, writing a new period for each project
    whose team, profile or claim changed; returns the warning lines (rules aimed at this workspace that claim
    none of its projects). A workspace not read yet has no projects: nothing to do."""
    if workspace_id is None:
        return []
    write_sla_profiles(conn, ownership.profiles)
    present: tuple[str, ...] = tuple(n for n in names if n)
    projects: dict[str, tuple[str | None, list[str]]] = {}
    for project_id, name, address in conn.execute(read_sql("ownership/projects.sql"),
                                                  {"workspace_id": workspace_id}).fetchall():
        entry = projects.setdefault(project_id, (name, []))
        if address is not None:
            entry[1].append(address)
    owners: dict[str, Owner] = {pid: ownership.owner(present, pid, name, addresses)
                                for pid, (name, addresses) in projects.items()}
    with transaction(conn):
        # In the workspace's turn, as its merges: two runs of one workspace at once never both open a period.
        conn.engine.lock_workspace(conn, workspace_id)
        current = {pid: (team, profile, rule is None) for pid, team, profile, rule in
                   conn.execute(read_sql("ownership/current.sql"), {"workspace_id": workspace_id}).fetchall()}
        changed = [(pid, o) for pid, o in sorted(owners.items())
                   if current.get(pid) != (o.team, o.sla_profile, o.rule is None)]
        if changed:
            execute_file(conn, "ownership/record.sql", {
                "workspace_id": workspace_id, "now": now.astimezone(UTC).isoformat(),
                "project_ids": [pid for pid, _ in changed], "teams": [o.team for _, o in changed],
                "profiles": [o.sla_profile for _, o in changed],
                "rules": [-1 if o.rule is None else o.rule for _, o in changed]})
    return ownership.unmatched(present, (o.rule for o in owners.values() if o.rule is not None))
