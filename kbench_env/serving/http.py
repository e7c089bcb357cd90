"""HTTP plumbing of the server: reading a JSON body within the size limit, and the guard every route goes
through (token, per-client concurrency, refusals turned into JSON errors with their status and headers)."""

from __future__ import annotations

import functools
import json

from starlette.requests import Request
from starlette.responses import JSONResponse

from kbench_env.serving.admission import Refused, check_token
from kbench_env.serving.logevents import client_key
from kbench_env.serving.api import TOKEN_HEADER


async def read_json(request: Request, limit: int) -> dict:
    """The request's JSON object, refused with 413 past ``limit`` bytes (announced or streamed) and 400 when it
    is not a JSON object."""
    announced = request.headers.get("content-length")
    if announced and announced.isdigit() and int(announced) > limit:
        raise Refused(413, f"request body is {int(announced):,} bytes; this server takes at most {limit:,} "
                           f"(--max-body-bytes)", "TOO_LARGE", reason="body_too_large")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise Refused(413, f"request body is over {limit:,} bytes, this server's limit (--max-body-bytes)",
                          "TOO_LARGE", reason="body_too_large")
    if not body:
        return {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused(400, f"request body is not JSON: {exc}", "INVALID_JSON") from None
    if not isinstance(data, dict):
        raise Refused(400, f"request body must be a JSON object, not {type(data).__name__}", "INVALID_JSON")
    return data


def error_response(exc: Refused) -> JSONResponse:
    return JSONResponse({"error": exc.message, "code": exc.code, "status": exc.status}, status_code=exc.status,
                        headers=exc.headers)


def guarded(server, route: str, *, counted: bool = False):
    """Decorate a route handler ``f(request)``: token first, then (``counted``) a per-client place for the
    request's life; any ``Refused`` becomes its JSON error."""
    def wrap(handler):
        @functools.wraps(handler)
        async def endpoint(request: Request):
            server.metrics.requests[route] += 1
            client = client_key(request.scope.get("client"))
            entered = False
            try:
                check_token(request.headers.get(TOKEN_HEADER), server.token)
                if counted:
                    server.admission.enter_client(client)
                    entered = True
                return await handler(request)
            except Refused as exc:
                server.refuse(exc, client, request.url.path)
                return error_response(exc)
            finally:
                if entered:
                    server.admission.leave_client(client)
        return endpoint
    return wrap
