"""The demo's scans schedule, checked as Dagster reads its cron, without starting anything."""

from __future__ import annotations

from itertools import islice, pairwise

from dagster._utils.schedules import cron_string_iterator

from pipelines.commands.demo_run import demo_scans_cron

T = 1_795_000_000  # 18 Nov 2026, 11:06:40 UTC


def test_the_scans_schedule_first_runs_three_to_four_minutes_after_the_demo_starts():
    """Its run settles the scan the demo requested at start as the scan-finished sensor would. At a multiple of
    five minutes it could come before the sensor's next tick, and the run the banner promises never came (in
    one run of the demo test, the 21:10 run settled the scan the sensor had seen running at 21:09:20)."""
    wrong = []
    for started in range(T, T + 2 * 3600, 37):  # start times over two hours
        cron = demo_scans_cron(started)
        ticks = [t.timestamp() for t in islice(cron_string_iterator(started, cron, "UTC"), 3)]
        gaps = [b - a for a, b in pairwise(ticks)]
        if not 180 <= ticks[0] - started <= 240 or gaps != [300, 300]:
            wrong.append((started, cron, ticks[0] - started, gaps))
    assert not wrong, wrong[:5]
