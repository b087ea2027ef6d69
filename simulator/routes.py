"""The fourteen `/v1` routes: HTTP in, `World` calls, contract JSON out.

Each handler runs with the world lock held and returns (status, body); errors are raised as ApiError.
Scopes of the four issue routes the contract leaves open are the simulator's choice (see docs/simulator.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import views
from .catalog import ISSUE_STATUSES, SEVERITIES
from .errors import ApiError, invalid, not_found
from .model import Credential
from .validation import (
    is_uuid,
    normalize_site,
    only_fields,
    parse_body,
    parse_limit,
    string_field,
)
from .world import World


@dataclass
class Call:
    world: World
    cred: Credential
    params: dict[str, str]
    query: dict[str, str]
    body: bytes
    content_type: str | None
    running_status: str = "queued"
    repository_host_down: bool = False

    @property
    def ws(self) -> str:
        return self.cred.workspace_id

    @property
    def lang(self) -> str:
        return self.cred.lang

    def id(self, name: str) -> str:
        """Path ids are UUIDs; anything else names no object, hence 404 like a missing one."""
        value = self.params[name]
        if not is_uuid(value):
            raise not_found()
        return value

    def json(self, *, allow_empty: bool = False) -> dict[str, Any]:
        return parse_body(self.body, self.content_type, allow_empty=allow_empty)


Result = tuple[int, dict[str, Any]]


def page(call: Call, items: list[Any], render: Callable[[Any], dict[str, Any]]) -> Result:
    """The list envelope: `limit` items after `starting_after`, which must be an item of this list."""
    limit = parse_limit(call.query)
    cursor = call.query.get("starting_after")
    if cursor is not None:
        pos = next((n for n, item in enumerate(items) if item.id == cursor), None)
        if pos is None:
            raise ApiError(400, "cursor_invalid")
        items = items[pos + 1:]
    return 200, {"object": "list", "data": [render(x) for x in items[:limit]], "has_more": len(items) > limit}


# ------------------------------------------------------------------------------------------ account, projects
def get_account(c: Call) -> Result:
    return 200, views.account(c.world, c.world.workspaces[c.ws])


def list_projects(c: Call) -> Result:
    return page(c, c.world.projects_ordered(c.ws), lambda p: views.project(c.world, p))


def create_project(c: Call) -> Result:
    body = c.json()
    only_fields(body, ("name", "url"))
    name = string_field(body, "name", 1, 80, required=True)
    if name is None or not name.strip():
        raise invalid("name")
    url = string_field(body, "url", 1, 2048, required=False)
    address = normalize_site(url) if url is not None else None
    return 201, views.project(c.world, c.world.create_project(c.ws, name, address))


def get_project(c: Call) -> Result:
    return 200, views.project(c.world, c.world.project_in(c.ws, c.id("project_id")))


def add_target(c: Call) -> Result:
    project_id = c.id("project_id")
    c.world.project_in(c.ws, project_id)
    body = c.json()
    only_fields(body, ("url",))
    url = string_field(body, "url", 3, 2048, required=True)
    assert url is not None
    return 201, views.target(c.world, c.world.add_site(c.ws, project_id, normalize_site(url)))


# ------------------------------------------------------------------------------------------ scans
def start_scan(c: Call) -> Result:
    target_id = c.id("target_id")
    c.world.target_in(c.ws, target_id)
    body = c.json(allow_empty=True)
    only_fields(body, ("kind",))
    kind = body.get("kind")
    if kind is not None and kind not in ("quick", "audit", "repository"):
        raise invalid("kind")
    if c.repository_host_down and c.world.targets[target_id].kind == "repository":
        raise ApiError(409, "repository_host_unavailable")
    scan, reused, nxt = c.world.start_scan(c.ws, target_id, kind)
    return (200 if reused else 201), views.scan(scan, reused=reused, next_real_scan_at=nxt,
                                                running_status=c.running_status, now=c.world.now())


def get_scan(c: Call) -> Result:
    scan = c.world.scan_in(c.ws, c.id("scan_id"))
    return 200, views.scan(scan, running_status=c.running_status, now=c.world.now())


def list_scans(c: Call) -> Result:
    project = c.world.project_in(c.ws, c.id("project_id"))
    now = c.world.now()
    return page(c, c.world.scans_ordered(project), lambda s: views.scan(s, running_status=c.running_status, now=now))


# ------------------------------------------------------------------------------------------ issues
def list_issues(c: Call) -> Result:
    project = c.world.project_in(c.ws, c.id("project_id"))
    q = c.query
    status, severity, target_id = q.get("status"), q.get("severity"), q.get("target_id")
    if status is not None and status not in ISSUE_STATUSES:
        raise invalid("status")
    if severity is not None and severity not in SEVERITIES:
        raise invalid("severity")
    if target_id is not None and not is_uuid(target_id):
        raise invalid("target_id")
    items = c.world.issues_ordered(project)
    if status or severity or target_id:
        items = [i for i in items if (status is None or i.status == status)
                 and (severity is None or i.severity == severity) and (target_id is None or i.target_id == target_id)]
    return page(c, items, lambda i: views.issue(c.world, i, c.lang))


def get_issue(c: Call) -> Result:
    issue = c.world.issue_in(c.ws, c.id("issue_id"))
    if not c.world.target_visible(c.world.targets[issue.target_id]):
        raise ApiError(409, "proof_required")
    return 200, views.issue(c.world, issue, c.lang)


def mark_issue(c: Call) -> Result:
    issue_id = c.id("issue_id")
    issue = c.world.issue_in(c.ws, issue_id)
    body = c.json()
    if issue.status == "fixed":
        raise ApiError(409, "issue_already_fixed")
    only_fields(body, ("status", "reason"))
    status = body.get("status")
    if status not in ("open", "false_positive", "accepted_risk"):
        raise invalid("status")
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise invalid("reason")
    if status != "open" and (reason is None or not 10 <= len(reason.strip()) <= 500 or len(reason) > 500):
        raise ApiError(400, "reason_required")
    return 200, views.issue(c.world, c.world.mark_issue(c.ws, issue_id, status, reason, c.cred.name), c.lang)


def unlock_fix(c: Call) -> Result:
    issue, unlocked_now = c.world.unlock_fix(c.ws, c.id("issue_id"))
    return (201 if unlocked_now else 200), views.fix(c.world, issue, c.lang)


def get_fix(c: Call) -> Result:
    issue = c.world.issue_in(c.ws, c.id("issue_id"))
    if not c.world.target_visible(c.world.targets[issue.target_id]):
        raise ApiError(409, "proof_required")
    if not issue.fix_unlocked:
        raise not_found()
    return 200, views.fix(c.world, issue, c.lang)


def recheck(c: Call) -> Result:
    issue_id = c.id("issue_id")
    c.world.issue_in(c.ws, issue_id)
    body = c.json(allow_empty=True)
    only_fields(body, ())
    result = c.world.recheck(c.ws, issue_id)
    return 200, views.recheck(c.world, c.world.issues[issue_id], result, c.lang)


@dataclass(frozen=True)
class RouteSpec:
    method: str
    path: str  # Starlette path under /v1
    scope: str
    handler: Callable[[Call], Result]
    is_list: bool = False


ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec("GET", "/account", "scans:read", get_account),
    RouteSpec("GET", "/projects", "scans:read", list_projects, is_list=True),
    RouteSpec("POST", "/projects", "scans:run", create_project),
    RouteSpec("GET", "/projects/{project_id}", "scans:read", get_project),
    RouteSpec("POST", "/projects/{project_id}/targets", "scans:run", add_target),
    RouteSpec("POST", "/targets/{target_id}/scans", "scans:run", start_scan),
    RouteSpec("GET", "/scans/{scan_id}", "scans:read", get_scan),
    RouteSpec("GET", "/projects/{project_id}/scans", "scans:read", list_scans, is_list=True),
    RouteSpec("GET", "/projects/{project_id}/issues", "scans:read", list_issues, is_list=True),
    RouteSpec("GET", "/issues/{issue_id}", "scans:read", get_issue),
    RouteSpec("POST", "/issues/{issue_id}/fix", "issues:write", unlock_fix),
    RouteSpec("GET", "/issues/{issue_id}/fix", "scans:read", get_fix),
    RouteSpec("POST", "/issues/{issue_id}/recheck", "scans:run", recheck),
    RouteSpec("PATCH", "/issues/{issue_id}", "issues:write", mark_issue),
)
