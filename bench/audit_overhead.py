"""What the forward audit (worker/audit.ForwardAudit) costs per audited forward call on the CPU, in this process:

    python bench/audit_overhead.py [--calls 200]

For two forwards (one call of a C++ kernel built on the fast path; the same plus 40 glue operators, views and
copies, around it), prints the median wall time of a plain call, of an audited call (start the profile, forward,
stop it, read the report), their difference, and the audit's own ``overhead_s``; then the first audit's wall time in
a fresh process (the profiler's one-off set-up). One line of JSON per row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_KERNEL = r'''
extern "C" void row_sums(const float* x, float* y, long rows, long cols) {
  for (long r = 0; r < rows; ++r) { float s = 0; for (long j = 0; j < cols; ++j) s += x[r * cols + j]; y[r] = s; }
}'''


def _forwards():
    import torch

    from kbench_env.fastpath import cpp_kernel

    row_sums = cpp_kernel(_KERNEL, "row_sums")

    def plain(x):
        y = x.new_empty(x.shape[:1])
        row_sums(x, y, x.shape[0], x.shape[1])
        return y

    def glue(x):
        for _ in range(10):
            x = x.contiguous().view(-1).view(x.shape).clone()
        return plain(x)

    return {"one_kernel": plain, "kernel_and_40_glue_ops": glue}, torch.randn(64, 4096)


def _measure(calls: int) -> list[dict]:
    import torch

    from kbench_env import fastpath
    from kbench_env.worker import audit as worker_audit

    forwards, x = _forwards()
    rows = []
    for name, fn in forwards.items():
        with torch.no_grad():
            for _ in range(5):
                fn(x)
            plain, audited, own = [], [], []
            for _ in range(calls):
                t0 = time.perf_counter()
                fn(x)
                plain.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                audit = worker_audit.ForwardAudit(set(), fastpath.call_count, "cpu")
                with audit:
                    fn(x)
                report = audit.report()
                audited.append(time.perf_counter() - t0)
                own.append(report["overhead_s"])
        p, a = statistics.median(plain) * 1e3, statistics.median(audited) * 1e3
        rows.append({"forward": name, "plain_ms": round(p, 4), "audited_ms": round(a, 4),
                     "audit_cost_ms": round(a - p, 4), "overhead_s_ms": round(statistics.median(own) * 1e3, 4),
                     "report_keys": sorted(report)})
    return rows


def _first_audit() -> dict:
    code = ("import time, torch; from kbench_env.worker import audit as worker_audit; x = torch.randn(8, 8)\n"
            "t0 = time.perf_counter(); a = worker_audit.ForwardAudit(set(), lambda: 0, 'cpu')\n"
            "with a:\n    x.clone()\n"
            "r = a.report(); print((time.perf_counter() - t0) * 1e3)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return {"forward": "first audit in a fresh process", "audited_ms": round(float(out.stdout.split()[-1]), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    os.environ.setdefault("KBENCH_BUILD_ROOT", tempfile.mkdtemp(prefix="kbench-audit-bench-"))
    import torch

    torch.set_num_threads(1)
    for row in _measure(args.calls) + [_first_audit()]:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
