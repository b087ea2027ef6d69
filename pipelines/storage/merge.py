"""Set-based merges of staged API pages into the history, one transaction per call: the job generator every
engine runs (`pipelines/storage/destinations/impl/<name>/` holds what DuckDB and PostgreSQL do differently).

Pages go to an NDJSON file that the engine loads with every column as text, so a wrong type in one field
cannot crash the load; the typed staging table keeps a value that does not fit its type as NULL (DuckDB's
`TRY_CAST`), failures and unknown enum values go to `ingest_warnings`, and the merge SQL in `sql/merge/` does
the rest.

One bad record is one warning, never a failed list: a string with a lone surrogate (which no UTF-8 file can
hold) is stored with U+FFFD in its place, and a record over `MAX_RECORD_BYTES` is quarantined (left out,
listed in `ingest_warnings` with field `(record)`; its ids are in `MergeResult.quarantined` and, during the
merge SQL, in the table `listed_issue_ids`, so a quarantined issue is never taken for one the service
stopped listing).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pipelines.core import milestones
from pipelines.core.sqlfiles import execute_file, read_sql, sql_dir, transaction
from pipelines.core.text import printable
from pipelines.core.vocabulary import hidden_reason_params
from pipelines.storage.destinations import Connection
from pipelines.storage.destinations.stage_format import as_text
from pipelines.storage.entities import (
    ACCOUNT,
    ISSUE,
    PROJECT,
    QUOTA,
    SCAN,
    TARGET,
    Entity,
    account_rows,
)
from pipelines.storage.stage import MAX_RECORD_BYTES, QUARANTINED, SEQ, StageFile, StageFormat, chunks
from pipelines.storage.upsert import digest_counts, quote, rows_digest, touch_unchanged, upsert

log = logging.getLogger("scanwatch.storage")

__all__ = ["MAX_RECORD_BYTES", "QUARANTINED", "MergeResult", "merge_account", "merge_issue_stages",
           "merge_projects", "merge_scan_stages", "merge_scans"]


@dataclass
class MergeResult:
    rows: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    warnings: list[tuple[str, str | None, str, str | None]] = field(default_factory=list)
    rejected: int = 0
    quarantined: list[str] = field(default_factory=list)  # ids of records left out whole (too large)
    notices: list[str] = field(default_factory=list)  # one line per bad record, for the run's log
    flagged: int = 0  # stages with a value that breaks a rule, warned about now or by an earlier merge

    @property
    def rows_written(self) -> int:
        return sum(self.rows.values()) + sum(self.events.values())


def stage_format(conn: Connection, entity: Entity) -> StageFormat:
    """The lines `conn`'s engine loads fastest, for the stage files of `entity` (a sync writes them while the
    pages arrive, before it holds a connection)."""
    return conn.engine.stage_format(list(entity.columns))


def _stage(conn: Connection, entity: Entity, records: Iterable[dict[str, Any]], result: MergeResult) -> int:
    """Stage items held in memory (the small lists) the way streamed lists are: through a stage file."""
    with StageFile(entity.name, stage_format(conn, entity)) as stage:
        return _load_stage(conn, entity, [stage.extend(records).close()], result)


def _warn(conn: Connection, result: MergeResult, entity: Entity, entity_id: object, fld: str,
          value: str, notice: str) -> None:
    """One bad record: a row in `ingest_warnings` (once per distinct problem) and one line in the run's log."""
    entity_id = None if entity_id is None else printable(entity_id)[:100]
    conn.execute(read_sql("merge/ingest_warning.sql"),
                 {"entity": entity.name, "entity_id": entity_id, "field": fld, "value": value})
    result.warnings.append((entity.name, entity_id, fld, value))
    result.notices.append(printable(f"{entity.name} {entity_id}: {notice}"))
    log.warning("%s", result.notices[-1])


def _load_stage(conn: Connection, entity: Entity, stages: Sequence[StageFile], result: MergeResult) -> int:
    engine = conn.engine
    raw, stg = f"raw_{entity.name}", f"stg_{entity.name}"
    cols = ", ".join(f"{quote(c)} VARCHAR" for c in entity.columns)
    conn.execute(f"DROP TABLE IF EXISTS {raw}; CREATE TEMP TABLE {raw} ({cols}, {quote(SEQ)} BIGINT)")
    for stage in stages:  # what the per-record checks found while the pages were written
        result.quarantined.extend(stage.quarantined)
        for entity_id, fld, value, notice in stage.problems:
            _warn(conn, result, entity, entity_id, fld, value, notice)
    # An empty stage (an unchanged workspace's lists) still gets its typed table, which the merge reads; it has
    # no line to count, check or warn about.
    written = [s for s in stages if s.count]
    missing = " OR ".join(f"{quote(c)} IS NULL" for c in entity.required)
    if written:
        milestones.reached("merge.staged")
        engine.load_stage(conn, raw, [*entity.columns, SEQ], written)
        result.rejected += conn.execute(f"SELECT count(*) FROM {raw} WHERE {missing}").fetchall()[0][0]
    key = quote(entity.key)

    def typed(catching: bool) -> str:
        columns = ", ".join(
            quote(c) if t == "VARCHAR" else f"{engine.cast(quote(c), t, catching=catching)} AS {quote(c)}"
            for c, t in entity.columns.items())
        # The latest sighting of an id wins (an item that moved between pages is read twice).
        return (f"DROP TABLE IF EXISTS {stg}; CREATE TEMP TABLE {stg} AS SELECT {columns} FROM ("
                f"SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY {quote(SEQ)} DESC) AS scanwatch_sighting "
                f"FROM {raw} WHERE NOT ({missing})) AS latest WHERE scanwatch_sighting = 1")

    # A value may have been left out only when a cast could catch one (always on DuckDB; on PostgreSQL only
    # when the plain casts failed): only then are the typed columns searched for it.
    caught = engine.typed(conn, typed)
    rules = [  # (field, value, condition): a line that meets a rule's condition is a problem to warn about
        (f"'{c}'", quote(c), f"{quote(c)} IS NOT NULL AND {engine.cast(quote(c), t)} IS NULL")
        for c, t in entity.columns.items() if t != "VARCHAR" and caught
    ] + [
        (f"'{c}'", quote(c),
         f"{quote(c)} IS NOT NULL AND {quote(c)} NOT IN (" + ", ".join(f"'{v}'" for v in allowed) + ")")
        for c, allowed in entity.enums.items()
    ] + [(f"'{c}'", "CAST(NULL AS VARCHAR)", f"{quote(c)} IS NULL") for c in entity.required]
    checks = [f"SELECT {fld} AS field, {value} AS value, {key} AS entity_id FROM {raw} WHERE {condition}"
              for fld, value, condition in rules]
    # One scan asks whether any line breaks a rule; only then are the problems listed, one branch per rule:
    # planning that union cost each stage of an unchanged workspace 7 ms, for nothing to store.
    problems = bool(written and rules) and conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM {raw} WHERE {' OR '.join(f'({c})' for *_, c in rules)})").fetchall()[0][0]
    result.flagged += bool(problems)
    found = [] if not problems else conn.execute(
        "INSERT INTO ingest_warnings (workspace_id, observed_at, entity, entity_id, field, value) "
        f"SELECT DISTINCT c.workspace_id, c.observed_at, '{entity.name}', w.entity_id, w.field, "
        f"w.value FROM ({' UNION ALL '.join(checks)}) AS w CROSS JOIN merge_context AS c WHERE NOT EXISTS ("
        f"SELECT 1 FROM ingest_warnings o WHERE {_SAME_WORKSPACE} AND "
        f"o.entity = '{entity.name}' AND o.entity_id IS NOT DISTINCT FROM w.entity_id AND o.field = w.field "
        "AND o.value IS NOT DISTINCT FROM w.value) "
        "RETURNING entity, entity_id, field, value"
    ).fetchall()
    conn.execute(f"DROP TABLE {raw}")  # the text copy is done with; a big sync should not carry it
    for entity_name, entity_id, fld, value in found:
        log.warning("stored %s %s with unexpected %s=%r (kept, listed in ingest_warnings)",
                    entity_name, entity_id, fld, value)
    result.warnings.extend(found)
    staged: int = conn.execute(f"SELECT count(*) FROM {stg}").fetchall()[0][0] if written else 0
    return staged


# `o.workspace_id IS NOT DISTINCT FROM` the merge's workspace, in a form an index on the workspace answers: a
# PostgreSQL history holds every workspace's warnings, and the comparison as written read them all.
_SAME_WORKSPACE = ("(o.workspace_id = (SELECT workspace_id FROM merge_context) "
                   "OR (o.workspace_id IS NULL AND (SELECT workspace_id FROM merge_context) IS NULL))")


def _set_context(conn: Connection, workspace_id: str | None, now: datetime,
                 service_version: str | None = None) -> None:
    """The merge's context (merge/context.sql), after the turn of its workspace: merges of one workspace
    from several syncs at once take turns until this transaction ends (a no-op where one writer is all)."""
    conn.engine.lock_workspace(conn, workspace_id)
    execute_file(conn, "merge/context.sql",
                 {"workspace_id": workspace_id, "now": now, "service_version": service_version})
    if conn.engine.capabilities.analyse_context:  # one row: joined with a stage, it must not multiply estimates
        conn.engine.analyse(conn, "merge_context")


# An unchanged list. Most reads of a followed workspace's account and project list answer what the last one
# did: staging such a list, finding every row unchanged and writing the samples took two-thirds of what an
# unchanged workspace's steps held the writer's turn for (25 and 32 statements; `python -m
# benchmarks.statements`). `merged_lists` keeps, per workspace and list, a digest of the answer the last full
# merge read and one of the rows it left; when both match, and the rows are as many as the answer's ids, the
# rows are only marked seen and sampled again (merge/*_seen_again.sql). The rows' digest is read from the rows
# themselves, so no other writer (the plan gate's `api_access_lost`, a restore, a hand-made UPDATE) needs to
# know about the shortcut; the answer's is made with the merge's own definition, so a new scanwatch merges each
# list in full once. A list with any value that breaks a rule is merged in full at every read: its warnings
# are kept once (`ingest_warnings`), and `scanwatch prune` may take them out.
# Per list: (entity whose API fields are hashed, the table or view, which rows), in the order of its counts.
_LIST_ROWS: dict[str, tuple[tuple[Entity, str, str], ...]] = {
    "account": (
        (ACCOUNT, "accounts", "workspace_id = $workspace_id"),
        (QUOTA, "quota_snapshots", "workspace_id = $workspace_id AND observed_at = m.observed_at"),  # its samples
    ),
    "projects": (  # the listed ones (the views say which are)
        (PROJECT, "project_states", "workspace_id = $workspace_id AND listed"),
        (TARGET, "target_states", "workspace_id = $workspace_id AND listed"),
    ),
}
# What shapes the rows a list's merge leaves: the typing and staging of an answer (both engines' casts and
# stage lines), the merge statements, and the views that say which rows are listed.
_DEFINITION_MODULES = ("entities.py", "merge.py", "stage.py", "upsert.py", "destinations/stage_format.py",
                       "destinations/impl/duckdb/factory.py", "destinations/impl/postgres/factory.py",
                       "destinations/impl/postgres/stage_format.py")
_DEFINITION_VIEWS = ("project_states", "target_states")


@functools.cache
def merge_definition() -> bytes:
    """What a list's merge is, as code: the modules that type and stage an answer and the statements that
    merge it. A digest of an answer made by another definition never matches."""
    here = Path(__file__).parent
    modules = [(here / name).read_bytes() for name in _DEFINITION_MODULES]
    statements = [read_sql(f"merge/{path.name}").encode() for path in sorted((sql_dir() / "merge").glob("*.sql"))]
    views = [read_sql(f"views/{name}.sql").encode() for name in _DEFINITION_VIEWS]
    return hashlib.sha256(b"\0".join([*modules, *statements, *views])).digest()


@dataclass(frozen=True)
class _Listed:
    """One list as a merge read it: whose, which, the digest of the answer, and how many rows of each table
    (`_LIST_ROWS`) its ids make, as the stage stores them (`1` and `"1"` are one id)."""

    name: str
    workspace_id: object
    body_digest: str
    counts: tuple[int, ...]

    @classmethod
    def of(cls, name: str, workspace_id: object, answer: object, counts: tuple[int, ...]) -> _Listed:
        text = json.dumps([name, answer], sort_keys=True, default=str).encode()
        return cls(name, workspace_id, hashlib.sha256(merge_definition() + text).hexdigest(), counts)

    def _params(self, **more: object) -> dict[str, object]:
        return {"workspace_id": self.workspace_id, "list_name": self.name, "body_digest": self.body_digest, **more}

    def last_merge(self, conn: Connection) -> datetime | None:
        """When the last full merge read this answer, if nothing changed its rows since and they are the
        answer's (a row another workspace holds is not this one's); None: merge in full."""
        if not isinstance(self.workspace_id, str):
            return None
        for same, recorded, current, merged_at in execute_file(
                conn, "merge/merged_list_check.sql", self._params(),
                {"rows": rows_digest(conn.engine, _LIST_ROWS[self.name])}).fetchall():
            if same and recorded == current and digest_counts(current) == self.counts:
                return merged_at  # type: ignore[no-any-return]
        return None

    def record(self, conn: Connection, result: MergeResult, now: datetime) -> None:
        """After a full merge: its digests, or none when a value broke a rule or a record was rejected or
        quarantined (each such read is merged in full, and its lines said again)."""
        if not isinstance(self.workspace_id, str):
            return
        clean = not (result.warnings or result.notices or result.rejected or result.quarantined or result.flagged)
        execute_file(conn, "merge/merged_list_record.sql",
                     {**self._params(), "body_digest": self.body_digest if clean else None, "now": now},
                     {"rows": rows_digest(conn.engine, _LIST_ROWS[self.name])})


def _ids(records: Sequence[dict[str, Any]]) -> set[str | None]:
    """The ids of `records` as the stage stores them."""
    return {as_text(r.get("id")) for r in records}


def merge_account(conn: Connection, account: dict[str, Any], *, now: datetime,
                  service_version: str | None = None) -> MergeResult:
    """Current account row plus one quota snapshot per quota."""
    result = MergeResult()
    row, quotas = account_rows(account)
    listed = _Listed.of("account", row["workspace_id"], account, (1, len(quotas)))
    with transaction(conn, "merge"):
        _set_context(conn, row["workspace_id"], now, service_version)
        merged_at = listed.last_merge(conn)
        if merged_at is not None:
            result.rows["accounts"] = 1
            result.rows["quota_snapshots"] = execute_file(conn, "merge/account_seen_again.sql",
                                                          {"merged_at": merged_at}).fetchall()[0][0]
        else:
            result.rows["accounts"] = _stage(conn, ACCOUNT, [row], result)
            _stage(conn, QUOTA, quotas, result)
            result.rows["quota_snapshots"] = execute_file(conn, "merge/account.sql").fetchall()[0][0]
            listed.record(conn, result, now)
    conn.engine.refresh_statistics(conn, ("accounts", "quota_snapshots"))
    return result


def merge_projects(conn: Connection, workspace_id: str, projects: Sequence[dict[str, Any]], *,
                   now: datetime) -> MergeResult:
    """Projects and their embedded targets, removals marked, one score snapshot per project and target."""
    result = MergeResult()
    # A `targets` that is not a list of objects is kept out (its project's targets are then left as they were
    # rather than marked removed) and reported like any other unexpected value.
    malformed = [p for p in projects if not isinstance(p.get("targets") or [], list)
                 or not all(isinstance(t, dict) for t in p.get("targets") or [])]
    for p in malformed:
        log.warning("project %s has a malformed targets field; its targets are kept as they were", p.get("id"))
    keep = {p.get("id") for p in malformed}
    targets = [dict(t, project_id=p.get("id")) for p in projects if p.get("id") not in keep
               for t in (p.get("targets") or [])]
    project_ids, target_ids = _ids(projects), _ids(targets)
    # The same projects in another order are the same list, when no id comes twice: of two sightings of one
    # project or target, the later wins, so there the order is part of the answer.
    once = len(project_ids) == len(projects) and len(target_ids) == len(targets)
    answer = sorted(projects, key=lambda p: as_text(p.get("id")) or "") if once else projects
    listed = _Listed.of("projects", workspace_id, answer, (len(project_ids), len(target_ids)))
    with transaction(conn, "merge"):
        _set_context(conn, workspace_id, now)
        if listed.last_merge(conn) is not None:
            execute_file(conn, "merge/projects_seen_again.sql")
            result.rows["projects"], result.rows["targets"] = listed.counts
        else:
            for p in malformed:
                conn.execute(read_sql("merge/ingest_warning.sql"), {
                    "entity": PROJECT.name, "entity_id": p.get("id"), "field": "targets",
                    "value": json.dumps(p.get("targets"))[:200]})
                result.warnings.append(("projects", p.get("id"), "targets", "malformed"))
            result.rows["projects"] = _stage(conn, PROJECT, projects, result)
            result.rows["targets"] = _stage(conn, TARGET, targets, result)
            upsert(conn, PROJECT)
            upsert(conn, TARGET)
            execute_file(conn, "merge/projects.sql", {"targets_unread": sorted(str(k) for k in keep)})
            listed.record(conn, result, now)
        result.rows["score_snapshots"] = result.rows["projects"] + result.rows["targets"]
        result.events = _hide_unlisted_issues(conn, [])
    conn.engine.refresh_statistics(conn, ("projects", "targets", "score_snapshots", "issues", "issue_events"))
    return result


def merge_scans(conn: Connection, workspace_id: str, scans: Sequence[dict[str, Any]], *,
                now: datetime, gone: Sequence[tuple[str, str]] = ()) -> MergeResult:
    """Scans held in memory (a few), merged as `merge_scan_stages` merges the ones a sync streams to files."""
    with StageFile(SCAN.name, stage_format(conn, SCAN)) as stage:
        return merge_scan_stages(conn, workspace_id, [stage.extend(scans).close()], now=now, gone=gone)


def merge_scan_stages(conn: Connection, workspace_id: str, stages: Sequence[StageFile], *,
                      now: datetime, gone: Sequence[tuple[str, str]] = (), unlisted: bool = True) -> MergeResult:
    """Scans read this run, in stage files; `project_id` must be set on each (the scan object does not carry
    it). A scan is in one file only: the latest sighting wins within a file, not across files.

    `gone` (scan_id, project_id) are queued scans that answered 404: settled, never polled again. Queued scans
    of a project or target no longer listed are settled here too, without a request; `unlisted` False says the
    caller found none (`sql/sync/pending_scans.sql`). With nothing staged (no line, no bad record to warn
    about), gone or unlisted, there is nothing to write, and the merge is not run: its statements were a
    tenth of an unchanged workspace's time in the writer's turn (`python -m benchmarks.statements`).
    """
    result = MergeResult()
    if not unlisted and not gone and not any(s.count or s.problems or s.quarantined for s in stages):
        result.rows.update(scans=0, scans_gone=0)
        return result
    with transaction(conn, "merge"):
        _set_context(conn, workspace_id, now)
        result.rows["scans"] = _load_stage(conn, SCAN, stages, result)
        if result.rows["scans"]:  # an unchanged workspace's scans step reads no list and polls nothing
            upsert(conn, SCAN)
        settled = execute_file(conn, "merge/scans_gone.sql", {"scan_ids": [sid for sid, _ in gone],
                                                              "project_ids": [pid for _, pid in gone]})
        result.rows["scans_gone"] = settled.fetchall()[0][0]
    conn.engine.refresh_statistics(conn, ("scans", "scans_gone"))
    return result


# Stage files are merged a group at a time, up to this much NDJSON, so memory stays bounded by it rather
# than growing with the workspace: a group's text and typed stage tables take about 3 times its size, well
# inside DuckDB's memory_limit (storage/db.py). A workspace of some 15k issues is one group. An engine whose
# stage lives on its server, not in scanwatch, takes larger groups (Capabilities.merge_group_bytes).
CHUNK_BYTES = 16 * 1024 * 1024


def group_bytes(conn: Connection) -> int:
    """How much NDJSON one merge transaction takes on this connection's engine."""
    return conn.engine.capabilities.merge_group_bytes or CHUNK_BYTES


def _hide_unlisted_issues(conn: Connection, listed_projects: Sequence[str],
                          quarantined: Sequence[str] = ()) -> dict[str, int]:
    """Issues whose project or target was removed, or whose site lost its proof, leave every open count;
    returns the events this merge wrote.

    `listed_projects` are the projects whose complete issue lists this merge read; the ids those lists held
    are in `listed_issue_ids`. Only there can an issue's absence be read as the service hiding it.

    With no list read, only issues of a removed project or target can be set aside: a workspace that has none
    (an unchanged re-sync, most of them) skips the pass over its issues, a scan of every one of them on
    PostgreSQL. Not "none went in this merge": an issue a list held while its target was already unlisted
    stays visible in that merge, and is set aside by the next pass (tests/benchmarks/test_resync_shortcuts.py).
    """
    if listed_projects or execute_file(conn, "merge/removed_any.sql").fetchall()[0][0]:
        execute_file(conn, "merge/issues_hidden.sql",
                     {"listed_projects": list(listed_projects), "quarantined": list(quarantined),
                      **hidden_reason_params()})
    else:
        conn.execute("DROP TABLE IF EXISTS listed_issue_ids")
    return dict(execute_file(conn, "merge/events_written.sql").fetchall())


def merge_issue_stages(conn: Connection, workspace_id: str, stages: Sequence[StageFile], *,
                       now: datetime, project_state: Sequence[tuple[str, str | None, bool]] = ()) -> MergeResult:
    """Complete issue lists of some projects, each in its stage file: events diffed against the history,
    then written, a bounded group of files at a time.

    Each group commits on its own: DuckDB keeps what a transaction writes apart until it commits, and one
    transaction over a first sync of 400k issues held 85 MB of index entries in memory and spilled 260 MB
    more; committed, a group's rows are DuckDB's to write out and let go of at its own checkpoints (at the
    WAL's size threshold: one after every group cost a third of a first sync's merge and saved no memory).
    A group holds whole projects' lists.
    What needs every list, the issues the lists no longer hold, is written last, with the `project_state`
    rows (project_id, fingerprint, full_reconcile): a project is only marked as read once all its issues are
    in, so a sync stopped between groups leaves its projects unmarked and the next one reads them again
    (what it then finds unchanged costs no write).
    """
    result = MergeResult()
    result.rows["issues"] = 0
    # The ids the lists held gather in listed_issue_ids, group after group (issues_visible_again.sql), for
    # issues_hidden.sql at the end; none may remain from a merge stopped earlier on this connection.
    conn.execute("DROP TABLE IF EXISTS listed_issue_ids")
    for group in chunks(stages, group_bytes(conn)):
        with transaction(conn, "merge"):
            _set_context(conn, workspace_id, now)
            result.rows["issues"] += _load_stage(conn, ISSUE, group, result)
            execute_file(conn, "merge/issues_visible_again.sql")
            touch_unchanged(conn, ISSUE)
            conn.execute(read_sql("merge/issues.sql"))
            upsert(conn, ISSUE)
            conn.execute(f"DROP TABLE stg_{ISSUE.name}")
    with transaction(conn, "merge"):
        _set_context(conn, workspace_id, now)
        result.events = _hide_unlisted_issues(conn, [pid for pid, _, _ in project_state], result.quarantined)
        if project_state:
            pids, fingerprints, fulls = (list(column) for column in zip(*project_state, strict=True))
            conn.execute(read_sql("merge/issues_synced.sql"),
                         {"project_ids": pids, "fingerprints": fingerprints, "full_reconciles": fulls})
    conn.engine.refresh_statistics(conn, ("issues", "issue_events", "project_sync_state", "ingest_warnings"))
    return result


def record_scans_state(conn: Connection, workspace_id: str,
                       project_state: Sequence[tuple[str, str | None]], now: datetime) -> None:
    if project_state:
        conn.execute(read_sql("merge/scans_synced.sql"), {
            "workspace_id": workspace_id, "now": now, "project_ids": [pid for pid, _ in project_state],
            "fingerprints": [fp for _, fp in project_state]})


def record_api_access_lost(conn: Connection, workspace_id: str, now: datetime) -> None:
    """The plan gate answered 402 (`api_plan_required`, `api_trial_ended`): the account says the API no longer
    answers, so `secscan_api_access_allowed` drops to 0 and SecscanApiAccessLost can fire. The next good
    account read sets it back."""
    conn.execute(read_sql("merge/api_access_lost.sql"), {"now": now, "workspace_id": workspace_id})


def record_sync_run(conn: Connection, *, workspace_id: str | None, run_id: str, asset: str,
                    started_at: datetime, finished_at: datetime, status: str, stats: dict[str, Any] | None = None,
                    rows_written: int = 0, error: str | None = None, workspace_label: str | None = None) -> None:
    """The pipeline's own health, read by the metrics snapshot."""
    stats = stats or {}
    conn.execute(read_sql("sync/record_run.sql"), {
        "workspace_id": workspace_id, "workspace_label": workspace_label, "run_id": run_id, "asset": asset,
        "started_at": started_at, "finished_at": finished_at, "status": status,
        "requests": stats.get("requests"), "retries": stats.get("retries"),
        "rate_limited": stats.get("rate_limited"), "rate_limit_remaining": stats.get("last_remaining"),
        "rows_written": rows_written, "service_version": stats.get("service_version"),
        "error": (error or "")[:500] or None})
