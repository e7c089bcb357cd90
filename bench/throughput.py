"""Throughput benchmark: the naive way against kbench's Evaluator, side by side in one run.

naive: a fresh Python process per candidate doing a plain ``load_inline`` (KernelBench format: <torch/extension.h>,
       default flags, its own build directory) and a KernelBench-style evaluation (allclose over 5 trials, then 100
       timed calls of the reference and of the candidate), one candidate after another (bench/naive_eval.py).
ours:  ``Evaluator.evaluate_many`` (fresh worker per candidate forked from a warm server, builds overlapping on the
       CPU cores, the device shared one candidate at a time, content-addressed build cache), plus the fast path.

Prints and writes (``--out``, Markdown + JSONL): step latency p50/p95 cold and cached, throughput (candidates per
minute) for a batch of distinct candidates, fast-path latency, and env overhead per step beyond build and run.

    python bench/throughput.py --device cpu --n 4 --naive 2            # small, as in CI
    python bench/throughput.py --device cuda --n 64 --naive 3 --out bench/results/throughput_h100.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import naive_eval  # noqa: E402

CPU_TEMPLATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
// candidate {idx}
torch::Tensor relu_forward(torch::Tensor x) {{
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    const int64_t chunk = {chunk};
    for (int64_t s = 0; s < n; s += chunk) {{
        const int64_t e = s + chunk < n ? s + chunk : n;
        for (int64_t i = s; i < e; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    }}
    return out;
}}
"""
ext = load_inline(name="bench_relu_{idx}", cpp_sources=cpp_source, functions=["relu_forward"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
'''

CUDA_TEMPLATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
// candidate {idx}
template <typename T>
__global__ void relu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = (float)x[i] > 0.f ? x[i] : (T)0.f;
}}
torch::Tensor relu_forward(torch::Tensor x) {{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    const int threads = {chunk};
    int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 65535);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "relu", [&] {{
        relu_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    }});
    return y;
}}
"""
ext = load_inline(name="bench_relu_{idx}", cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
'''

FAST_CPU = r'''
import torch
import torch.nn as nn
from kbench_env.fastpath import cpp_kernel

relu = cpp_kernel(r"""
#include <cstdint>
// candidate {idx}
extern "C" void relu(const float* x, float* y, int64_t n) {{ for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f; }}
""", "relu")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous(); y = torch.empty_like(x); relu(x, y, x.numel()); return y
'''

FAST_CUDA = r'''
import torch
import torch.nn as nn
from kbench_env.fastpath import cuda_kernel

relu = cuda_kernel(r"""
// candidate {idx}
extern "C" __global__ void relu(const float* x, float* y, long long n) {{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}}""", "relu")


class ModelNew(nn.Module):
    def forward(self, x):
        xf = x.contiguous().float(); y = torch.empty_like(xf); n = xf.numel()
        relu(((n + 255) // 256,), (256,), xf, y, n)
        return y.to(x.dtype)
'''

# The reference the naive way checks and times candidates against (bench/naive_eval.py): ReLU on one 16 x 4096 input.
NAIVE_REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 4096)]


def get_init_inputs():
    return []
"""


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run_naive(sources: list[str], device: str, workdir: Path) -> dict:
    """The naive way (bench/naive_eval.py) over ``sources``: per-candidate latencies and candidates a minute."""
    got = naive_eval.run_naive([(NAIVE_REFERENCE, src) for src in sources], device, workdir)
    for r in got["rows"]:
        if r["error"]:
            print(f"naive: {r['error']}", file=sys.stderr)
    return {"latency_s": [r["latency_s"] for r in got["rows"]], "throughput_per_min": got["per_minute"],
            "wall_s": got["wall_s"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=4, help="distinct candidates in the throughput batch")
    ap.add_argument("--naive", type=int, default=2, help="candidates evaluated the naive way (serial)")
    ap.add_argument("--cold", type=int, default=2, help="single cold candidates for the latency figures")
    ap.add_argument("--workers", type=int, default=None, help="candidates in flight (default: CPU cores)")
    ap.add_argument("--out", default=None, help="write Markdown here (and .jsonl beside it)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds from the start by which the whole run must end: the batch wait is cut to fit, and "
                         "the rate of the candidates finished by then is reported (pipeline fill included, so a "
                         "lower bound on the steady rate)")
    ap.add_argument("--step-gap", type=float, default=0.0,
                    help="seconds before each single evaluation and env step, not counted (a policy generating its "
                         "next action): the spare worker's start, ~6.5 s on an H100, happens in the gap")
    ap.add_argument("--env-steps", type=int, default=5, help="cached env steps for the overhead figure")
    args = ap.parse_args()
    started = time.perf_counter()

    from kbench_env import Evaluator, resolve_task
    from kbench_env.env.env import KBenchEnv

    cuda = args.device.startswith("cuda")
    template = CUDA_TEMPLATE if cuda else CPU_TEMPLATE
    fast = FAST_CUDA if cuda else FAST_CPU
    chunks = [128, 256, 512, 1024] if cuda else [256, 512, 1024, 4096]
    task = resolve_task("level1/relu")
    work = Path(tempfile.mkdtemp(prefix="kbench-bench-"))
    timing = {"warmup": 2, "min_reps": 10, "max_reps": 50, "min_seconds": 0.05}
    ev = Evaluator(device=args.device, cache_dir=work / "cache", timing=timing, build_workers=args.workers,
                   compile_baseline=False)
    srcs = lambda k, off: [template.format(idx=off + i, chunk=chunks[i % len(chunks)]) for i in range(k)]  # noqa: E731
    print(f"kbench throughput benchmark on {args.device}: {args.n} candidates, naive on {args.naive}", flush=True)

    naive = run_naive(srcs(args.naive, 10_000), args.device, work)
    print(f"naive: latency {statistics.median(naive['latency_s']):.1f} s, "
          f"{naive['throughput_per_min']:.2f} candidates/min", flush=True)

    ev.evaluate(task, fast.format(idx=-1))  # warm the worker server and the reference timings
    phases: dict = {"cold": [], "cached": [], "fast_path": []}  # where each single evaluation's time went

    def single(kind: str, src: str, check: bool = True) -> float:
        """One evaluation after the step gap: its latency; its phases kept under ``kind``."""
        time.sleep(args.step_gap)
        t0 = time.perf_counter()
        r = ev.evaluate(task, src)
        latency = time.perf_counter() - t0
        phases[kind].append(r.phase_seconds)
        assert r.correct or not check, r.feedback()
        return latency

    cold = [single("cold", s) for s in srcs(args.cold, 20_000)]
    cached = [single("cached", s, check=False) for s in srcs(args.cold, 20_000)]
    fast_lat = [single("fast_path", fast.format(idx=30_000 + i)) for i in range(3)]
    print("phases:", json.dumps(phases), flush=True)
    print(f"ours: cold {statistics.median(cold):.1f} s, cached {statistics.median(cached):.2f} s, "
          f"fast path {statistics.median(fast_lat):.2f} s", flush=True)

    # env overhead first: a batch cut short leaves evaluations queueing for the device
    env = KBenchEnv(task="level1/relu", evaluator=ev)
    env.reset(seed=0)
    overhead, checks = [], []
    src = srcs(1, 20_000)[0]  # cached
    for _ in range(args.env_steps):
        time.sleep(args.step_gap)  # as between the single evaluations: the spare worker's start falls in the gap
        t0 = time.perf_counter()
        _, _, _, _, info = env.step(src)
        step = time.perf_counter() - t0
        e = info["eval"]
        # the GPU worker's start of CUDA and its profiler (worker_warmup) is the worker's work, like its build
        warmup = (e.get("phase_seconds") or {}).get("worker_warmup", 0.0)
        overhead.append(step - (e["build_seconds"] or 0) - warmup - (e["worker_seconds"] or 0))
        # the correctness run's reference outputs overlap the worker's run; the timed outputs' checks do not
        checks.append((e.get("phase_seconds") or {}).get("timed_output_checks", 0.0))

    batch = srcs(args.n, 40_000)
    done_at: list = []  # (seconds since the batch began, correct, check phase seconds) per finished candidate
    t0 = time.perf_counter()

    def run_batch():
        for _, r in ev.evaluate_iter([(task, s) for s in batch], max_workers=args.workers):
            done_at.append((time.perf_counter() - t0, r.correct, (r.phase_seconds or {}).get("check")))
            print(f"  {len(done_at)}/{len(batch)} at {done_at[-1][0]:.0f} s correct={r.correct}", flush=True)

    runner = threading.Thread(target=run_batch, daemon=True)
    runner.start()
    runner.join(None if args.deadline is None else max(1.0, args.deadline - (time.perf_counter() - started) - 5))
    finished = list(done_at)
    partial = len(finished) < len(batch)
    wall = time.perf_counter() - t0 if partial else finished[-1][0]
    ours_tp = 60 * len(finished) / wall
    n_ok = sum(c for _, c, _ in finished)
    if partial:
        print(f"batch: {len(finished)}/{len(batch)} finished in {wall:.0f} s; the rest are abandoned", flush=True)

    import torch

    name = torch.cuda.get_device_name() if cuda else __import__("kbench_env.machine.hardware", fromlist=["x"]).cpu_description()
    rows = {
        "device": name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
        "naive_latency_s": naive["latency_s"], "naive_throughput_per_min": naive["throughput_per_min"],
        "cold_latency_s": cold, "cached_latency_s": cached, "fast_path_latency_s": fast_lat,
        "batch": args.n, "batch_wall_s": wall, "batch_correct": n_ok, "batch_finished": len(finished),
        "batch_finish_times_s": [round(t, 2) for t, _, _ in finished],
        "batch_check_s": [c for _, _, c in finished], "phase_seconds": phases,
        "worker_warmup": os.environ.get("KBENCH_WORKER_WARMUP", "1") != "0", "step_gap_s": args.step_gap,
        "spare_worker": ev._spares is not None, "spare_served": ev._spares.served if ev._spares else 0,  # noqa: SLF001
        "gpu_audit": os.environ.get("KBENCH_GPU_AUDIT", "kernels"), "ours_throughput_per_min": ours_tp,
        "env_overhead_s": overhead, "env_overhead_timed_output_checks_s": checks, "workers": args.workers or ev.build_workers,
    }
    md = [
        f"# Throughput: naive vs kbench ({name}, {rows['date']}, {rows['cores']} cores)", "",
        f"Command: `python bench/throughput.py {' '.join(sys.argv[1:])}`", "",
        "| measure | naive | kbench |", "| --- | --- | --- |",
        f"| cold step latency p50 / p95 (s) | {pct(naive['latency_s'], .5):.1f} / {pct(naive['latency_s'], .95):.1f} "
        f"| {pct(cold, .5):.1f} / {pct(cold, .95):.1f} |",
        f"| cached step latency p50 / p95 (s) | (no cache: as cold) | {pct(cached, .5):.2f} / {pct(cached, .95):.2f} |",
        f"| fast-path step latency p50 (s) | - | {pct(fast_lat, .5):.2f} |",
        f"| throughput, {args.n} distinct candidates (per minute) | {naive['throughput_per_min']:.2f} "
        f"(serial, measured on {args.naive}) | {ours_tp:.2f} ({n_ok}/{args.n} correct, {wall:.0f} s wall"
        + (f"; {len(finished)} of {args.n} finished when the run stopped waiting, pipeline fill included" if partial
           else "") + ") |",
        f"| throughput ratio | 1x | {ours_tp / naive['throughput_per_min']:.1f}x |",
        f"| env overhead per step beyond build and run, p50 (ms) | - | {1e3 * statistics.median(overhead):.0f} |",
        f"| of which the trusted side's checks of timed outputs, p50 (ms) | - | "
        f"{1e3 * statistics.median(checks):.0f} |",
    ]
    text = "\n".join(md)
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
        with open(out.with_suffix(".jsonl"), "a") as f:
            f.write(json.dumps(rows) + "\n")
    if partial:  # abandoned evaluations still hold workers: do not wait for them
        sys.stdout.flush()
        os._exit(0)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
