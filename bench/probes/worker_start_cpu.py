"""Probe (issue #36): the CPU-seconds of a GPU worker's life, step by step, in processes forked as the fork server
forks a worker (torch, setuptools and the worker's modules imported first, no CUDA before the fork).

A steady KernelBench-format step on the 16-core H200 host is bound by its host CPU, and its workers took 9.3 of a
candidate's 32.2 CPU-seconds (bench/results/rl_batch_train_kernelbench_h200_20261202.md). Each child here runs the
worker's own warm-up steps (worker/loop.py's ``_warm_up``) one at a time, then what a candidate's checks add, and
reports its process CPU time (``time.process_time``) and wall after each:

- ``framing``: the message framing's first use (torch.save and torch.load's set-up);
- ``cuda``: ``torch.cuda.init``, the device selected, a first kernel and its synchronisation (CUDA's context);
- ``blocking``: ``worker/cuda_wait.start`` (the context's waits made asleep);
- ``audit_warm``: the forward audit's profiler started and stopped once (``worker/audit.ForwardAudit``, kernels
  mode, as the warm-up does), its report read;
- ``cpp_extension``: ``import torch.utils.cpp_extension`` (what a KernelBench-format candidate's load imports);
- ``audit_again``: a second audit around 20 small kernels (a check's);
- ``wrapper`` (with ``--wrapper``): ``torch.profiler.profile`` with the audit's activities started and stopped once,
  after the steps above: what the audit paid per worker while it started kineto through that wrapper (its first
  start imports Inductor), against ``torch.autograd.profiler.profile`` now;
- ``idle``: 2 s asleep waiting on a pipe (a spare waiting for its candidate: should cost nothing).

The parent then kills the child (SIGKILL, as ``Worker.close`` does) and reads its whole CPU time from ``wait4``'s
rusage: ``exit`` is what the kernel spent tearing the process down after the last report (the CUDA context's
memory unmapped). ``--at-once N`` runs N children together (a busy host's starts contend), ``--rounds`` times.

    python bench/probes/worker_start_cpu.py --at-once 1 16 --rounds 3 --wrapper --out /tmp/worker_start_cpu.jsonl
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

import setuptools  # noqa: E402,F401  (the fork server's preloads: confine/forkserver.py)
import torch  # noqa: E402

from kbench_env.worker import audit, cuda_wait, loop  # noqa: E402

STEPS = ("framing", "cuda", "blocking", "audit_warm", "cpp_extension", "audit_again", "wrapper", "idle")


def _child(w: int, wrapper: bool) -> None:
    """The steps, each reported as ``[step, process CPU-s, wall s]`` lines on ``w``; then wait to be killed."""
    out = os.fdopen(w, "w", buffering=1)
    t_wall = time.perf_counter()

    def mark(step):
        out.write(json.dumps([step, time.process_time(), time.perf_counter() - t_wall]) + "\n")

    mark("fork")
    loop.unpack(loop.pack({"type": "warm_up"}, {"x": [torch.zeros(2)]}))
    mark("framing")
    torch.cuda.init()
    loop.select_device("cuda")
    x = torch.ones(256, device="cuda")
    torch.cuda.synchronize()
    mark("cuda")
    cuda_wait.start(True)
    mark("blocking")
    warm = audit.ForwardAudit(set(), lambda: 0, "cuda", mode="kernels")
    with warm:
        x.add_(1)
        torch.cuda.synchronize()
    warm.report()
    mark("audit_warm")
    importlib.import_module("torch.utils.cpp_extension")  # (an import statement here would make torch a local)
    mark("cpp_extension")
    again = audit.ForwardAudit(set(), lambda: 0, "cuda", mode="kernels")
    with again:
        for _ in range(20):
            x.mul_(1.0001)
        torch.cuda.synchronize()
    again.report()
    mark("audit_again")
    if wrapper:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            x.add_(1)
            torch.cuda.synchronize()
        mark("wrapper")
    rd, _ = os.pipe()
    import select
    select.select([rd], [], [], 2.0)
    mark("idle")
    time.sleep(600)  # killed by the parent


def _round(n: int, wrapper: bool) -> list[dict]:
    """``n`` children at once; per child its steps' CPU and wall, and the exit's CPU from wait4."""
    kids, errors = [], []
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                _child(w, wrapper)
            except BaseException:  # (os._exit below would drop the traceback: it goes to the parent instead)
                os.write(w, (json.dumps(["error", traceback.format_exc(), 0.0]) + "\n").encode())
            finally:
                os._exit(0)
        os.close(w)
        kids.append((pid, os.fdopen(r)))
    rows = []
    for pid, f in kids:
        marks = {}
        for line in f:
            step, cpu, wall = json.loads(line)
            if step == "error":
                errors.append(cpu)
                break
            marks[step] = (cpu, wall)
            if step == "idle":
                break
        os.kill(pid, signal.SIGKILL)
        _, _, usage = os.wait4(pid, 0)
        f.close()
        total = usage.ru_utime + usage.ru_stime
        row, prev = {"at_once": n, "total_cpu_s": round(total, 3)}, marks.get("fork", (0.0, 0.0))
        for step in STEPS:
            if step in marks:
                row[f"{step}_cpu_s"] = round(marks[step][0] - prev[0], 3)
                row[f"{step}_wall_s"] = round(marks[step][1] - prev[1], 3)
                prev = marks[step]
        row["exit_cpu_s"] = round(total - prev[0], 3)
        rows.append(row)
    if errors:
        raise SystemExit(f"{len(errors)} of {n} children failed; the first:\n{errors[0]}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--at-once", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--wrapper", action="store_true", help="also time torch.profiler.profile's first start")
    args = ap.parse_args()
    if torch.cuda.is_initialized():
        raise SystemExit("CUDA started before the fork: the children could not start it")
    rows = []
    for n in args.at_once:
        for k in range(args.rounds):
            got = _round(n, args.wrapper)
            for r in got:
                r["round"] = k
            rows += got
        mine = [r for r in rows if r["at_once"] == n]
        keys = ["total_cpu_s"] + [f"{s}_cpu_s" for s in STEPS] + ["exit_cpu_s"]
        print(f"{n} at once, {len(mine)} children, median CPU-s: " + ", ".join(
            f"{k[:-6]} {statistics.median(r.get(k, 0.0) for r in mine):.3f}" for k in keys), flush=True)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
