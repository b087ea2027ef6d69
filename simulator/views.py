"""JSON shapes of the contract's objects, rendered for one caller (language) at one instant."""

from __future__ import annotations

import hashlib
from typing import Any

from .catalog import BY_ID, texts
from .clock import iso
from .model import Issue, Project, Scan, Target, Workspace
from .scoring import grade_of
from .world import World


def account(w: World, ws: Workspace) -> dict[str, Any]:
    spec = ws.spec
    quotas = {}
    for name in ("quick_scans", "audits", "fixes"):
        limit = ws.quota_limit(name)
        used = ws.used[name]
        quotas[name] = {"limit": limit, "used": used, "remaining": max(0, limit - used)}
    trial_ends = ws.trial_started_at + 14 * 86400 if ws.plan == "solo" and ws.trial_started_at is not None else None
    allowed = ws.plan == "pro" or (ws.plan == "solo" and (trial_ends is None or w.now() < trial_ends))
    return {
        "object": "account",
        "workspace": {"id": ws.id, "name": ws.name},
        "plan": ws.plan,
        "api_access": {"allowed": allowed, "trial_ends_at": iso(trial_ends)},
        "period": {"start": iso(ws.period_start), "end": iso(ws.period_start + 30 * 86400)},
        "quotas": quotas,
        "free_fixes_left": ws.free_fixes_left,
        "pack_credits": {"scans": ws.pack_scans, "fixes": ws.pack_fixes},
        "projects": {"limit": ws.project_limit, "used": len(ws.project_ids),
                     "paused": sum(1 for p in ws.project_ids if w.projects[p].paused)},
        "addresses_per_project": spec["addresses"],
        "features": dict(spec["features"]),
    }


def target(w: World, t: Target) -> dict[str, Any]:
    return {
        "object": "target",
        "id": t.id,
        "project_id": t.project_id,
        "kind": t.kind,
        "address": t.address,
        "verified": t.verified,
        "score": t.score,
        "grade": t.grade,
        "last_scan_at": iso(t.last_scan_at),
        "hidden_issues": w.hidden_issues(t),
    }


def project(w: World, p: Project) -> dict[str, Any]:
    score = w.project_score(p)
    return {
        "object": "project",
        "id": p.id,
        "name": p.name,
        "score": score,
        "grade": grade_of(score),
        "open_issues": w.project_open_issues(p),
        "paused": p.paused,
        "last_scan_at": iso(w.project_last_scan(p)),
        "targets": [target(w, w.targets[tid]) for tid in p.target_ids],
    }


def scan(s: Scan, *, reused: bool = False, next_real_scan_at: float | None = None, running_status: str = "queued",
         now: float | None = None) -> dict[str, Any]:
    status = s.status
    if status == "queued" and running_status != "queued" and now is not None and now >= (s.created_at + s.due_at) / 2:
        status = running_status
    return {
        "object": "scan",
        "id": s.id,
        "target_id": s.target_id,
        "kind": s.kind,
        "status": status,
        "score": s.score if s.status == "done" else None,
        "grade": s.grade if s.status == "done" else None,
        "coverage": s.coverage if s.status == "done" else None,
        "audit_fallback": s.audit_fallback,
        "reused": reused,
        "next_real_scan_at": iso(next_real_scan_at),
        "created_at": iso(s.created_at),
        "finished_at": iso(s.finished_at),
    }


def _evidence(i: Issue) -> str:
    family = BY_ID[i.control_id].family
    h = hashlib.blake2s(i.id.encode(), digest_size=4).hexdigest()
    if family == "secrets":
        return f"sk_live_{'*' * 16}{h[:4]}"
    if family in ("database", "personalData"):
        return f"HTTP 200, {int(h[:3], 16) % 900 + 3} rows, values masked"
    if family == "exposedFiles":
        return f"HTTP 200, {int(h[:3], 16) % 90 + 1}.{int(h[3], 16) % 10} kB, first line masked"
    return f"observed in response to GET {i.location}" if i.location.startswith("/") else f"observed at {i.location}"


def issue(w: World, i: Issue, lang: str) -> dict[str, Any]:
    t = w.targets[i.target_id]
    title, explanation, detail = texts(i.control_id, i.location, lang)
    is_repo = t.kind == "repository"
    file = line = None
    location = i.location
    if is_repo:
        file, _, ln = i.location.rpartition(":")
        line = int(ln) if ln.isdigit() else None
        location = f"{i.location}@{i.commit}" if i.commit else i.location
    return {
        "object": "issue",
        "id": i.id,
        "project_id": i.project_id,
        "target_id": i.target_id,
        "address": t.address,
        "control_id": i.control_id,
        "family": BY_ID[i.control_id].family,
        "severity": i.severity,
        "confidence": i.confidence,
        "status": i.status,
        "title": title,
        "explanation": explanation,
        "detail": detail,
        "location": location,
        "file": file,
        "line": line,
        "commit": i.commit if is_repo else None,
        "evidence": _evidence(i),
        "fix_unlocked": i.fix_unlocked,
        "status_reason": i.status_reason,
        "marked_by": i.marked_by,
        "first_seen_at": iso(i.first_seen_at),
        "last_seen_at": iso(i.last_seen_at),
        "fixed_at": iso(i.fixed_at),
    }


FIX_STEPS = {
    "en": ("Confirm the finding at {location}.", "Apply the change below in a branch and deploy it.",
           "Recheck the issue: it is marked fixed once the check no longer finds it."),
    "fr": ("Confirmez le constat sur {location}.",
           "Appliquez la modification ci-dessous dans une branche et déployez-la.",
           "Relancez la vérification : le problème passe à corrigé quand la vérification ne le trouve plus."),
}


def fix(w: World, i: Issue, lang: str) -> dict[str, Any]:
    """The fix object is not shown by the contract; this shape is the simulator's choice (see docs/simulator.md)."""
    title, _, _ = texts(i.control_id, i.location, lang)
    t = w.targets[i.target_id]
    steps = [s.format(location=i.location) for s in FIX_STEPS["fr" if lang == "fr" else "en"]]
    patch = None
    if t.kind == "repository":
        file = i.location.rpartition(":")[0]
        patch = f"--- a/{file}\n+++ b/{file}\n@@\n-    unsafe()\n+    safe()\n"
    return {
        "object": "fix",
        "issue_id": i.id,
        "control_id": i.control_id,
        "title": title,
        "summary": steps[1],
        "steps": steps,
        "patch": patch,
        "language": lang,
    }


def recheck(w: World, i: Issue, result: dict[str, Any], lang: str) -> dict[str, Any]:
    """The recheck response is not shown by the contract; its shape is the simulator's choice (docs/simulator.md)."""
    return {
        "object": "recheck",
        "issue_id": i.id,
        "status": "done",
        "analysis_started": result["analysed"],
        "result": "fixed" if i.status == "fixed" else "still_present",
        "previous_status": result["before"],
        "checked_at": iso(result["checked_at"]),
        "rechecks_remaining_today": max(0, result["remaining"]),
        "issue": issue(w, i, lang),
    }
