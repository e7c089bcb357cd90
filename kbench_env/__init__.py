"""kbench: a Gymnasium environment (``KBench-v0``) in which actions are kernels and the reward is verified speedup.

``import kbench_env`` registers ``KBench-v0``; ``gym.make("kbench_env:KBench-v0")`` works without the import;
``gym.make("KBench-v0", url="http://host:port", token=...)`` is the same env served by ``kbench serve``.
Public API: ``Evaluator``, ``EvalResult``, ``Task``, ``load_task``, ``load_suite``, ``KBenchEnv``.
"""

from __future__ import annotations

from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.result import ConfigResult, EvalResult
from kbench_env.tasks.suite import load_suite, resolve_task
from kbench_env.tasks.loading import load_task
from kbench_env.tasks.task import Config, Task

__version__ = "0.1.0"

try:  # the evaluator works without gymnasium (e.g. on a bare GPU image); the env needs it
    import gymnasium as gym
except ImportError:  # pragma: no cover
    gym = None
if gym is not None and "KBench-v0" not in gym.registry:
    gym.register(id="KBench-v0", entry_point="kbench_env:make_env", nondeterministic=True,
                 vector_entry_point="kbench_env.env.vector:KBenchVectorEnv")


def make_env(url: str | None = None, **kwargs):
    """What ``gym.make("KBench-v0", ...)`` calls: ``KBenchEnv(**kwargs)``; with ``url``, ``RemoteKBenchEnv(url,
    **kwargs)``, the same env on a ``kbench serve`` server (kbench_env.serving.remote_env, the [serve] extra). Here,
    above both, so that the env package never imports the serving one (which imports it)."""
    if url is not None:
        from kbench_env.serving.remote_env import RemoteKBenchEnv  # httpx, the [serve] extra

        return RemoteKBenchEnv(url, **kwargs)
    from kbench_env.env.env import KBenchEnv

    return KBenchEnv(**kwargs)


# gym.make reads the creator's render modes from here (both envs have these)
make_env.metadata = {"render_modes": ["ansi"], "render_fps": 1}


def __getattr__(name):  # the env class imports gymnasium spaces; load it on first use
    if name == "KBenchEnv":
        from kbench_env.env.env import KBenchEnv

        return KBenchEnv
    raise AttributeError(name)


__all__ = ["Evaluator", "EvalResult", "ConfigResult", "Task", "Config", "load_task", "load_suite", "resolve_task",
           "KBenchEnv"]
