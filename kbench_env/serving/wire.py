"""The wire format server and clients share (no third-party imports, so either side may import it).

It follows OpenEnv's (``openenv-core``) HTTP and WebSocket protocol where it fits:

- ``POST /reset`` ``{"seed", "session_id", "task", "suite", "max_turns", "target_speedup"}`` and ``POST /step``
  ``{"session_id", "action": {"source": str}}`` answer ``{"observation": {...}, "reward", "done"}``; the
  observation holds ``text`` (what the local env's observation is), ``info``, ``terminated``, ``truncated`` and
  ``session_id``. Unlike OpenEnv's stateless HTTP routes, a ``session_id`` keeps one episode (one server-side
  KBenchEnv) across calls; the first ``/reset`` without one opens a session.
- ``GET /state?session_id=...``: ``{"session_id", "episode_id", "step_count", "task", ...}``.
- ``WS /ws``: OpenEnv's messages ``{"type": "reset"|"step"|"state"|"close", "data": {...}}`` answered with
  ``{"type": "observation"|"state"|"error", "data": {...}}``; each connection is its own session.
- ``POST /batch`` ``{"items": [{"task", "source", "seed"?, "id"?}, ...]}``: NDJSON, one line per item as it
  finishes (``{"index", "id", "task", "reward", "result"}`` or ``{"index", "id", "error"}``), then
  ``{"done": true, "count", "failed"}``.
- ``GET /health`` (no token), ``GET /metrics`` (Prometheus text), ``GET /tasks``, ``GET /schema``.

Every route but ``/health`` needs ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

TOKEN_HEADER = "authorization"
TOKEN_ENV = "KBENCH_TOKEN"
#: OpenEnv's WebSocket error codes (``WSErrorCode``), and ours for admission.
ERROR_CODES = ("INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR", "CAPACITY_REACHED",
               "SESSION_ERROR", "TOO_LARGE", "TIMEOUT")
#: The episode options a client may send with ``/reset``; the Evaluator's options are the server's.
RESET_OPTIONS = ("task", "suite", "max_turns", "target_speedup")


def auth_header(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def observation_payload(session_id: str, obs: str, info: dict, reward: float | None = None,
                        terminated: bool = False, truncated: bool = False) -> dict:
    """A reset or step answer in OpenEnv's ``{"observation", "reward", "done"}`` shape."""
    return {"observation": {"text": obs, "info": info, "terminated": terminated, "truncated": truncated,
                            "session_id": session_id},
            "reward": reward, "done": bool(terminated or truncated)}
