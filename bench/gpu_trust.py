"""The trust boundary on a GPU (issue #21): the shipped CUDA relu solution, honest and with the issue's forgeries,
evaluated with the default evaluator; per evaluation the speedup and the flags, and per timing this side's view of
its blocks (wall time by this side's clock, the device time the worker reported, the bound, blocks under it).

    python bench/gpu_trust.py --out bench/results/trust_gpu.jsonl   (on a GPU; the table goes to stdout)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from kbench_env.pipeline import baseline, gpu_blocks, timing
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.tasks.suite import resolve_task

ROOT = Path(__file__).resolve().parents[1]

#: The forgeries: (name, prelude put before the honest solution).
ATTACKS = [
    ("honest", ""),
    ("summarize_divided_by_7",  # the worker's summary: no longer read anywhere
     "import kbench_env.measure.stats as _t\n_s = _t.summarize\n"
     "_t.summarize = lambda ts: _s([x / 7 for x in ts])\n"),
    ("pack_ms_over_8",  # every time field the worker sends divided by 8
     "import kbench_env.worker.loop as _l\n_p = _l.pack\n"
     "def _pack(h, p=None):\n"
     "    h = dict(h)\n"
     "    for k in ('median_ms', 'ms'):\n"
     "        if isinstance(h.get(k), (int, float)):\n"
     "            h[k] = h[k] / 8\n"
     "    return _p(h, p)\n"
     "_l.pack = _pack\n"),
    ("event_clock_divided_by_7",  # the device events read 7 times short
     "import torch\n_e = torch.cuda.Event.elapsed_time\n"
     "torch.cuda.Event.elapsed_time = lambda self, other: _e(self, other) / 7\n"),
]
TASKS = [("level1/relu", "tasks/solutions/cuda/level1/relu.py")]


def edge_attacks(divisors: list) -> list:
    """The device events read short by less than the flag ratio: the forgeries the bound must hold (paid at most
    the bound, never flagged), one per divisor."""
    return [(f"event_clock_divided_by_{d:g}",
             f"import torch\n_e = torch.cuda.Event.elapsed_time\n"
             f"torch.cuda.Event.elapsed_time = lambda self, other: _e(self, other) / {d!r}\n") for d in divisors]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/trust_gpu.jsonl")
    ap.add_argument("--edge", default="", help="divisors of the event clock under the flag ratio, e.g. 1.1,1.25,1.5")
    ap.add_argument("--tolerance", default="", help="bound tolerances to run the attacks under, e.g. 0.2,0.05 "
                    "(default: the library's)")
    ap.add_argument("--only", default="", help="run only the attacks whose names contain one of these, e.g. "
                    "honest,divided_by_1")
    args = ap.parse_args()
    attacks = ATTACKS + edge_attacks([float(x) for x in args.edge.split(",") if x])
    if args.only:
        attacks = [a for a in attacks if any(k in a[0] for k in args.only.split(","))]
    tolerances = [float(x) for x in args.tolerance.split(",") if x] or [gpu_blocks.TOLERANCE]
    seen: list = []
    real = gpu_blocks.time_gpu

    def spy(*a, **k):
        gt = real(*a, **k)
        ref = k.get("reference")
        staged = gt.staged_ms or [0.0] * len(gt.walls_ms)
        bounds = [gpu_blocks.bound_ms(w, ref, gt.method, gt.block, s) for w, s in zip(gt.walls_ms, staged)] \
            if ref else []
        seen.append({"reference": ref is None, "block": gt.block, "method": gt.method, "flagged": gt.flagged,
                     "walls_ms": [round(x, 4) for x in gt.walls_ms], "device_ms": [round(x, 4) for x in gt.device_ms],
                     "bounds_ms": [round(x, 4) for x in bounds], "outside": gt.outside, "fixed_ms": gt.fixed_ms,
                     "staged_ms": [round(x, 4) for x in gt.staged_ms]})
        return gt

    timing.gpu_blocks.time_gpu = spy
    baseline.time_gpu = spy
    ev = Evaluator(device="cuda", backend="cuda", compile_baseline=False)
    print(f"# {torch.cuda.get_device_name()}  {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'task':14s} {'attack':30s} {'tol':>5s} {'correct':7s} {'speedup':>8s}  flags")
    runs = [(t, tp, a) for t in tolerances for tp in TASKS for a in attacks]
    with open(args.out, "a") as f:
        for tolerance, (task_name, path), (name, prelude) in runs:
            gpu_blocks.TOLERANCE = tolerance
            task = resolve_task(task_name)
            honest = (ROOT / path).read_text()
            seen.clear()
            t0 = time.perf_counter()
            r = ev.evaluate(task, prelude + honest, seed=11)
            row = {"task": task_name, "attack": name, "tolerance": tolerance, "gpu": torch.cuda.get_device_name(),
                   "date": time.strftime("%Y-%m-%d %H:%M"), "seconds": time.perf_counter() - t0,
                   "correct": r.correct, "speedup": r.speedup, "reward": r.reward, "flags": r.integrity_flags,
                   "error": r.error, "configs": [(c.name, c.candidate_ms, c.reference_ms) for c in r.configs],
                   "phases": r.to_dict().get("phase_seconds"), "timings": list(seen)}
            f.write(json.dumps(row) + "\n")
            sp = f"{r.speedup:.2f}x" if r.speedup else "-"
            print(f"{task_name:14s} {name:30s} {tolerance:5.2f} {str(r.correct):7s} {sp:>8s}  "
                  f"{[x[:90] for x in r.integrity_flags]} {(r.error or '')[:300]}")
            for b in seen:
                w, d, bd = b["walls_ms"], b["device_ms"], b["bounds_ms"]
                med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
                print(f"    {'ref ' if b['reference'] else 'cand'} B={b['block']:3d} {b['method']:10s} "
                      f"wall {med(w):.3f} device {med(d):.3f} bound {med(bd):.3f} staged {med(b['staged_ms']):.3f} "
                      f"fixed {b['fixed_ms']:.3f} ms "
                      f"outside {b['outside']}/{len(w)} flagged {b['flagged']}")


if __name__ == "__main__":
    main()
