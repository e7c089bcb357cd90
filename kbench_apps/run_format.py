"""``kbench run --format auto`` (its default): which action format a run uses when none is named.

The fast format (``kbench_env/pipeline/formats.py``) builds a CUDA kernel in about a second; a KernelBench-format
build of the same kind of kernel takes tens of seconds (figures: bench/RESULTS.md), enough that the main job on a
GPU, which replays and tunes shipped solutions, finishes the default suite in its 5 minutes only in the fast
format. "auto" therefore
picks the fast format where that changes nothing but the build time: on a CUDA device, for an agent that only
replays or tunes the shipped solutions (``shipped``, or the evolutionary agent with the offline proposer), when
every task the run would play in the KernelBench format has a shipped fast solution too. Everywhere else, an LLM
proposer above all, it is KernelBench's format, so that results stay comparable with KernelBench's; ``--format``
names one explicitly.
"""

from __future__ import annotations

from kbench_env.backends import default_backend
from kbench_env.machine.device import Device
from kbench_env.tasks.suite import solution_path

#: The agents whose candidates are the shipped solutions or offline mutations of their tuning constants ("auto" is
#: the evolutionary agent with the offline proposer, runner.make_agent).
_SOLUTION_AGENTS = ("auto", "shipped", "evolutionary")


def run_format(requested: str, agent: str, proposer: str | None, device: str, backend: str | None,
               tasks: list) -> tuple[str, str]:
    """The format a run uses, and why in a few words (for the run's header line). ``requested``: the ``--format``
    value ("auto" or a format name, which is returned as it is)."""
    if requested != "auto":
        return requested, "as asked"
    dev = Device.parse(device)
    if not dev.is_cuda or (backend or default_backend(str(dev))) != "cuda":
        return "kernelbench", "auto: KernelBench's, off a GPU"
    if agent not in _SOLUTION_AGENTS or (agent == "evolutionary" and (proposer or "offline") != "offline"):
        return "kernelbench", "auto: KernelBench's, for a model's candidates"
    played = [t for t in tasks if solution_path(t, "cuda", "kernelbench") is not None]
    missing = [t.name for t in played if solution_path(t, "cuda", "fast") is None]
    if not played or missing:
        return "kernelbench", (f"auto: KernelBench's, {', '.join(missing[:3])} "
                               f"{'have' if len(missing) > 1 else 'has'} no fast solution" if missing
                               else "auto: KernelBench's")
    return "fast", "auto: shipped fast solutions on a GPU, ~1 s builds; --format kernelbench for KernelBench's"
