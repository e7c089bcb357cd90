"""``WS /ws``: OpenEnv's WebSocket session. Each connection is its own episode; messages
``{"type": "reset"|"step"|"state"|"close", "data": {...}}`` are answered with ``{"type": "observation"|"state"|
"error", "data": ...}``. The token (a header as on every route, or ``?token=`` on the URL) is checked before the
connection is accepted (refused: HTTP 403); a connection idle longer than the session idle limit is closed."""

from __future__ import annotations

import asyncio
import json

from starlette.websockets import WebSocket, WebSocketDisconnect

from kbench_env.serving.admission import Refused, check_token
from kbench_env.serving.logevents import client_key
from kbench_env.serving.api import TOKEN_HEADER


def _error(message: str, code: str, status: int | None = None) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code, "status": status}})


def _message(raw: str, limit: int) -> dict:
    """A message as a dict, refused past ``limit`` or when it is not JSON, as an HTTP body would be."""
    if len(raw) > limit:
        raise Refused(413, f"message over {limit:,} bytes (--max-body-bytes)", "TOO_LARGE", reason="body_too_large")
    try:
        msg = json.loads(raw)
    except ValueError as exc:
        raise Refused(400, f"invalid JSON: {exc}", "INVALID_JSON") from None
    return msg if isinstance(msg, dict) else {}


async def _answer(server, session, client: str, raw: str) -> str | None:
    msg = _message(raw, server.limits.max_body_bytes)
    try:
        return await _dispatch(server, session, client, msg)
    except ValueError as exc:  # the env's own (a TaskError: the task cannot run here): an error, the episode goes on
        raise Refused(400, str(exc)) from None


async def _dispatch(server, session, client: str, msg: dict) -> str | None:
    kind, data = msg.get("type"), msg.get("data") or {}
    if not isinstance(data, dict):
        raise Refused(400, "data must be a JSON object")
    if kind == "reset":
        return json.dumps({"type": "observation", "data": await server.sessions.reset(session, data)})
    if kind == "step":
        server.admission.enter_client(client)
        try:
            payload = await server.sessions.step(session, data.get("action", data))
        finally:
            server.admission.leave_client(client)
        return json.dumps({"type": "observation", "data": payload})
    if kind == "state":
        return json.dumps({"type": "state", "data": server.sessions.state(session)})
    if kind == "close":
        return None
    raise Refused(400, f"unknown message type {str(kind)[:40]!r}: reset, step, state or close", "UNKNOWN_TYPE")


def websocket_route(server):
    async def ws(websocket: WebSocket):
        server.metrics.requests["ws"] += 1
        client = client_key(websocket.scope.get("client"))
        try:
            check_token(websocket.headers.get(TOKEN_HEADER), server.token, websocket.query_params.get("token"))
            session = server.sessions.create()
        except Refused as exc:
            server.refuse(exc, client, "/ws")
            await websocket.close(code=1008, reason=exc.message[:120])
            return
        await websocket.accept()
        try:
            while True:
                raw = await asyncio.wait_for(websocket.receive_text(), server.limits.session_idle)
                try:
                    answer = await _answer(server, session, client, raw)
                except Refused as exc:
                    server.refuse(exc, client, "/ws")
                    answer = _error(exc.message, exc.code, exc.status)
                if answer is None:
                    break
                await websocket.send_text(answer)
        except (WebSocketDisconnect, asyncio.TimeoutError):
            pass
        finally:
            server.sessions.close(session.id)
        try:
            await websocket.close()
        except RuntimeError:  # already closed by the client
            pass
    return ws
