"""Wall-clock cost of each task's reference program on its first CPU configuration: how long the suite's
correctness checks spend in the PyTorch reference, and which tasks are slow enough to deserve smaller CPU sizes.

The test suite checks only that references run and are deterministic (tests/test_suite_quality.py); whether they
are quick is a measurement of this machine, so it lives here.

    python bench/reference_cost.py [--suite all] [--limit 2.0] [--out bench/results/reference_cost_cpu.md]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from kbench_env.tasks.suite import load_suite  # noqa: E402


def measure(task, repeats: int) -> float:
    """The median seconds of ``repeats`` reference runs (seeded as the suite's tests seed them)."""
    cfg = task.configs_for("cpu")[0]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        task.reference(cfg, seed=1, init_seed=7, upcast=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="all")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=float, default=2.0, help="seconds a reference run should stay under")
    ap.add_argument("--out", default=None, help="Markdown file for the table (default: print only)")
    args = ap.parse_args()
    rows = sorted(((measure(t, args.repeats), t.name) for t in load_suite(args.suite) if t.configs_for("cpu")),
                  reverse=True)
    over = [(s, n) for s, n in rows if s >= args.limit]
    lines = [f"# Reference run cost on the CPU ({args.suite}, median of {args.repeats})", "",
             f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, torch "
             f"{torch.__version__}. Command: `python bench/reference_cost.py --suite {args.suite}`.", "",
             f"{len(rows)} tasks; median {statistics.median(s for s, _ in rows):.3f} s, slowest {rows[0][0]:.3f} s; "
             f"{len(over)} at or over {args.limit:g} s.", "", "| task | seconds |", "| --- | --- |"]
    lines += [f"| {n} | {s:.3f} |" for s, n in rows[:15]]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
