"""Timing fidelity on the GPU: kbench's per-call time against the kernel duration the PyTorch profiler (CUPTI)
reports, for kernels from a few microseconds to ~10 ms, and the spread of repeated measurements of one kernel. The
profiler's figure is taken twice: in a warm loop (inputs of small kernels stay in L2) and in the very runs kbench
times (after its L2 flush), which isolates the method's own error from the cache state it imposes.

Also shows the naive method (one launch between a pair of events) for contrast. Writes a Markdown table and a
JSONL record (GPU name, date, numbers).

    python bench/timing_fidelity.py --out bench/results/timing_fidelity_h100.md
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kbench_env.backends.cuda import CudaBackend  # noqa: E402
from kbench_env.fastpath import cuda_kernel  # noqa: E402

SRC = r"""
extern "C" __global__ void scale_add(const float* x, float* y, long long n, int iters) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        for (int k = 0; k < iters; ++k) v = v * 0.999f + 0.001f;
        y[i] = v;
    }
}
"""

# (label, elements, inner iterations): from a few microseconds (launch-bound) to ~10 ms (compute-bound)
CASES = [("tiny 4K", 1 << 12, 1), ("64K", 1 << 16, 1), ("256K", 1 << 18, 1), ("1M", 1 << 20, 1),
         ("16M", 1 << 24, 1), ("64M", 1 << 26, 1), ("16M x 64 iters", 1 << 24, 64),
         ("16M x 512 iters", 1 << 24, 512), ("16M x 16384 iters", 1 << 24, 16384)]


def profiler_kernel_ms(fn, inputs, reps: int = 30) -> float:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn(*inputs)
        torch.cuda.synchronize()
    durs = [e.device_time for e in prof.events() if "scale_add" in e.name]  # microseconds
    return statistics.median(durs) / 1e3


def profiler_in_timing_ms(backend, fn, make_inputs) -> float:
    """The kernel's median CUPTI duration while kbench times it (graph replay after an L2 flush): the same runs,
    so the comparison measures the method, not a difference in cache state (a warm loop keeps a small kernel's
    inputs in L2, kbench's timing flushes it first)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        backend.time_calls(fn, make_inputs, warmup=3, min_reps=20, max_reps=60, min_seconds=0.05)
        torch.cuda.synchronize()
    durs = [e.device_time for e in prof.events() if "scale_add" in e.name]
    return statistics.median(durs) / 1e3


NCU_LAUNCHES = 5  # launches of each case's kernel under ncu


def ncu_child() -> int:
    """Launch each case's kernel NCU_LAUNCHES times, in CASES order, for ncu to measure."""
    kern = cuda_kernel(SRC, "scale_add")
    for _, n, iters in CASES:
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)
        for _ in range(NCU_LAUNCHES):
            kern(((n + 255) // 256,), (256,), x, y, n, iters)
        torch.cuda.synchronize()
    return 0


def ncu_kernel_ms(raw: str | None = None) -> list | None:
    """Per case, the median of Nsight Compute's gpu__time_duration (ms); None without ncu or if it fails. Its
    output is kept in ``raw`` when given."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return None
    cmd = [ncu, "--clock-control", "none", "--cache-control", "all", "--metrics", "gpu__time_duration.sum",
           "--kernel-name", "scale_add", "--csv", sys.executable, str(Path(__file__).resolve()), "--ncu-child"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        print("ncu: timed out", flush=True)
        return None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    if raw:
        Path(raw).write_text(proc.stdout[-200_000:] + proc.stderr[-20_000:])
    scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3,
             "s": 1e3}
    vals = [float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], float("nan")) for r in rows
            if r.get("Metric Name") == "gpu__time_duration.sum"]
    if len(vals) != NCU_LAUNCHES * len(CASES):
        print(f"ncu: {len(vals)} measurements, expected {NCU_LAUNCHES * len(CASES)}; rc {proc.returncode}; "
              f"{(proc.stderr or proc.stdout)[-600:]}", flush=True)
        return None
    return [statistics.median(vals[k * NCU_LAUNCHES:(k + 1) * NCU_LAUNCHES]) for k in range(len(CASES))]


def naive_event_ms(fn, inputs, reps: int = 30) -> float:
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*inputs)
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=5, help="repeated kbench measurements per kernel (spread)")
    ap.add_argument("--ncu-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ncu_child:
        return ncu_child()
    ncu = ncu_kernel_ms(str(Path(args.out).with_suffix(".ncu.txt")) if args.out else None)
    print(f"ncu: {ncu}", flush=True)
    kern = cuda_kernel(SRC, "scale_add")
    backend = CudaBackend()
    gap = backend.calibrate("cuda", ["float32"])["graph_gap_ms"]
    gap32 = backend.graph_gap_ms("cuda", 32)
    print(f"graph node gap: {gap * 1e3:.3f} us (blocks of 32: {gap32 * 1e3:.3f} us)", flush=True)
    rows = []
    for k, (label, n, iters) in enumerate(CASES):
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)

        def fn(x, y, n=n, iters=iters):
            kern(((n + 255) // 256,), (256,), x, y, n, iters)
            return y

        prof_ms = profiler_kernel_ms(fn, [x, y])
        meds = []
        for _ in range(args.repeats):
            t = backend.time_calls(fn, lambda j, x=x, y=y: [x, y])  # an evaluation's defaults
            meds.append(t.median_ms)
        ours = statistics.median(meds)
        b32 = statistics.median(backend.time_calls(fn, lambda j, x=x, y=y: [x, y], block=32).median_ms
                                for _ in range(3))
        block = backend._block_size(fn, lambda j, x=x, y=y: [x, y], [x, y], [])  # noqa: SLF001 - kbench's choice
        spread = (statistics.pstdev(meds) / statistics.mean(meds)) if len(meds) > 1 else 0.0
        naive = naive_event_ms(fn, [x, y])
        same_ms = profiler_in_timing_ms(backend, fn, lambda j, x=x, y=y: [x, y])
        rows.append({"kernel": label, "profiler_ms": prof_ms, "kbench_ms": ours, "error": ours / prof_ms - 1,
                     "profiler_in_timing_ms": same_ms, "error_vs_same_runs": ours / same_ms - 1,
                     "spread": spread, "block": block, "gap_us": 1e3 * gap, "kbench_block32_ms": b32,
                     "ncu_ms": ncu[k] if ncu else None, "error_vs_ncu": (ours / ncu[k] - 1) if ncu else None,
                     "naive_event_ms": naive, "naive_error": naive / prof_ms - 1,
                     "method": backend.last_method})
        print(rows[-1], flush=True)
    name = torch.cuda.get_device_name()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    md = [f"# Timing fidelity on {name} ({date})", "",
          "kbench: CUDA-graph replay of a block of calls between events, L2 flushed before each block, fresh inputs "
          "per call, the replay's whole time over its calls (nothing subtracted; for reference, the calibrated idle gap "
          f"between graph nodes of tiny kernels: {gap * 1e3:.3f} us; in a graph of 32: {gap32 * 1e3:.3f} us); B = calls per block as kbench chose them; median over blocks; spread = std/mean of "
          f"{args.repeats} repeated measurements. Profiler: median CUPTI kernel duration, in a warm loop and in the "
          "runs kbench times (after its L2 flush). ncu: median Nsight Compute gpu__time_duration of "
          f"{NCU_LAUNCHES} launches, caches flushed before each, clocks not locked. Naive: one launch between a pair "
          "of events.", "",
          "| kernel | profiler, warm loop (ms) | profiler, kbench's runs (ms) | ncu (ms) | kbench (ms) | B | gap (us) | "
          "kbench error vs warm | vs its runs | vs ncu | spread | kbench, B=32 (ms) | naive events (ms) | "
          "naive error | method |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    for r in rows:
        md.append(f"| {r['kernel']} | {r['profiler_ms']:.4f} | {r['profiler_in_timing_ms']:.4f} | "
                  f"{fmt(r['ncu_ms'], '.4f')} | {r['kbench_ms']:.4f} | {r['block']} | {r['gap_us']:.3f} | "
                  f"{100 * r['error']:+.1f}% | "
                  f"{100 * r['error_vs_same_runs']:+.1f}% | "
                  f"{fmt(None if r['error_vs_ncu'] is None else 100 * r['error_vs_ncu'], '+.1f')}% | "
                  f"{100 * r['spread']:.2f}% | {r['kbench_block32_ms']:.4f} | {r['naive_event_ms']:.4f} | "
                  f"{100 * r['naive_error']:+.1f}% | {r['method']} |")
    text = "\n".join(md)
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
        with open(out.with_suffix(".jsonl"), "a") as f:
            f.write(json.dumps({"gpu": name, "date": date, "rows": rows}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
