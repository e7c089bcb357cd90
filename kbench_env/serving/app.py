"""The server's routes (``api.py`` describes the protocol): OpenEnv's reset/step/state over HTTP and WebSocket,
the streamed batch, and /health, /metrics, /tasks, /schema. ``KBenchServer`` holds the parts (registry,
admission, evaluations, sessions, metrics); ``server.app`` is the ASGI application uvicorn runs, wrapped in the
request log (``logevents.py``)."""

from __future__ import annotations

import contextlib
import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route, WebSocketRoute

from kbench_env.serving.admission import Admission, ServerLimits
from kbench_env.serving.batch import batch_route
from kbench_env.serving.evaluations import Evaluations
from kbench_env.serving.http import guarded, read_json
from kbench_env.serving.logevents import RequestLog, refused
from kbench_env.serving.logs import event
from kbench_env.serving.metrics import Metrics
from kbench_env.serving.registry import TaskRegistry
from kbench_env.serving.sessions import Sessions
from kbench_env.serving.socket import websocket_route
from kbench_env.serving.api import RESET_OPTIONS


class KBenchServer:
    """``executor``: what evaluates (``make_executor(...)``); ``evaluator``: whose device, backend and rules the
    prompts name (the local executor's first Evaluator, or the Ray executor itself: its actors'); ``token``: the
    bearer token every route but /health needs; ``expose_info``: answers carry the researcher's record (the
    EvalResult, held-out configurations named: ``kbench serve --expose-info``), off by default (api.py)."""

    def __init__(self, executor, evaluator, registry: TaskRegistry, token: str, limits: ServerLimits | None = None,
                 expose_info: bool = False):
        if not token:
            raise ValueError("the server needs a token (the code it runs comes from its callers)")
        self.token = token
        self.limits = limits or ServerLimits()
        self.registry = registry
        self.evaluator = evaluator
        self.expose_info = bool(expose_info)
        self.metrics = Metrics()
        self.admission = Admission(self.limits)
        self.evaluations = Evaluations(executor, self.admission, self.metrics)
        self.sessions = Sessions(registry, evaluator, self.evaluations, self.limits, self.expose_info)
        self.app = RequestLog(self._build())
        self._in_flight_at_stop: int | None = None  # evaluations holding a place when shutdown began

    def refuse(self, exc, client: str, path: str | None) -> None:
        """Count and log a refusal (an ``admission.Refused``) of ``client``'s request to ``path``."""
        self.metrics.refused[str(exc.status)] += 1
        refused(exc, client, path)

    def stopping(self, signal_name: str | None = None) -> None:
        """Shutdown begins (the server stops accepting): log what is in flight."""
        a = self.admission
        self._in_flight_at_stop = a.admitted
        event("shutdown", stage="begin", signal=signal_name, in_flight=a.admitted, running=a.running,
              open_requests=self.app.open, sessions=len(self.sessions.open))

    def close(self) -> None:
        """Finish in-flight evaluations, then close sessions and the executor; log what finished and what did
        not (``handed_back``: evaluations still holding a place once the executor closed). Closing waits for
        every evaluation and each gives its place back when it ends, so what still holds one did not finish."""
        if self._in_flight_at_stop is None:
            self.stopping()
        self.evaluations.close()
        self.sessions.close_all()
        in_flight, handed_back = self._in_flight_at_stop, self.admission.admitted
        event("shutdown", stage="done", in_flight=in_flight, finished=max(0, in_flight - handed_back),
              handed_back=handed_back)

    def _build(self) -> Starlette:
        limit = self.limits.max_body_bytes

        @guarded(self, "reset")
        async def reset(request: Request):
            data = await read_json(request, limit)
            sid = data.get("session_id") or data.get("episode_id")
            session = self.sessions.get(sid) if sid else self.sessions.create()
            return JSONResponse(await self.sessions.reset(session, data))

        @guarded(self, "step", counted=True)
        async def step(request: Request):
            data = await read_json(request, limit)
            session = self.sessions.get(data.get("session_id") or data.get("episode_id"))
            return JSONResponse(await self.sessions.step(session, data.get("action")))

        @guarded(self, "state")
        async def state(request: Request):
            return JSONResponse(self.sessions.state(self.sessions.get(request.query_params.get("session_id"))))

        @guarded(self, "close")
        async def close(request: Request):
            data = await read_json(request, limit)
            self.sessions.close(data.get("session_id") or data.get("episode_id"))
            return JSONResponse({"closed": True})

        async def health(request: Request):
            return JSONResponse({"status": "healthy"})

        @guarded(self, "metrics")
        async def metrics(request: Request):
            a = self.admission
            return PlainTextResponse(self.metrics.render(queued=a.queued, running=a.running, capacity=a.capacity,
                                                         sessions=len(self.sessions.open)),
                                     media_type="text/plain; version=0.0.4")

        @guarded(self, "tasks")
        async def tasks(request: Request):
            return JSONResponse({"suite": self.registry.spec, "tasks": self.registry.names()})

        @guarded(self, "schema")
        async def schema(request: Request):
            return JSONResponse(self.schema())

        @contextlib.asynccontextmanager
        async def lifespan(app):
            yield
            self.close()  # uvicorn has waited for open requests (graceful shutdown); then the executor goes

        routes = [Route("/reset", reset, methods=["POST"]), Route("/step", step, methods=["POST"]),
                  Route("/state", state), Route("/close", close, methods=["POST"]), Route("/health", health),
                  Route("/metrics", metrics), Route("/tasks", tasks), Route("/schema", schema),
                  Route("/batch", batch_route(self), methods=["POST"]), WebSocketRoute("/ws", websocket_route(self))]
        return Starlette(routes=routes, lifespan=lifespan)

    def schema(self) -> dict:
        ev = self.evaluator
        return {"action": {"type": "object", "properties": {"source": {"type": "string",
                                                                       "maxLength": self.limits.max_source_chars}},
                           "required": ["source"]},
                "observation": {"type": "object", "properties": {
                    "text": {"type": "string"}, "terminated": {"type": "boolean"},
                    "truncated": {"type": "boolean"}, "session_id": {"type": "string"}}},
                "info": {"type": "object"}, "expose_info": self.expose_info,
                "state": {"type": "object"}, "reset_options": list(RESET_OPTIONS),
                "evaluator": {"device": ev.device, "backend": ev.backend_name, "rules": ev.rules,
                              "format": ev.format},
                "limits": json.loads(json.dumps(self.limits.__dict__))}
