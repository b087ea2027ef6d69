"""End to end, the page about a new critical issue: simulator -> `scanwatch sync` -> exporter -> Prometheus with
the shipped rules -> Alertmanager with the shipped routes, grouping and templates -> this test's webhook.

A first deployment over 40 open critical issues sends nothing. Then one sync brings a new critical issue, a
regression of a fixed critical one and a high raised to critical: each reaches the webhook once, in one
message, saying what it is; a sync with no change sends nothing new (the next page is a later canary's);
fixing one resolves it alone. Only timers are shortened (scrapes, evaluations, group timers, the alert's
keep_firing_for). The page is the module's `paged` fixture, so each test also runs alone.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from tests.e2e.stack import LiveStack, WebhookReceiver, get_json, poll, running_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
ALERT = "SecscanNewCriticalIssue"
FIELDS = ("project", "address", "title", "family", "control_id", "location", "first_seen", "what", "summary",
          "description", "runbook")


class Pager(LiveStack):
    """The running stack and the world's issues this module stages."""

    staged: dict[str, str]  # role -> issue id

    def synced_and_scraped(self) -> None:
        """Sync, then wait until Prometheus has scraped the new snapshot and evaluated rules over it."""
        before = self.generated()
        self.sync()
        poll("the new snapshot scraped", lambda: self.generated() > before, timeout=30)

    def generated(self) -> float:
        result = self.query("secscan_snapshot_generated_timestamp_seconds")
        return float(result[0]["value"][1]) if result else 0.0

    def prometheus_alerts(self, state: str = "firing") -> list[dict]:
        return [a for a in get_json(f"{self.prom_url}/api/v1/alerts")["data"]["alerts"]
                if a["labels"]["alertname"] == ALERT and a["state"] == state]

    def pages(self) -> list[dict]:
        """Webhook notifications about new critical issues, in the order received."""
        return [n for n in list(self.webhook.notifications) if n["groupLabels"].get("alertname") == ALERT]

    def api_issue(self, issue_id: str) -> dict:
        return httpx.get(f"{self.sim.base_url}/issues/{issue_id}", headers=self.sim.headers(), timeout=10).json()


def stage_first_deployment(sim) -> dict[str, str]:
    """A world with at least 40 open critical issues a client can see, one critical fixed (to regress later)
    and one high open (to raise later)."""
    w = sim.world
    visible = [t for t in sim.target_ids(verified=True) if w.targets[t].kind != "repository"]
    repository = sim.target_ids(kind="repository", verified=True)[0]

    def open_issues(severity: str) -> list[str]:
        with w.lock:
            return sorted(i.id for i in w.issues.values() if i.status == "open" and i.severity == severity
                          and w.targets[i.target_id].id in visible)

    n = 0
    while len(open_issues("critical")) < 41:
        sim.add_issue(visible[n % len(visible)], "critical")
        n += 1
    if not open_issues("high"):
        sim.add_issue(visible[0], "high")
    regress = open_issues("critical")[0]
    sim.scan_finds(regress, status="fixed")
    return {"regress": regress, "raise": open_issues("high")[0], "repository": repository}


@pytest.fixture(scope="module")
def pager(tmp_path_factory):
    from simulator.testing import SimConfig, serve_simulator

    with serve_simulator(SimConfig(seed=11)) as sim:
        st = Pager(tmp_path_factory.mktemp("pager"), sim, WebhookReceiver())
        st.staged = stage_first_deployment(sim)
        with running_stack(st, shipped_routes=True, keep_firing_for="2s"):
            yield st


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_first_deployment_over_40_open_critical_issues_sends_nothing(pager):
    (open_critical,) = pager.query('sum(secscan_issues_open{severity="critical"})')
    assert float(open_critical["value"][1]) >= 40
    # Rules have been evaluated over many scrapes of that first snapshot (1 s intervals)...
    poll("ten rule evaluations", lambda: pager.query("count_over_time(secscan:issues_open:sum[1m]) >= 10"), timeout=30)
    # ...and none of the backlog is new: no series, no alert, no notification.
    assert not pager.query("secscan_critical_issue_new")
    assert not pager.prometheus_alerts() and not pager.prometheus_alerts("pending")
    assert not pager.pages()


@dataclass
class Paged:
    """The sync that brought a new, a reopened and a raised critical issue, and the one message it paged."""

    expected: dict[str, str]  # issue id -> change
    message: dict
    seconds: float


@pytest.fixture(scope="module")
def paged(pager) -> Paged:
    """Any test about what happens after the page gets it from here, whatever runs before it (or alone)."""
    sim = pager.sim
    new = sim.add_issue(pager.staged["repository"], "critical")
    sim.scan_finds(new.id)  # the analysis that found it, at a commit
    sim.scan_finds(pager.staged["regress"], status="open")
    sim.scan_finds(pager.staged["raise"], severity="critical")
    pager.staged["new"] = new.id
    started = time.monotonic()
    pager.sync()
    expected = {new.id: "new", pager.staged["regress"]: "reopened", pager.staged["raise"]: "raised"}

    def delivered() -> list[dict]:
        return [n for n in pager.pages() if {a["labels"]["issue_id"] for a in n["alerts"]} >= set(expected)]

    (message,) = poll("one message naming the three issues", delivered, timeout=60)
    return Paged(expected, message, time.monotonic() - started)


def test_one_sync_pages_a_new_a_reopened_and_a_raised_critical_issue_with_what_each_is(pager, paged):
    message, expected = paged.message, paged.expected
    print(f"delivered {paged.seconds:.1f}s after the sync started:\n{json.dumps(message, indent=2)}")
    assert message["status"] == "firing" and message["receiver"] == "secscan-page"
    assert len(message["alerts"]) == 3  # one sync, one message, each issue once
    snap = pager.snapshot()
    workspace = snap["tables"]["workspaces"][0]["workspace"]
    projects = {p["project_id"]: p["project"] for p in snap["tables"]["projects"]}
    for alert in message["alerts"]:
        labels, ann = alert["labels"], alert["annotations"]
        issue = pager.api_issue(labels["issue_id"])
        assert labels["change"] == expected[issue["id"]]
        assert (labels["workspace"], labels["project_id"], labels["severity"], labels["issue_severity"]) == (
            workspace, issue["project_id"], "page", "critical")
        assert set(FIELDS) <= set(ann) and all(ann[f] for f in FIELDS), ann
        assert ann["project"] == projects[issue["project_id"]]
        assert (ann["address"], ann["title"], ann["family"], ann["control_id"]) == (
            issue["address"], issue["title"], issue["family"], issue["control_id"])
        assert ann["location"] == issue["location"]
        assert ann["first_seen"] == iso(datetime.fromisoformat(issue["first_seen_at"].replace("Z", "+00:00"))
                                        .timestamp())
        assert issue["title"] in ann["summary"] and projects[issue["project_id"]] in ann["summary"]
        assert issue["id"] in ann["runbook"]
    by_change = {a["labels"]["change"]: a for a in message["alerts"]}
    assert re.fullmatch(r".+:\d+@[0-9a-f]{7}", by_change["new"]["annotations"]["location"])  # file:line@commit
    assert by_change["new"]["annotations"]["what"] == "new critical issue"
    assert by_change["reopened"]["annotations"]["what"] == "reopened after a fix"
    assert by_change["raised"]["annotations"]["what"] == "raised to critical from high"
    assert by_change["raised"]["labels"]["from_severity"] == "high"
    # The same message through the shipped Slack template: a whole-number count and every issue listed.
    titles = [a["annotations"]["title"] for a in message["alerts"]]
    (slack,) = poll("the Slack message", lambda: [
        b["attachments"][0] for p, b in pager.webhook.posts
        if p == "/slack/secscan-page" and all(t in b["attachments"][0]["text"] for t in titles)])
    # Without an ownership map every project is the default team's, which the page names.
    assert slack["title"] == f"3 new critical issues in {workspace}, team unowned"
    assert all(a["labels"]["issue_id"] in slack["text"] for a in message["alerts"])


def _identity(alert: dict) -> tuple:
    """What makes an alert the same alert to Alertmanager: its labels."""
    return tuple(sorted(alert["labels"].items()))


def test_a_second_sync_with_no_change_sends_nothing_new(pager, paged):
    """Nothing new after a sync with no change, proven by what comes next rather than by a pause: a canary
    (one more new critical issue, one sync later) must be the next and only new alert to reach the webhook,
    with the three earlier ones unchanged. Anything the no-change sync set off would reach Alertmanager
    before the canary does, in an earlier message or beside the canary in the same one.

    Mutations that fail it: the shipped page route's `repeat_interval` cut from 168h to 5s (the same page
    again every few seconds), which the former 3 s pause passed once Alertmanager's timers were 4 s, as on
    a slower machine; and the arrival's `detected_at` taken from the snapshot's time, so every sync
    re-fires."""
    before = len(pager.pages())
    known = {_identity(a) for a in paged.message["alerts"]}
    firing = {a["labels"]["issue_id"]: a["activeAt"] for a in pager.prometheus_alerts()}
    assert set(firing) >= set(paged.expected)
    pager.synced_and_scraped()  # the sync with no change
    canary = pager.sim.add_issue(pager.staged["repository"], "critical")
    pager.sim.scan_finds(canary.id)
    pager.synced_and_scraped()
    pager.staged["canary"] = canary.id

    def canary_paged() -> list[dict]:
        return [n for n in pager.pages()[before:] if canary.id in {a["labels"]["issue_id"] for a in n["alerts"]}]

    poll("the canary's page", canary_paged, timeout=60)
    since = pager.pages()[before:]
    first = next(i for i, n in enumerate(since) if n in canary_paged())
    assert first == 0, f"a page before the canary's: {since[:first]}"
    new = {_identity(a) for n in since for a in n["alerts"]} - known
    assert {dict(i)["issue_id"] for i in new} == {canary.id}, new
    now_firing = {a["labels"]["issue_id"]: a["activeAt"] for a in pager.prometheus_alerts()}
    assert {i: t for i, t in now_firing.items() if i != canary.id} == firing  # none restarted


def test_fixing_one_resolves_it_and_only_it(pager, paged):
    fixed = pager.staged["new"]
    firing_before = {a["labels"]["issue_id"] for a in pager.prometheus_alerts()}
    assert fixed in firing_before
    pager.sim.scan_finds(fixed, status="fixed")
    pager.sync()

    def resolved() -> list[dict]:
        return [a for n in pager.pages() for a in n["alerts"]
                if a["labels"]["issue_id"] == fixed and a["status"] == "resolved"]

    (alert,) = poll("the resolved notification", resolved, timeout=60)
    assert alert["annotations"]["title"]  # the resolution still says which issue
    still = {a["labels"]["issue_id"] for a in pager.prometheus_alerts()}
    assert still == firing_before - {fixed}
    assert {pager.staged["regress"], pager.staged["raise"]} <= still
    last = pager.pages()[-1]  # the message of the paged sync's group (grouped by detected_at)
    assert {a["labels"]["issue_id"]: a["status"] for a in last["alerts"]} == {
        fixed: "resolved", **dict.fromkeys(set(paged.expected) - {fixed}, "firing")}
