"""What paired CPU timing can and cannot cancel on this machine (issue 37's measure of its floor), in two parts:

1. ``inputs``: the trusted side's cost of making one timed call's inputs (pipeline/revealed_inputs.py ``make``) for
   each CPU configuration of the given tasks: a pair's time not spent timing. Run it on two commits to compare
   their input making (e.g. ``git stash``, or a worktree of the older commit with ``PYTHONPATH`` set to it).
2. ``cores``: blocks of ``torch.relu`` on 64K floats (~4 ms each) in one process, one thread, pinned to one core:
   back to back, after ``--gap`` seconds of sleep before each block (the core idle, as between a pair's blocks while
   the trusted side writes inputs), and after as long a busy wait. Per condition: the blocks' coefficient of
   variation and the standard deviation of the log ratio of consecutive blocks (A B pairs), which is what a pair's
   ratio moves by when both sides run the same code.

    python bench/cpu_timing_floor.py                 # both parts, level1/relu's configurations
    python bench/cpu_timing_floor.py --part cores --rounds 3

Prints a table per part; ``--out`` also writes the rows as JSONL.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kbench_env.pipeline.revealed_inputs import RevealedInputs  # noqa: E402
from kbench_env.sandbox.placement import timing_cores  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402


def input_cost(tasks: list[str], calls: int) -> list[dict]:
    rows = []
    for name in tasks:
        task = resolve_task(name)
        for config in task.configs_for("cpu"):
            _, _, inputs = task.instantiate(config, seed=0)
            made = RevealedInputs(inputs, noise=1e-2)
            for _ in range(20):  # warm: allocator, first-call costs
                made.make(made.draw())
            t0 = time.perf_counter()
            for _ in range(calls):
                made.make(made.draw())
            ms = (time.perf_counter() - t0) / calls * 1e3
            rows.append({"part": "inputs", "task": name, "config": config.name,
                         "shapes": [list(x.shape) for x in inputs if isinstance(x, torch.Tensor)],
                         "ms_per_call": round(ms, 4)})
    return rows


def _block(x: torch.Tensor, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        torch.relu(x)
    return time.perf_counter() - t0


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def core_noise(pairs: int, gap: float, rounds: int) -> list[dict]:
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, timing_cores(1))  # the core a paired block runs on
    x = torch.randn(16, 4096)
    calls = max(1, int(0.004 / max(_block(x, 200) / 200, 1e-7)))  # ~4 ms blocks
    waits = {"back to back": lambda: None, "after sleep": lambda: time.sleep(gap), "after busy wait": lambda: _spin(gap)}
    rows = []
    for r in range(rounds):
        for label, wait in waits.items():
            a, b = [], []
            for _ in range(pairs):
                wait()
                a.append(_block(x, calls))
                wait()
                b.append(_block(x, calls))
            blocks = a + b
            logs = [math.log(p / q) for p, q in zip(a, b)]
            rows.append({"part": "cores", "round": r, "condition": label, "block_calls": calls,
                         "block_ms": round(statistics.median(blocks) * 1e3, 3),
                         "cv": round(statistics.pstdev(blocks) / statistics.mean(blocks), 4),
                         "pair_log_sd": round(statistics.pstdev(logs), 4)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("inputs", "cores", "both"), default="both")
    ap.add_argument("--tasks", default="level1/relu", help="comma list of tasks (inputs part)")
    ap.add_argument("--calls", type=int, default=2000, help="inputs made per configuration")
    ap.add_argument("--pairs", type=int, default=40, help="A B block pairs per condition (cores part)")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds waited before each block")
    ap.add_argument("--rounds", type=int, default=2, help="times each condition is run")
    ap.add_argument("--out", default=None, help="also write the rows here (JSONL)")
    args = ap.parse_args(argv)
    rows = []
    if args.part in ("inputs", "both"):
        rows += input_cost([t for t in args.tasks.split(",") if t], args.calls)
        print("| task | configuration | input shapes | ms per call made |\n|---|---|---|---|")
        for r in (r for r in rows if r["part"] == "inputs"):
            print(f"| {r['task']} | {r['config']} | {r['shapes']} | {r['ms_per_call']} |")
    if args.part in ("cores", "both"):
        cores = core_noise(args.pairs, args.gap, args.rounds)
        rows += cores
        print(f"\n| round | condition | block ms | blocks' CV | pair log-ratio sd |\n|---|---|---|---|---|")
        for r in cores:
            print(f"| {r['round']} | {r['condition']} | {r['block_ms']} | {r['cv']} | {r['pair_log_sd']} |")
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
