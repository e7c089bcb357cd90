"""What the sandbox costs per evaluation: the same work with every layer on and with isolation off, interleaved.

Measures, on the CPU backend: the worker's own confinement time (as it reports it), a worker's start + load of a
trivial candidate + clean-up, and a whole ``Evaluator.evaluate`` of a correct, cached ReLU (build cache hit,
correctness on every configuration, timing). Writes a Markdown table.

    python bench/sandbox_overhead.py --n 30 --out bench/results/sandbox_overhead.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TRIVIAL = "class ModelNew:\n    pass\n"


def _stats(xs: list) -> str:
    q = statistics.quantiles(xs, n=4) if len(xs) >= 4 else [min(xs), statistics.median(xs), max(xs)]
    return f"{statistics.median(xs):.1f} ({q[0]:.1f}-{q[2]:.1f})"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=30, help="repetitions of each measurement per mode")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits
    from kbench_env.sandbox.worker_process import Worker
    from kbench_env.tasks.suite import resolve_task

    modes = {"sandbox (all layers)": Limits(), "isolation off": Limits(isolation=False)}
    root = tempfile.mkdtemp(prefix="kbench-overhead-")
    task = resolve_task("level1/relu")
    good = (ROOT / "tasks/solutions/cpu/level1/relu.py").read_text()
    timing = {"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.01}
    evs = {m: Evaluator(device="cpu", limits=lim, timing=timing) for m, lim in modes.items()}
    start, confine, evals = ({m: [] for m in modes} for _ in range(3))
    for m, lim in modes.items():  # warm: fork server, reference timings, the build
        with Worker(TRIVIAL, "cpu", "cpu", root, lim) as w:
            w.recv(60, "load")
        r = evs[m].evaluate(task, good)
        assert r.correct, r.feedback()
    for _ in range(args.n):
        for m, lim in modes.items():
            t0 = time.perf_counter()
            with Worker(TRIVIAL, "cpu", "cpu", root, lim) as w:
                w.recv(60, "load")
                w._drain_reports()
                confine[m].append(w.protections.get("confine_ms", 0.0))
            start[m].append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            evs[m].evaluate(task, good)
            evals[m].append((time.perf_counter() - t0) * 1e3)
    on, off = modes
    lines = [f"# Sandbox overhead per evaluation (CPU backend, {args.n} interleaved repetitions)", "",
             f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
             f"- machine: {platform.machine()}, {os.cpu_count()} cores, Linux {platform.release()}, uid {os.geteuid()}, "
             f"load average at the end {os.getloadavg()[0]:.1f} (other work shares this machine)",
             "", "median (interquartile range), milliseconds", "",
             "| measurement | " + " | ".join(modes) + " | difference of medians |", "| --- | ---: | ---: | ---: |"]
    for name, d in (("worker confines itself (its own report)", confine),
                    ("worker start + load trivial candidate + clean-up", start),
                    ("evaluate(): cached correct ReLU, 4 configurations, timed", evals)):
        diff = statistics.median(d[on]) - statistics.median(d[off])
        lines.append(f"| {name} | {_stats(d[on])} | {_stats(d[off])} | {diff:+.1f} |")
    lines += ["", "'isolation off' keeps the session, scrubbed environment, resource limits, the capability drop and the audit hook "
              "(report only); 'all layers' adds the network and mount namespaces (the build cache read-only), "
              "Landlock, seccomp and the pids cgroup (see `kbench doctor`).", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
