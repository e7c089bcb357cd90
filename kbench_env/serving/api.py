"""The wire format server and clients share (no third-party imports, so either side may import it).

It follows OpenEnv's (``openenv-core``) HTTP and WebSocket protocol where it fits:

- ``POST /reset`` ``{"seed", "session_id", "task", "suite", "max_turns", "target_speedup"}`` and ``POST /step``
  ``{"session_id", "action": {"source": str}}`` answer ``{"observation": {...}, "reward", "done", "info"}``. The
  observation is what a policy may read, the local env's observation and nothing more: ``text`` (the prompt or
  the feedback, held-out configurations hidden), ``terminated``, ``truncated`` and ``session_id``. ``info`` beside
  it is the local env's ``info`` without its evaluation record (``task``, ``turn``, ``max_turns``, ``format``,
  ``best_speedup``). The researcher's record, the whole ``EvalResult`` (held-out configurations' names, shapes
  and times), travels only from a server started with ``kbench serve --expose-info``, as the answer's
  ``researcher_record`` field (never inside ``observation``). Unlike OpenEnv's stateless HTTP routes, a
  ``session_id`` keeps one episode (one server-side KBenchEnv) across calls; the first ``/reset`` without one
  opens a session.
- ``GET /state?session_id=...``: ``{"session_id", "episode_id", "step_count", "task", ...}``.
- ``WS /ws``: OpenEnv's messages ``{"type": "reset"|"step"|"state"|"close", "data": {...}}`` answered with
  ``{"type": "observation"|"state"|"error", "data": {...}}``; each connection is its own session.
- ``POST /batch`` ``{"items": [{"task", "source", "seed"?, "id"?}, ...]}``: NDJSON, one line per item as it
  finishes (``{"index", "id", "task", "reward", "correct", "speedup", "feedback"}``, plus ``researcher_record``
  with ``--expose-info``; or ``{"index", "id", "task"?, "code", "error"}`` for an item that could not be
  evaluated, an unknown task for one: the other items still are), then ``{"done": true, "count", "failed"}``.
  ``feedback`` is the policy's view of the result (the text a step's observation holds).
- ``GET /health`` (no token), ``GET /metrics`` (Prometheus text), ``GET /tasks``, ``GET /schema``.

Every route but ``/health`` needs the token: ``Authorization: Bearer <token>``, or HTTP Basic authentication
with the token as password (any user name), which is what a client given only a URL
``http://kbench:<token>@host:port`` sends (OpenEnv's ``GenericEnvClient``, whose WebSocket cannot add a header,
httpx, websockets). ``WS /ws`` also takes ``?token=<token>`` on its URL, for clients that set neither.
"""

from __future__ import annotations

TOKEN_HEADER = "authorization"
TOKEN_ENV = "KBENCH_TOKEN"
#: OpenEnv's WebSocket error codes (``WSErrorCode``), and ours for admission.
ERROR_CODES = ("INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR", "CAPACITY_REACHED",
               "SESSION_ERROR", "TOO_LARGE", "TIMEOUT")
#: The episode options a client may send with ``/reset``; the Evaluator's options are the server's.
RESET_OPTIONS = ("task", "suite", "max_turns", "target_speedup")
#: the answer's field holding the researcher's record (``--expose-info`` only)
RECORD_FIELD = "researcher_record"


def auth_header(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def observation_payload(session_id: str, obs: str, info: dict, reward: float | None = None,
                        terminated: bool = False, truncated: bool = False, expose_info: bool = False) -> dict:
    """A reset or step answer in OpenEnv's ``{"observation", "reward", "done"}`` shape. An OpenEnv client hands
    ``observation`` to its policy, so it holds the local env's observation only; the env's evaluation record
    (``info["eval"]``) goes out as ``researcher_record`` when the server exposes it, else not at all."""
    answer = {"observation": {"text": obs, "terminated": terminated, "truncated": truncated,
                              "session_id": session_id},
              "reward": reward, "done": bool(terminated or truncated),
              "info": {k: v for k, v in info.items() if k != "eval"}}
    if expose_info and info.get("eval") is not None:
        answer[RECORD_FIELD] = info["eval"]
    return answer
