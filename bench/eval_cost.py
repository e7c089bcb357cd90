"""What one evaluation costs on the CPU, for the two changes that target it (see bench/results/eval_cost_cpu.md):

    python bench/eval_cost.py big        # cached evaluations of level1/relu on a 256x65536 float32 configuration
                                         # (64 MiB of input): the cost of moving tensors between the processes
    python bench/eval_cost.py task [N] --device cuda --profile --trace /tmp/trace.jsonl
                                         # level1/relu on all its configurations for the device with the shipped
                                         # solution (first: reference timing), the last evaluation under cProfile,
                                         # every worker message's time and bytes written to the trace
    python bench/eval_cost.py cold [N]   # N cold builds of a KernelBench-format C++ candidate (<torch/extension.h>);
                                         # run with KBENCH_LIGHT_HEADERS=0 and =1 to compare the headers

Prints one JSON line per evaluation (wall seconds, build seconds, worker busy seconds, and ``phase_seconds`` where
the evaluator reports them), and appends it to ``--out`` when given. Runs against whatever ``kbench_env`` is on
PYTHONPATH, so an older checkout can be measured the same way (PYTHONPATH=<checkout> python bench/eval_cost.py ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
TIMING = {"warmup": 1, "min_reps": 5, "max_reps": 10, "min_seconds": 0.01}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["big", "cold", "task"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--task", default="level1/relu")
    ap.add_argument("--profile", action="store_true", help="cProfile the last evaluation (parent side)")
    ap.add_argument("--trace", default=None, help="append every worker message's timing to this JSONL file")
    ap.add_argument("n", type=int, nargs="?", default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--default-timing", action="store_true", help="the Evaluator's own timing settings, not TIMING")
    args = ap.parse_args()

    import kbench_env
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task, solution_path
    from kbench_env.tasks.task import Config

    if args.trace:
        os.environ["KBENCH_TRACE"] = args.trace
    task = resolve_task(args.task)
    ev = Evaluator(device=args.device, cache_dir=tempfile.mkdtemp(prefix="kbench-cost-") if args.what == "cold" else None,
                   timing=None if args.default_timing else dict(TIMING))
    if args.what == "big":
        big = Config(name="big", sizes={"batch_size": 256, "dim": 65536}, dtype="float32", held_out=False,
                     devices=(args.device,))
        task = dataclasses.replace(task, configs=[big])
    if args.what in ("big", "task"):
        backend = "cpu" if args.device == "cpu" else "cuda"
        sources = [solution_path(task, backend).read_text()] * (args.n + 1)  # the first one times the reference
    else:
        from throughput import CPU_TEMPLATE
        sources = [CPU_TEMPLATE.format(idx=time.time_ns() % 10**9 + i, chunk=1024) for i in range(args.n)]
    commit = subprocess.run(["git", "-C", os.path.dirname(kbench_env.__file__), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    for i, src in enumerate(sources):
        t0 = time.perf_counter()
        if args.profile and i == len(sources) - 1:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            r = prof.runcall(ev.evaluate, task, src)
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        else:
            r = ev.evaluate(task, src)
        rec = {"what": args.what, "run": i, "commit": commit, "light_headers": os.environ.get("KBENCH_LIGHT_HEADERS", "1"),
               "correct": r.correct, "seconds": round(time.perf_counter() - t0, 2), "build_seconds": r.build_seconds,
               "device": args.device, "task": task.name, "speedup": r.speedup, "error": r.error,
               "worker_seconds": r.worker_seconds, "phase_seconds": getattr(r, "phase_seconds", None),
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        print(json.dumps(rec), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
