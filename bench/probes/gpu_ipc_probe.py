"""Probe: CUDA inter-process memory (protocol/cuda_ipc.py) between two plain processes, with no sandbox: the child
exports a tensor and a CUDA graph's output, the parent writes one and reads the other, and times the exchange.

    PYTHONPATH=. python bench/probes/gpu_ipc_probe.py      (on a GPU, from the repository root)
"""

from __future__ import annotations

import multiprocessing as mp
import time

import torch

from kbench_env.protocol.cuda_ipc import Exporter, Mappings


def child(conn) -> None:
    x = torch.zeros(1000, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = x * 2 + 1
    torch.cuda.synchronize()
    ex = Exporter()
    conn.send({"x": ex.locate(x), "y": ex.locate(y), "handles": ex.handles})
    for _ in range(200):
        msg = conn.recv()
        if msg == "stop":
            break
        g.replay()
        torch.cuda.synchronize()
        conn.send("done")


def main() -> None:
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=child, args=(b,))
    p.start()
    info = a.recv()
    torch.cuda.init()
    maps = Mappings("cuda")
    xh, xo = info["x"]
    yh, yo = info["y"]
    xv = maps.bytes_at(info["handles"][xh], xo, 4000).view(torch.float32)
    yv = maps.bytes_at(info["handles"][yh], yo, 4000).view(torch.float32)
    times = []
    for k in range(100):
        src = torch.full((1000,), float(k), device="cuda")
        t0 = time.perf_counter()
        xv.copy_(src)
        torch.cuda.synchronize()
        a.send("go")
        a.recv()
        times.append((time.perf_counter() - t0) * 1e6)
        assert torch.equal(yv, src * 2 + 1), (k, yv[:4])
    a.send("stop")
    p.join()
    del xv, yv
    maps.close()
    times.sort()
    print(f"ipc probe ok: 100 round trips, write + replay + read correct; round trip median {times[50]:.0f} us, "
          f"p90 {times[90]:.0f} us")


if __name__ == "__main__":
    main()
