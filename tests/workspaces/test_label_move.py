"""Moving from the two variables to a workspaces file keeps what the workspace is called when its entry says
so: `label: Acme Corp` keeps the service's name that every series, alert and history row carried, where the
entry's `name` alone (`acme`) would rename it and split every Prometheus series and the backfilled year."""

from __future__ import annotations

import json

import pytest

from simulator.testing import SimConfig, serve_simulator
from tests.backends import rows
from tests.reliability.harness import cli, service_env


@pytest.fixture(scope="module")
def sim():
    with serve_simulator(SimConfig(seed=5, scale="small", clock="driven", control=True, rate_limit=100000)) as s:
        yield s


def _labels_served(snapshot) -> set[str]:
    found = set()
    for part in snapshot.glob("*.json"):
        text = part.read_text()
        found |= {label for label in ("Acme Corp", "acme") if json.dumps(label) in text}
    return found


@pytest.mark.parametrize(("entry", "shown"), [("    label: Acme Corp\n", "Acme Corp"), ("", "acme")])
def test_a_label_keeps_the_workspace_s_name_across_the_move(sim, tmp_path, entry, shown):
    db, snapshot = tmp_path / "history.duckdb", tmp_path / "metrics"
    env = service_env(sim, db, SCANWATCH_SNAPSHOT=str(snapshot))
    done = cli(["sync", "--quiet"], env)
    assert done.returncode == 0, done.stderr
    assert rows(db, "SELECT workspace FROM workspace_labels") == [("Acme Corp",)]

    listed = tmp_path / "workspaces.yml"
    listed.write_text(f"workspaces:\n  - name: acme\n    api_key_env: MOVED_KEY\n{entry}")
    moved = {k: v for k, v in env.items() if k != "SCANWATCH_API_KEY"}
    moved.update(SCANWATCH_WORKSPACES_FILE=str(listed), MOVED_KEY=sim.api_key)
    sim.run_round()
    done = cli(["sync", "--quiet"], moved)
    assert done.returncode == 0, done.stderr
    assert rows(db, "SELECT workspace FROM workspace_labels") == [(shown,)]
    assert _labels_served(snapshot) == {shown}
    done = cli(["sql", "SELECT count(*) AS n FROM projects", "--workspace", shown, "--format", "csv"], moved)
    assert done.returncode == 0 and int(done.stdout.splitlines()[1]) > 0, done.stderr
