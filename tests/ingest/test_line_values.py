"""A non-integer `line` (the contract says integer or null) is stored as NULL and warned about, not rounded."""

from __future__ import annotations

from typing import Any

from tests.ingest.conftest import query, run_sync
from tests.reliability.proxy import rewriting_proxy


def test_a_fractional_line_is_warned_about_not_rounded(sim, env, monkeypatch):
    changed: dict[str, Any] = {}

    def fractional(path: str, body: Any) -> Any:
        for issue in body.get("data") or [] if path.endswith("/issues") else []:
            if issue.get("line") is not None and (not changed or issue["id"] in changed):
                changed[issue["id"]] = issue["line"]
                issue["line"] = issue["line"] + 0.5
        return body

    with rewriting_proxy(sim.base_url, fractional) as proxied:
        monkeypatch.setenv("SCANWATCH_BASE_URL", proxied)
        assert run_sync().success
    ((issue_id, line),) = changed.items()
    assert query(env, f"SELECT line FROM issues WHERE id = '{issue_id}'") == [(None,)]
    assert query(env, f"SELECT value FROM ingest_warnings WHERE entity_id = '{issue_id}' AND field = 'line'") == [
        (str(line + 0.5),)]
    # Whole numbers, also written as 12.0, are kept.
    assert query(env, "SELECT count(*) FROM issues WHERE line IS NOT NULL")[0][0] > 0
