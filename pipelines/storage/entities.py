"""What each API object looks like once typed: columns, required keys and the enums this version knows.

Staged columns arrive as text; these types drive the `TRY_CAST`s of the typed staging table, and a value
that fails its cast, or an enum value this version does not know, is stored and listed in
`ingest_warnings` rather than failing the sync.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipelines.core.vocabulary import ISSUE_STATUSES, SCAN_STATUSES, SEVERITIES


@dataclass(frozen=True)
class Entity:
    """One API object and the history table it lands in.

    `columns` is the one list of its API fields: the staging load, the typed casts, the unchanged test and
    the generated UPDATE and INSERT (`pipelines.storage.upsert`) all read it, so a new field is added here
    and in a migration, nowhere else. The table adds `workspace_id`, `first_observed_at`,
    `last_observed_at` (and `removed_at` where `tracks_removal`).
    """

    name: str
    columns: dict[str, str]
    required: tuple[str, ...] = ("id",)
    enums: dict[str, tuple[str, ...]] = field(default_factory=dict)
    immutable: tuple[str, ...] = ()  # fields a later sighting never overwrites (the first one is the truth)
    tracks_removal: bool = False  # a row seen again after the service stopped listing it is no longer removed
    # How a field is updated when it is not simply overwritten: SQL over `t` (the stored row) and `s` (staged).
    update_rules: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.required[0]


ACCOUNT = Entity(
    "account",
    {
        "workspace_id": "VARCHAR", "workspace_name": "VARCHAR", "plan": "VARCHAR", "api_access_allowed": "BOOLEAN",
        "trial_ends_at": "TIMESTAMPTZ", "period_start": "TIMESTAMPTZ", "period_end": "TIMESTAMPTZ",
        "free_fixes_left": "INTEGER", "pack_credits_scans": "INTEGER", "pack_credits_fixes": "INTEGER",
        "projects_limit": "INTEGER", "projects_used": "INTEGER", "projects_paused": "INTEGER",
        "addresses_per_project": "INTEGER", "features": "JSON",
    },
    required=("workspace_id",),
    enums={"plan": ("free", "solo", "pro")},
)

QUOTA = Entity("quotas", {"quota": "VARCHAR", "limit": "INTEGER", "used": "INTEGER", "remaining": "INTEGER"},
               required=("quota",))


def _at(value: object, *path: str) -> object:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def account_rows(body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """GET /account as the `accounts` row and one row per quota: its nested objects (workspace, api_access,
    period, pack_credits, projects, quotas) read by the contract's field names, so both engines type and warn
    about every value the same way; a field that is not where the contract puts it is missing (NULL)."""
    quotas = body.get("quotas")
    return {
        "workspace_id": _at(body, "workspace", "id"), "workspace_name": _at(body, "workspace", "name"),
        "plan": body.get("plan"), "api_access_allowed": _at(body, "api_access", "allowed"),
        "trial_ends_at": _at(body, "api_access", "trial_ends_at"),
        "period_start": _at(body, "period", "start"), "period_end": _at(body, "period", "end"),
        "free_fixes_left": body.get("free_fixes_left"),
        "pack_credits_scans": _at(body, "pack_credits", "scans"),
        "pack_credits_fixes": _at(body, "pack_credits", "fixes"),
        "projects_limit": _at(body, "projects", "limit"), "projects_used": _at(body, "projects", "used"),
        "projects_paused": _at(body, "projects", "paused"),
        "addresses_per_project": body.get("addresses_per_project"), "features": body.get("features"),
    }, [{"quota": name, "limit": _at(q, "limit"), "used": _at(q, "used"), "remaining": _at(q, "remaining")}
        for name, q in (quotas.items() if isinstance(quotas, dict) else ())]


PROJECT = Entity(
    "projects",
    {
        "id": "VARCHAR", "name": "VARCHAR", "score": "INTEGER", "grade": "VARCHAR", "open_issues": "INTEGER",
        "paused": "BOOLEAN", "last_scan_at": "TIMESTAMPTZ",
    },
    tracks_removal=True,
)

TARGET = Entity(
    "targets",
    {
        "id": "VARCHAR", "project_id": "VARCHAR", "kind": "VARCHAR", "address": "VARCHAR", "verified": "BOOLEAN",
        "score": "INTEGER", "grade": "VARCHAR", "last_scan_at": "TIMESTAMPTZ", "hidden_issues": "INTEGER",
    },
    required=("id", "project_id"),
    enums={"kind": ("domain", "repository")},
    tracks_removal=True,
)


SCAN = Entity(
    "scans",
    {
        "id": "VARCHAR", "target_id": "VARCHAR", "project_id": "VARCHAR", "kind": "VARCHAR", "status": "VARCHAR",
        "score": "INTEGER", "grade": "VARCHAR", "coverage": "DOUBLE PRECISION", "audit_fallback": "BOOLEAN",
        "reused": "BOOLEAN", "next_real_scan_at": "TIMESTAMPTZ", "created_at": "TIMESTAMPTZ",
        "finished_at": "TIMESTAMPTZ",
    },
    required=("id", "target_id", "project_id"),
    enums={"kind": ("quick", "audit", "repository"), "status": SCAN_STATUSES},
    immutable=("target_id", "project_id", "kind", "created_at"),
    # reused: a scan request was answered with this existing scan at least once (the scheduled-scans job sees
    # it in the POST answer; a list or GET shows false). Once true it stays true.
    update_rules={"reused": "t.reused OR coalesce(s.reused, false)"},
)

ISSUE = Entity(
    "issues",
    {
        "id": "VARCHAR", "project_id": "VARCHAR", "target_id": "VARCHAR", "address": "VARCHAR",
        "control_id": "VARCHAR", "family": "VARCHAR", "severity": "VARCHAR", "confidence": "VARCHAR",
        "status": "VARCHAR", "title": "VARCHAR", "explanation": "VARCHAR", "detail": "VARCHAR",
        "location": "VARCHAR", "file": "VARCHAR", "line": "INTEGER", "commit": "VARCHAR", "evidence": "VARCHAR",
        "fix_unlocked": "BOOLEAN", "status_reason": "VARCHAR", "marked_by": "VARCHAR",
        "first_seen_at": "TIMESTAMPTZ", "last_seen_at": "TIMESTAMPTZ", "fixed_at": "TIMESTAMPTZ",
    },
    required=("id", "project_id", "target_id"),
    enums={
        "family": ("database", "secrets", "exposedFiles", "personalData", "vulnerableVersions", "configuration",
                   "compliance", "server", "code"),
        "severity": SEVERITIES,
        "confidence": ("confirmed", "likely", "estimated"),
        "status": ISSUE_STATUSES,
    },
)
