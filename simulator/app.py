"""The ASGI application: one request pipeline around the route handlers.

Order of a `/v1` request: request id and version headers (always) -> credential (401) -> rate limit
(429, per credential, wall time) -> plan gate (402) -> scope (403) -> injected faults -> idempotency
(POST) -> latency -> handler under the world lock -> idempotency record -> list-mutation fault.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import SERVICE_VERSION
from .auth import authenticate, plan_gate, require_scope
from .config import SimConfig
from .errors import ApiError
from .fault_effects import corrupt, future_enums, injected_failures, mutate_list
from .faults import FaultEngine
from .idempotency import IdempotencyStore, fingerprint, validate_key
from .ratelimit import RateLimiter
from .routes import ROUTES, Call, RouteSpec
from .world import World

log = logging.getLogger("scanwatch.simulator.access")


class Runtime:
    """Everything a running simulator holds besides the world: limiter, idempotency, faults, counters."""

    def __init__(self, world: World, config: SimConfig) -> None:
        self.world = world
        self.config = config
        self.limiter = RateLimiter(config.rate_limit, config.rate_window)
        self.idempotency = IdempotencyStore(config.idempotency_ttl)
        self.faults = FaultEngine(config.seed, config.faults)
        self.counts: Counter[tuple[str, str, str]] = Counter()  # (method, route, credential name)

    def count(self, method: str, route: str, who: str) -> None:
        self.counts[(method, route, who)] += 1

    def request_count(self, *, key: str | None = None, route: str | None = None, method: str | None = None) -> int:
        """Requests served; `key` is a name from World.keys or a credential name, `route` a template."""
        names = {key}
        if key is not None and key in self.world.keys:
            names.add(self.world.credentials[self.world.keys[key]].name)
        return sum(n for (m, r, who), n in self.counts.items()
                   if (key is None or who in names or who == key) and (route is None or r == route)
                   and (method is None or m == method))


def dumps(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def json_response(status: int, body: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def error_response(err: ApiError, lang: str, extra: dict[str, str] | None = None) -> Response:
    headers = dict(err.headers)
    if extra:
        headers.update(extra)
    return json_response(err.status, dumps(err.body(lang)), headers)


def make_endpoint(rt: Runtime, spec: RouteSpec) -> Callable[[Request], Awaitable[Response]]:
    template = "/v1" + spec.path

    async def endpoint(request: Request) -> Response:
        world, faults = rt.world, rt.faults
        lang = "en"
        who = "-"
        idem: tuple[str, str] | None = None
        try:
            with world.lock:
                world.tick()
                cred = authenticate(world, request.headers.get("authorization"))
                who, lang = cred.name, cred.lang
                rt.count(spec.method, template, who)
                decision = rt.limiter.hit(cred.secret)
                if not decision.allowed:
                    raise ApiError(429, "rate_limited", headers={"Retry-After": str(decision.retry_after)},
                                   retry_after=decision.retry_after)
                plan_gate(world, cred)
                require_scope(cred, spec.scope)
            in_scope = faults.applies(spec.is_list)
            if in_scope:
                await injected_failures(rt, spec, request)
            body = await request.body()
            replay = None
            if spec.method == "POST" and "idempotency-key" in request.headers:
                key = request.headers["idempotency-key"]
                validate_key(key)
                with world.lock:
                    replay = rt.idempotency.begin(cred.secret, key, fingerprint(spec.method, request.url.path, body),
                                                  world.now())
                if replay is None:
                    idem = (cred.secret, key)
            if in_scope and (delay := faults.delay()) > 0:
                await asyncio.sleep(delay)
            if replay is not None:
                return json_response(replay.status, replay.body,
                                     {**replay.headers, **decision.headers(), "Idempotent-Replayed": "true"})
            call = Call(world=world, cred=cred, params=dict(request.path_params), query=dict(request.query_params),
                        body=body, content_type=request.headers.get("content-type"),
                        running_status=rt.config.running_status,
                        repository_host_down=faults.faults.repository_host_down)
            with world.lock:
                try:
                    status, payload = spec.handler(call)
                except ApiError as err:
                    if idem and rt.config.readings["replay_errors"] and err.status not in (429, 503):
                        # The loose reading: the first answer is the answer, an error too (429 and 503 say retry).
                        rt.idempotency.finish(*idem, err.status, dumps(err.body(lang)), dict(err.headers),
                                              keep_errors=True)
                        idem = None
                    elif idem:
                        rt.idempotency.release(*idem)
                    raise
                if in_scope and spec.is_list:
                    payload = future_enums(rt, payload)
                    if payload.get("has_more"):
                        mutate_list(rt, spec, call, payload)
                elif in_scope and payload.get("object") == "issue":
                    payload = rt.faults.future_enum(payload)
                raw = dumps(payload)
                if idem:
                    rt.idempotency.finish(*idem, status, raw, {})
                    idem = None
            headers = decision.headers()
            if in_scope:
                raw = corrupt(rt, raw)
            return json_response(status, raw, headers)
        except ApiError as err:
            if idem:
                rt.idempotency.release(*idem)
            if who == "-":
                rt.count(spec.method, template, who)
            return error_response(err, lang)
        except Exception:
            # A simulator bug still answers in the contract's envelope, and the trace goes to the log.
            logging.getLogger("scanwatch.simulator").exception("unexpected error on %s %s", spec.method, template)
            if idem:
                rt.idempotency.release(*idem)
            return error_response(ApiError(500, "internal_error"), lang)
        except BaseException:
            # A client gone mid-request (cancelled task): never leave the key "in progress" forever.
            if idem:
                rt.idempotency.release(*idem)
            raise

    return endpoint


class Outer:
    """Outermost ASGI layer: headers every response carries, the access log, and the raw transport
    (kept for the dropped-connection fault, which must close the socket before any byte is sent)."""

    def __init__(self, app: Any, rt: Runtime) -> None:
        self.app = app
        self.rt = rt

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = "req_" + uuid.uuid4().hex
        cycle = getattr(send, "__self__", None)
        scope["sim.transport"] = getattr(cycle, "transport", None)
        started = time.perf_counter()
        status_holder = [0]

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status_holder[0] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"request-id", request_id.encode()))
                headers.append((b"service-version", SERVICE_VERSION.encode()))
                message = dict(message, headers=headers)
            await send(message)

        await self.app(scope, receive, send_with_headers)
        if self.rt.config.access_log:
            # Never the credential: method, path (keys never travel in the address), status, duration.
            log.info("%s %s %s %d %.1fms", request_id, scope["method"], scope["path"], status_holder[0],
                     (time.perf_counter() - started) * 1000)


def build_app(rt: Runtime) -> Outer:
    routes = [Route("/v1" + spec.path, make_endpoint(rt, spec), methods=[spec.method]) for spec in ROUTES]
    if rt.config.control:
        from .control import control_routes

        routes += control_routes(rt)

    async def not_found(request: Request) -> Response:
        return error_response(ApiError(404, "resource_not_found"), "en")

    routes.append(Route("/{path:path}", not_found, methods=["GET", "POST", "PATCH", "PUT", "DELETE", "HEAD"]))
    app = Starlette(routes=routes)
    return Outer(app, rt)
