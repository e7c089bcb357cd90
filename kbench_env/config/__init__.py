"""Options and their defaults, below every other package: ``environ`` is the one module that reads ``KBENCH_*``
environment variables, ``evaluator`` holds ``EvaluatorConfig`` (every option of an Evaluator). Nothing here
imports the rest of kbench_env, so the sandbox, the builder and the worker may import it too."""

from __future__ import annotations

from kbench_env.config.evaluator import OPTIONS, EvaluatorConfig, IntegrityConfig, ResourcesConfig, TimingConfig

__all__ = ["OPTIONS", "EvaluatorConfig", "IntegrityConfig", "ResourcesConfig", "TimingConfig"]
