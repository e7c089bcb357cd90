"""kbench: a Gymnasium environment (``KBench-v0``) in which actions are kernels and the reward is verified speedup.

``import kbench_env`` registers ``KBench-v0``; ``gym.make("kbench_env:KBench-v0")`` works without the import;
``gym.make("KBench-v0", url="http://host:port", token=...)`` is the same env served by ``kbench serve``.
Public API: ``Evaluator``, ``EvalResult``, ``Task``, ``load_task``, ``load_suite``, ``KBenchEnv``.

The public names are loaded on first use (``kbench_env.Evaluator``, ``from kbench_env import Evaluator``): a
sandboxed worker imports modules of this package, and importing the package must not bring the trusted side's
evaluator into it (tests/test_boundary.py lists what a worker loads).
"""

from __future__ import annotations

import importlib

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
    above both, so that the env package never imports the serving one (which imports it); both classes are loaded
    by name when called, as the public names are (a worker imports this package)."""
    if url is not None:
        return importlib.import_module("kbench_env.serving.remote_env").RemoteKBenchEnv(url, **kwargs)
    return __getattr__("KBenchEnv")(**kwargs)


# gym.make reads the creator's render modes from here (both envs have these)
make_env.metadata = {"render_modes": ["ansi"], "render_fps": 1}


#: Each public name and the module that defines it (imported by ``__getattr__`` on first use).
_PUBLIC = {
    "Evaluator": "kbench_env.pipeline.evaluator",
    "EvalResult": "kbench_env.pipeline.result",
    "ConfigResult": "kbench_env.pipeline.result",
    "Task": "kbench_env.tasks.task",
    "Config": "kbench_env.tasks.task",
    "load_task": "kbench_env.tasks.loading",
    "load_suite": "kbench_env.tasks.suite",
    "resolve_task": "kbench_env.tasks.suite",
    "KBenchEnv": "kbench_env.env.env",  # imports gymnasium's spaces
}


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kbench_env' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups find it without this function
    return value


def __dir__():
    return sorted({*globals(), *_PUBLIC})


__all__ = ["Evaluator", "EvalResult", "ConfigResult", "Task", "Config", "load_task", "load_suite", "resolve_task",
           "KBenchEnv"]
