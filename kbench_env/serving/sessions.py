"""Episodes on the server: one session per client (an HTTP ``session_id`` or a WebSocket connection), each with
its own KBenchEnv sharing the server's front Evaluator (the prompt's device, backend and rules). A step draws the
evaluation seed from the session env's generator and records the executor's result in the env, exactly as
``KBenchEnv.step`` does in-process, so a seeded remote episode matches a local one."""

from __future__ import annotations

import asyncio
import math
import secrets
import time

from kbench_env.env.env import KBenchEnv
from kbench_env.serving.admission import Refused, check_source
from kbench_env.serving.evaluations import Evaluations
from kbench_env.serving.logevents import origin
from kbench_env.serving.registry import TaskRegistry
from kbench_env.serving.api import observation_payload


class Session:
    def __init__(self, sid: str, env: KBenchEnv):
        self.id = sid
        self.env = env
        self.lock = asyncio.Lock()  # one call at a time per episode
        self.last_used = time.monotonic()


def _int_option(data: dict, name: str, default, low: float, *, integer: bool = False):
    """``data[name]``, a number >= ``low`` (NaN never is; Infinity is not an ``integer``), or ``default``."""
    value = data.get(name, default)
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < low
            or (integer and math.isinf(value))):
        raise Refused(400, f"{name} must be a number >= {low}, not {value!r}")
    return value


class Sessions:
    def __init__(self, registry: TaskRegistry, evaluator, evaluations: Evaluations, limits,
                 expose_info: bool = False):
        self.registry = registry
        self.expose_info = expose_info  # answers carry the researcher's record (api.py)
        self.evaluator = evaluator  # prompts only; evaluations go through ``evaluations``
        self.evaluations = evaluations
        self.limits = limits
        self.open: dict[str, Session] = {}

    def _expire(self) -> None:
        cutoff = time.monotonic() - self.limits.session_idle
        for sid in [s.id for s in self.open.values() if s.last_used < cutoff and not s.lock.locked()]:
            self.close(sid)

    def create(self) -> Session:
        self._expire()
        if len(self.open) >= self.limits.max_sessions:
            raise Refused(429, f"{len(self.open)} sessions open, the most this server keeps (--max-sessions); close "
                               f"one (POST /close) or retry after {self.limits.retry_after} s", "CAPACITY_REACHED",
                          {"Retry-After": str(self.limits.retry_after)}, "sessions_full")
        env = KBenchEnv(evaluator=self.evaluator)
        sid = secrets.token_urlsafe(16)
        self.open[sid] = Session(sid, env)
        return self.open[sid]

    def get(self, sid) -> Session:
        session = self.open.get(sid) if isinstance(sid, str) else None
        if session is None:
            raise Refused(404, f"no open session {str(sid)[:64]!r}: it was closed, expired after "
                               f"{self.limits.session_idle:g} s idle, or the server restarted; call /reset without "
                               f"session_id to open one", "SESSION_ERROR")
        session.last_used = time.monotonic()
        return session

    def close(self, sid: str) -> None:
        session = self.open.pop(sid, None)
        if session is not None:
            session.env.close()  # a shared evaluator: the env leaves it open

    async def reset(self, session: Session, data: dict) -> dict:
        env = session.env
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise Refused(400, f"seed must be a non-negative integer, not {seed!r}")
        async with session.lock:
            env.max_turns = int(_int_option(data, "max_turns", env.max_turns, 1, integer=True))
            env.target_speedup = _int_option(data, "target_speedup", None, 0)
            task = self.registry.task(data["task"]) if data.get("task") else None
            env.fixed_task = task
            env._suite = None if task else self.registry.suite(data.get("suite") or self.registry.default_spec)
            obs, info = env.reset(seed=seed)
        return observation_payload(session.id, obs, info, expose_info=self.expose_info)

    async def step(self, session: Session, action) -> dict:
        source = action.get("source") if isinstance(action, dict) else action
        check_source(source, self.limits)
        env = session.env
        async with session.lock:
            if env.task is None:
                raise Refused(409, "step before reset: call /reset first", "SESSION_ERROR")
            seed = int(env.np_random.integers(2**62))
            result = await self.evaluations.run(env.task, source, seed, origin(session=session.id[:8]))
            obs, reward, terminated, truncated, info = env.record(result)
        return observation_payload(session.id, obs, info, reward, terminated, truncated, self.expose_info)

    def state(self, session: Session) -> dict:
        env = session.env
        return {"session_id": session.id, "episode_id": session.id, "step_count": env.turn,
                "task": env.task.name if env.task else None, "max_turns": env.max_turns,
                "best_speedup": env.best_speedup, "device": self.evaluator.device,
                "backend": self.evaluator.backend_name, "rules": self.evaluator.rules}

    def close_all(self) -> None:
        for sid in list(self.open):
            self.close(sid)
