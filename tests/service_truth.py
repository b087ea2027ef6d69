"""What the history must hold after a sync, worked out from the service itself, without scanwatch's code.

The fault, crash and concurrency suites compare a disturbed sync with a clean sync of the same world. That
proves the disturbance changes nothing, not that the clean sync is right, so each clean reference is first
checked here against an independent walk of the API (`benchmarks/oracle.py`: plain httpx, every page):

- every project, target, scan and issue the service lists is in the history, under the workspace that
  lists it, and each of its columns named after an API field holds what the service says (instants compared
  as instants); the account's fields likewise, nested ones flattened (`api_access.allowed` is
  `api_access_allowed`); the last quota sample and the last score sample (every project and target listed);
- a row the service no longer lists is kept, marked as removed (projects, targets) or set aside (issues);
- the events one sync records are exactly the changes between two walks of the API, computed here in Python:
  `opened` for an issue first listed, `reopened` for a fixed one listed open again (or fixed again later:
  then `reopened` and `status_changed` back to fixed), `status_changed` for any other status change and
  `severity_changed`. (Issues that leave their list and come back are the subject of tests/ingest; a
  world in which one does fails this check, and the expectation must then be written.)

Like `tests/history_dump.py`, it reads the history through a DB-API style connection with plain SQL, so a
PostgreSQL history can be held to the same truth.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from benchmarks.oracle import Oracle, WorldState


@dataclass
class Truth:
    """One walk of the service: the account and every list, as the API shows them."""

    account: dict[str, Any]
    state: WorldState

    @property
    def workspace_id(self) -> str:
        return self.account["workspace"]["id"]

    def targets(self) -> dict[str, dict[str, Any]]:
        return {t["id"]: t for p in self.state.projects for t in p.get("targets") or []}

    def projects(self) -> dict[str, dict[str, Any]]:
        return {p["id"]: {k: v for k, v in p.items() if k != "targets"} for p in self.state.projects}

    def scans(self) -> dict[str, dict[str, Any]]:
        return {s["id"]: {**s, "project_id": pid} for pid, rows in self.state.scans.items() for s in rows}

    def issues(self) -> dict[str, dict[str, Any]]:
        return self.state.issues_by_id()


def walk(base_url: str, api_key: str) -> Truth:
    """The service as an independent client sees it now."""
    oracle = Oracle(base_url, api_key)
    try:
        return Truth(account=oracle.get("/account", {}), state=oracle.state())
    finally:
        oracle.close()


def _instant(value: Any) -> Any:
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] == "T":
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return value


def _same(stored: Any, shown: Any) -> bool:
    if isinstance(shown, dict | list):
        stored = json.loads(stored) if isinstance(stored, str | bytes) else stored
        return stored == shown
    if isinstance(shown, float) or isinstance(stored, float):
        return stored is not None and shown is not None and abs(float(stored) - float(shown)) < 1e-9
    return _instant(stored) == _instant(shown)


def _rows(conn: Any, sql: str) -> list[dict[str, Any]]:
    cur = conn.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"api_access": {"allowed": true}}` as `{"api_access_allowed": true}`; a nested field is also known by
    its own name (`api_access.trial_ends_at` is stored as trial_ends_at). `features` stays one JSON value."""
    out: dict[str, Any] = {}
    leaves: dict[str, Any] = {}
    for key, value in obj.items():
        if isinstance(value, dict) and key != "features":
            out.update(_flatten(value, f"{prefix}{key}_"))
            leaves.update({k: v for k, v in value.items() if not isinstance(v, dict)})
        else:
            out[f"{prefix}{key}"] = value
    return {**leaves, **out}


def _compare(table: str, stored: dict[str, dict[str, Any]], shown: dict[str, dict[str, Any]], workspace: str,
             problems: list[str]) -> None:
    missing = sorted(set(shown) - set(stored))
    if missing:
        problems.append(f"{table}: {len(missing)} listed by the service, not in the history: {missing[:3]}")
    for key in sorted(set(shown) & set(stored)):
        row, item = stored[key], shown[key]
        if row.get("workspace_id") != workspace:
            problems.append(f"{table} {key}: workspace_id {row.get('workspace_id')!r}, listed under {workspace!r}")
        for field, value in item.items():
            if field == "object" or field not in row:
                continue
            if not _same(row[field], value):
                problems.append(f"{table} {key}.{field}: history {row[field]!r}, service {value!r}")


def mismatches(conn: Any, truth: Truth) -> list[str]:
    """How the history behind `conn` differs from what the service shows (empty when it holds the truth)."""
    problems: list[str] = []
    ws = truth.workspace_id
    where = f"WHERE workspace_id = '{ws}'"
    accounts = {r["workspace_id"]: r for r in _rows(conn, f"SELECT * FROM accounts {where}")}
    account = {k: v for k, v in _flatten(truth.account).items() if k != "quotas" and not k.startswith("quotas_")}
    _compare("accounts", accounts, {ws: account}, ws, problems)
    last = _rows(conn, f"SELECT quota, \"limit\", used, remaining FROM quota_snapshots {where} AND observed_at = "
                       f"(SELECT max(observed_at) FROM quota_snapshots {where})")
    quotas = {r["quota"]: (r["limit"], r["used"], r["remaining"]) for r in last}
    shown_quotas = {q: (v["limit"], v["used"], v["remaining"]) for q, v in truth.account.get("quotas", {}).items()}
    if quotas != shown_quotas:
        problems.append(f"quota_snapshots: last sample {quotas}, service {shown_quotas}")
    sample = _rows(conn, f"SELECT project_id, target_id, score, grade, open_issues, hidden_issues FROM score_snapshots "
                         f"{where} AND observed_at = (SELECT max(observed_at) FROM score_snapshots {where})")
    sampled = {(r["project_id"], r["target_id"]): (r["score"], r["grade"], r["open_issues"], r["hidden_issues"])
               for r in sample}
    shown_scores = {(p["id"], None): (p["score"], p["grade"], p["open_issues"], None) for p in truth.state.projects}
    shown_scores.update({(t["project_id"], t["id"]): (t["score"], t["grade"], None, t["hidden_issues"])
                         for t in truth.targets().values()})
    if sampled != shown_scores:
        wrong = sorted(set(sampled.items()) ^ set(shown_scores.items()), key=repr)[:4]
        problems.append(f"score_snapshots: the last sample differs from the service: {wrong}")
    for table, shown, gone in (("projects", truth.projects(), "removed_at"),
                               ("targets", truth.targets(), "removed_at"),
                               ("scans", truth.scans(), None),
                               ("issues", truth.issues(), "hidden_reason")):
        stored = {r["id"]: r for r in _rows(conn, f"SELECT * FROM {table} {where}")}
        _compare(table, stored, shown, ws, problems)
        if gone:
            unmarked = sorted(k for k in set(stored) - set(shown) if stored[k][gone] is None)
            if unmarked:
                problems.append(f"{table}: {len(unmarked)} no longer listed, not marked by {gone}: {unmarked[:3]}")
        if table == "issues":
            marked = sorted(k for k in set(stored) & set(shown) if stored[k]["hidden_reason"] is not None)
            if marked:
                problems.append(f"issues: {len(marked)} listed but set aside as hidden: {marked[:3]}")
    return problems


Event = tuple[str, str, str | None, str | None]  # issue id, event, from, to


def expected_events(before: Truth | None, after: Truth) -> Counter[Event]:
    """The events a sync must record between two walks of the service (`before` None: a first sync)."""
    old = before.issues() if before else {}
    new = after.issues()
    out: Counter[Event] = Counter()
    for iid, issue in new.items():
        was = old.get(iid)
        if was is None:
            out[(iid, "opened", None, issue["status"])] += 1
            continue
        if was["status"] == issue["status"] == "fixed" and was["fixed_at"] and issue["fixed_at"] \
                and _instant(issue["fixed_at"]) > _instant(was["fixed_at"]):
            # Fixed again later: it regressed and was fixed between the two walks.
            out[(iid, "reopened", "fixed", "open")] += 1
            out[(iid, "status_changed", "open", "fixed")] += 1
        elif was["status"] != issue["status"]:
            kind = "reopened" if was["status"] == "fixed" else "status_changed"
            out[(iid, kind, was["status"], issue["status"])] += 1
        if was["severity"] != issue["severity"]:
            out[(iid, "severity_changed", was["severity"], issue["severity"])] += 1
    return out


def recorded_events(conn: Any, workspace_id: str, since: Any = None) -> Counter[Event]:
    """The events the history holds for a workspace (after `since`, scanwatch's clock, when given)."""
    cond = f" AND observed_at > '{since.isoformat()}'" if since is not None else ""
    rows = conn.execute("SELECT issue_id, event, from_value, to_value FROM issue_events "
                        f"WHERE workspace_id = '{workspace_id}'{cond}").fetchall()
    return Counter(tuple(r) for r in rows)


def last_event_at(conn: Any, workspace_id: str) -> Any:
    return conn.execute(f"SELECT max(observed_at) FROM issue_events WHERE workspace_id = '{workspace_id}'"
                        ).fetchall()[0][0]
