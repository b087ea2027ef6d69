"""Builds a world from a seed and a scale.

History is synthesised directly (issues get first/last seen and fixed times that fall on the target's
past scans) rather than replayed scan by scan, which keeps `--scale large` (50,000 issues, 20,000 scans)
to a few seconds. Same seed and scale, same world: every id and time comes from seeded RNGs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from .catalog import SEVERITIES
from .clock import DRIVEN_EPOCH, Clock
from .config import SimConfig
from .evolve import commit_of, controls_for, vary_location
from .model import DAY, HOUR, PERIOD_SECONDS, TRIAL_SECONDS, Credential, Issue, Project, Scan, Target, Workspace
from .scoring import grade_of
from .world import World


@dataclass(frozen=True)
class Scale:
    projects: int
    targets: int
    issues: int
    scans: int
    history_days: int


SCALES = {
    "small": Scale(projects=3, targets=8, issues=320, scans=320, history_days=360),
    "medium": Scale(projects=8, targets=40, issues=5_000, scans=3_000, history_days=360),
    "large": Scale(projects=20, targets=200, issues=50_000, scans=20_000, history_days=360),
    # One large workspace's memory figure: ~200k visible issues on large's projects and targets.
    "200k": Scale(projects=20, targets=200, issues=236_000, scans=20_000, history_days=360),
    # The scale curve's top: ten times large's issues on the same projects and targets (~400k visible).
    "xlarge": Scale(projects=20, targets=200, issues=460_000, scans=20_000, history_days=360),
}

SMALL_LAYOUT = (
    ("Storefront", (("domain", "shop.acme-demo.com", True), ("domain", "api.acme-demo.com", True),
                    ("repository", "acme-demo/storefront", True))),
    ("Marketing site", (("domain", "www.acme-demo.com", True), ("domain", "blog.acme-demo.com", True),
                        ("domain", "landing.acme-demo.com", False))),
    ("Internal tools", (("domain", "status.acme-demo.com", True), ("domain", "docs.acme-demo.com", False))),
)
PROJECT_WORDS = ("Storefront", "Marketing", "Payments", "Support", "Mobile API", "Partner portal", "Careers",
                 "Investor site", "Docs", "Status", "Billing", "Identity", "Search", "Analytics", "Media",
                 "Checkout", "Loyalty", "Logistics", "Community", "Labs")
HOST_WORDS = ("www", "api", "shop", "blog", "app", "cdn", "admin", "auth", "pay", "help", "docs", "status",
              "m", "static", "portal", "files")
MARK_REASONS = ("Behind the VPN, not reachable from the internet.", "Test fixture with fake data only.",
                "Accepted until the Q3 migration is done.", "Vendor widget we do not control.")


def _owned(address: str, owner: str) -> str:
    """An address of the main workspace's layout, moved under another owner's domain and repositories."""
    if "acme-demo" in address:
        return address.replace("acme-demo", f"{owner}-demo")
    if address.startswith("acme/"):
        return f"{owner}/" + address.removeprefix("acme/")
    return address.replace(".example.com", f".{owner}.example.com")


def build_world(config: SimConfig, clock: Clock) -> World:
    world = World(config, clock)
    anchor = clock.now() if clock.kind == "real" else DRIVEN_EPOCH
    gen = _Generator(world, SCALES[config.scale], anchor)
    gen.build()
    return world


class _Generator:
    def __init__(self, world: World, scale: Scale, anchor: float) -> None:
        self.w = world
        self.scale = scale
        self.now = anchor
        self.rng = random.Random(f"{world.seed}:world")
        self.key_rng = random.Random(f"{world.seed}:keys")

    # ------------------------------------------------------------------ workspaces and keys
    def build(self) -> None:
        main = self.workspace("Acme Corp", "pro", extra_projects=max(2, self.scale.projects - 3 + 2),
                              pack_scans=50, pack_fixes=10)
        self.w.main_workspace_id = main.id
        self.key("pro", main, "en", name="ci-key")
        self.key("pro_fr", main, "fr", name="cle-equipe-fr")
        self.key("token_read", main, "en", scopes={"scans:read"}, name="agent:assistant")
        self.key("token_run", main, "en", scopes={"scans:read", "scans:run"}, name="agent:assistant")
        self.key("token_write", main, "en", scopes={"scans:read", "issues:write"}, name="agent:assistant")
        self.key("token_none", main, "en", scopes=set(), name="agent:assistant")
        self.key("revoked", main, "en", name="old-key", revoked=True)
        self.main_projects(main)

        free = self.workspace("Free Tier Co", "free", free_fixes=3)
        self.key("free", free, "en", name="free-key")
        self.small_workspace(free, "Side project", ("domain", "side-project.example.org"))

        trial = self.workspace("Solo Trial Ltd", "solo")
        self.key("solo_trial", trial, "en", name="solo-key")
        self.small_workspace(trial, "Portfolio", ("domain", "portfolio.example.net"))

        ended = self.workspace("Solo Ended SARL", "solo", trial_started_at=self.now - 20 * DAY)
        self.key("trial_ended", ended, "fr", name="cle-solo")
        self.small_workspace(ended, "Boutique", ("domain", "boutique.example.fr"))

        other = self.workspace("Other Workspace Inc", "pro")
        self.key("other_workspace", other, "en", name="other-key")
        self.small_workspace(other, "Other app", ("domain", "other-app.example.com"), ("domain", "other.example.io"))

        # More Pro workspaces shaped like the main one (a deployment following several), built last so
        # that every id and key above stays the same whatever their number.
        self.w.pro_workspace_ids.append(main.id)
        for n in range(2, self.w.config.pro_workspaces + 1):
            ws = self.workspace(f"Pro Workspace {n}", "pro", extra_projects=max(2, self.scale.projects - 3 + 2),
                                pack_scans=50, pack_fixes=10)
            self.key(f"pro_{n}", ws, "en", name=f"ci-key-{n}")
            self.w.pro_workspace_ids.append(ws.id)
            self.main_projects(ws, owner=f"pro{n}")

    def workspace(self, name: str, plan: str, *, extra_projects: int = 0, trial_started_at: float | None = None,
                  free_fixes: int = 0, pack_scans: int = 0, pack_fixes: int = 0) -> Workspace:
        ws = Workspace(id=self.w.new_id(), name=name, plan=plan, extra_projects=extra_projects,
                       trial_started_at=trial_started_at, period_start=self.now - 9 * DAY - 3 * HOUR,
                       free_fixes_left=free_fixes, pack_scans=pack_scans, pack_fixes=pack_fixes)
        assert self.now - ws.period_start < PERIOD_SECONDS and TRIAL_SECONDS > 0
        self.w.workspaces[ws.id] = ws
        return ws

    def key(self, label: str, ws: Workspace, lang: str, *, name: str, scopes: set[str] | None = None,
            revoked: bool = False) -> None:
        prefix = "rst_" if scopes is None else "rat_"
        secret = prefix + f"{self.key_rng.getrandbits(160):040x}"
        self.w.credentials[secret] = Credential(name=name, secret=secret, workspace_id=ws.id, lang=lang,
                                                scopes=None if scopes is None else frozenset(scopes), revoked=revoked)
        self.w.keys[label] = secret

    # ------------------------------------------------------------------ projects
    def main_projects(self, ws: Workspace, owner: str = "acme") -> None:
        """The main workspace's shape; `owner` names its addresses, so each Pro workspace scans its own sites
        (`shop.pro2-demo.com`, not the main workspace's `shop.acme-demo.com`)."""
        s = self.scale
        layout: Sequence[tuple[str, Sequence[tuple[str, str, bool]]]] = SMALL_LAYOUT
        if self.w.config.scale != "small":
            built: list[tuple[str, Sequence[tuple[str, str, bool]]]] = []
            per = s.targets // s.projects
            for n in range(s.projects):
                name = PROJECT_WORDS[n % len(PROJECT_WORDS)] + ("" if n < len(PROJECT_WORDS) else f" {n}")
                domain = f"{name.lower().replace(' ', '-')}{n}.example.com"
                hosts: list[tuple[str, str, bool]] = []
                for k in range(per):
                    if k % 5 == 4:
                        hosts.append(("repository", f"acme/{name.lower().replace(' ', '-')}-{k}", True))
                    else:
                        host = HOST_WORDS[k % len(HOST_WORDS)] + ("" if k < len(HOST_WORDS) else str(k))
                        hosts.append(("domain", f"{host}.{domain}", k % 10 != 7))
                built.append((name, tuple(hosts)))
            layout = built
        if owner != "acme":
            layout = [(name, tuple((kind, _owned(address, owner), verified) for kind, address, verified in targets))
                      for name, targets in layout]
        per_target_issues = s.issues / s.targets
        per_target_scans = s.scans / s.targets
        for pi, (name, targets) in enumerate(layout):
            created = self.now - (s.history_days + 30 - pi) * DAY
            if pi == 0:
                created = min(created, self.now - 400 * DAY)  # old enough for the scans beyond one year
            p = self.project(ws, name, created)
            for ti, (kind, address, verified) in enumerate(targets):
                never_scanned = self.w.config.scale == "small" and address.startswith("docs.")
                never_scanned = never_scanned or (self.w.config.scale != "small" and (pi * 31 + ti) % 40 == 39)
                t = self.w.add_target(p, kind, address, verified=verified, created_at=created + ti * HOUR)
                if never_scanned:
                    continue
                n_scans = max(2, round(per_target_scans * self.rng.uniform(0.7, 1.3)))
                n_issues = max(3, round(per_target_issues * self.rng.uniform(0.7, 1.3)))
                old = 2 if (pi == 0 and ti == 0) else 0  # a few scans beyond one year: the history filter bites
                self.history(ws, t, n_scans, n_issues, s.history_days, old)

    def small_workspace(self, ws: Workspace, name: str, *targets: tuple[str, str]) -> None:
        p = self.project(ws, name, self.now - 60 * DAY)
        for kind, address in targets:
            t = self.w.add_target(p, kind, address, verified=True, created_at=p.created_at)
            self.history(ws, t, 12, 14, 50, 0)

    def project(self, ws: Workspace, name: str, created: float) -> Project:
        p = Project(id=self.w.new_id(), workspace_id=ws.id, name=name, created_at=created)
        self.w.projects[p.id] = p
        ws.project_ids.append(p.id)
        return p

    # ------------------------------------------------------------------ history of one target
    def history(self, ws: Workspace, t: Target, n_scans: int, n_issues: int, days: int, old: int) -> None:
        rng, w = self.rng, self.w
        start = max(t.created_at, self.now - days * DAY)
        end = self.now - 2 * HOUR
        times = sorted(rng.uniform(start, end) for _ in range(n_scans))
        times = [self.now - (380 + 5 * i) * DAY for i in range(old)][::-1] + times
        scans: list[Scan] = []
        for ts in times:
            if t.kind == "repository":
                kind = "repository"
            else:
                kind = "audit" if t.verified and ws.spec["features"]["full_audit"] and rng.random() < 0.2 else "quick"
            duration = rng.uniform(15, 55)
            sc = Scan(id=w.new_id(), target_id=t.id, project_id=t.project_id, kind=kind, created_at=ts,
                      due_at=ts + duration, finished_at=ts + duration,
                      status="failed" if rng.random() < 0.04 else "done")
            w.scans[sc.id] = sc
            t.scan_ids.append(sc.id)
            scans.append(sc)
        done = [sc for sc in scans if sc.status == "done" and sc.created_at >= start]
        if not done:
            done = [sc for sc in scans if sc.status == "done"]
        if not done:
            return
        seen_times = [sc.finished_at or sc.created_at for sc in done]
        controls = controls_for(t)
        used: set[tuple[str, str]] = set()
        last = len(done) - 1
        fixed_share = 0.4 + 0.55 * rng.random()  # some teams fix fast, some do not: a spread of grades
        for _ in range(n_issues):
            c = rng.choice(controls)
            base = rng.choice(c.locations)
            k = 0
            while (c.id, vary_location(base, k)) in used:
                k += 1
            loc = vary_location(base, k)
            used.add((c.id, loc))
            first = min(last, int(rng.random() ** 1.6 * len(done)))
            severity = c.severity
            if rng.random() < 0.2:
                i = SEVERITIES.index(severity) + rng.choice((-1, 1))
                severity = SEVERITIES[min(len(SEVERITIES) - 1, max(0, i))]
            issue = Issue(id=w.new_id(), project_id=t.project_id, target_id=t.id, control_id=c.id,
                          severity=severity, confidence=c.confidence, location=loc,
                          first_seen_at=seen_times[first], last_seen_at=seen_times[last])
            r = rng.random()
            if r < fixed_share and first < last:
                j = rng.randint(first + 1, last)
                issue.status, issue.fixed_at, issue.last_seen_at = "fixed", seen_times[j], seen_times[j - 1]
                seen_scan = done[j - 1]
            else:
                seen_scan = done[last]
                if r > 0.95:
                    issue.status = "false_positive" if r > 0.975 else "accepted_risk"
                    issue.status_reason = rng.choice(MARK_REASONS)
                    issue.marked_by = "app"
            if t.kind == "repository":
                issue.commit = commit_of(seen_scan.id)
            issue.fix_unlocked = rng.random() < 0.05
            w.issues[issue.id] = issue
            t.issue_ids.append(issue.id)
        t.scans_done = len(done)
        w.rescore(t)
        t.last_scan_at = done[-1].finished_at
        # Past scans: scores drift towards today's, mostly improving, so dashboards have a trend to show.
        final = t.score or 0
        span = max(1.0, self.now - start)
        drift = rng.uniform(-30, 8)
        for sc in done:
            age = (self.now - sc.created_at) / span
            sc.score = max(0, min(100, round(final + drift * min(age, 1.2) + rng.uniform(-3, 3))))
            sc.grade = grade_of(sc.score)
            sc.coverage = round(rng.uniform(0.7, 1.0) if sc.kind != "quick" else rng.uniform(0.5, 0.8), 2)
        done[-1].score, done[-1].grade = t.score, t.grade
