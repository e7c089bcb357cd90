"""The trust boundary on a GPU (issue #21): the shipped CUDA relu solution, honest and with the issue's Python-level
forgeries, evaluated with the default evaluator; per evaluation the speedup, the flags, and this side's bound of
every timed block (wall time from GO to DONE, the device time the worker reported, the allowance).

    python bench/gpu_trust.py --out bench/results/trust_gpu.jsonl   (on a GPU; the table goes to stdout)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from kbench_env.pipeline import gpu_blocks, timing
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.tasks.suite import resolve_task

ROOT = Path(__file__).resolve().parents[1]

#: The issue's forgeries: (name, prelude put before the honest solution).
ATTACKS = [
    ("honest", ""),
    ("summarize_divided_by_7",  # the worker's summary is no longer read: the trusted side computes it
     "import kbench_env.worker.timing as _t\n_s = _t.summarize\n"
     "_t.summarize = lambda ts: _s([x / 7 for x in ts])\n"),
    ("pack_median_over_8",  # the reply the worker frames: every time field it sends divided by 8
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/trust_gpu.jsonl")
    args = ap.parse_args()
    blocks_seen: list = []
    real = gpu_blocks.drive

    def spy(*a, **k):
        gt = real(*a, **k)
        blocks_seen.append({"reference": k.get("reference") is None, "block": gt.block, "method": gt.method,
                            "walls_ms": [round(x, 4) for x in gt.walls_ms],
                            "device_ms": [round(x, 4) for x in gt.device_ms], "outside": gt.outside_bound,
                            "allowance_ms": gpu_blocks.allowance_ms(k.get("reference"), gt.block, gt.method)})
        return gt

    gpu_blocks.drive = timing.gpu_blocks.drive = spy
    import kbench_env.pipeline.baseline as baseline
    baseline.drive = spy
    task = resolve_task("level1/relu")
    honest = (ROOT / "tasks/solutions/cuda/level1/relu.py").read_text()
    ev = Evaluator(device="cuda", backend="cuda", compile_baseline=False)
    print(f"# {torch.cuda.get_device_name()}  {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'attack':28s} {'correct':7s} {'speedup':>8s}  flags")
    with open(args.out, "a") as f:
        for name, prelude in ATTACKS:
            blocks_seen.clear()
            r = ev.evaluate(task, prelude + honest, seed=11)
            row = {"attack": name, "gpu": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d %H:%M"),
                   "correct": r.correct, "speedup": r.speedup, "reward": r.reward, "flags": r.integrity_flags,
                   "error": r.error, "configs": [(c.name, c.candidate_ms, c.reference_ms) for c in r.configs],
                   "blocks": list(blocks_seen)}
            f.write(json.dumps(row) + "\n")
            sp = f"{r.speedup:.2f}x" if r.speedup else "-"
            print(f"{name:28s} {str(r.correct):7s} {sp:>8s}  {[x[:60] for x in r.integrity_flags]} {r.error or ''}")
            for b in blocks_seen:
                w, d = b["walls_ms"], b["device_ms"]
                print(f"    {'ref ' if b['reference'] else 'cand'} B={b['block']:3d} {b['method']:10s} "
                      f"wall {sorted(w)[len(w) // 2]:.3f} ms device {sorted(d)[len(d) // 2]:.3f} ms "
                      f"allowance {b['allowance_ms']:.3f} ms outside {b['outside']}/{len(w)}")


if __name__ == "__main__":
    main()
