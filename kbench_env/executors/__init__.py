"""Executors: where evaluations run. ``local``: one Evaluator per device in this process, builds overlapping on
the CPU cores; ``processes``: the same with one process per device, each with its own Evaluator (processes.py: the
trusted sides of several GPUs then share no interpreter); ``auto`` (the default): ``processes`` where there are
several devices, else ``local``; ``ray``: one actor per GPU (or CPU slot) of an existing or local Ray cluster. Both
take ``[(task, action), ...]`` and return EvalResults in order; the Evaluator stays the only thing that compiles,
runs or times candidate code. Both take the same arguments (``options.py``): ``device``, ``workers`` and the
Evaluator's own; Ray adds its cluster's. Every executor, like the Evaluator, has the ``Evaluates`` protocol
(evaluates.py)."""

from __future__ import annotations

from kbench_env.executors.evaluates import Evaluates
from kbench_env.executors.local import LocalExecutor, local_devices
from kbench_env.executors.processes import ProcessExecutor
from kbench_env.executors.ray_executor import RayExecutor  # ray itself (the [ray] extra) only when one is made


def make_executor(kind: str = "auto", **kwargs):
    """A "local", "processes" or "ray" executor; arguments as in ``kbench_env.executors.options``. "auto" (the
    default): one process per device where ``device`` names several (every GPU of a multi-GPU host), so that the
    GPUs' trusted sides share no interpreter (in one process a candidate's device hold grows with the GPUs
    that process serves), else the local executor."""
    if kind == "auto":
        kind = "processes" if len(local_devices(kwargs.get("device", "auto"))) > 1 else "local"
    if kind == "local":
        return LocalExecutor(**kwargs)
    if kind == "processes":
        return ProcessExecutor(**kwargs)
    if kind == "ray":
        return RayExecutor(**kwargs)
    raise ValueError(f"unknown executor {kind!r}: auto, local, processes or ray")
