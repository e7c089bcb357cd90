"""The candidates of bench/rl_batch.py: per task, the distinct sources of one action format (the shipped solution,
its honest variants, the batch's own candidates under bench/data/rl_batch/), and the pick of tasks for a batch."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kbench_env.tasks.suite import solution_folder

ROOT = Path(__file__).resolve().parent.parent

#: KernelBench-format CPU solutions (bench/data/kernelbench_cpu) that solve one of kbench's own tasks.
KERNELBENCH_CPU = {"level1/relu": "19_ReLU.py", "level1/softmax_rows": "23_Softmax.py"}


def candidates_folder(fmt: str, backend: str) -> str:
    """The folder of ``fmt``'s candidates for ``backend`` (the format's own backend: triton for Triton) under
    tasks/solutions/, tests/data/honest_variants/ and bench/data/rl_batch/: the shipped solutions' folder."""
    return solution_folder(backend, fmt)


def catalogue(backend: str, fmt: str = "kernelbench") -> dict[str, list[tuple[str, str]]]:
    """Task name -> [(label, source)], distinct sources only, for every task with a shipped solution or candidates
    of the batch in ``fmt`` for ``backend``: the shipped solution (suite.solution_path), then its honest variants,
    then the batch's own candidates (bench/data/rl_batch/<folder>)."""
    from kbench_env.tasks.suite import resolve_task, solution_path

    folder = candidates_folder(fmt, backend)
    names = {f"{f.parent.name}/{f.stem}" for f in (ROOT / "tasks/solutions" / folder).glob("*/*.py")}
    names |= {f"{f.parent.name}/{f.stem.partition('__')[0]}" for f in (ROOT / "bench/data/rl_batch" / folder).glob("*/*.py")}
    out: dict = {}
    for name in sorted(names):
        level, _, stem = name.partition("/")
        sol = solution_path(resolve_task(name), backend, fmt)
        files = ([sol] if sol else []) + [f for root in ("tests/data/honest_variants", "bench/data/rl_batch")
                                          for f in sorted((ROOT / root / folder / level).glob(f"{stem}__*.py"))]
        if folder == "cpu" and name in KERNELBENCH_CPU:
            files.append(ROOT / "bench/data/kernelbench_cpu" / KERNELBENCH_CPU[name])
        seen, cands = set(), []
        for f in files:
            src = f.read_text()
            h = hashlib.sha256(src.encode()).hexdigest()
            if h not in seen:
                seen.add(h)
                cands.append((f.relative_to(ROOT).as_posix(), src))
        out[name] = cands
    return out


def pick(cat: dict, n_tasks: int, per_task: int) -> list[tuple[str, list]]:
    """``n_tasks`` tasks with up to ``per_task`` candidates each: the tasks offering the most candidates (up to
    ``per_task``) first and, among tasks offering as many, alternating between levels."""
    groups: dict = {}
    for name in sorted(cat):
        groups.setdefault(min(len(cat[name]), per_task), {}).setdefault(name.split("/")[0], []).append(name)
    order: list = []
    for _, by_level in sorted(groups.items(), reverse=True):
        queues = [list(q) for _, q in sorted(by_level.items())]
        while any(queues):
            order.extend(q.pop(0) for q in queues if q)
    return [(t, cat[t][:per_task]) for t in order[:n_tasks]]
