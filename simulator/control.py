"""The `/_sim/` control surface: drive the simulator from outside (demo scripts, other processes' tests).

Off unless the simulator was started with `control=True` / `--control`; it has no authentication, so it
is meant for loopback only. Bodies and answers are plain JSON, not the contract's shapes.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .clock import iso
from .config import parse_readings
from .errors import ApiError

if TYPE_CHECKING:
    from .app import Runtime  # app imports this module


async def _json(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ValueError("body is not JSON") from exc
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    return body


def control_routes(rt: Runtime) -> list[Route]:
    world = rt.world

    def guarded(fn: Callable[[Request], Awaitable[dict[str, Any]]]) -> Callable[[Request], Awaitable[Response]]:
        """Control answers are plain JSON; a bad argument is a 400 with the reason, never a traceback."""

        async def endpoint(request: Request) -> Response:
            try:
                return JSONResponse(await fn(request))
            except ApiError as err:
                return JSONResponse({"error": err.code}, status_code=err.status)
            except (ValueError, TypeError, KeyError) as err:
                return JSONResponse({"error": str(err)}, status_code=400)
        return endpoint

    async def clock(request: Request) -> dict[str, Any]:
        if request.method == "POST":
            body = await _json(request)
            world.advance(float(body.get("seconds", 0)))
        return {"now": iso(world.now()), "clock": world.clock.kind}

    async def round_(request: Request) -> dict[str, Any]:
        body = await _json(request)
        return world.run_round(float(body.get("fraction", 1.0)))

    async def faults(request: Request) -> dict[str, Any]:
        if request.method == "DELETE":
            rt.faults.clear()
        elif request.method in ("POST", "PUT"):
            rt.faults.set(**(await _json(request)))
        return rt.faults.faults.as_dict()

    async def keys(request: Request) -> dict[str, Any]:
        with world.lock:
            out = {}
            for label, secret in world.keys.items():
                cred = world.credentials[secret]
                ws = world.workspaces[cred.workspace_id]
                out[label] = {"key": secret, "name": cred.name, "workspace_id": ws.id, "plan": ws.plan,
                              "lang": cred.lang, "scopes": None if cred.scopes is None else sorted(cred.scopes),
                              "revoked": cred.revoked}
            return out

    async def verify(request: Request) -> dict[str, Any]:
        body = await _json(request)
        t = world.set_verified(request.path_params["target_id"], bool(body.get("verified", True)),
                               bool(body.get("proof_holds", True)))
        return {"id": t.id, "verified": t.verified, "proof_holds": t.proof_holds}

    async def pause(request: Request) -> dict[str, Any]:
        body = await _json(request)
        p = world.set_paused(request.path_params["project_id"], bool(body.get("paused", True)))
        return {"id": p.id, "paused": p.paused}

    async def delete_project(request: Request) -> dict[str, Any]:
        world.delete_project(request.path_params["project_id"])
        return {"deleted": request.path_params["project_id"]}

    async def remove_target(request: Request) -> dict[str, Any]:
        world.remove_target(request.path_params["target_id"])
        return {"removed": request.path_params["target_id"]}

    async def add_issue(request: Request) -> dict[str, Any]:
        body = await _json(request)
        issue = world.add_issue(request.path_params["target_id"], body.get("severity", "critical"),
                                body.get("control_id"))
        return {"id": issue.id, "severity": issue.severity, "target_id": issue.target_id,
                "project_id": issue.project_id}

    async def requests(request: Request) -> dict[str, Any]:
        rows = [{"method": m, "route": r, "key": who, "count": n} for (m, r, who), n in sorted(rt.counts.items())]
        return {"total": sum(rt.counts.values()), "by_route": rows}

    async def rate_limit(request: Request) -> dict[str, Any]:
        if request.method == "POST":
            body = await _json(request)
            rt.limiter.configure(int(body["limit"]) if "limit" in body else None,
                                 float(body["window"]) if "window" in body else None)
        return {"limit": rt.limiter.limit, "window": rt.limiter.window}

    async def readings(request: Request) -> dict[str, Any]:
        if request.method == "POST":
            body = await _json(request)
            with world.lock:
                rt.config.readings = parse_readings({**rt.config.readings, **body})
        return dict(rt.config.readings)

    async def stats(request: Request) -> dict[str, Any]:
        with world.lock:
            return {**world.stats(), "now": iso(world.now()), "seed": world.seed, "scale": rt.config.scale}

    return [
        Route("/_sim/clock", guarded(clock), methods=["GET", "POST"]),
        Route("/_sim/clock/advance", guarded(clock), methods=["POST"]),
        Route("/_sim/round", guarded(round_), methods=["POST"]),
        Route("/_sim/faults", guarded(faults), methods=["GET", "POST", "PUT", "DELETE"]),
        Route("/_sim/keys", guarded(keys), methods=["GET"]),
        Route("/_sim/targets/{target_id}/verify", guarded(verify), methods=["POST"]),
        Route("/_sim/targets/{target_id}/issues", guarded(add_issue), methods=["POST"]),
        Route("/_sim/targets/{target_id}", guarded(remove_target), methods=["DELETE"]),
        Route("/_sim/projects/{project_id}/pause", guarded(pause), methods=["POST"]),
        Route("/_sim/projects/{project_id}", guarded(delete_project), methods=["DELETE"]),
        Route("/_sim/requests", guarded(requests), methods=["GET"]),
        Route("/_sim/rate-limit", guarded(rate_limit), methods=["GET", "POST"]),
        Route("/_sim/stats", guarded(stats), methods=["GET"]),
        Route("/_sim/readings", guarded(readings), methods=["GET", "POST"]),
    ]
