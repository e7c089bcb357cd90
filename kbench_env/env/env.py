"""KBench-v0: the Gymnasium environment. It owns the episode (task choice, turns, feedback text) and nothing else:
every evaluation goes through one Evaluator."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium import spaces

from kbench_env.config import EvaluatorConfig
from kbench_env.machine.device import resolve_device
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.feedback import policy_feedback
from kbench_env.env.prompt import build_prompt
from kbench_env.env.spaces import CHARSET, MAX_OBSERVATION_CHARS, OBSERVATION_CHARSET
from kbench_env.pipeline.result import EvalResult
from kbench_env.pipeline.reward import get_reward_fn
from kbench_env.pipeline.rules import check_rules
from kbench_env.pipeline.screen import MAX_SOURCE_CHARS
from kbench_env.tasks.suite import find_task, load_suite, resolve_task
from kbench_env.tasks.task import Task, TaskError

_PLAIN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
                        "\u2014": "-", "\u2026": "...", "\u00a0": " "})


def sanitize(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    """``text`` within ``OBSERVATION_CHARSET`` and ``limit`` characters (an overlong text says it was cut)."""
    allowed = set(OBSERVATION_CHARSET)
    # unicode_escape, not backslashreplace: an ASCII control character (a model's reply echoed in an error) is
    # outside the charset too, and backslashreplace leaves ASCII as it is
    out = "".join(ch if ch in allowed else ch.encode("unicode_escape").decode("ascii")
                  for ch in text.translate(_PLAIN))
    if len(out) > limit:
        out = out[: limit - 40] + "\n... (truncated)"
    return out


def check_shared_evaluator(evaluator: Evaluator, *, device: str | None = None, backend: str | None = None,
                           reward: Any = None, rules: str | None = None, config: EvaluatorConfig | None = None,
                           format: str | None = None) -> None:
    """Raise ValueError when an argument given beside a shared ``evaluator`` disagrees with it, or is a ``config``
    that the shared evaluator already fixed: such an argument would otherwise be silently ignored."""
    conflicts = []
    if device is not None and resolve_device(device) != evaluator.device:
        conflicts.append(f"device={device!r} (the evaluator runs on {evaluator.device!r})")
    if backend is not None and backend != evaluator.backend_name:
        conflicts.append(f"backend={backend!r} (the evaluator's backend is {evaluator.backend_name!r})")
    if reward is not None and get_reward_fn(reward) is not evaluator.reward_fn:
        paid = getattr(evaluator.reward_fn, "__name__", "its own reward")
        conflicts.append(f"reward={reward!r} (the evaluator pays {paid})")
    if rules is not None and check_rules(rules) != evaluator.rules:
        conflicts.append(f"rules={rules!r} differs from the given evaluator's rules {evaluator.rules!r}")
    if format is not None and format != getattr(evaluator, "format", "kernelbench"):
        conflicts.append(f"format={format!r} (the evaluator's format is {evaluator.format!r})")
    if config is not None:
        conflicts.append("config= (the evaluator is already made with its own)")
    if conflicts:
        raise ValueError("arguments that the given evaluator would ignore: " + "; ".join(conflicts)
                         + ". Make the Evaluator with these arguments, or leave them out when passing evaluator=")


class KBenchEnv(gym.Env):
    """Write a kernel that computes what a PyTorch reference program computes, faster.

    ## Description
    Each episode is one kernel task: a reference PyTorch program (a KernelBench file or a robust-kbench task
    folder) with several input configurations, some shown in the prompt and some held out. The agent answers with
    source code defining ``ModelNew``; the environment builds it in a sandboxed worker, checks it against the
    reference on fresh random inputs for every configuration, times it against the reference, and pays for
    verified speed. An episode allows up to ``max_turns`` attempts, each informed by the feedback on the previous
    one. Every evaluation goes through one ``Evaluator`` (``kbench_env.pipeline.evaluator``).

    ## Action Space
    ``Text(max_length=200_000, min_length=0, charset=string.printable)``: Python source defining ``class
    ModelNew(nn.Module)`` with the same constructor and forward signature as the reference ``Model``, whose kernels
    are written in the action ``format`` (``pipeline/formats.py``): "kernelbench", the backend's language (C++
    through ``load_inline`` for "cpu", CUDA C++ for "cuda", Triton for "triton"); "fast", ``extern "C"`` kernels
    through ``kbench_env.fastpath`` (``cpp_kernel`` on the CPU, ``cuda_kernel`` on a GPU: ~1 s builds,
    ``torch.utils.cpp_extension`` refused); "triton", ``@triton.jit`` kernels (GPU only). An LLM reply containing a
    fenced code block is accepted: the block is extracted. Non-ASCII characters are accepted; any other value (a
    non-string, an oversized or unparsable source) is answered with an error observation and the "invalid" reward,
    without building anything.

    ## Observation Space
    ``Text(max_length=64_000, min_length=0, charset=string.printable + "±")``; other characters are written as
    ASCII (typographic quotes as plain ones, anything else as its ``\\uXXXX`` escape) and an overlong text is
    truncated. After ``reset``: the task prompt (reference program, shown configurations, target hardware, the
    action format and its rules, a one-shot example in that format). After ``step``: the feedback on the attempt
    (``pipeline.feedback.policy_feedback``): the stage reached, the compiler's or runtime's own error (trimmed),
    the first mismatching configuration with its error figures, or the timing table, speedup and kernel coverage.
    A held-out configuration appears only as "held-out configuration k of n" with a verdict: whether it passed and
    how it failed (wrong values, a crash, a timeout), never its name, shapes, dtype, error figures or times.

    ``info`` always holds ``task``, ``turn``, ``max_turns``, ``format`` and ``best_speedup`` (the best verified
    speedup of the episode, None until one); after ``step`` also ``eval``, the full ``EvalResult`` as a
    JSON-serialisable dict. ``info`` is the researcher's record: ``eval`` names the held-out configurations with
    their shapes and times, so a policy must read the observation only, never ``info``.

    ## Rewards
    Per step, the reward of that attempt's EvalResult. The default preset, "tiered"
    (``kbench_env.pipeline.reward``), orders outcomes: exploit detected -1.0 < invalid -0.6 < does not build
    -0.4 < wrong, crashes or times out -0.2 < correct but slower (0.05 .. 1) < faster (1 .. 2, 2 at 10x and
    above). Other presets: "binary", "speedup", "kevin"; or any callable ``f(EvalResult) -> float``. A reward is
    never paid for a speedup that an integrity check flagged.

    ## Starting State
    ``reset(seed=..., options={"task": name_or_Task})`` picks the named task, else the fixed ``task`` given to
    the constructor, else a task of ``suite`` drawn with the env's random generator. A task name (here or as
    ``task=``) is looked up in the env's ``suite`` first (a task's full name as ``kbench tasks --suite`` lists
    it, or a tail only one of its tasks has: "level2/76_Gemm_Add_ReLU", "layernorm/backward"), then as
    ``kbench eval --task`` takes it (a name under the tasks folder, a file, ``<robust-kbench folder>/backward``):
    a name outside the suite is accepted when it names a task there, and refused (``TaskError``, saying where
    it was looked for) when it names none (``seed`` makes the draw and
    the evaluation seeds of the episode reproducible; timings are not, hence ``nondeterministic=True``). A task
    with no configuration for the env's device is the task's error: ``reset`` raises ``TaskError``.

    ## Episode End
    1. Termination: an attempt is correct, unflagged, and at least ``target_speedup`` times faster (only when
       ``target_speedup`` is set).
    2. Truncation: ``max_turns`` attempts were made.

    ## Arguments
    ```python
    >>> import gymnasium as gym, kbench_env
    >>> env = gym.make("KBench-v0", task="level1/relu", device="cpu", max_turns=4)
    >>> prompt, info = env.reset(seed=0)
    ```

    | Parameter          | Type            | Default     | Description                                                |
    |--------------------|-----------------|-------------|------------------------------------------------------------|
    | `task`             | str, Task, None | `None`      | A fixed task ("level1/relu" or a path); None: from `suite` |
    | `suite`            | str             | `"default"` | Named suite, folder, task file, or a comma-separated list  |
    | `max_turns`        | int             | `4`         | Attempts per episode (at least 1)                          |
    | `target_speedup`   | float, None     | `None`      | Terminate on a correct attempt at least this much faster   |
    | `render_mode`      | str, None       | `None`      | "ansi" or None (see Render Mode)                           |
    | `dtype`            | str, None       | `None`      | float32, float16 or bfloat16 for plain KernelBench files'  |
    |                    |                 |             | configurations (files without a KBENCH block)              |
    | `evaluator`        | Evaluator, None | `None`      | Shared Evaluator (build cache, reference timings, device   |
    |                    |                 |             | lock, spare worker); the env does not close it             |
    | `device`           | str             | `"auto"`    | "auto" (cuda if available, else cpu), "cpu", "cuda", ...   |
    | `backend`          | str, None       | `None`      | "cpu", "cuda", "triton"; None: "cpu" on CPU, "cuda" on GPU |
    | `reward`           | str, callable   | `"tiered"`  | A preset of `reward.PRESETS`, or `f(EvalResult) -> float`  |
    | `rules`            | str             | `"strict"`  | "strict": forward runs only own kernels; "kernelbench":    |
    |                    |                 |             | PyTorch ops allowed beside one own kernel that runs        |
    | `format`           | str             | see note    | Action format: "kernelbench" (the default: load_inline),   |
    |                    |                 |             | "fast" (fastpath extern "C" kernels, ~1 s builds) or       |
    |                    |                 |             | "triton" (GPU only); fixes the backend for fast and triton |
    | `config`           | EvaluatorConfig | `None`      | Every other Evaluator option (`kbench_env.config`: timing, |
    |                    | None            |             | integrity, resources); None: the defaults and `KBENCH_*`   |

    `device`, `backend`, `reward`, `rules` and `format` are the Evaluator's options a prompt depends on; given here
    they win over `config`'s. Every other Evaluator option goes in `config` (`EvaluatorConfig.from_options(
    spare_worker=False, timing={...})`). With `evaluator=` they all belong to that Evaluator: `device`, `backend`,
    `reward`, `rules` and `format` may be repeated only with the values it has, and `config` beside `evaluator=`
    raises ValueError instead of being ignored.

    ## Vector Environment
    ``gym.make_vec("KBench-v0", num_envs=N, vectorization_mode="vector_entry_point")`` (``env.vector``): N episodes
    sharing one Evaluator, each step's N actions evaluated together (``Evaluator.evaluate_many``, builds
    overlapping, the device used by one candidate at a time), next-step autoreset. It takes the arguments above and
    ``max_workers``. ``vectorization_mode="sync"`` or ``"async"`` also work, with one Evaluator per env unless
    ``evaluator=`` is given.

    ## Render Mode
    ``render_mode="ansi"``: ``render()`` returns the last observation (the prompt or the feedback) as text. None:
    ``render()`` returns None. There is no visual mode.

    ## Version History
    * v0: first version: text actions and observations, tiered reward, held-out configurations, integrity checks,
      the "strict" and "kernelbench" rules, and arguments that conflict with a shared ``evaluator`` raising
      ValueError; the action ``format`` ("kernelbench", "fast", "triton"), "kernelbench" by default; the
      Evaluator's other options in one ``config`` (an ``EvaluatorConfig``).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, task: str | Task | None = None, suite: str = "default", device: str | None = None,
                 backend: str | None = None, max_turns: int = 4, reward: Any = None,
                 target_speedup: float | None = None, evaluator: Evaluator | None = None,
                 render_mode: str | None = None, rules: str | None = None, dtype: str | None = None,
                 format: str | None = None, config: EvaluatorConfig | None = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None")
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if evaluator is not None:
            check_shared_evaluator(evaluator, device=device, backend=backend, reward=reward, rules=rules,
                                   config=config, format=format)
        self._owns_evaluator = evaluator is None  # closed with the env (its spare worker); a shared one is not
        # the arguments given here win over the config's (None: the config's, by default the Evaluator's defaults)
        self.evaluator = evaluator or Evaluator(config, device=device, backend=backend, reward=reward, rules=rules,
                                                format=format)
        self.dtype = dtype
        self.suite_spec = suite
        self._suite: list[Task] | None = None
        self.fixed_task = self._named_task(task) if isinstance(task, str) else task
        self.max_turns = max_turns
        self.target_speedup = target_speedup
        self.render_mode = render_mode
        self.action_space = spaces.Text(max_length=MAX_SOURCE_CHARS, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Text(max_length=MAX_OBSERVATION_CHARS, min_length=0,
                                             charset=OBSERVATION_CHARSET)
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
            self.task = self._named_task(t) if isinstance(t, str) else t
        elif self.fixed_task is not None:
            self.task = self.fixed_task
        else:
            suite = self.suite_tasks()
            self.task = suite[int(self.np_random.integers(len(suite)))]
        self.task.require_configs(self.evaluator.device)  # the task's error (TaskError), never a reward
        self.turn = 0
        self.best_speedup = None
        self.history = []
        self._last_obs = sanitize(build_prompt(self.task, self.evaluator.backend, self.evaluator.device,
                                               rules=self.evaluator.rules, format=self.evaluator.format))
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
        text = policy_feedback(result)
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

    def _named_task(self, name: str) -> Task:
        """The task ``name`` names: in the env's suite first, then anywhere ``resolve_task`` looks (see Starting
        State). A suite that cannot load (a misspelt suite beside a ``task=``) leaves the name to the latter."""
        try:
            suite = self.suite_tasks()
        except (ValueError, OSError):  # TaskError is a ValueError
            suite = []
        found = find_task(suite, name)
        if found is not None:
            return found
        try:
            return resolve_task(name, self.dtype)
        except TaskError as exc:
            raise TaskError(f"no task named {name!r} in the env's suite {self.suite_spec!r} ({len(suite)} tasks; "
                            f"`kbench tasks --suite` lists them) nor elsewhere: {exc}") from None

    def _info(self, result: EvalResult | None) -> dict:
        info = {"task": self.task.name, "turn": self.turn, "max_turns": self.max_turns,
                "format": self.evaluator.format, "best_speedup": self.best_speedup}
        if result is not None:
            info["eval"] = result.to_dict()
        return info
