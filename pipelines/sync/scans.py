"""The scans step: scan history, read incrementally."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pipelines.api import NotFoundError, PagingError
from pipelines.core import milestones
from pipelines.core.sqlfiles import read_sql
from pipelines.storage import merge_scan_stages, stage_format
from pipelines.storage.entities import SCAN
from pipelines.storage.merge import record_scans_state
from pipelines.storage.stage import StageFile
from pipelines.sync.step import Progress, Step, row_counts


def sync_scans(step: Step, *, all_projects: bool, project_ids: list[str], peek_before: datetime) -> int:
    """Lists are newest first, so each moved project is read only down to the first scan the history already
    holds as finished (and past the scans sharing its created_at); scans still queued in the history are
    re-read one by one. A project that has not moved has its newest scan page read when its list is older than
    `peek_before`. `project_ids`: only these (empty: every one that moved, or all of them). The rows the
    workspace's scans table then holds.

    Scans go to stage files as the pages arrive, as issues do: a first sync reads every scan of the year, and
    holding them as Python objects until the merge left tens of MB of the process's memory behind for the rest
    of the sync."""
    client = step.service
    with step.db() as conn:
        listed = conn.execute(read_sql("sync/scan_projects.sql"), {
            "workspace_id": step.workspace_id, "all": all_projects, "peek_before": peek_before,
            "only": project_ids,
        }).fetchall()
        unfinished = conn.execute(read_sql("sync/pending_scans.sql"), {
            "workspace_id": step.workspace_id, "limit": 1_000_000}).fetchall()
        finished: set[str] = set()
        expected: dict[str, int] = {}
        if listed:  # every finished scan's id, every list's bound: only a list to read needs them
            finished = {r[0] for r in conn.execute(read_sql("sync/finished_scans.sql"),
                                                    {"workspace_id": step.workspace_id}).fetchall()}
            expected = {pid: n for pid, _, n in conn.execute(read_sql("sync/list_expectations.sql"),
                                                             {"workspace_id": step.workspace_id}).fetchall()}
        line_format = stage_format(conn, SCAN)
    todo = [(pid, fp) for pid, fp, _ in listed]

    progress = Progress(step.named("scans"), len(todo), client)
    unread: set[str] = set()
    seen: set[Any] = set()  # ids of the scans the lists gave: those need no re-read
    opened: list[StageFile] = []  # every stage file, so that a failure leaves none behind

    def stage_file() -> StageFile:
        stage = StageFile(SCAN.name, line_format)
        opened.append(stage)
        return stage

    def read(project_id: str) -> StageFile | None:
        stage = stage_file()
        ids: set[Any] = set()
        # Newest first, but scans started together share their created_at and tie in any order: stop
        # only past the instant of the first known finished scan, never inside it.
        stop_before: object = None
        try:
            for scan in client.iter_scans(project_id, expected=expected.get(project_id)):
                if stop_before is not None and scan.get("created_at") != stop_before:
                    break
                if scan.get("id") in finished:
                    stop_before = scan.get("created_at") or ""
                    continue
                stage.write(dict(scan, project_id=project_id))
                ids.add(scan.get("id"))
                milestones.reached("scans.paging")
        except NotFoundError:
            step.log.warning("project %s vanished while its scans were read; skipped", project_id)
        except PagingError as exc:
            # Nothing of this list is kept, and the project is not marked as read: the next sync retries it.
            step.log.warning("scans of project %s skipped: %s", project_id, exc)
            unread.add(project_id)
            return None
        finally:
            stage.close()
        seen.update(ids)
        progress.step(stage.count)
        return stage

    try:
        stages = [got for got in client.map(read, [pid for pid, _ in todo]) if got is not None]
        # Only the statuses known to be unfinished and not settled as gone: a status from a newer service
        # (stored and warned about) or a vanished scan would otherwise cost a request in every sync, forever.
        pending = [(sid, pid) for sid, pid, listed in unfinished if listed and sid not in seen]
        gone: list[tuple[str, str]] = []

        def reread(item: tuple[str, str]) -> dict[str, Any] | None:
            try:
                return dict(client.get_scan(item[0]), project_id=item[1])
            except NotFoundError:
                gone.append(item)
                return None

        stages.append(stage_file().extend(s for s in client.map(reread, pending) if s).close())
        if gone:
            step.log.warning("%d queued scan(s) answered 404 and are settled as gone: %s", len(gone),
                             ", ".join(sid for sid, _ in gone[:5]))
        with step.db(keep=True) as conn:
            result = step.add(merge_scan_stages(conn, step.known_workspace_id, stages, now=step.now, gone=gone,
                                                unlisted=any(not listed for *_, listed in unfinished)))
            milestones.reached("scans.before_state")
            record_scans_state(conn, step.known_workspace_id, [row for row in todo if row[0] not in unread],
                               step.now)
            held = row_counts(conn, step.workspace_id)["scans"]
    finally:
        for stage in opened:
            stage.discard()
    step.metadata.update({"projects_read": len(todo), "projects_peeked": sum(1 for *_, peek in listed if peek),
                          "scans_upserted": result.rows["scans"],
                          "queued_rechecked": len(pending), "scans_gone": result.rows["scans_gone"]})
    return held
