"""What the workers' heap on transparent huge pages (sandbox/confine/environment.py, MALLOC_TUNABLES) costs a CPU
evaluation on a machine that faults huge pages in slowly (the development VM: a fresh 2 MiB page is cleared at about
100 MB/s there, against about 1.4 GB/s for 4 KiB pages). Evaluates shipped CPU solutions N times each in one
Evaluator (a fresh worker pair each evaluation, builds cached after the first) and writes one JSON line per
evaluation: the wall time, the phases, the speedup. Run once as is and once with the tunable given off:

    python bench/probes/hugepage_cost.py --label huge --out /tmp/hp.jsonl
    GLIBC_TUNABLES=glibc.malloc.hugetlb=0 python bench/probes/hugepage_cost.py --label small --out /tmp/hp.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbench_env.pipeline.evaluator import Evaluator  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402

TASKS = ["level1/relu", "level1/softmax_rows", "level1/layer_norm", "level1/matmul_square"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--cache-dir", default="/tmp/kbench-hugepage-cost")
    a = ap.parse_args()
    ev = Evaluator(device="cpu", cache_dir=a.cache_dir)
    try:
        with open(a.out, "a") as out:
            for name in TASKS:
                task = resolve_task(name)
                source = solution_path(task, "cpu").read_text()
                for i in range(a.n + 1):  # the first builds (or finds the build): not counted
                    t0 = time.perf_counter()
                    r = ev.evaluate(task, source)
                    row = {"label": a.label, "tunables": os.environ.get("GLIBC_TUNABLES", ""), "task": name,
                           "i": i, "wall_s": round(time.perf_counter() - t0, 3), "correct": r.correct,
                           "speedup": r.speedup, "phases": r.phase_seconds}
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(f"{a.label} {name} {i}: {row['wall_s']} s, {r.speedup}", flush=True)
    finally:
        ev.close()


if __name__ == "__main__":
    main()
