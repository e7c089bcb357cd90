"""Build time of one task's answer in the fast format (kbench_env.fastpath.cpp_kernel) against the KernelBench
format (load_inline), on the CPU, each in a fresh build cache (cold) and then again (warm, cached build).

    PYTHONPATH=. .venv/bin/python bench/fast_format_cpu.py [--task level1/relu]

Prints a Markdown table (results: bench/results/fast_format_cpu.md).
"""

from __future__ import annotations

import argparse
import tempfile

from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.tasks.suite import resolve_task, solution_path

TIMING = {"warmup": 0, "min_reps": 2, "max_reps": 3, "min_seconds": 0}


def measure(task, fmt: str) -> list[dict]:
    source = solution_path(task, "cpu", fmt).read_text()
    ev = Evaluator(device="cpu", format=fmt, cache_dir=tempfile.mkdtemp(prefix=f"kbench-{fmt}-"), timing=TIMING,
                   spare_worker=False)
    try:
        rows = []
        for state in ("cold", "warm"):
            r = ev.evaluate(task, source, seed=0)
            rows.append({"format": fmt, "cache": state, "correct": r.correct, "build_s": r.build_seconds,
                         "build_phase_s": r.phase_seconds.get("build"), "eval_s": r.eval_seconds})
        return rows
    finally:
        ev.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="level1/relu")
    task = resolve_task(ap.parse_args().task)
    rows = measure(task, "kernelbench") + measure(task, "fast")
    print(f"task {task.name}\n\n| format | build cache | correct | build_seconds | build phase (s) | evaluation (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['format']} | {r['cache']} | {r['correct']} | {r['build_s']} | {r['build_phase_s']} | "
              f"{r['eval_s']} |")


if __name__ == "__main__":
    main()
