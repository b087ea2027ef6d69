"""The account step: plan, API access, quotas and credits; and which workspace a followed name stands for."""

from __future__ import annotations

from pipelines.core.settings import DEFAULT_WORKSPACE
from pipelines.core.sqlfiles import read_sql
from pipelines.storage import merge_account
from pipelines.storage.destinations import Connection
from pipelines.sync.step import Step


class WorkspaceMismatchError(RuntimeError):
    """A followed name would mix two of the service's workspaces; the message says which and what to fix."""


def bind_workspace(conn: Connection, label: str | None, workspace_id: str | None, name: str) -> None:
    """Refuse, before anything is written, a key that answers for another workspace than the one its name
    already holds in the history (or for a workspace followed under another name). `None` is the unnamed
    workspace of the two variables, `default`, bound like any name: several keys under it would otherwise
    each store their account, and every later step would take the last one observed for its own."""
    params = {"label": label, "workspace_id": workspace_id}
    shown = DEFAULT_WORKSPACE if label is None else label
    remedy = ("put the right key in SCANWATCH_API_KEY, or follow each workspace under a name of its own "
              "(SCANWATCH_WORKSPACES_FILE, docs/workspaces.md)" if label is None else
              "put the right key in its variable, or follow the new workspace under a new name")
    for conflict, other_id, other_name in conn.execute(read_sql("sync/workspace_binding.sql"), params).fetchall():
        if conflict == "moved":
            raise WorkspaceMismatchError(
                f"workspace {shown}: its key now answers for workspace {name!r} ({workspace_id}), but the history "
                f"holds {other_name!r} ({other_id}) under this name; {remedy}")
        raise WorkspaceMismatchError(
            f"workspace {shown}: its key answers for workspace {name!r} ({workspace_id}), which is already "
            f"followed as {other_name}; each workspace is followed under one name")


def sync_account(step: Step) -> None:
    """One request; free of charge on the service. Binds the followed name to the service's workspace id on
    the first sync, and refuses a key that later answers for another workspace."""
    client = step.service
    body = client.get_account()
    workspace = body.get("workspace") or {}
    with step.db(keep=True) as conn, conn.engine.holding_name(conn, step.label, workspace.get("id")):
        bind_workspace(conn, step.label, workspace.get("id"), workspace.get("name") or "")
        step.workspace_id = workspace.get("id")
        step.add(merge_account(conn, body, now=step.now, service_version=client.stats.service_version))
        if step.label is not None:
            conn.execute(read_sql("sync/bind_workspace.sql"),
                         {"label": step.label, "workspace_id": step.workspace_id})
    step.metadata.update({"workspace": workspace.get("name"), "plan": body.get("plan")})
