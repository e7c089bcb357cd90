"""What the server logs (``logs.py`` writes it): ``request`` for every HTTP request or WebSocket connection
(``RequestLog``, an ASGI wrapper), ``refused`` for every request turned away and why, ``evaluation`` for every
evaluation that ends; ``server_start`` and ``shutdown`` come from ``kbench serve`` and ``KBenchServer``.

The log must be safe to ship: no event carries the bearer token (the Authorization header is never read here) or a
candidate's source. A source appears as its size and a sha256 prefix; an evaluation's error message, which can quote
the source (a compiler's or a traceback's line), is left out: its stage is logged, the message goes to the caller."""

from __future__ import annotations

import contextvars
import logging
import secrets
import time

from kbench_env.pipeline.result import hash_source
from kbench_env.serving.logs import event

#: the id of the request being served (set by ``RequestLog``): events of one request share it
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("kbench_request_id", default=None)


def client_key(scope_client) -> str:
    """Who a client is, for per-client limits and the log: its address."""
    return scope_client[0] if scope_client else "unknown"


class RequestLog:
    """ASGI wrapper: gives each request an id and logs ``request`` (method, path without the query, status,
    duration_ms, client) when it ends; ``open`` counts requests in progress. A WebSocket connection is one request
    (method ``WS``, status 101 once accepted, 403 when refused before)."""

    def __init__(self, app):
        self.app = app
        self.open = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        rid = secrets.token_hex(6)
        reset = REQUEST_ID.set(rid)
        status: list = [None]

        async def watched(message):
            kind = message["type"]
            if kind in ("http.response.start", "websocket.http.response.start"):
                status[0] = message["status"]
            elif kind == "websocket.accept":
                status[0] = 101
            elif kind == "websocket.close" and status[0] is None:
                status[0] = 403
            await send(message)

        start = time.perf_counter()
        self.open += 1
        try:
            await self.app(scope, receive, watched)
        finally:
            self.open -= 1
            code = status[0] or 500  # no answer started: the application raised (uvicorn answers 500)
            event("request", logging.WARNING if code >= 500 else logging.INFO, request_id=rid,
                  method=scope.get("method", "WS"), path=scope.get("path"), status=code,
                  duration_ms=round((time.perf_counter() - start) * 1e3, 2), client=client_key(scope.get("client")))
            REQUEST_ID.reset(reset)


def refused(exc, client: str, path: str | None) -> None:
    """Log a refusal (an ``admission.Refused``): its reason (``token_missing``, ``source_too_large``,
    ``queue_full``, ``client_limit``, ...), status and message. Messages name limits and sizes, never the token
    or a source."""
    event("refused", logging.WARNING, request_id=REQUEST_ID.get(), path=path, client=client, status=exc.status,
          reason=exc.reason, code=exc.code, message=exc.message[:300])


def source_fields(source, result: dict | None = None) -> dict:
    """What the log says of a candidate's source: its size and ``source_sha256``, the hash its result carries
    (``source_hash``, of the source the evaluator took from the action), or, where there is no result or the
    result has none (the executor raised, the screen refused the action first), the same hash of the action."""
    if not isinstance(source, str):
        return {"source_chars": None, "source_sha256": None}
    return {"source_chars": len(source),
            "source_sha256": (result or {}).get("source_hash") or hash_source(source)}


def origin(**ids) -> dict:
    """Where an evaluation comes from: the current request's id and ``ids`` (``session``, or a batch item's
    ``batch``, the number of items, and ``index``)."""
    return {"request_id": REQUEST_ID.get(), **ids}


#: what the log keeps of an evaluation's result (``error_stage`` is kept for an incorrect one only)
RESULT_FIELDS = ("correct", "compiled", "stage", "error_stage", "speedup", "reward", "integrity_flags",
                 "eval_seconds", "phase_seconds", "cached_build", "device")


def evaluation(task, source, where: dict, result: dict | None = None, exc: BaseException | None = None) -> None:
    """Log an evaluation that ended: its ``result`` (``EvalResult.to_dict()``) or the exception the executor
    raised."""
    fields = {"task": getattr(task, "name", str(task)), **where, **source_fields(source, result)}
    if exc is not None:
        event("evaluation", logging.ERROR, **fields, correct=None, error_stage="executor",
              exception=f"{type(exc).__name__}: {exc}"[:300])
        return
    fields.update((k, result.get(k)) for k in RESULT_FIELDS)
    if result.get("correct"):
        fields["error_stage"] = None
    if result.get("retries"):
        fields["retries"] = result["retries"]
    event("evaluation", logging.WARNING if fields["integrity_flags"] else logging.INFO, **fields)
