"""The remote env: ``gym.make("KBench-v0", url="http://host:port", token=...)`` returns a ``RemoteKBenchEnv``,
the same Gymnasium env as the local one (same spaces, observations, rewards and info) whose episode lives on a
``kbench serve`` server. It needs httpx (the [serve] extra) and never imports torch itself.

Its ``info`` is the local env's, except that ``info["eval"]`` (the EvalResult, which names the held-out
configurations) is there only when the server was started with ``--expose-info``: a server for agents keeps its
held-out configurations to itself. The server's Evaluator fixes device, backend, reward and rules: the client may repeat them only with the values
the server has (ValueError otherwise, as with a shared ``evaluator=``). Tasks are named ("level1/relu"), never
given as paths or Task objects. A 429 (the server's queue is full) is retried after its ``Retry-After``, up to
``retries`` times.
"""

from __future__ import annotations

import time

import gymnasium as gym
import httpx
from gymnasium import spaces

from kbench_env.config import environ
from kbench_env.env.spaces import CHARSET, MAX_OBSERVATION_CHARS, OBSERVATION_CHARSET
from kbench_env.pipeline.screen import MAX_SOURCE_CHARS
from kbench_env.serving.api import RECORD_FIELD, TOKEN_ENV, auth_header

_JSON_TYPES = (str, int, float, bool, type(None), list, dict)


class ServerError(RuntimeError):
    """The server refused or failed a request: ``status`` and its message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"kbench server answered {status}: {message}")
        self.status = status


def raise_for(response: httpx.Response) -> None:
    """Turn an error answer into the exception a local env would raise where one matches."""
    if response.status_code < 400:
        return
    try:
        message = response.json().get("error", response.text)
    except ValueError:
        message = response.text
    if response.status_code == 401:
        raise PermissionError(f"kbench server refused the token: {message}")
    if response.status_code in (400, 404, 413):
        raise ValueError(message)
    raise ServerError(response.status_code, message)


def retry_after(response: httpx.Response, default: float = 1.0) -> float:
    value = response.headers.get("retry-after", "")
    return float(value) if value.replace(".", "", 1).isdigit() else default


def check_server_evaluator(server: dict, given: dict) -> None:
    conflicts = [f"{k}={v!r} (the server's is {server.get(k)!r})" for k, v in given.items()
                 if v is not None and k in ("device", "backend", "rules") and v != server.get(k)]
    if conflicts:
        raise ValueError("arguments the server's Evaluator does not have: " + "; ".join(conflicts)
                         + ". Start kbench serve with them, or leave them out")


class RemoteKBenchEnv(gym.Env):
    """KBench-v0 over HTTP. Arguments: ``url``, ``token`` (default ``$KBENCH_TOKEN``), ``task`` (a name),
    ``suite`` (a suite name the server knows), ``max_turns``, ``target_speedup``, ``render_mode``, ``timeout``
    (seconds per HTTP request), ``retries`` (on 429); ``device``, ``backend``, ``rules`` only as the server has."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, url: str, token: str | None = None, task: str | None = None, suite: str = "default",
                 max_turns: int = 4, target_speedup: float | None = None, render_mode: str | None = None,
                 timeout: float = 960.0, retries: int = 30, device: str | None = None, backend: str | None = None,
                 rules: str | None = None, **other):
        if other:
            raise ValueError(f"the server's Evaluator options are set by kbench serve, not the client: "
                             f"{', '.join(sorted(other))}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if task is not None and not isinstance(task, str):
            raise ValueError("a remote env takes a task name (GET /tasks lists the server's), not a Task object")
        token = token or environ.get(TOKEN_ENV)
        if not token:
            raise ValueError(f"a remote env needs the server's token: token=... or ${TOKEN_ENV}")
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=auth_header(token), timeout=timeout)
        self.retries = retries
        self.options = {"task": task, "suite": suite, "max_turns": max_turns, "target_speedup": target_speedup}
        self.max_turns, self.render_mode = max_turns, render_mode
        self.server = self._call("GET", "/schema")["evaluator"]
        check_server_evaluator(self.server, {"device": device, "backend": backend, "rules": rules})
        self.action_space = spaces.Text(max_length=MAX_SOURCE_CHARS, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Text(max_length=MAX_OBSERVATION_CHARS, min_length=0,
                                             charset=OBSERVATION_CHARSET)
        self.session_id: str | None = None
        self._last_obs = ""

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        for attempt in range(self.retries + 1):
            response = self.http.request(method, path, json=body)
            if response.status_code != 429 or attempt == self.retries:
                break
            time.sleep(retry_after(response))
        raise_for(response)
        return response.json()

    def _answer(self, payload: dict):
        """``(observation, info)`` of an answer; ``info`` with ``eval`` where the server exposes its record."""
        obs = payload["observation"]
        self.session_id = obs["session_id"]
        self._last_obs = obs["text"]
        info = dict(payload.get("info") or {})
        if payload.get(RECORD_FIELD) is not None:
            info["eval"] = payload[RECORD_FIELD]
        return obs, info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        body = dict(self.options, seed=seed, session_id=self.session_id)
        if options and options.get("task"):
            body["task"] = options["task"]
        obs, info = self._answer(self._call("POST", "/reset", body))
        return obs["text"], info

    def step(self, action):
        if self.session_id is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        source = action if isinstance(action, _JSON_TYPES) else repr(action)
        payload = self._call("POST", "/step", {"session_id": self.session_id, "action": {"source": source}})
        obs, info = self._answer(payload)
        return obs["text"], float(payload["reward"]), obs["terminated"], obs["truncated"], info

    def render(self):
        return self._last_obs if self.render_mode == "ansi" else None

    def close(self):
        if self.session_id is not None:
            try:
                self._call("POST", "/close", {"session_id": self.session_id})
            except (httpx.HTTPError, ServerError):
                pass  # the server is gone: nothing left to close there
            self.session_id = None
        self.http.close()
