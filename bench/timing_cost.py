"""Wall-clock cost of timing one configuration on the GPU (CudaBackend.time_calls), per configuration of a task,
with the fresh inputs and output fingerprints an evaluation uses, for a few timing settings side by side: which
part of a cached step's timing phase each setting costs, and how many calls it times.

    python bench/timing_cost.py [--task level1/relu]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from kbench_env.pipeline import integrity  # noqa: E402
from kbench_env.backends.cuda import CudaBackend  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402

SETTINGS = {"default": {}, "block 32": {"block": 32}, "min 0.3 s": {"min_seconds": 0.3}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="level1/relu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--settings", default=",".join(SETTINGS), help="which of the timing settings, comma-separated")
    ap.add_argument("--per-call", action="store_true",
                    help="inputs copied and outputs fingerprinted one call at a time (as before 2026-11-25)")
    args = ap.parse_args()
    task = resolve_task(args.task)
    backend = CudaBackend()
    gap = backend.calibrate("cuda", ["float32"])["graph_gap_ms"]
    rows = []
    for cfg in task.configs_for("cuda"):
        _, _, inputs = task.instantiate(cfg, 1234, "cuda")
        fn = torch.relu
        for label, params in ((k, SETTINGS[k]) for k in args.settings.split(",")):
            make_inputs = integrity.TimedInputs(inputs, 77, 3, 99).materialise()
            fps, fingerprint = [], integrity.Fingerprint(5)
            t0 = time.perf_counter()
            if args.per_call:  # the way before block fingerprints and in-place inputs (for the A/B)
                t = backend.time_calls(fn, lambda j, m=make_inputs: m(j),
                                       on_output=lambda j, o: fps.append(fingerprint.pending(o)), gap_ms=gap, **params)
            else:  # as the worker times
                t = backend.time_calls(fn, make_inputs, gap_ms=gap, on_block=lambda j, outs, static: fps.extend(
                    fingerprint.pending_block(outs, static=static)), **params)
            integrity.fingerprint_values(fps)
            wall = time.perf_counter() - t0
            # host cost of one call's inputs and fingerprint, for the record
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            for j in range(200):
                fingerprint.pending(fn(*make_inputs(10_000 + j)))
            torch.cuda.synchronize()
            per_call_ms = (time.perf_counter() - t1) / 200 * 1e3
            t1 = time.perf_counter()
            made = [make_inputs(20_000 + j) for j in range(200)]
            torch.cuda.synchronize()
            inputs_ms = (time.perf_counter() - t1) / 200 * 1e3
            out = fn(*made[0])
            t1 = time.perf_counter()
            pend = [fingerprint.pending(out) for _ in range(200)]
            torch.cuda.synchronize()
            fingerprint_ms = (time.perf_counter() - t1) / 200 * 1e3
            del made, pend
            rows.append({"config": cfg.name, "setting": label + (" (per call)" if args.per_call else ""),
                         "wall_s": round(wall, 4), "calls": len(fps),
                         "blocks": len(t.times_ms), "median_ms": t.median_ms, "iqr_ms": t.iqr_ms,
                         "eager_call_with_inputs_and_fingerprint_ms": round(per_call_ms, 4),
                         "inputs_ms": round(inputs_ms, 4), "fingerprint_ms": round(fingerprint_ms, 4)})
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, task {args.task}")
    print("| config | setting | wall (s) | calls | blocks | median (ms) | one call's inputs (ms) | its fingerprint (ms) |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['config']} | {r['setting']} | {r['wall_s']:.3f} | {r['calls']} | {r['blocks']} | {r['median_ms']:.4f} "
              f"| {r['inputs_ms']:.3f} | {r['fingerprint_ms']:.3f} |")
    if args.out:
        with open(args.out, "a") as f:
            for r in rows:
                f.write(json.dumps({"gpu": torch.cuda.get_device_name(), **r}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
