"""The one place where kbench reads its ``KBENCH_*`` environment variables.

``VARIABLES`` is the table: each variable's name, how its text is read, its value when unset, what it means and
which process reads it. ``get(name)`` reads one (from this process's environment, or from a given mapping). No
other module reads a ``KBENCH_*`` variable (tests/test_structure.py holds to that), so that every switch is found
here; those that set an Evaluator option are read once, when an ``EvaluatorConfig`` is made
(config/evaluator_config.py), and an option given to the Evaluator wins over its variable.

Which process reads a variable matters because a worker's environment is scrubbed (sandbox/confine/environment.py):
the trusted side reads the worker's settings and sends them in the job (sandbox/job.py). The one variable read on
the far side is ``KBENCH_CUTLASS``: the builder process reads it from the build environment the trusted side hands
it (builder/server.py), since a remote builder's checkout (a Ray node's) is known only where the build runs.

This module imports nothing of kbench: every package may import it, the worker's and the builder's too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass


def _on(text: str) -> bool:
    return text != "0"


def _zero_or_one(text: str) -> bool | None:
    return {"0": False, "1": True}.get(text)


def _nonempty(text: str) -> str | None:
    return text or None


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _count(text: str) -> int | None:
    return max(0, int(text)) if text.strip() else None


def _fraction(text: str) -> float | None:
    return float(text) if text else None


def _reference_cache(text: str):
    return {"0": False, "1": True, "": None}.get(text, text)


def _stripped(text: str) -> str | None:
    return text.strip() or None


@dataclass(frozen=True)
class Variable:
    """One ``KBENCH_*`` variable: ``parse`` turns its text into its value, ``unset`` is the value when it is not
    set; ``meaning`` says what it does, ``read_by`` where and when it is read."""

    name: str
    parse: Callable[[str], object]
    unset: object
    meaning: str
    read_by: str


_TRUSTED = "the trusted side"
VARIABLES: dict[str, Variable] = {v.name: v for v in (
    # Evaluator options (EvaluatorConfig reads these when it is made; an option given wins)
    Variable("KBENCH_COMPILE_BASELINE", _zero_or_one, None,
             "0 or 1: time the reference under torch.compile too (unset: on for GPUs, off on the CPU)", _TRUSTED),
    Variable("KBENCH_COMPILE_LATER", _zero_or_one, None,
             "0 or 1: time the torch.compile reference off the candidates' path (unset: on for GPUs sharing checks)",
             _TRUSTED),
    Variable("KBENCH_SHARED_CHECKS", _zero_or_one, None,
             "0 or 1: correctness checks share the device (unset: on for GPUs, off on the CPU)", _TRUSTED),
    Variable("KBENCH_SPARE_WORKER", _on, True, "0: keep no spare workers ready (sandbox/spares.py)", _TRUSTED),
    Variable("KBENCH_REFERENCE_CACHE", _reference_cache, None,
             "0, 1 or a folder: reference timings on disk (unset: on for GPUs, off on the CPU)", _TRUSTED),
    # Defaults of sandbox limits and caches
    Variable("KBENCH_CACHE", _nonempty, None, "where builds, derivations and locks are kept (unset: "
             "~/.cache/kbench; machine/cache_dir.py)", _TRUSTED),
    Variable("KBENCH_CACHE_MAX_BYTES", _int_or_none, None,
             "the shared build cache's bound in bytes (unset or 0: sandbox/confine/policy.CACHE_BYTES)", _TRUSTED),
    Variable("KBENCH_THREADS", int, 0,
             "threads of candidate and reference (unset or 0: half the cores; Limits.threads)", _TRUSTED),
    Variable("KBENCH_SPARE_WORKERS", _count, None,
             "how many spare workers a pool may keep (unset: memory, and on the CPU the cores; spares.default_cap)",
             _TRUSTED),
    Variable("KBENCH_REFERENCE_TOLERANCE", _fraction, None, "drift of the device calibration (a fraction) that "
             "invalidates the reference cache (unset: reference_cache.DEFAULT_TOLERANCE)", _TRUSTED),
    Variable("KBENCH_TASKS", _nonempty, None, "another tasks folder (unset: the shipped one; tasks/suite.py)",
             _TRUSTED),
    # How candidates are built, run and timed
    Variable("KBENCH_TIMING_BOOST", _on, True,
             "0: paired CPU timing runs at the normal priority (pipeline/timing.py)", "the trusted side, at import"),
    Variable("KBENCH_GPU_AUDIT", str, "kernels", "the worker's audit of forward on a GPU: kernels, or ops (PyTorch "
             "operators only: pipeline/integrity.py)", "the trusted side, into the worker's job"),
    Variable("KBENCH_WORKER_WARMUP", _on, True, "0: a worker does not warm up before its candidate (worker/loop.py)",
             "the trusted side, into the worker's job"),
    Variable("KBENCH_TIMING_SWITCH_US", _int_or_none, 200, "the trusted process's interpreter switch interval "
             "(microseconds) while it holds a device alone; 0: Python's own (machine/interpreter.py)", _TRUSTED),
    Variable("KBENCH_GPU_SPARES_IN_FLIGHT", _on, False, "1: on a GPU, spare workers start while several evaluations "
             "are in flight too, one per evaluation (sandbox/spares.py: by default only with none in flight)",
             _TRUSTED),
    Variable("KBENCH_SPARE_IDLE_START", _on, True, "0: spare workers start at the default scheduling policy, "
             "not at the idle class (sandbox/idle_start.py)", _TRUSTED),
    Variable("KBENCH_WORKER_BLOCKING_SYNC", _on, True, "0: a GPU worker's untimed waits for its device spin as "
             "CUDA's own choice has them (worker/cuda_wait.py)", "the trusted side, into the worker's job"),
    Variable("KBENCH_SANDBOX_USERNS", lambda text: text == "1", False,
             "1: a worker started as root tries a user namespace too", "the trusted side, into the worker's job"),
    Variable("KBENCH_LIGHT_HEADERS", _on, True,
             "0: build every source as written (builder/client.py; unset: lighter headers where they suffice)",
             "the trusted side, per build request"),
    Variable("KBENCH_CUTLASS", _stripped, None, "a CUTLASS checkout for CUDA builds (else $CUTLASS_PATH; "
             "backends/cutlass.py)", "the trusted side and the builder process, from its build environment"),
    # Diagnostics
    Variable("KBENCH_TRACE", _nonempty, None, "a file: each worker's messages and their times, a JSON line each",
             _TRUSTED),
    Variable("KBENCH_DEVICE_HOLD_LOG", _nonempty, None, "a file: each hold of a device lock, a JSON line each "
             "(machine/device_lock.py)", _TRUSTED),
    # Clients of a server, and the LLM proposers
    Variable("KBENCH_TOKEN", _nonempty, None, "the bearer token of a kbench serve server (its clients' default)",
             "the server and its clients"),
    Variable("KBENCH_LLM_BASE_URL", _nonempty, None, "an OpenAI-compatible endpoint (agents/llm.py)", "the agents"),
    Variable("KBENCH_LLM_MODEL", _nonempty, None, "the model name at that endpoint (agents/llm.py)", "the agents"),
    Variable("KBENCH_URL", _nonempty, None, "a kbench serve server the verl reward evaluates on "
             "(kbench_apps/integrations/verl_reward.py)", "verl's reward workers"),
    Variable("KBENCH_VERL_FACTORY", _nonempty, None, "module:function making the verl reward's evaluator "
             "(kbench_apps/integrations/verl_reward.py)", "verl's reward workers"),
)}

#: Where a CUTLASS checkout is named, in the order looked at: kbench's variable, then CUTLASS's own.
CUTLASS_VARS = ("KBENCH_CUTLASS", "CUTLASS_PATH")


def get(name: str, env: Mapping[str, str] | None = None):
    """The value of the variable ``name`` (a key of ``VARIABLES``) in ``env`` (default: this process's
    environment): its text read as the table says, or its ``unset`` value."""
    var = VARIABLES[name]
    text = (os.environ if env is None else env).get(name)
    return var.unset if text is None else var.parse(text)


def cutlass_checkouts(env: Mapping[str, str] | None = None) -> list[str]:
    """The CUTLASS checkouts named in ``env`` (default: this process's environment), ``KBENCH_CUTLASS``'s first."""
    env = os.environ if env is None else env
    given = [get("KBENCH_CUTLASS", env), _stripped(env.get("CUTLASS_PATH") or "")]
    return [path for path in given if path]


__all__ = ["CUTLASS_VARS", "VARIABLES", "Variable", "cutlass_checkouts", "get"]
