"""A workspace's sync reconstructs its own past only. Another workspace whose first sync is under way may hold
its account and not yet its issues: reconstructed by someone else's run, its past would be built from that
and recorded as done, and a first sync of many workspaces at once would reconstruct each one once per run."""

from __future__ import annotations

import duckdb

from tests.workspaces.pair import synced_pair


def _reconstructed(db) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {r[0] for r in con.execute(
            "SELECT a.workspace_label FROM reconstruction_runs AS r JOIN accounts AS a USING (workspace_id)"
        ).fetchall()}


def test_a_workspaces_sync_leaves_another_workspaces_past_to_it(tmp_path):
    """Mutation that fails it: the snapshot step reconstructing every workspace never reconstructed."""
    with synced_pair(tmp_path) as pair:
        assert _reconstructed(pair.db) == {"acme", "globex"}, pair.sync.stderr
        with duckdb.connect(str(pair.db)) as con:  # globex as if its first sync had not reached its snapshot
            con.execute("DELETE FROM reconstruction_runs WHERE workspace_id IN "
                        "(SELECT workspace_id FROM accounts WHERE workspace_label = 'globex')")
        done = pair.cli("sync", "--quiet", "--workspace", "acme")
        assert done.returncode == 0, done.stderr
        assert _reconstructed(pair.db) == {"acme"}
        done = pair.cli("sync", "--quiet", "--workspace", "globex")
        assert done.returncode == 0, done.stderr
        assert _reconstructed(pair.db) == {"acme", "globex"}  # its own next sync does it
