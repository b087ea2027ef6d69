"""The history's asset checks on both engines: after a real sync of the simulator's world every one passes,
and a history broken behind scanwatch's back fails exactly the checks that watch what was broken, each
counting the offending rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest

from simulator.testing import SimConfig, serve_simulator
from tests import backends

CHECKS = ("issue_ids_unique", "scan_ids_unique", "fixed_exactly_when_fixed_at", "last_seen_not_before_first_seen",
          "issue_targets_exist", "no_issues_of_unverified_targets")


@pytest.fixture
def synced(engine_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, dict[str, Any]]]:
    with serve_simulator(SimConfig(seed=5, scale="small", rate_limit=100000)) as sim:
        backends.point_at(monkeypatch, sim, engine_db)
        result = backends.sync_history()
        assert result.success, backends.failure(result)
        yield engine_db, _evaluations(result)


def _evaluations(result: Any) -> dict[str, tuple[bool, int]]:
    out = {}
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            data = event.event_specific_data
            out[data.check_name] = (data.passed, data.metadata["offending_rows"].value)
    return out


def _run_checks(workspace: str | None = None) -> dict[str, tuple[bool, int]]:
    """The checks alone, in a run of `workspace` (its partition, as a run's tag says it), or of no workspace
    (every row)."""
    from pipelines.defs.assets import ALL_ASSETS
    from pipelines.defs.checks import history_checks
    from pipelines.defs.partitions import register
    from pipelines.defs.resources import default_resources

    instance = dg.DagsterInstance.ephemeral()
    if workspace is not None:
        register(instance, [workspace])
    result = dg.materialize([*ALL_ASSETS, *history_checks], resources=default_resources(), instance=instance,
                            selection=dg.AssetSelection.all_asset_checks(),
                            tags={"dagster/partition": workspace} if workspace is not None else None)
    assert result.success
    return _evaluations(result)


def test_a_synced_history_passes_every_check(synced) -> None:
    _, evaluations = synced
    assert evaluations == dict.fromkeys(CHECKS, (True, 0))


def test_a_broken_history_fails_the_checks_that_watch_it(synced) -> None:
    """Mutation that fails it: a check file that counts nothing (`SELECT 0`) for any of the broken rules."""
    db, _ = synced
    fixed = backends.value(db, "SELECT min(id) FROM issues WHERE status = 'fixed'")
    opened = backends.value(db, "SELECT min(id) FROM issues WHERE status = 'open'")
    moved = backends.value(db, "SELECT max(id) FROM issues WHERE status = 'open'")
    target = backends.value(
        db, "SELECT t.id FROM targets AS t JOIN issues AS i ON i.target_id = t.id WHERE t.kind = 'domain' "
            "AND t.verified GROUP BY t.id ORDER BY count(*) DESC, t.id LIMIT 1")
    assert fixed and opened and moved != opened
    backends.write(db, f"UPDATE issues SET fixed_at = NULL WHERE id = '{fixed}'")
    backends.write(db, f"UPDATE issues SET last_seen_at = first_seen_at - INTERVAL '1 day' WHERE id = '{opened}'")
    backends.write(db, f"UPDATE issues SET target_id = 'no-such-target' WHERE id = '{moved}'")
    # The service hides the issues of an unproved site: rows read while it was unproved should not exist.
    backends.write(db, f"UPDATE targets SET verified = FALSE WHERE id = '{target}'")
    issues_on_it = backends.value(db, "SELECT count(*) FROM issues WHERE target_id = ?", [target])
    want = {"fixed_exactly_when_fixed_at": (False, 1), "last_seen_not_before_first_seen": (False, 1),
            "issue_targets_exist": (False, 1), "no_issues_of_unverified_targets": (False, issues_on_it),
            "scan_ids_unique": (True, 0), "issue_ids_unique": (True, 0)}
    if not backends.backend_of(db).keeps_keys:  # where the server keeps the key, it refuses a second row itself
        backends.write(db, f"INSERT INTO issues SELECT * FROM issues WHERE id = '{fixed}'")
        want["issue_ids_unique"] = (False, 1)
        want["fixed_exactly_when_fixed_at"] = (False, 2)
        issues_on_it = backends.value(db, "SELECT count(*) FROM issues WHERE target_id = ?", [target])
        want["no_issues_of_unverified_targets"] = (False, issues_on_it)
        backends.write(db, "INSERT INTO scans SELECT * FROM scans WHERE id = (SELECT min(id) FROM scans)")
        want["scan_ids_unique"] = (False, 1)
    assert _run_checks() == want


def test_a_workspaces_run_checks_its_own_rows(synced) -> None:
    """A row broken in another workspace fails no check of this workspace's run (whose cost then stays the same
    however many workspaces the history holds), and fails the run of no workspace, which checks every row.
    Mutation that fails it: the checks' files without their workspace condition."""
    db, _ = synced
    fixed = backends.value(db, "SELECT min(id) FROM issues WHERE status = 'fixed'")
    backends.write(db, f"UPDATE issues SET workspace_id = 'elsewhere', fixed_at = NULL WHERE id = '{fixed}'")
    assert _run_checks("default") == dict.fromkeys(CHECKS, (True, 0))
    assert _run_checks()["fixed_exactly_when_fixed_at"] == (False, 1)


def test_no_check_result_is_handled_while_the_history_is_held(synced, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dagster stores each check's result (its event) while the checks' generator waits: done while the
    history's connection is held, that held DuckDB's one writer for 40 ms of Python a workspace, while every
    other run's merge waited. Mutation that fails it: a result yielded inside the connection's block."""
    from pipelines.defs.resources import HistoryResource

    held = [0]
    opened = HistoryResource.get_connection

    def counted(self: HistoryResource) -> Any:
        context = opened(self)

        class Held:
            def __enter__(self) -> Any:
                conn = context.__enter__()
                held[0] += 1
                return conn

            def __exit__(self, *exc: Any) -> Any:
                held[0] -= 1
                return context.__exit__(*exc)

        return Held()

    stored: list[int] = []
    handle = dg.DagsterInstance.handle_new_event

    def spied(self: dg.DagsterInstance, event: Any, *args: Any, **kwargs: Any) -> Any:
        if event.dagster_event is not None and event.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION":
            stored.append(held[0])
        return handle(self, event, *args, **kwargs)

    monkeypatch.setattr(HistoryResource, "get_connection", counted)
    monkeypatch.setattr(dg.DagsterInstance, "handle_new_event", spied)
    assert _run_checks("default") == dict.fromkeys(CHECKS, (True, 0))
    assert stored == [0] * len(CHECKS), f"results stored with the history held: {stored}"
