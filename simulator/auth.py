"""Who is calling and whether they may: credentials, the plan gate and OAuth scopes."""

from __future__ import annotations

from .errors import ApiError
from .model import TRIAL_SECONDS, Credential
from .world import World


def authenticate(world: World, header: str | None) -> Credential:
    """401 `authentication_required` without a bearer credential, `invalid_api_key` for an unknown one."""
    if not header:
        raise ApiError(401, "authentication_required")
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "authentication_required")
    cred = world.credentials.get(token)
    if cred is None or cred.revoked:
        raise ApiError(401, "invalid_api_key")
    return cred


def plan_gate(world: World, cred: Credential) -> None:
    """Pro answers; Solo answers during the 14-day trial its first call starts; Free never does."""
    ws = world.workspaces[cred.workspace_id]
    if ws.plan == "pro":
        return
    if ws.plan == "free":
        raise ApiError(402, "api_plan_required")
    now = world.now()
    if ws.trial_started_at is None:
        ws.trial_started_at = now
        world.touch()
    if now >= ws.trial_started_at + TRIAL_SECONDS:
        raise ApiError(402, "api_trial_ended")


def require_scope(cred: Credential, scope: str) -> None:
    """An API key has every permission; a token needs the route's scope."""
    if cred.scopes is not None and scope not in cred.scopes:
        raise ApiError(403, "scope_missing", scope=scope)
