"""`scanwatch prune --before DATE` on both engines: the samples older than DATE are thinned, and nothing that the
metrics, the alerts, the day-level history or the other tables hold changes.

The history is a real sync's, with 20 days of past samples added beside it (five a day, each day's scores
moving), as months of syncs every 15 minutes would leave."""

from __future__ import annotations

import datetime as dt

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.backends import rows, value, write
from tests.history_dump import diff, dump_history
from tests.reliability.harness import assert_one_line, cli, service_env

DAYS, PER_DAY = 20, 5
MOMENTS = ", ".join(f"({d}, {h})" for d in range(1, DAYS + 1) for h in range(PER_DAY))
PAST = f"""
INSERT INTO score_snapshots (workspace_id, observed_at, project_id, target_id, score, grade, open_issues,
                             hidden_issues)
SELECT s.workspace_id, s.observed_at - v.d * INTERVAL '1 day' - v.h * INTERVAL '1 hour', s.project_id, s.target_id,
       s.score - (v.d * v.h) % 7, s.grade, s.open_issues + v.h, s.hidden_issues
FROM score_snapshots AS s, (VALUES {MOMENTS}) AS v(d, h)
WHERE s.observed_at >= (SELECT max(observed_at) FROM score_snapshots) - INTERVAL '1 minute'
"""
PAST_QUOTAS = f"""
INSERT INTO quota_snapshots
SELECT q.workspace_id, q.observed_at - v.d * INTERVAL '1 day' - v.h * INTERVAL '1 hour', q.quota, q."limit", q.used,
       q.remaining, q.period_start, q.period_end
FROM quota_snapshots AS q, (VALUES {MOMENTS}) AS v(d, h)
WHERE q.observed_at = (SELECT max(observed_at) FROM quota_snapshots)
"""


@pytest.fixture(scope="module")
def sim():
    with serve_simulator(SimConfig(seed=23, scale="small", clock="driven", control=True, rate_limit=100000)) as s:
        yield s


def _metrics(db: str) -> dict:
    """Every part of the metrics snapshot, as the exporter would serve it now."""
    from pipelines.storage.db import writer
    from pipelines.sync.snapshot import build_parts

    now = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    with writer(db) as conn:  # the snapshot writes the SLA policy it computes with
        parts = build_parts(conn, now=now)
    for part in parts.values():
        part.pop("generated_at", None)
    return parts


def _read(db: str) -> dict:
    return {
        "score_days": rows(db, "SELECT workspace_id, day, project_id, target_id, score, grade, min_score, max_score, "
                               "open_issues, hidden_issues, source FROM score_days ORDER BY 1, 2, 3, 4 NULLS FIRST"),
        "first": rows(db, "SELECT workspace_id, first_observed_at FROM first_observations"),
        "quota_days": rows(db, "SELECT workspace_id, quota, CAST(timezone('UTC', observed_at) AS DATE) AS d, "
                               "max(observed_at) FROM quota_snapshots GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"),
        "metrics": _metrics(db),
    }


def test_prune_thins_old_samples_and_changes_nothing_anything_reads(sim, new_history, tmp_path):
    db = new_history()
    env = service_env(sim, db, SCANWATCH_SNAPSHOT=str(tmp_path / "metrics"))
    assert cli(["sync", "--quiet"], env).returncode == 0
    sim.run_round()
    assert cli(["sync", "--quiet"], env).returncode == 0
    write(db, PAST)
    write(db, PAST_QUOTAS)
    samples = value(db, "SELECT count(*) FROM score_snapshots")
    before, kept = _read(db), dump_history(db)

    cut = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).date().isoformat()
    dry = cli(["prune", "--before", cut, "--dry-run"], env)
    assert dry.returncode == 0 and "would drop" in dry.stdout, dry.stderr
    assert value(db, "SELECT count(*) FROM score_snapshots") == samples
    done = cli(["prune", "--before", cut], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.replace("would drop", "dropped") == dry.stdout.replace("would drop", "dropped")

    left = value(db, "SELECT count(*) FROM score_snapshots")
    assert left < samples * 0.75, (left, samples)  # the samples were thinned
    after = _read(db)
    for what in before:
        assert after[what] == before[what], what
    changed = diff(dump_history(db), kept)
    assert set(changed) <= {"score_snapshots", "quota_snapshots"}, changed

    # A second prune finds nothing more to drop.
    again = cli(["prune", "--before", cut], env)
    assert again.returncode == 0 and "dropped" in again.stdout
    assert value(db, "SELECT count(*) FROM score_snapshots") == left


@pytest.mark.parametrize(("before", "says"), [("2999-01-01", "in the future"), ("last tuesday", "must be a date")])
def test_a_bad_date_is_one_line_and_changes_nothing(sim, tmp_path, before, says):
    db = tmp_path / "history.duckdb"
    env = service_env(sim, db)
    assert cli(["sync", "--quiet"], env).returncode == 0
    kept = dump_history(db)
    done = cli(["prune", "--before", before], env)
    assert done.returncode == 2
    assert_one_line(done.stderr, must_contain=says)
    assert diff(dump_history(db), kept) == {}
