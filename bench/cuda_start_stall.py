"""Does a process starting CUDA at SCHED_IDLE, starved by busy cores, stall another process's driver calls
(cudaMalloc/cudaFree, a graph capture): a priority inversion? Phases of 25 s: spares started every 2 s at SCHED_IDLE,
then at nice 19 (SCHED_OTHER), then none; busy loops at nice 10 (the builds' niceness) throughout. Issue #36: whether
spares started at SCHED_IDLE while the builds take the cores hold up the timing's driver calls. On a GPU:

    python bench/cuda_start_stall.py [busy loops, default 20]
"""
import multiprocessing as mp, os, sys, time, statistics, subprocess

SPARE = ("import os,sys,time;m=sys.argv[1]\n"
         "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)) if m=='idle' else os.nice(19)\n"
         "import torch;t=time.time();torch.zeros(1,device='cuda');torch.cuda.synchronize();"
         "print('spare',m,round(time.time()-t,2),flush=True)")

def busy():
    os.nice(10)
    while True:
        pass

def main():
    import torch
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    loops = [mp.Process(target=busy, daemon=True) for _ in range(n)]
    [p.start() for p in loops]
    torch.zeros(1, device="cuda"); torch.cuda.synchronize()
    f = lambda x: x * 2 + 1
    for mode in ("none", "idle", "nice19", "idle", "nice19", "none"):
        lat, spares, t0 = [], [], time.time()
        while time.time() - t0 < 25:
            if mode != "none" and len(spares) < int((time.time() - t0) / 2.0) + 1:
                spares.append(subprocess.Popen([sys.executable, "-c", SPARE, mode]))
            a = time.perf_counter()
            x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda"); del x; torch.cuda.empty_cache()
            b = time.perf_counter()
            g = torch.cuda.CUDAGraph(); s = torch.zeros(1024, device="cuda")
            with torch.cuda.graph(g):
                for _ in range(50):
                    s = f(s)
            torch.cuda.synchronize(); del g; torch.cuda.empty_cache()
            c = time.perf_counter()
            lat.append((b - a, c - b))
            time.sleep(0.01)
        end = time.time() + 20
        for p in spares:
            try:
                p.wait(timeout=max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                p.kill(); p.wait(5)
        m = sorted(x for x, _ in lat); g_ = sorted(y for _, y in lat)
        print(f"{mode}: n={len(lat)} malloc ms median {1e3*statistics.median(m):.2f} p99 {1e3*m[int(.99*len(m))]:.1f} "
              f"max {1e3*m[-1]:.1f}; capture50 ms median {1e3*statistics.median(g_):.2f} p99 "
              f"{1e3*g_[int(.99*len(g_))]:.1f} max {1e3*g_[-1]:.1f}; spares {len(spares)}", flush=True)
    [p.kill() for p in loops]

if __name__ == "__main__":
    main()
