"""What an injected fault does to one request: fail it, drop it, corrupt its body, change a list under it.

The decisions are drawn from the FaultEngine's seeded RNG; this module only applies them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from .errors import ApiError
from .routes import Call, RouteSpec

if TYPE_CHECKING:
    from .app import Runtime


async def injected_failures(rt: Runtime, spec: RouteSpec, request: Request) -> None:
    f, engine = rt.faults.faults, rt.faults
    if engine.draw(f.drop_rate):
        transport = request.scope.get("sim.transport")
        if transport is not None:
            transport.close()
            await asyncio.sleep(0.01)  # let the server notice the disconnect so it sends nothing
            raise ApiError(500, "internal_error")
    if engine.rate_limited():
        raise ApiError(429, "rate_limited", headers={"Retry-After": "1"}, retry_after=1)
    if engine.draw(f.error_rate):
        raise ApiError(500, "internal_error")
    if engine.draw(f.unavailable_rate):
        raise ApiError(503, "service_unavailable", headers={"Retry-After": "1"})
    if spec.handler.__name__ == "start_scan" and engine.draw(f.busy_rate):
        raise ApiError(503, "platform_busy", headers={"Retry-After": "120"})


def corrupt(rt: Runtime, raw: bytes) -> bytes:
    engine = rt.faults
    if engine.draw(engine.faults.malformed_rate):
        return b"<html><body>502 Bad Gateway</body></html>" if engine.rng.random() < 0.5 else raw[:-1] + b",}"
    if engine.draw(engine.faults.truncated_rate):
        return raw[: max(1, len(raw) // 2)]
    return raw


def future_enums(rt: Runtime, payload: dict[str, Any]) -> dict[str, Any]:
    if rt.faults.faults.future_enum_rate <= 0 or not payload["data"] or payload["data"][0].get("object") != "issue":
        return payload
    return dict(payload, data=[rt.faults.future_enum(i) for i in payload["data"]])


def mutate_list(rt: Runtime, spec: RouteSpec, call: Call, payload: dict[str, Any]) -> None:
    """Change the list between two pages: a new item appears, or the cursor item disappears."""
    engine, world = rt.faults, rt.world
    if not engine.draw(engine.faults.list_mutation_rate):
        return
    mode = engine.faults.list_mutation
    if mode == "both":
        mode = "insert" if engine.rng.random() < 0.5 else "remove"
    last_id = payload["data"][-1]["id"]
    kind = payload["data"][-1]["object"]
    if mode == "remove" and kind in ("scan", "issue"):
        (world.remove_scan if kind == "scan" else world.remove_issue)(last_id)
        return
    if kind == "issue":
        target = world.targets[world.issues[last_id].target_id]
        world.add_issue(target.id, severity="critical")
    elif kind == "scan":
        target = world.targets[world.scans[last_id].target_id]
        if world.running_scan(target) is None:
            world.create_scan(target, "repository" if target.kind == "repository" else "quick")
    elif kind == "project":
        ws = world.workspaces[call.ws]
        if len(ws.project_ids) < ws.project_limit:
            world.create_project(call.ws, f"Added while paging {world.version}", None)
