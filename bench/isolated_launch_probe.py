"""Which stream measurement reproduces Nsight Compute's duration of a few-microsecond kernel (issue #21's last
point)? Nsight Compute times one launch alone, caches flushed before it; a graph replay of B back-to-back calls
reads ~10 % less at 5 us (bench/results/timing_fidelity_trusted_h100.md). This probe times bench/timing_fidelity.py's kernels five ways
on the same inputs (a fresh input per call, L2 flushed before each block):

- ``graph``: a CUDA graph of B calls between two events, replay time / B (what evaluations do, nothing subtracted);
- ``graph_ev``: the same graph with an event-record node before every call (events captured as external), replay
  time / B and the median of consecutive event pairs;
- ``eager_ev``: B eager launches queued behind a sleep kernel, an event before each (no host gaps on the device);
- ``isolated``: per call, an L2 flush then the call between two events, all queued behind a sleep kernel: each
  launch alone with its caches flushed, as Nsight Compute runs it; median of the pairs;
- ``graph_iso``: a graph of B x (L2 flush, event, call, event): the isolated form without host launches;

and CUPTI's kernel duration in the ``graph`` and ``isolated`` runs. With ``--ncu`` Nsight Compute runs too
(bench/timing_fidelity.py's ncu_kernel_ms), so every column comes from one GPU and one session.

    python bench/isolated_launch_probe.py --ncu --out bench/results/isolated_launch_h100.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import torch  # noqa: E402

from timing_fidelity import CASES, SRC, ncu_kernel_ms  # noqa: E402

from kbench_env.fastpath import cuda_kernel  # noqa: E402

FLUSH = None


def flush() -> None:
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(64 << 20, dtype=torch.float32, device="cuda")
    FLUSH.zero_()


def ev(external: bool = False):
    return torch.cuda.Event(enable_timing=True, external=external)


def sleep_ms(ms: float) -> None:
    """Queue a spin of about ``ms`` so the host can queue the calls behind it without gaps on the device."""
    torch.cuda._sleep(int(ms * 1.98e6))  # cycles at up to ~1.98 GHz: at least ``ms``


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--ncu", action="store_true")
    args = ap.parse_args()
    from torch.profiler import ProfilerActivity, profile

    kern = cuda_kernel(SRC, "scale_add")
    flush()  # the flush buffer exists before any capture (not in a graph's pool)
    name = torch.cuda.get_device_name()
    rows = []
    for label, n, iters in CASES:
        grid = ((n + 255) // 256,)

        def call(x, y, n=n, iters=iters, grid=grid):
            kern(grid, (256,), x, y, n, iters)

        x0 = torch.randn(n, device="cuda")
        y0 = torch.empty_like(x0)
        t0, e0, e1 = time.perf_counter(), ev(), ev()
        for _ in range(3):
            call(x0, y0)
        e0.record()
        call(x0, y0)
        e1.record()
        torch.cuda.synchronize()
        est = e0.elapsed_time(e1)
        B = int(max(1, min(256, 2.0 / max(est, 1e-4))))
        xs = [torch.randn(n, device="cuda") for _ in range(B)]
        ys = [torch.empty_like(x0) for _ in range(B)]
        row = {"case": label, "n": n, "iters": iters, "block": B, "gpu": name}

        # graph, and graph with event nodes before every call
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for b in range(B):
                call(xs[b], ys[b])
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for b in range(B):
                call(xs[b], ys[b])
        gev = torch.cuda.CUDAGraph()
        marks = [ev(external=True) for _ in range(B + 1)]
        with torch.cuda.graph(gev):
            for b in range(B):
                marks[b].record()
                call(xs[b], ys[b])
            marks[B].record()
        giso = torch.cuda.CUDAGraph()
        pairs = [(ev(external=True), ev(external=True)) for _ in range(B)]
        with torch.cuda.graph(giso):
            for b in range(B):
                FLUSH.zero_()
                pairs[b][0].record()
                call(xs[b], ys[b])
                pairs[b][1].record()
        torch.cuda.synchronize()

        def median_blocks(fn):
            vals = [fn() for _ in range(args.blocks)]
            return statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)

        def run_graph():
            flush()
            a, z = ev(), ev()
            a.record()
            g.replay()
            z.record()
            torch.cuda.synchronize()
            return a.elapsed_time(z) / B, 0.0

        def run_graph_ev():
            flush()
            gev.replay()
            torch.cuda.synchronize()
            d = [marks[b].elapsed_time(marks[b + 1]) for b in range(B)]
            return marks[0].elapsed_time(marks[B]) / B, statistics.median(d)

        def run_eager_ev():
            flush()
            es = [ev() for _ in range(B + 1)]
            sleep_ms(3.0 + 0.05 * B)
            for b in range(B):
                es[b].record()
                call(xs[b], ys[b])
            es[B].record()
            torch.cuda.synchronize()
            d = [es[b].elapsed_time(es[b + 1]) for b in range(B)]
            return es[0].elapsed_time(es[B]) / B, statistics.median(d)

        def run_isolated():
            ps = [(ev(), ev()) for _ in range(B)]
            sleep_ms(3.0 + 0.08 * B)
            for b in range(B):
                flush()
                ps[b][0].record()
                call(xs[b], ys[b])
                ps[b][1].record()
            torch.cuda.synchronize()
            d = [a.elapsed_time(z) for a, z in ps]
            return statistics.median(d), min(d)

        def run_graph_iso():
            giso.replay()
            torch.cuda.synchronize()
            d = [a.elapsed_time(z) for a, z in pairs]
            return statistics.median(d), min(d)

        for key, fn in [("graph", run_graph), ("graph_ev", run_graph_ev), ("eager_ev", run_eager_ev),
                        ("isolated", run_isolated), ("graph_iso", run_graph_iso)]:
            try:
                fn()
                row[key] = median_blocks(fn)
            except Exception as exc:  # noqa: BLE001 - a method the runtime refuses is a finding, not a crash
                row[key] = f"{type(exc).__name__}: {exc}"[:200]
        for key, fn in [("cupti_graph", run_graph), ("cupti_isolated", run_isolated)]:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
            durs = [e.device_time for e in prof.events() if "scale_add" in e.name]
            row[key] = statistics.median(durs) / 1e3 if durs else None
        print(json.dumps(row), flush=True)
        rows.append(row)
        del g, gev, giso, xs, ys
        torch.cuda.empty_cache()
    if args.ncu:
        ncu = ncu_kernel_ms()
        for r, v in zip(rows, ncu or [None] * len(rows)):
            r["ncu_ms"] = v
        print("ncu", ncu, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            for r in rows:
                f.write(json.dumps({**r, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}) + "\n")
    print("| case | B | ncu | graph | graph_ev total / pair | eager_ev total / pair | isolated med / min | "
          "graph_iso med / min | CUPTI graph | CUPTI isolated |")
    fm = lambda v: "-" if v is None else (f"{v * 1e3:.2f}" if isinstance(v, float) else str(v)[:40])  # noqa: E731
    fp = lambda v: " / ".join(fm(t) for t in v) if isinstance(v, tuple) else fm(v)  # noqa: E731
    for r in rows:
        print(f"| {r['case']} | {r['block']} | {fm(r.get('ncu_ms'))} | {fm(r['graph'][0]) if isinstance(r['graph'], tuple) else r['graph']} | "
              f"{fp(r['graph_ev'])} | {fp(r['eager_ev'])} | {fp(r['isolated'])} | {fp(r['graph_iso'])} | "
              f"{fm(r['cupti_graph'])} | {fm(r['cupti_isolated'])} |")


if __name__ == "__main__":
    main()
