"""Do other processes' CUDA contexts ending (killed, as evaluators close their workers) or starting stall this
process's driver calls, and how long does a CUDA process take to die once killed? Issue #36: a compiled reference's
graph capture of ~2,400 calls held the device alone 31.9 s in a trainer step (0.2 s alone), and the worker killed
when its timing gave way took ~7.6 s to die (rl_batch_train_kernelbench_h200_20261202e.md); meanwhile candidates'
workers were being started and closed beside it, outside any device hold.

Phases of PHASE_S seconds each, busy loops at nice 10 (the builds' niceness) throughout:
  none   nothing beside this process
  start  children that start CUDA, allocate a little and exit, FLIGHT at a time
  die    children that start CUDA, allocate ALLOC_GB of device memory (touched) and pinned host memory, loop graph
         captures, and are SIGKILLed after a second, FLIGHT at a time (a worker closed by an evaluator)
This process meanwhile allocates and frees 256 MiB and captures CAPTURE_CALLS small calls in a CUDA graph, again and
again: the medians, 99th percentiles and maxima of each, a phase. For "die": from SIGKILL to the child reaped (s).

    python bench/cuda_teardown_stall.py [busy loops, default 12]
"""
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import multiprocessing as mp

PHASE_S, FLIGHT, ALLOC_GB, PINNED_GB, CAPTURE_CALLS = 20.0, 4, 8, 2, 2000

CHILD = """import sys, torch
mode, gb, pinned = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if mode == "start":
    torch.zeros(1 << 20, device="cuda"); torch.cuda.synchronize(); sys.exit(0)
x = torch.ones(gb << 28, dtype=torch.float32, device="cuda")  # gb GiB, touched
h = torch.ones(pinned << 28, dtype=torch.float32).pin_memory()
s = torch.zeros(4096, device="cuda")
print("ready", flush=True)
while True:  # in driver calls when the kill comes, as a timing's capture is
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(500):
            s = s * 2 + 1
    g.replay(); torch.cuda.synchronize(); del g
"""


def busy():
    os.nice(10)
    while True:
        pass


def slot(mode, stop, deaths):
    """One child at a time until ``stop``: "start" ones run to their exit; "die" ones are killed a second after
    they are ready, the time from the kill to their reaping appended to ``deaths``."""
    while not stop.is_set():
        p = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(ALLOC_GB), str(PINNED_GB)],
                             stdout=subprocess.PIPE if mode == "die" else None)
        if mode == "start":
            p.wait(120)
            continue
        if not p.stdout.readline():  # (ready: its memory allocated, capturing; EOF: it died first)
            p.wait(120)
            p.stdout.close()
            continue
        time.sleep(1.0)
        a = time.perf_counter()
        p.send_signal(signal.SIGKILL)
        p.wait(120)
        deaths.append(time.perf_counter() - a)
        p.stdout.close()


def q(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))]


def main():
    import torch
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    loops = [mp.Process(target=busy, daemon=True) for _ in range(n)]
    [p.start() for p in loops]
    torch.zeros(1, device="cuda"); torch.cuda.synchronize()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {n} busy loops, {FLIGHT} children at a time",
          flush=True)
    for mode in ("none", "die", "start", "none", "die"):
        lat, deaths, stop, t0 = [], [], threading.Event(), time.time()
        slots = [threading.Thread(target=slot, args=(mode, stop, deaths), daemon=True)
                 for _ in range(FLIGHT if mode != "none" else 0)]
        [t.start() for t in slots]
        while time.time() - t0 < PHASE_S:
            a = time.perf_counter()
            x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda"); del x; torch.cuda.empty_cache()
            b = time.perf_counter()
            g, s = torch.cuda.CUDAGraph(), torch.zeros(1024, device="cuda")
            with torch.cuda.graph(g):
                for _ in range(CAPTURE_CALLS):
                    s = s * 2 + 1
            torch.cuda.synchronize(); del g; torch.cuda.empty_cache()
            lat.append((b - a, time.perf_counter() - b))
        stop.set()
        [t.join(120) for t in slots]
        m, c = [x for x, _ in lat], [y for _, y in lat]
        line = (f"{mode}: n={len(lat)} malloc256M ms median {1e3 * statistics.median(m):.1f} p99 {1e3 * q(m, .99):.1f} "
                f"max {1e3 * max(m):.1f}; capture{CAPTURE_CALLS} ms median {1e3 * statistics.median(c):.1f} "
                f"p99 {1e3 * q(c, .99):.1f} max {1e3 * max(c):.1f}")
        if deaths:
            line += (f"; kill to reaped s: {len(deaths)} median {statistics.median(deaths):.2f} "
                     f"max {max(deaths):.2f}")
        print(line, flush=True)
    [p.kill() for p in loops]


if __name__ == "__main__":
    main()
