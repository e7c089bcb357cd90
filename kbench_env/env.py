"""KBench-v0: the Gymnasium environment. It owns the episode (task choice, turns, feedback text) and nothing else:
every evaluation goes through one Evaluator."""

from __future__ import annotations

import string
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from .evaluator import Evaluator
from .prompt import build_prompt
from .result import EvalResult
from .screen import MAX_SOURCE_CHARS
from .suite import load_suite, resolve_task
from .task import Task

#: Characters an observation or action may hold. Observations are sanitised into it; actions outside it
#: (non-ASCII text) are still accepted by ``step``.
CHARSET = string.printable
MAX_OBSERVATION_CHARS = 64_000


def sanitize(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    allowed = set(CHARSET)
    out = "".join(ch if ch in allowed else "?" for ch in text)
    if len(out) > limit:
        out = out[: limit - 40] + "\n... (truncated)"
    return out


class KBenchEnv(gym.Env):
    """Write a kernel that computes what a PyTorch reference program computes, faster.

    ## Description
    Each episode is one kernel task: a reference PyTorch program (KernelBench format) with several input
    configurations, some shown in the prompt and some held out. The agent answers with source code defining
    ``ModelNew``; the environment builds it in a sandboxed worker, checks it against the reference on fresh random
    inputs for every configuration, times it against the reference, and pays for verified speed. An episode allows
    up to ``max_turns`` attempts, each informed by the feedback on the previous one.

    ## Action Space
    ``Text(max_length=200_000, min_length=0, charset=string.printable)``: Python source defining ``class
    ModelNew(nn.Module)`` with the same constructor and forward signature as the reference ``Model``, whose kernels
    are written in the backend's language (C++ through ``load_inline`` for "cpu"). An LLM reply containing a fenced
    code block is accepted: the block is extracted. Non-ASCII characters are accepted; any other value is answered
    with an error observation and the "invalid" reward.

    ## Observation Space
    ``Text(max_length=64_000, min_length=0, charset=string.printable)``. After ``reset``: the task prompt (reference
    program, shown configurations, target hardware, backend rules, a one-shot example). After ``step``: the feedback
    on the attempt: the stage reached, the compiler's or runtime's own error (trimmed), the first mismatching
    configuration with its error figures, or the timing table and speedup. ``info["eval"]`` holds the full
    EvalResult as a dict; ``info["task"]``, ``info["turn"]`` and ``info["best_speedup"]`` are always present.

    ## Rewards
    Per step, the reward of that attempt's EvalResult (``reward="tiered"`` by default, see ``kbench_env.reward``):
    exploit -1.0 < invalid -0.6 < does not build -0.4 < wrong or crashes -0.2 < correct but slower (0.05..1) <
    faster (1..2, capped at 10x). ``reward=`` takes another preset name or a callable over the EvalResult.

    ## Starting State
    ``reset(seed=..., options={"task": name})`` picks the named task, or the fixed ``task`` given to the
    constructor, or a task from ``suite`` drawn with the env's random generator.

    ## Episode End
    Terminated when an attempt is correct and at least ``target_speedup`` times faster (if set). Truncated after
    ``max_turns`` attempts.

    ## Arguments
    ``gym.make("KBench-v0", task=None, suite="default", device="auto", backend=None, max_turns=4,
    reward="tiered", target_speedup=None, evaluator=None, render_mode=None, dtype=None)``. ``evaluator`` shares one
    Evaluator (and its build cache and reference timings) between environments. ``dtype`` (float32, float16,
    bfloat16) sets the dtype of plain KernelBench files' configurations. A task with no configuration for the
    device raises TaskError at ``reset``.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, task: str | Task | None = None, suite: str = "default", device: str = "auto",
                 backend: str | None = None, max_turns: int = 4, reward: Any = "tiered",
                 target_speedup: float | None = None, evaluator: Evaluator | None = None,
                 render_mode: str | None = None, dtype: str | None = None, **evaluator_kwargs):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self._owns_evaluator = evaluator is None  # closed with the env (its spare worker); a shared one is not
        self.evaluator = evaluator or Evaluator(device=device, backend=backend, reward=reward, **evaluator_kwargs)
        self.dtype = dtype
        self.fixed_task = resolve_task(task, dtype) if isinstance(task, str) else task
        self.suite_spec = suite
        self._suite: list[Task] | None = None
        self.max_turns = max_turns
        self.target_speedup = target_speedup
        self.render_mode = render_mode
        self.action_space = spaces.Text(max_length=MAX_SOURCE_CHARS, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Text(max_length=MAX_OBSERVATION_CHARS, min_length=0, charset=CHARSET)
        self.task: Task | None = None
        self.turn = 0
        self.best_speedup: float | None = None
        self.history: list[EvalResult] = []
        self._last_obs = ""
        self._closed = False

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        if options.get("task"):
            t = options["task"]
            self.task = resolve_task(t, self.dtype) if isinstance(t, str) else t
        elif self.fixed_task is not None:
            self.task = self.fixed_task
        else:
            suite = self.suite_tasks()
            self.task = suite[int(self.np_random.integers(len(suite)))]
        self.task.require_configs(self.evaluator.device)  # the task's error (TaskError), never a reward
        self.turn = 0
        self.best_speedup = None
        self.history = []
        self._last_obs = sanitize(build_prompt(self.task, self.evaluator.backend, self.evaluator.device))
        return self._last_obs, self._info(None)

    def step(self, action):
        if self.task is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        eval_seed = int(self.np_random.integers(2**62))
        return self.record(self.evaluator.evaluate(self.task, action, seed=eval_seed))

    def record(self, result: EvalResult):
        """Advance the episode by one attempt whose evaluation is ``result`` (``step`` = evaluate + record; the
        vector env evaluates a batch of attempts together and records each)."""
        self.turn += 1
        self.history.append(result)
        if result.correct and result.speedup is not None and not result.integrity_flags:
            self.best_speedup = max(self.best_speedup or 0.0, result.speedup)
        terminated = bool(result.correct and self.target_speedup is not None and result.speedup is not None
                          and result.speedup >= self.target_speedup and not result.integrity_flags)
        truncated = bool(not terminated and self.turn >= self.max_turns)
        text = result.feedback()
        if not (terminated or truncated):
            text += f"\n\nAttempt {self.turn} of {self.max_turns}. Send an improved ModelNew."
        self._last_obs = sanitize(text)
        return self._last_obs, float(result.reward), terminated, truncated, self._info(result)

    def render(self):
        if self.render_mode == "ansi":
            return self._last_obs
        return None

    def close(self):
        self._closed = True
        if self._owns_evaluator:
            self.evaluator.close()

    # ------------------------------------------------------------------ helpers
    def suite_tasks(self) -> list[Task]:
        if self._suite is None:
            self._suite = load_suite(self.suite_spec, dtype=self.dtype)
            if not self._suite:
                raise ValueError(f"suite {self.suite_spec!r} has no tasks")
        return self._suite

    def _info(self, result: EvalResult | None) -> dict:
        info = {"task": self.task.name, "turn": self.turn, "max_turns": self.max_turns,
                "best_speedup": self.best_speedup}
        if result is not None:
            info["eval"] = result.to_dict()
        return info
