"""Figure 7: scanwatch, a naive pull and dlt against the same simulator, one after another, each run
starting on a fresh rate window: requests, wall time and peak memory for a first sync and an unchanged
re-sync, then whether each history shows the changes of one round of scans (new, fixed, reopened,
severity changed). scanwatch runs as the `scanwatch sync` command, start-up included, like the peers."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.figures import INFO, SKIP, Figure, judge
from benchmarks.oracle import Oracle
from benchmarks.peers import dlt_peer, naive
from benchmarks.sim import SimProcess
from benchmarks.syncing import sync_command

KINDS = {"new": "new_ids", "fixed": "fixed_ids", "reopened": "reopened_ids", "severity_changed": "severity_changed_ids"}
SCANWATCH_EVENTS = {
    "new": "event = 'opened'",
    "fixed": "event = 'status_changed' AND to_value = 'fixed'",
    "reopened": "event = 'reopened'",
    "severity_changed": "event = 'severity_changed'",
}


def _scanwatch_history(db: str, expected: dict[str, list[str]]) -> dict[str, int]:
    conn = duckdb.connect(db, read_only=True)
    try:
        last = conn.execute("SELECT max(observed_at) FROM issue_events").fetchall()[0][0]
        return {kind: conn.execute(f"SELECT count(DISTINCT issue_id) FROM issue_events WHERE {cond} "
                                   "AND observed_at = ? AND issue_id IN (SELECT unnest(?))",
                                   [last, expected[kind]]).fetchall()[0][0]
                for kind, cond in SCANWATCH_EVENTS.items()}
    finally:
        conn.close()


def _say(what: str) -> None:
    print(f"[bench]   peers: {what}", file=sys.stderr, flush=True)


def _row(requests: int, seconds: float, rss: float | None, ok: bool, **extra: Any) -> dict[str, Any]:
    return {"requests": requests, "seconds": round(seconds, 2), "peak_rss_mb": None if rss is None else round(rss, 1),
            "success": ok, **extra}


def measure(scale: str, seed: int, rate_limit: int, rate_window: float, workdir: Path) -> list[Figure]:
    work = Path(tempfile.mkdtemp(prefix="peers-", dir=workdir))
    sw_db, naive_db, dlt_dir = str(work / "scanwatch.duckdb"), str(work / "naive.duckdb"), work / "dlt"
    dlt_dir.mkdir()
    try:
        dlt_python, dlt_reason = dlt_peer.ensure_env(), None
    except dlt_peer.DltUnavailable as exc:
        dlt_python, dlt_reason = None, str(exc)
    runs: dict[str, dict[str, dict[str, Any]]] = {"first": {}, "unchanged": {}}
    with SimProcess(scale=scale, seed=seed, rate_limit=rate_limit, rate_window=rate_window) as sim:
        for phase in runs:
            sim.wait_for_window()
            sw = sync_command(sim, sw_db)
            _say(f"scanwatch {phase}: {sw.requests} requests, {sw.seconds:.1f} s")
            runs[phase]["scanwatch"] = _row(sw.requests, sw.seconds, sw.max_rss_mb, sw.success, error=sw.error)
            sim.wait_for_window()
            before = sim.request_count()
            ok, seconds, rss, out = naive.run_measured(sim.base_url, sim.api_key, naive_db)
            runs[phase]["naive"] = _row(sim.request_count() - before, seconds, rss, ok,
                                        own_count=out.get("requests"), rate_limited=out.get("rate_limited"))
            _say(f"naive {phase}: {runs[phase]['naive']['requests']} requests, {seconds:.1f} s")
            if dlt_python:
                sim.wait_for_window()
                before = sim.request_count()
                d = dlt_peer.run(dlt_python, sim.base_url, sim.api_key, dlt_dir)
                runs[phase]["dlt"] = _row(sim.request_count() - before, d.seconds, d.max_rss_mb, d.success,
                                          error=d.error, **d.output)
                _say(f"dlt {phase}: {runs[phase]['dlt']['requests']} requests, {d.seconds:.1f} s, ok={d.success}")
        changes = sim.run_round()
        sim.wait_for_window()
        sw_after = sync_command(sim, sw_db)
        dlt_after, dlt_after_requests = None, 0
        if dlt_python:
            sim.wait_for_window()
            before = sim.request_count()
            dlt_after = dlt_peer.run(dlt_python, sim.base_url, sim.api_key, dlt_dir)
            dlt_after_requests = sim.request_count() - before
        oracle = Oracle(sim.base_url, sim.api_key)
        try:
            visible = {i["id"] for i in oracle.state().all_issues()}
        finally:
            oracle.close()
    # Changes on sites whose issues the service hides cannot be seen by any client: leave them out.
    expected = {kind: [i for i in changes.get(field, []) if i in visible] for kind, field in KINDS.items()}
    want = {k: len(v) for k, v in expected.items()}
    sw_found = _scanwatch_history(sw_db, expected) if sw_after.success else {}
    figures = []
    for phase, label in (("first", "first sync"), ("unchanged", "unchanged re-sync")):
        sw = runs[phase]["scanwatch"]
        for peer in ("naive", "dlt"):
            r = runs[phase].get(peer)
            key = f"peer_{peer}_{phase}"
            title = f"{'naive pull' if peer == 'naive' else 'dlt rest_api (merge + scd2)'} / scanwatch, {label}"
            if r is None:
                figures.append(Figure(key, title, None, "x requests", "reported", SKIP, {"reason": dlt_reason}))
                continue
            ratio = r["requests"] / max(1, sw["requests"])
            wall = r["seconds"] / max(1e-9, sw["seconds"])
            common = {"peer": r, "scanwatch": sw, "rate_limit": f"{rate_limit} per {rate_window:g} s", "scale": scale}
            figures.append(Figure(
                key, title, round(ratio, 2), "x requests", "scanwatch no worse (>= 1)",
                judge(ratio >= 1 and sw["success"]) if r["success"] else INFO,
                {"wall_ratio": round(wall, 2), **common}))
            figures.append(Figure(
                f"{key}_wall", title.replace(" / scanwatch", " / scanwatch wall time"), round(wall, 2), "x",
                f"reported ({r['seconds']:.1f} s vs {sw['seconds']:.1f} s, start-up included)", INFO, common))
            if peer == "dlt" and r.get("peak_rss_mb") and sw.get("peak_rss_mb"):
                figures.append(Figure(
                    f"{key}_memory", title.replace(" / scanwatch", " / scanwatch peak RSS"),
                    round(r["peak_rss_mb"] / sw["peak_rss_mb"], 2), "x",
                    f"reported ({r['peak_rss_mb']:.0f} MB vs {sw['peak_rss_mb']:.0f} MB)", INFO, common))
    history: dict[str, Any] = {"expected": want, "scanwatch": sw_found,
                               "scanwatch_sync": _row(sw_after.requests, sw_after.seconds, sw_after.max_rss_mb,
                                                      sw_after.success)}
    if dlt_after is not None and dlt_python is not None:
        dlt_hist = dlt_peer.history(dlt_python, dlt_dir, expected)
        history.update(dlt=dlt_hist.get("found", dlt_hist), dlt_detail=dlt_hist,
                       dlt_run=_row(dlt_after_requests, dlt_after.seconds, dlt_after.max_rss_mb, dlt_after.success))
    sw_all = bool(sw_found) and all(sw_found.get(k) == n for k, n in want.items())
    figures.append(Figure("history_scanwatch", "scanwatch history shows every change of a round",
                          f"{sum(sw_found.values()) if sw_found else 0}/{sum(want.values())}", "changes",
                          "all", judge(sw_all), history))
    if "dlt" in history and isinstance(history["dlt"], dict) and "error" not in history["dlt"]:
        found = history["dlt"]
        versions = (history.get("dlt_detail") or {}).get("versions_written_by_last_load")
        figures.append(Figure("history_dlt", "dlt scd2 history shows every change of a round",
                              f"{sum(found.values())}/{sum(want.values())}", "changes",
                              f"reported ({versions} versions written for them)", INFO,
                              {"expected": want, "found": found, "detail": history.get("dlt_detail")}))
    else:
        figures.append(Figure("history_dlt", "dlt scd2 history shows every change of a round", None, "changes",
                              "reported", SKIP, {"reason": dlt_reason or history.get("dlt")}))
    return figures
