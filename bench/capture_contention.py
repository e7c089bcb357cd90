"""Is a timed block's graph capture slow under a busy trainer step because each captured call's output is a new
cudaMalloc of the graph's fresh private pool, and other processes' driver work stalls cudaMalloc? And does a pool
reserved before the capture (one cudaMalloc, the capture's outputs carved from it) take that away? Issue #36: a
compiled reference's capture of 2,461 calls took 31.5 s in a trainer step (12.8 ms a call) and 0.20 s alone
(compiled_capture_h200_20261202.md); other processes' CUDA contexts ending raise a 256 MiB cudaMalloc's p99 to
11-14 ms (cuda_teardown_stall_h200_20261202.md).

For each background load (FLIGHT children, ROUNDS captures a variant):
  none      nothing beside this process
  malloc    children allocating and freeing 1 GiB of device memory in a loop (cudaMalloc/cudaFree)
  pinned    children allocating and freeing 1 GiB of pinned host memory in a loop (cudaHostAlloc/cudaFreeHost)
  die       children that start CUDA, take 8 GiB of device memory and are killed a second later (workers closed)
  cupti     children that start CUDA and loop the workers' audit: kineto (CUPTI) started, a few kernels, stopped
  cuptinew  children that start CUDA, run one such audit and exit (fresh workers' first audit, CUPTI's set-up)
the capture of CALLS calls of ``x * 2`` (OUT_MB of output each, every output kept: a timed block's shape), in
  plain     torch.cuda.graph's own fresh pool, as kbench captures now (a cudaMalloc an output)
  reserved  the graph's pool (graph_pool_handle) grown first by a capture of its own that allocates the block's
            outputs' size and frees it (one cudaMalloc), the block's capture then carving its outputs from it
  mempool   the same with a torch.cuda.MemPool grown under use_mem_pool, its id given as the graph's pool
is timed, and its calls one by one: wall seconds (median, max), calls that took 1 ms or more, the slowest call; and
a thread samples the capturing thread's kernel wait channel every millisecond: the share of samples in the NVIDIA
driver's lock (``os_acquire_rwlock_*``: where a given-way timing's worker was found waiting,
rl_batch_train_kernelbench_h200_20261202f.md) and the longest run of such samples.

    python bench/capture_contention.py            # x * 2, eager: one kernel and one output a call
    FN=compiled python bench/capture_contention.py   # torch.compile'd gelu, as compile_later's reference
    PHASES=none,die ROUNDS=2 python bench/capture_contention.py   # fewer phases and rounds
    PHASES=none,cupti,cuptinew VARIANTS=plain python bench/capture_contention.py   # the audit's CUPTI beside
"""
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

FLIGHT, CALLS, OUT_MB = 4, 2400, 4
ROUNDS = int(os.environ.get("ROUNDS", "3"))
PHASES = os.environ.get("PHASES", "none,malloc,pinned,die,none").split(",")
VARIANTS = os.environ.get("VARIANTS", "plain,reserved,mempool").split(",")

CHILD = """import sys, time, torch
mode = sys.argv[1]
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
if mode == "die":
    x = torch.ones(2 << 30, dtype=torch.float32, device="cuda"); torch.cuda.synchronize()
    print("ready", flush=True); time.sleep(3600)
if mode in ("cupti", "cuptinew"):
    y = torch.ones(1 << 20, device="cuda")
    print("ready", flush=True)
    while True:
        with torch.autograd.profiler.profile(use_kineto=True, use_device="cuda") as prof:
            for _ in range(20):
                y = y * 1.0001
            torch.cuda.synchronize()
        prof.key_averages()
        if mode == "cuptinew":
            sys.exit(0)
print("ready", flush=True)
while True:
    if mode == "malloc":
        x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); del x; torch.cuda.empty_cache()
    else:
        x = torch.empty(1 << 30, dtype=torch.uint8, pin_memory=True); del x
"""


def slot(mode, stop):
    """One child at a time until ``stop``: "die" ones killed a second after they are ready, others run on."""
    while not stop.is_set():
        p = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE)
        try:
            if p.stdout.readline() and mode != "cuptinew":  # (EOF: it died first; cuptinew ends by itself)
                stop.wait(1.0 if mode == "die" else 3600)
            elif mode == "cuptinew":
                p.wait(120)
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait(120)
            p.stdout.close()


class WchanWatch:
    """Samples a thread's kernel wait channel every millisecond while entered: how many samples, how many in the
    NVIDIA driver's lock (``os_acquire_rwlock*``), the longest run of those in a row (ms), and the commonest waits."""

    def __init__(self, tid: int):
        self.path = f"/proc/self/task/{tid}/wchan"
        self.samples, self.in_lock, self.longest, self.waits = 0, 0, 0, {}

    def __enter__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        return False

    def _run(self):
        run = 0
        while not self._stop.wait(0.001):
            try:
                with open(self.path) as f:
                    w = f.read().strip() or "0"
            except OSError:
                return
            self.samples += 1
            self.waits[w] = self.waits.get(w, 0) + 1
            if w.startswith("os_acquire_rwlock"):
                self.in_lock += 1
                run += 1
                self.longest = max(self.longest, run)
            else:
                run = 0

    def summary(self) -> str:
        common = sorted(self.waits.items(), key=lambda kv: -kv[1])[:3]
        return (f"wchan samples {self.samples}, in the driver's lock {self.in_lock} (longest run {self.longest} ms); "
                f"commonest {common}")


FNS = {}


def fn(torch):
    """The captured call: ``x * 2`` eagerly, or (FN=compiled) torch.compile'd tanh-gelu scaled so that an input of
    ones still gives 2 (checked after the replay)."""
    if "f" not in FNS:
        if os.environ.get("FN") == "compiled":
            scale = 2.0 / float(torch.nn.functional.gelu(torch.ones(1), approximate="tanh"))
            FNS["f"] = torch.compile(lambda x: torch.nn.functional.gelu(x, approximate="tanh") * scale)
        else:
            FNS["f"] = lambda x: x * 2
    return FNS["f"]


def capture(torch, variant: str):
    f = fn(torch)
    x = torch.ones(OUT_MB << 18, device="cuda")  # OUT_MB MiB of float32
    for _ in range(2):
        f(x)
    torch.cuda.synchronize()
    pool, g0, kw = None, None, {}
    t0 = time.perf_counter()
    if variant == "mempool":  # (torch.cuda.MemPool's id as the graph's pool: not in graph()'s documentation)
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            r = torch.empty(CALLS * (OUT_MB << 20), dtype=torch.uint8, device="cuda")
            del r
        kw = {"pool": pool.id}
    elif variant == "reserved":  # the pool grown by a capture of its own that allocates and frees the block's size
        pool, g0 = torch.cuda.graph_pool_handle(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(g0, pool=pool):
            r = torch.empty(CALLS * (OUT_MB << 20), dtype=torch.uint8, device="cuda")
            del r
        kw = {"pool": pool}
    t1 = time.perf_counter()
    g, outs, calls = torch.cuda.CUDAGraph(), [], []
    with torch.cuda.graph(g, **kw):
        for _ in range(CALLS):
            a = time.perf_counter()
            outs.append(f(x))
            calls.append(time.perf_counter() - a)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    g.replay(); torch.cuda.synchronize()
    ok = bool(torch.allclose(outs[-1], torch.full_like(outs[-1], 2.0), rtol=1e-3))
    del g, g0, outs
    pool = None
    torch.cuda.synchronize(); torch.cuda.empty_cache()
    return t1 - t0, t2 - t1, calls, ok


def main():
    import torch
    torch.zeros(1, device="cuda"); torch.cuda.synchronize()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {CALLS} calls of {OUT_MB} MiB outputs "
          f"({os.environ.get('FN') or 'eager'}), "
          f"{FLIGHT} children at a time", flush=True)
    for mode in PHASES:
        stop = threading.Event()
        slots = [threading.Thread(target=slot, args=(mode, stop), daemon=True)
                 for _ in range(FLIGHT if mode != "none" else 0)]
        [t.start() for t in slots]
        time.sleep(3 if mode != "none" else 0)
        for variant in VARIANTS:
            walls, slow, worst, reserve, oks = [], 0, 0.0, [], True
            watch = WchanWatch(threading.get_native_id())
            for _ in range(ROUNDS):
                try:
                    with watch:
                        r, w, calls, ok = capture(torch, variant)
                except Exception as exc:  # noqa: BLE001 - a variant this torch refuses: said, and the rest go on
                    print(f"{mode:6s} {variant:8s}: {type(exc).__name__}: {exc}"[:300], flush=True)
                    torch.cuda.synchronize(); torch.cuda.empty_cache()
                    break
                walls.append(w); reserve.append(r); oks &= ok
                slow += sum(c >= 1e-3 for c in calls); worst = max(worst, max(calls))
            if not walls:
                continue
            print(f"{mode:6s} {variant:8s}: capture s median {statistics.median(walls):.3f} max {max(walls):.3f}; "
                  f"calls >= 1 ms {slow} of {ROUNDS * CALLS}, slowest {1e3 * worst:.1f} ms; "
                  f"reserve s median {statistics.median(reserve):.3f}; replayed right {oks}; {watch.summary()}",
                  flush=True)
        stop.set()
        [t.join(120) for t in slots]


if __name__ == "__main__":
    main()
