"""How fast fresh memory is faulted in with and without the workers' huge pages (sandbox/confine/environment.py,
MALLOC_TUNABLES), where a machine clears fresh huge pages slowly (the development VM): a plain process filling
1 GiB in 64 MiB pieces, and a CPU worker's memory bomb (tests/candidates.py MEMORY_BOMB) reaching a 1 GiB
address-space allowance, the bomb first (memory a process has just freed is faulted in again fast: the
bomb reached its limit in 0.18 s right after memory was freed, in 11.47 s first thing). Prints one JSON line per
measure; run once as is and once with the tunable given off (an ordinary evaluation's cost: bench/cpu_noise.py
under both, as in bench/results/hugepage_cost_cpu_20261204.md):

    python bench/probes/hugepage_fill.py
    GLIBC_TUNABLES=glibc.malloc.hugetlb=0 python bench/probes/hugepage_fill.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

FILL = ("import time\nt = time.perf_counter(); h = []\nfor _ in range(16): h.append(bytearray(64 << 20))\n"
        "print(time.perf_counter() - t)")


def main() -> None:
    from candidates import MEMORY_BOMB  # tests/candidates.py
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits
    from kbench_env.tasks.suite import resolve_task

    tunables = os.environ.get("GLIBC_TUNABLES", "")
    # the fork server's setting (environment.py adds hugetlb=1 unless the tunable is given)
    plain = {**os.environ, "GLIBC_TUNABLES": tunables if "hugetlb" in tunables else "glibc.malloc.hugetlb=1"}
    ev = Evaluator(device="cpu", cache_dir="/tmp/kbench-hugepage-fill",
                   limits=Limits(run_timeout=300, time_timeout=300, memory_bytes=1 << 30))
    try:
        r = ev.evaluate(resolve_task("level1/relu"), MEMORY_BOMB)
        print(json.dumps({"measure": "worker memory bomb, 1 GiB allowance", "tunables": tunables or "(default)",
                          "MemoryError": "MemoryError" in (r.error or ""),
                          "seconds": round(r.phase_seconds.get("check_recv", float("nan")), 3)}), flush=True)
    finally:
        ev.close()
    fill = float(subprocess.run([sys.executable, "-c", FILL], env=plain, capture_output=True, text=True,
                                timeout=600, check=True).stdout)
    print(json.dumps({"measure": "plain process, 1 GiB", "tunables": plain["GLIBC_TUNABLES"], "seconds": round(fill, 3),
                      "MB_per_s": round((1 << 30) / fill / 1e6, 1)}), flush=True)


if __name__ == "__main__":
    main()
