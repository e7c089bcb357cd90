"""Probe (issue #36): whether a process waiting for its GPU work burns a core while it waits (CUDA's default
schedule spins when a process has fewer contexts than the host has cores), and what a blocking wait costs.

A steady KernelBench-format step on the 16-core H200 host is bound by its builds' CPU, and every candidate's worker
waits on the device through its checks and timing (a few seconds each, four checks and a timing at once): if each
wait spins, those seconds are taken from the compilers. Each mode runs in a process of its own (the schedule is a
context's setting, fixed when the context starts):

- ``spin``: torch as it comes (the default schedule), waits by ``torch.cuda.synchronize()``;
- ``event``: waits on an event made with ``blocking=True`` (cudaEventBlockingSync), the context as it comes;
- ``blocking``: the primary context's flags set to CU_CTX_SCHED_BLOCKING_SYNC through the driver before torch
  starts CUDA, then ``torch.cuda.synchronize()``;
- ``switched``: torch's context as it comes, switched while it runs (``cuCtxSetFlags``, as
  ``kbench_env/worker/cuda_wait.py`` does) to CU_CTX_SCHED_BLOCKING_SYNC for the measured waits, then back to the
  schedule it started with for as many more (``cpu_s_back``): whether a worker can sleep in its checks and spin
  in its timings.

Per mode: the process's CPU-seconds over ``--waits`` waits of ``--ms`` milliseconds of device work each (a kernel
that sleeps on the device: ``torch.cuda._sleep``), the wall, and the device time of a block of small kernels as CUDA
events measure it (median of ``--blocks``), which a blocking wait must not change.

    python bench/probes/sync_spin.py --out bench/results/sync_spin_h200.jsonl
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import time

MODES = ("spin", "event", "blocking", "switched")


def _set_blocking_sync() -> str:
    cuda, dev = ctypes.CDLL("libcuda.so.1"), ctypes.c_int()
    set_flags = getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None) or cuda.cuDevicePrimaryCtxSetFlags
    for name, call in (("cuInit", lambda: cuda.cuInit(0)),
                       ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(dev), 0)),
                       ("cuDevicePrimaryCtxSetFlags", lambda: set_flags(dev, 0x04))):  # CU_CTX_SCHED_BLOCKING_SYNC
        rc = call()
        if rc != 0:
            return f"{name} returned {rc}"
    return "ok"


def one(mode: str, waits: int, ms: float, blocks: int) -> dict:
    note = _set_blocking_sync() if mode == "blocking" else None
    import torch

    torch.cuda.init()
    x = torch.zeros(1 << 20, device="cuda")
    # cycles for ``ms`` of device sleep, from the clock rate torch reports (kHz)
    rate = getattr(torch.cuda.get_device_properties(0), "clock_rate", 1_980_000)
    cycles = int(ms * rate)

    def wait() -> None:
        if mode == "event":
            ev = torch.cuda.Event(blocking=True)
            ev.record()
            ev.synchronize()
        else:
            torch.cuda.synchronize()

    torch.cuda._sleep(cycles)
    wait()
    def measured() -> tuple[float, float]:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(waits):
            torch.cuda._sleep(cycles)
            wait()
        return time.process_time() - cpu0, time.perf_counter() - wall0

    back = None
    if mode == "switched":
        cuda, held = ctypes.CDLL("libcuda.so.1"), ctypes.c_uint(0)
        note = f"get: {cuda.cuCtxGetFlags(ctypes.byref(held))}, started with {held.value:#x}"
        note += f"; to blocking: {cuda.cuCtxSetFlags((held.value & ~0x07) | 0x04)}"  # CU_CTX_SCHED_BLOCKING_SYNC
        cpu, wall = measured()
        note += f"; back: {cuda.cuCtxSetFlags(held.value)}"
        back = round(measured()[0], 3)
    else:
        cpu, wall = measured()
    times = []
    for _ in range(blocks):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(100):
            x.add_(1.0)
        b.record()
        wait()
        times.append(a.elapsed_time(b))
    return {"mode": mode, "note": note, "waits": waits, "ms": ms, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "cpu_share_of_wall": round(cpu / wall, 3), "cpu_s_back": back,
            "block_ms_median": round(statistics.median(times), 4),
            "block_ms_min": round(min(times), 4), "block_ms_max": round(max(times), 4),
            "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=MODES, default=None, help="(internal) one mode in this process")
    ap.add_argument("--waits", type=int, default=40)
    ap.add_argument("--ms", type=float, default=50.0)
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2, help="each mode this many times, in turn")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.mode:
        print(json.dumps(one(a.mode, a.waits, a.ms, a.blocks)), flush=True)
        return 0
    for r in range(a.rounds):
        for mode in MODES:
            cmd = [sys.executable, __file__, "--mode", mode, "--waits", str(a.waits), "--ms", str(a.ms),
                   "--blocks", str(a.blocks)]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else json.dumps(
                {"mode": mode, "error": p.stderr[-600:]})
            row = {**json.loads(line), "round": r + 1}
            print(json.dumps(row), flush=True)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
