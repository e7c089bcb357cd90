"""Issue 36 probe: does host CPU load, arriving after a task's reference was timed, flag an honest GPU candidate's
timing (``device_time_outside_trusted_bound``)? A fresh batch flagged the shipped rms_norm once (configuration
'small': median wall 0.608 ms a block, reported 0.007 ms) while reference compiles and builds filled the cores.

    python bench/probes/gpu_load_flag.py [busy processes] [evaluations under load] [nice of the busy ones]

One evaluation on an idle host (its reference timed then, and kept in memory as a cache would), then the busy
processes (``while True`` loops) started and the same source evaluated again; each evaluation's speedup, the
configurations' figures and flags printed as JSON lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbench_env.pipeline.evaluator import Evaluator  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402

args = [int(a) for a in sys.argv[1:4]]
busy, evals, nice = args + [32, 4, 0][len(args):]
task_name = "level1/rms_norm"
source = (ROOT / "tasks/solutions/cuda/level1/rms_norm.py").read_text()
SPIN = "import os, time\nos.nice({})\nt = time.monotonic()\nwhile time.monotonic() - t < 900:\n    pass\n"


def show(label: str, r) -> None:
    print(json.dumps({"label": label, "correct": r.correct, "speedup": r.speedup, "flags": r.integrity_flags,
                      "configs": [[c.name, c.candidate_ms, c.reference_ms] for c in r.configs],
                      "timing_again": (r.phase_seconds or {}).get("timing_again")}), flush=True)


ev = Evaluator(device="cuda", reference_cache=False, compile_baseline=False)
procs = []
try:
    task = resolve_task(task_name)
    show("idle", ev.evaluate(task, source, seed=0))
    procs = [subprocess.Popen([sys.executable, "-c", SPIN.format(nice)]) for _ in range(busy)]
    for i in range(evals):
        show(f"loaded {busy} x nice {nice}", ev.evaluate(task, source, seed=i + 1))
finally:
    for p in procs:
        p.kill()
    ev.close()
