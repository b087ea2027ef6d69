"""A deployment's workspace roles keep reading their workspace's rows through an upgrade that replaces a
table: schema 20 drops the reconstruction's day tables (and with them their policies and grants) for tables
of runs, and schema 21 gives the runs what `reconstruction_runs` has. Built as a deployment builds it: the
roles applied, the tables created and filled by the writer role at schema 19, a role for `acme`, then the
writer's next open upgrades the history."""

from __future__ import annotations

from datetime import UTC, date, datetime

from pipelines.commands import roles
from pipelines.storage import connect, migrate
from pipelines.storage.destinations.impl import location_of
from pipelines.storage.destinations.impl.postgres.factory import POSTGRES
from tests.backends import rows
from tests.postgres.roles import WRITER, apply_roles, role_url
from tests.postgres.test_door_boundary import scanwatch_sql

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACME, GLOBEX = "w-acme", "w-globex"


def test_a_workspace_role_reads_its_reconstructed_past_after_the_upgrade_to_runs(pg_server):
    """Mutation that fails it: migration 021 without its block copying the policies and grants (the role is
    then refused the runs: "permission denied for table reconstructed_score_runs")."""
    name = pg_server.create_database()
    admin = pg_server.url(name)
    try:
        apply_roles(pg_server, admin)
        writer = role_url(pg_server, admin, WRITER)
        conn = POSTGRES.open(location_of(writer))
        try:
            migrate(conn, target=19)
            for workspace, label, days in ((ACME, "acme", 5), (GLOBEX, "globex", 3)):
                conn.execute("INSERT INTO accounts (workspace_id, workspace_name, workspace_label, plan, "
                             "first_observed_at, last_observed_at) VALUES ($ws, $label, $label, 'pro', $now, $now)",
                             {"ws": workspace, "label": label, "now": NOW})
                for day in range(1, days + 1):
                    values = {"ws": workspace, "day": date(2026, 10, day)}
                    conn.execute("INSERT INTO reconstructed_scores VALUES ($ws, $day, 'p', 't', 70, 'C', 's')", values)
                    conn.execute("INSERT INTO reconstructed_open_issues VALUES ($ws, $day, 'p', 'high', 2)", values)
        finally:
            conn.close()
        apply_roles(pg_server, admin, ["acme"])  # the role made at schema 19, on the tables of then
        connect(writer).close()  # the writer's next open: schemas 20 and 21
        acme = role_url(pg_server, admin, roles.workspace_role("acme"))
        for runs in ("reconstructed_score_runs", "reconstructed_open_issue_runs"):
            assert rows(acme, f"SELECT workspace_id, first_day, last_day FROM {runs}") == [
                (ACME, date(2026, 10, 1), date(2026, 10, 5))], runs
        done = scanwatch_sql(acme, "SELECT count(*) AS days FROM reconstructed_scores", "--workspace", "acme",
                             "--format", "csv")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[1:] == ["5"]
    finally:
        pg_server.drop_database(name)
