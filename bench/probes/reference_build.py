"""What building a reference runner costs (tasks/task.py ``Task.reference_runner``: the model made with its seed,
and its upcast copy), per GPU configuration of every task with a shipped CUDA solution, built on the CPU as the
trusted side builds it before moving it (what bench/wip/lazy_checker.patch keeps out of a timing's exclusive hold).
One JSON line per configuration, slowest first:

    python bench/probes/reference_build.py > rows.jsonl
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbench_env.tasks.suite import resolve_task, tasks_root  # noqa: E402


def main() -> None:
    rows = []
    for path in sorted((tasks_root() / "solutions" / "cuda").glob("*/*.py")):
        task = resolve_task(f"{path.parent.name}/{path.stem}")
        for cfg in task.configs:
            if not cfg.name.startswith("gpu"):
                continue
            mod, init, _ = task.instantiate(cfg, 0, "cpu")
            t0 = time.perf_counter()
            task.reference_runner(mod, init, cfg, 1, "cpu")
            rows.append({"task": task.name, "config": cfg.name, "seconds": round(time.perf_counter() - t0, 4)})
    for r in sorted(rows, key=lambda r: -r["seconds"]):
        print(json.dumps(r))


if __name__ == "__main__":
    main()
