"""Timing fidelity of the GPU timing as evaluations now run it (issue #21): the trusted side drives blocks in a
separate worker process through CUDA IPC (pipeline/gpu_blocks.py, worker/gpu_executor.py), and its per-call figure
is compared with Nsight Compute's kernel duration (bench/timing_fidelity.py's kernels, cases and ncu run), from a
few microseconds to ~10 ms, and with the kernel's own CUPTI duration in the same kind of runs (one more timing per
case, with the PyTorch profiler on in the worker): that column separates the method's error from the two profilers' disagreement on short kernels. The
worker here is a plain process running the real executor handlers on a fast-path
kernel (no sandbox: the sandbox does not change the device's timing).

    python bench/timing_fidelity_trusted.py --out bench/results/timing_fidelity_trusted_h100.md   (on a GPU)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import torch  # noqa: E402

from timing_fidelity import CASES, SRC, ncu_kernel_ms  # noqa: E402

from kbench_env.pipeline.gpu_blocks import time_gpu  # noqa: E402
from kbench_env.protocol import messages as msg  # noqa: E402
from kbench_env.protocol.wire import pack, unpack  # noqa: E402


def worker(conn) -> None:
    from torch.profiler import ProfilerActivity, profile

    from kbench_env.backends.cuda import CudaBackend
    from kbench_env.fastpath import cuda_kernel
    from kbench_env.worker import executor, gpu_executor, loop

    kern = cuda_kernel(SRC, "scale_add")
    backend = CudaBackend()
    # The worker's own session (worker/loop.py), so the handlers find every field they keep state in.
    s = loop._Session(conn, {"device": "cuda"}, backend, types.ModuleType("candidate"), set(), None)  # noqa: SLF001
    send = lambda h, p=None: conn.send_bytes(pack(h, p))  # noqa: E731
    send({"type": "hello", "gap_ms": backend.graph_gap_ms("cuda")})
    handlers = {**gpu_executor.HANDLERS, msg.RELEASE: executor._release}  # noqa: SLF001
    while True:
        header, payload = unpack(conn.recv_bytes())
        if header["type"] == "stop":
            return
        if header["type"] == "profile_on":
            prof = profile(activities=[ProfilerActivity.CUDA])
            prof.__enter__()
            send({"type": "ok"})
            continue
        if header["type"] == "profile_off":
            torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            durs = [e.device_time for e in prof.events() if "scale_add" in e.name]  # microseconds
            send({"type": "ok", "cupti_ms": statistics.median(durs) / 1e3 if durs else None, "kernels": len(durs)})
            continue
        if header["type"] == "setup":
            n, iters = header["n"], header["iters"]

            def model(x, n=n, iters=iters):
                y = torch.empty_like(x)
                kern(((n + 255) // 256,), (256,), x, y, n, iters)
                return y

            s.models[header["config"]] = model
            s.originals[header["config"]] = [torch.randn(n, device="cuda")]
            send({"type": "ok"})
            continue
        handlers[header["type"]](s, header, payload, torch.no_grad(), send)


class Shim:
    """The trusted side's view of the worker (what sandbox.Worker offers time_gpu)."""

    def __init__(self, conn):
        self.conn = conn

    def send(self, header, payload=None):
        self.conn.send_bytes(pack(header, payload))

    def recv(self, timeout, what):
        if not self.conn.poll(timeout):
            raise TimeoutError(what)
        return unpack(self.conn.recv_bytes())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/timing_fidelity_trusted.md")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-ncu", action="store_true")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=worker, args=(b,))
    p.start()
    shim = Shim(a)
    gap = shim.recv(300, "hello")[0]["gap_ms"]
    params = {}
    torch.cuda.init()
    rows = []
    for k, (label, n, iters) in enumerate(CASES):
        shim.send({"type": "setup", "config": f"c{k}", "n": n, "iters": iters})
        shim.recv(60, "setup")
        x = torch.randn(n, device="cuda")
        ts, blocks = [], []
        for _ in range(args.repeats):
            g = time_gpu(shim, f"c{k}", [x], 0.01, params, 120, "cuda")
            ts.append(g.timing.median_ms)
            blocks.append(g.block)
        shim.send({"type": "profile_on"})
        shim.recv(60, "profile_on")
        time_gpu(shim, f"c{k}", [x], 0.01, params, 120, "cuda")
        shim.send({"type": "profile_off"})
        prof = shim.recv(120, "profile_off")[0]
        rows.append({"case": label, "kbench_ms": statistics.median(ts), "repeats_ms": ts, "block": blocks[0],
                     "cupti_ms": prof["cupti_ms"], "cupti_kernels": prof["kernels"]})
        print(rows[-1], flush=True)
    shim.send({"type": "stop"})
    p.join()
    ncu = None if args.no_ncu else ncu_kernel_ms()
    lines = [f"# GPU timing fidelity through the trusted path ({torch.cuda.get_device_name()}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
             "`python bench/timing_fidelity_trusted.py`: per-call median of `gpu_blocks.time_gpu` (median of "
             f"{args.repeats} timings) against Nsight Compute's `gpu__time_duration` (--cache-control all, median of "
             "5 launches) and against CUPTI's duration of the same kernel in one more timing of the same blocks "
             "(profiler on in the worker). The replay's whole time over its calls, nothing subtracted (the "
             f"calibrated idle gap between graph nodes of tiny kernels, for reference: {gap * 1e3:.2f} us).", "",
             "| case | block | kbench ms | CUPTI ms | ncu ms | kbench / CUPTI | kbench / ncu | CUPTI / ncu | repeats (ms) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r, nc in zip(rows, ncu or [None] * len(rows)):
        r["ncu_ms"] = nc
        cu = r["cupti_ms"]
        f5 = lambda v: "-" if v is None else f"{v:.5f}"  # noqa: E731
        ratio = lambda a, b: f"{a / b:.3f}" if a and b else "-"  # noqa: E731
        lines.append(f"| {r['case']} | {r['block']} | {r['kbench_ms']:.5f} | {f5(cu)} | {f5(nc)} | "
                     f"{ratio(r['kbench_ms'], cu)} | {ratio(r['kbench_ms'], nc)} | {ratio(cu, nc)} | "
                     f"{', '.join(f'{t:.5f}' for t in r['repeats_ms'])} |")
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    Path(args.out).with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
