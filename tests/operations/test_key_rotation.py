"""Key rotation: a workspace's key is replaced (docs/operations.md, "Rotating a key"). scanwatch accepts a new key
of the same workspace (the history is bound to the service's workspace id, not to a key) and refuses, in one
line and before writing anything, a key that answers for another workspace under the same name."""

from __future__ import annotations

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.backends import rows
from tests.history_dump import diff, dump_history, intact
from tests.reliability.harness import assert_one_line, cli, service_env


@pytest.fixture(scope="module")
def sim():
    with serve_simulator(SimConfig(seed=29, scale="small", clock="driven", control=True, rate_limit=100000)) as s:
        yield s


def test_a_new_key_of_the_same_workspace_is_accepted_and_another_workspace_s_is_refused(sim, tmp_path):
    db = tmp_path / "history.duckdb"
    old = service_env(sim, db, SCANWATCH_SNAPSHOT=str(tmp_path / "metrics"))
    assert cli(["sync", "--quiet"], old).returncode == 0
    workspace = sim.world.credentials[sim.keys["pro"]].workspace_id

    # The key is replaced by another of the same workspace (here a read-only token): the next sync goes on.
    rotated = {**old, "SCANWATCH_API_KEY": sim.keys["token_read"]}
    sim.run_round()
    done = cli(["sync", "--quiet"], rotated)
    assert done.returncode == 0, done.stderr
    assert rows(db, "SELECT workspace_id FROM accounts") == [(workspace,)]
    for table in ("projects", "issues", "scans"):
        assert rows(db, f"SELECT DISTINCT workspace_id FROM {table}") == [(workspace,)], table
    kept = dump_history(db)

    # The old key, once revoked, is one line naming the variable; nothing is lost.
    revoked = {**old, "SCANWATCH_API_KEY": sim.keys["revoked"]}
    done = cli(["sync", "--quiet"], revoked)
    assert done.returncode != 0
    assert_one_line(done.stderr, must_contain="SCANWATCH_API_KEY")
    assert intact(dump_history(db), kept) == {}

    # A key of another workspace under the same name: refused in one line, nothing of it stored.
    other = {**old, "SCANWATCH_API_KEY": sim.keys["other_workspace"]}
    kept = dump_history(db)
    done = cli(["sync", "--quiet"], other)
    assert done.returncode == 1
    line = assert_one_line(done.stderr, must_contain="workspace default: its key now answers for workspace")
    assert "'Other Workspace Inc'" in line and "'Acme Corp'" in line, line
    assert intact(dump_history(db), kept) == {}
    assert not diff(dump_history(db), kept, ignore=("sync_runs",))
