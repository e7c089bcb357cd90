"""Options and their defaults, below every other package: ``environ`` is the one module that reads ``KBENCH_*``
environment variables, ``evaluator_config`` holds ``EvaluatorConfig`` (every option of an Evaluator). Nothing here
imports the rest of kbench_env, so the sandbox, the builder and the worker may import it too; the worker needs
``environ`` only, so the config's names load on first use."""

from __future__ import annotations

import importlib

_NAMES = ("OPTIONS", "EvaluatorConfig", "IntegrityConfig", "ResourcesConfig", "TimingConfig")


def __getattr__(name):
    if name in _NAMES:
        return getattr(importlib.import_module("kbench_env.config.evaluator_config"), name)
    raise AttributeError(f"module 'kbench_env.config' has no attribute {name!r}")


__all__ = list(_NAMES)
