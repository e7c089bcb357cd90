"""Probe (issue #36): why a trainer's batch of KernelBench-format builds costs fewer CPU-seconds a candidate step by
step (the H200 batch: 45, 32, 25, 24 over four steps of the same 24 tasks, every source new each step, with every
candidate served by a spare worker from the second step on). This replays the batch's builds through one
builder's caches as the builder process keeps them (one ``pch.BindingHeaders`` made in the background, one build
store), on this machine's nvcc (bench/build_cost.py's set-up: torch's CUDA paths pointed at the toolkit), the
solutions of ``--tasks`` as the cold pass, then ``--steps`` steps of them made new as ``rl_batch.step_source`` makes
them, ``--jobs`` builds at once. Per pass: the builds' CPU-seconds (every compiler child, user and system) and what
the builder's caches served (heads made and reused, binding objects reused, host compiles' shared starts made and
reused).

    python bench/probes/builder_steps.py --tasks level1/relu,level1/gelu --steps 2 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import build_cost  # noqa: E402
from rl_batch import _cpu_s, step_source  # noqa: E402

from kbench_env.backends.cuda import CudaBackend  # noqa: E402
from kbench_env.builder import pch, torch_ext  # noqa: E402
from kbench_env.builder.store import Store  # noqa: E402


def _children_cpu() -> tuple[float, float]:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime, ru.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", required=True, help="comma-separated task names (level1/relu, robust/...)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=None, help="append each pass's figures here as JSON lines")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kbench-builder-steps-"))
    headers = pch.BindingHeaders(str(work / "pch"), background=True)  # as builder/server.py keeps it
    store = Store(str(work / "store"))
    paths = [ROOT / "tasks/solutions/cuda" / f"{t}.py" for t in a.tasks.split(",") if t]
    compile_fn = build_cost.compile_fn(work, "probe", wall=True)

    def build(path: Path, step: int) -> float:
        src = path.read_text()
        if step:
            path = work / f"step{step}" / path.parent.name / path.name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(step_source(src, step))
        with build_cost.ccc._MODULE_LOCK:  # (the solution runs with load_inline swapped: one at a time)
            req = build_cost.request_of(path)
        t0 = time.perf_counter()
        torch_ext.build(req, CudaBackend(), store, {"torch": "bench", "backend": "cuda"}, 1800.0, 1 << 31,
                        compile_fn=compile_fn, pch=headers)
        return time.perf_counter() - t0

    for step in range(a.steps + 1):
        before = headers.counts()
        u0, s0 = _children_cpu()
        own0 = _cpu_s(resource.RUSAGE_SELF)  # the builder's own Python: one interpreter for all its builds
        t0 = time.perf_counter()
        with ThreadPoolExecutor(a.jobs) as pool:
            walls = list(pool.map(lambda p: build(p, step), paths))
        u1, s1 = _children_cpu()
        row = {"pass": "cold" if step == 0 else f"step {step}", "builds": len(paths), "wall_s": round(
            time.perf_counter() - t0, 1), "user_s_per_build": round((u1 - u0) / len(paths), 2),
            "sys_s_per_build": round((s1 - s0) / len(paths), 2), "build_wall_max_s": round(max(walls), 1),
            "own_s_per_build": round((_cpu_s(resource.RUSAGE_SELF) - own0) / len(paths), 2),
            **{k: v - before[k] for k, v in headers.counts().items()}}
        print(json.dumps(row), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps({**row, "tasks": a.tasks, "jobs": a.jobs, "cores": os.cpu_count()}) + "\n")
        headers.wait(900)  # (what was being made in the background is there for the next step, as a trainer's gap)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
