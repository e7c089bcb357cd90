"""The naive way to evaluate a KernelBench-format candidate, for benchmarks to set beside kbench: a fresh Python
process per candidate that execs the task's reference program and the candidate (whose ``load_inline`` builds
with torch's defaults in its own build folder), checks ``ModelNew`` against ``Model`` with ``torch.allclose`` on
the task's own ``get_inputs`` (5 trials), and times 100 calls of each between synchronisations, as KernelBench's
harness does; one candidate after another. No sandbox, no held-out shapes, no integrity checks: what a naive RL
loop pays per step, to compare throughput with, not a verdict to trust.

    from naive_eval import run_naive
    run_naive([(task_source, candidate_source), ...], "cuda", workdir)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DRIVER = r'''
import json, sys, time, torch
t0 = time.perf_counter()
ref_ns, new_ns = {}, {}
exec(compile(open(sys.argv[1]).read(), "reference.py", "exec"), ref_ns)
exec(compile(open(sys.argv[2]).read(), "candidate.py", "exec"), new_ns)
build = time.perf_counter() - t0
dev = sys.argv[3]
sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
init = ref_ns["get_init_inputs"]()
torch.manual_seed(0); ref = ref_ns["Model"](*init).to(dev)
torch.manual_seed(0); new = new_ns["ModelNew"](*init).to(dev)
correct = True
with torch.no_grad():
    for trial in range(5):
        torch.manual_seed(trial)
        xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in ref_ns["get_inputs"]()]
        a, b = ref(*xs), new(*xs)
        correct = correct and a.shape == b.shape and bool(torch.allclose(a.float(), b.float(), atol=1e-2, rtol=1e-2))
    def median_ms(m):
        times = []
        for _ in range(100):
            sync(); t = time.perf_counter(); m(*xs); sync(); times.append(time.perf_counter() - t)
        return sorted(times)[50] * 1e3
    ref_ms, new_ms = median_ms(ref), median_ms(new)
print(json.dumps({"build_s": build, "correct": correct, "ref_ms": ref_ms, "new_ms": new_ms}))
'''


def run_naive(pairs: list[tuple[str, str]], device: str, workdir: Path, timeout: float = 900) -> dict:
    """Evaluate ``[(reference source, candidate source), ...]`` the naive way, serially. Returns per-candidate
    rows (latency, build seconds, correct, speedup; an error line where the process failed) and the totals."""
    workdir.mkdir(parents=True, exist_ok=True)
    driver = workdir / "naive_driver.py"
    driver.write_text(DRIVER)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(workdir / "naive_ext"))
    rows, t_all = [], time.perf_counter()
    for i, (ref_src, cand_src) in enumerate(pairs):
        ref, cand = workdir / f"reference_{i}.py", workdir / f"candidate_{i}.py"
        ref.write_text(ref_src)
        cand.write_text(cand_src)
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, str(driver), str(ref), str(cand), device], capture_output=True,
                               text=True, env=env, timeout=timeout)
            last = (p.stdout.strip().splitlines() or [""])[-1]
            got = json.loads(last) if p.returncode == 0 and last.startswith("{") else None
            error = None if got else (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1][:300]
        except subprocess.TimeoutExpired:
            got, error = None, f"no result in {timeout:g} s"
        row = {"latency_s": round(time.perf_counter() - t0, 3), "error": error}
        if got:
            row.update(build_s=round(got["build_s"], 3), correct=got["correct"],
                       speedup=got["ref_ms"] / got["new_ms"] if got["new_ms"] > 0 else None)
        rows.append(row)
    wall = time.perf_counter() - t_all
    lat = [r["latency_s"] for r in rows]
    return {"rows": rows, "wall_s": round(wall, 2), "per_minute": round(60 * len(rows) / wall, 2) if wall else None,
            "latency_p50_s": round(statistics.median(lat), 2) if lat else None,
            "correct": sum(bool(r.get("correct")) for r in rows)}
