"""What a CPU timed block costs beyond its calls (issue #37): one task's shipped CPU solution evaluated with paired
timing at several block lengths; for each configuration and side (candidate, reference) the calls per block, the
per-call time the blocks read, and a straight line through (calls, block seconds) over all lengths, whose
intercept is the block's fixed cost (the thaw, the wake-ups, the first calls' cold caches, the DONE message, the
freeze) and whose slope is a call's own time. A fixed cost common to both sides pulls a block-ratio speedup
toward 1 the shorter the blocks are. A one-off probe, no record of its own:

    python bench/probes/cpu_block_cost.py [--task level1/rms_norm] [--lengths 0.005,0.0125,0.025,0.05,0.1]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbench_env.pipeline import blocks  # noqa: E402
from kbench_env.pipeline.evaluator import Evaluator  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="level1/rms_norm")
    ap.add_argument("--lengths", default="0.005,0.0125,0.025,0.05,0.1", help="block_seconds to try, comma-separated")
    a = ap.parse_args()
    task = resolve_task(a.task)
    src = solution_path(task, "cpu").read_text()
    log: list[tuple[str, str, int, float]] = []
    timed = blocks._Run.block

    def logged(run, calls):
        out = timed(run, calls)
        side = "reference" if run.check is None else "candidate"
        log.append((run.config.split("#")[0], side, calls, out[0]))
        return out

    blocks._Run.block = logged  # (the probe's own process: every block's calls and seconds, both sides)
    points: dict = collections.defaultdict(list)
    print("| block_seconds | configuration | side | calls per block | per call, ms | block, ms |")
    print("|---|---|---|---|---|---|")
    speedups = []
    for length in (float(x) for x in a.lengths.split(",")):
        ev = Evaluator(device="cpu", timing={"block_seconds": length})
        log.clear()
        try:
            r = ev.evaluate(task, src)
        finally:
            ev.close()
        speedups.append((length, r.speedup, [(c.name, c.speedup) for c in r.configs]))
        for key in sorted({(cfg, side) for cfg, side, _, _ in log}):
            rows = [(c, s) for cfg, side, c, s in log if (cfg, side) == key]
            k = collections.Counter(c for c, _ in rows).most_common(1)[0][0]  # the timed blocks' size
            secs = statistics.median(s for c, s in rows if c == k)
            points[key].append((k, secs))
            print(f"| {length} | {key[0]} | {key[1]} | {k} | {1e3 * secs / k:.3f} | {1e3 * secs:.2f} |")
    print("\n| configuration | side | fixed cost a block, ms | a call, ms |\n|---|---|---|---|")
    for key, pts in sorted(points.items()):
        if len({k for k, _ in pts}) > 1:
            c, f = statistics.linear_regression([k for k, _ in pts], [t for _, t in pts])
            print(f"| {key[0]} | {key[1]} | {1e3 * f:.2f} | {1e3 * c:.3f} |")
    print("\n| block_seconds | speedup | per configuration |\n|---|---|---|")
    for length, s, per in speedups:
        print(f"| {length} | {s:.3f} | {', '.join(f'{n} {v:.3f}' for n, v in per)} |")


if __name__ == "__main__":
    main()
