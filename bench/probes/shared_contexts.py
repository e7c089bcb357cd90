"""How much slower is a candidate's shared device work (a check's small synchronised launches, a timed block's
set-up: inputs filled, a graph captured and replayed) when K processes do it at once on one GPU, and does MPS take
that away? Issue #36: in a fast-format trainer step the set-ups ahead (phase ``timing_prepare``, under the shared
hold, up to 4 processes at once) took 0.57 s a candidate at the median in step 1 and 2.99 s in step 2, the first
candidate of step 2 7.4 s with no timing to step aside for (rl_batch_train_fast_h200_20261202.jsonl). Separate
processes on one GPU time-slice between their contexts; under MPS their work shares the device at once.

Each child (a process of its own, as a worker is) does ROUNDS rounds of:
  fill     BLOCK inputs of 1 MiB each, filled with normal noise (a timed block's inputs)
  capture  a CUDA graph of CALLS calls of ``x * 2`` over them, then one replay, synchronised (the block set up)
  sync     SYNCS launches of a small kernel, each followed by a synchronisation (a check's forward and reads)
and reports each step's seconds (median of its rounds). K children start together (after all of them have CUDA
up), for K in KS; then, where ``nvidia-cuda-mps-control`` is on the PATH and a daemon starts, the same under MPS
(the parent never touches CUDA, so it is no client). Printed: per K and mode, each step's median over the children
and the slowest child, and the round's wall time (all children's rounds done).

Then (FAULTS, default "address,assert"; FAULTS= for none), plain and under MPS, what one candidate's fatal GPU
error does to the others: BYSTANDERS processes loop synchronised launches for BYSTAND_S seconds while one more
process makes the error (address: a kernel writing far outside any allocation, by cupy if importable; assert: an
out-of-range index, torch's device-side assert), then a new process starts CUDA. Printed per mode and fault: the
faulting process's error, each bystander's launches done and its error (None: unharmed), and whether the new
process got CUDA and how long it took. NVIDIA's MPS documentation says a fatal exception reaches every client of
the GPU and that the server takes no new client until they have all left: this measures it on the lent card.

    python bench/probes/shared_contexts.py            # KS=1,2,4,8 ROUNDS=5, then the faults
    KS=1,4 MPS=0 python bench/probes/shared_contexts.py   # without trying MPS
    KS= FAULTS=address python bench/probes/shared_contexts.py   # the illegal address alone
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

KS = [int(k) for k in os.environ.get("KS", "1,2,4,8").split(",") if k]
FAULTS = [f for f in os.environ.get("FAULTS", "address,assert").split(",") if f]
BYSTANDERS = int(os.environ.get("BYSTANDERS", "3"))
BYSTAND_S = float(os.environ.get("BYSTAND_S", "6"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
BLOCK, CALLS, SYNCS = 64, 2000, 500
DEADLINE_S = 240

CHILD = r"""
import json, statistics, sys, time, torch
rounds, block, calls, syncs = (int(a) for a in sys.argv[1:5])
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()  # go
steps = {"fill": [], "capture": [], "sync": []}
small = torch.ones(1024, device="cuda")
for _ in range(rounds):
    t0 = time.perf_counter()
    xs = [torch.empty(1 << 18, device="cuda") for _ in range(block)]
    for x in xs:
        x.normal_()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    g, outs = torch.cuda.CUDAGraph(), []
    with torch.cuda.graph(g):
        for i in range(calls):
            outs.append(xs[i % block] * 2)
    g.replay(); torch.cuda.synchronize()
    t2 = time.perf_counter()
    for _ in range(syncs):
        small = small * 1.0001
        torch.cuda.synchronize()
    t3 = time.perf_counter()
    steps["fill"].append(t1 - t0); steps["capture"].append(t2 - t1); steps["sync"].append(t3 - t2)
    del g, outs, xs
    torch.cuda.empty_cache()
print(json.dumps({k: statistics.median(v) for k, v in steps.items()}), flush=True)
"""


BYSTANDER = r"""
import json, sys, time, torch
seconds = float(sys.argv[1])
small = torch.ones(1024, device="cuda"); torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()  # go
n, error, end = 0, None, time.monotonic() + seconds
try:
    while time.monotonic() < end:
        small = small * 1.0001
        torch.cuda.synchronize()
        n += 1
except Exception as exc:  # the error another client's fault brought here, if any
    error = f"{type(exc).__name__}: {exc}"[:200]
print(json.dumps({"launches": n, "error": error}), flush=True)
"""

FAULTING = r"""
import sys, time, torch
kind = sys.argv[1]
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()  # go
time.sleep(1.0)  # the bystanders under way
try:
    if kind == "address":
        import cupy as cp  # (the lent image has it; without it the line says ModuleNotFoundError, no fault made)
        bad = cp.RawKernel(r'extern "C" __global__ void bad(float* p) { p[(1ull << 38) + threadIdx.x] = 1.0f; }',
                           "bad")
        a = cp.zeros(1, dtype=cp.float32)
        bad((1,), (32,), (a,))
        cp.cuda.runtime.deviceSynchronize()
    else:
        z = torch.zeros(3, device="cuda")
        z[torch.tensor([5], device="cuda")] += 1
        torch.cuda.synchronize()
    print("no error", flush=True)
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}"[:200].replace("\n", " "), flush=True)
"""

NEW_CLIENT = "import torch, time; t = time.perf_counter(); torch.zeros(1, device='cuda'); torch.cuda.synchronize(); " \
             "print(round(time.perf_counter() - t, 2))"


def run_fault(kind: str, env: dict) -> dict:
    """One faulting process beside BYSTANDERS looping ones, then a new process: what each got."""
    procs = [subprocess.Popen([sys.executable, "-c", BYSTANDER, str(BYSTAND_S)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
             for _ in range(BYSTANDERS)]
    procs.append(subprocess.Popen([sys.executable, "-c", FAULTING, kind], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env))
    out = {"fault": kind}
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a child did not start CUDA")
        for p in procs:
            p.stdin.write("go\n"); p.stdin.flush()
        texts = [p.communicate(timeout=DEADLINE_S)[0].strip().splitlines() for p in procs]
        out["faulting"] = (texts[-1] or ["(nothing)"])[-1]
        out["bystanders"] = [json.loads(t[-1]) if t else {"launches": None, "error": "no report (died)"}
                             for t in texts[:-1]]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", NEW_CLIENT], env=env, capture_output=True, text=True, timeout=60)
        out["new_client"] = {"ok": r.returncode == 0, "s": round(time.perf_counter() - t0, 2),
                             "said": (r.stdout.strip() or r.stderr.strip().splitlines()[-1:] or [""])[-1][:160]
                             if r.returncode else r.stdout.strip()}
    except subprocess.TimeoutExpired:
        out["new_client"] = {"ok": False, "s": 60.0, "said": "no CUDA within 60 s"}
    return out


def faults(mode: str, env: dict) -> None:
    for kind in FAULTS:
        try:
            print(f"fault {mode:5}", json.dumps(run_fault(kind, env)), flush=True)
        except Exception as exc:  # noqa: BLE001 - said, and the rest go on
            print(f"fault {mode:5} {kind}: {type(exc).__name__}: {exc}"[:300], flush=True)


def run_k(k: int, env: dict) -> dict:
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(ROUNDS), str(BLOCK), str(CALLS), str(SYNCS)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env) for _ in range(k)]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a child did not start CUDA")
        t0 = time.perf_counter()
        for p in procs:
            p.stdin.write("go\n"); p.stdin.flush()
        outs = [json.loads(p.communicate(timeout=DEADLINE_S)[0].strip().splitlines()[-1]) for p in procs]
        wall = time.perf_counter() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)
    return {"k": k, "wall_s": round(wall, 3),
            **{s: {"median": round(statistics.median(o[s] for o in outs), 4),
                   "slowest": round(max(o[s] for o in outs), 4)} for s in ("fill", "capture", "sync")}}


def mps_env():
    """A started MPS daemon's environment for its clients, and how to stop it; (None, None) where none starts."""
    ctl = shutil.which("nvidia-cuda-mps-control")
    if ctl is None or os.environ.get("MPS") == "0":
        return None, None
    d = tempfile.mkdtemp(prefix="kbench-mps-")
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": f"{d}/pipe", "CUDA_MPS_LOG_DIRECTORY": f"{d}/log"}
    os.makedirs(env["CUDA_MPS_PIPE_DIRECTORY"]); os.makedirs(env["CUDA_MPS_LOG_DIRECTORY"])
    r = subprocess.run([ctl, "-d"], env=env, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        print(f"MPS daemon did not start: {r.returncode} {r.stderr.strip()[:300]}", flush=True)
        return None, None

    def stop():
        subprocess.run([ctl], input="quit\n", env=env, capture_output=True, text=True, timeout=30)
        time.sleep(1)
        print("MPS log:", open(f"{d}/log/control.log").read()[-600:] if os.path.exists(f"{d}/log/control.log")
              else "none", flush=True)
    return env, stop


def main():
    print(f"{len(KS)} concurrencies {KS}, {ROUNDS} rounds: fill {BLOCK} x 1 MiB, capture {CALLS} calls, "
          f"{SYNCS} synchronised launches", flush=True)
    for k in KS:
        print("plain", json.dumps(run_k(k, dict(os.environ))), flush=True)
    faults("plain", dict(os.environ))
    env, stop = mps_env()
    if env is None:
        print("MPS: not tried (no nvidia-cuda-mps-control, or MPS=0, or the daemon did not start)", flush=True)
        return
    try:
        for k in KS:
            try:
                print("mps  ", json.dumps(run_k(k, env)), flush=True)
            except Exception as exc:  # noqa: BLE001 - said, and the rest go on
                print(f"mps   k={k}: {type(exc).__name__}: {exc}"[:300], flush=True)
        faults("mps", env)
    finally:
        stop()


if __name__ == "__main__":
    main()
