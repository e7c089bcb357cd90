"""Whether a CPU evaluation's far-off step goes with the VM's stolen time (issue #37): N evaluations of a task's
shipped CPU solution, one at a time in one Evaluator, each with the host's steal (``/proc/stat``, jiffies per CPU)
and each CPU's busy time over the evaluation, and each configuration's speedup; then the configurations' speedups
against the steal.

    python bench/probes/steal_state.py level1/rms_norm 20 /tmp/steal_state.jsonl
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kbench_env.pipeline.evaluator import Evaluator  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402


def cpu_times() -> dict:
    """Per CPU (``cpu0``, ...): (busy jiffies, steal jiffies) from /proc/stat."""
    out = {}
    for line in open("/proc/stat"):
        f = line.split()
        if f[0].startswith("cpu") and f[0] != "cpu":
            v = [int(x) for x in f[1:]]
            out[f[0]] = (v[0] + v[1] + v[2] + v[5] + v[6], v[7])  # user nice system irq softirq; steal
    return out


task = resolve_task(sys.argv[1])
n, path = int(sys.argv[2]), sys.argv[3]
src = solution_path(task, "cpu").read_text()
ev = Evaluator(device="cpu")
hz = os.sysconf("SC_CLK_TCK")
with open(path, "w") as f:
    for i in range(n):
        before, t0 = cpu_times(), time.monotonic()
        r = ev.evaluate(task, src)
        after, wall = cpu_times(), time.monotonic() - t0
        row = {"i": i, "speedup": r.speedup, "wall_s": round(wall, 2),
               "steal_s": {c: (after[c][1] - before[c][1]) / hz for c in after},
               "busy_s": {c: (after[c][0] - before[c][0]) / hz for c in after},
               "configs": {c.name: round(c.speedup, 3) for c in r.configs if c.speedup}}
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(i, f"{r.speedup:.3f}", row["configs"], "steal", row["steal_s"], "busy", row["busy_s"], flush=True)
ev.close()
