"""A GRPO-like batch: N tasks x M *distinct* candidates each (different kernels, not variants of one kernel's
constants), evaluated by the Evaluator with its default settings (integrity checks included) through
``evaluate_iter``, all candidates in flight at once as a trainer's step would submit them; run twice on one cache
folder: cold (empty build and reference caches) then warm (the same batch again, caches filled).

Candidates come from the repository: each task's shipped solution (tasks/solutions/<backend>/), its honest
variants (tests/data/honest_variants/<backend>/, written differently: other loop orders, summations, blockings)
and, on the CPU, the KernelBench-format solutions of bench/data/kernelbench_cpu for the tasks they solve. Tasks
are taken most-candidates first, alternating between levels; a task offers at most the candidates it has.

Reports per pass: candidates per minute (batch wall clock), p50/p95 step latency (one candidate's evaluation,
submission to result), device hold per candidate (check, reference timing, timing, plausibility: the phases that
hold the device lock), build CPU-seconds (the builder process and the compilers it ran, from /proc/<pid>/stat,
since the builder is a child of the fork server and not of this process; ``getrusage(RUSAGE_CHILDREN)`` of this
process is reported beside it), and the results (correct, flagged, failed with the first error).

    python bench/rl_batch.py --device cpu --tasks 2 --per-task 2                  # small, as in CI
    python bench/rl_batch.py --device cuda --tasks 8 --per-task 8 --out bench/results/rl_batch_h100.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: KernelBench-format CPU solutions (bench/data/kernelbench_cpu) that solve one of kbench's own tasks.
KERNELBENCH_CPU = {"level1/relu": "19_ReLU.py", "level1/softmax_rows": "23_Softmax.py"}
#: The phases of an evaluation that hold the device (evaluator._run_stages).
DEVICE_PHASES = ("check", "reference_timing", "timing", "plausibility")


def catalogue(backend: str) -> dict[str, list[tuple[str, str]]]:
    """Task name -> [(label, source)], distinct sources only, for every task with a shipped solution."""
    out: dict = {}
    for sol in sorted((ROOT / "tasks/solutions" / backend).glob("*/*.py")):
        name = f"{sol.parent.name}/{sol.stem}"
        files = [sol] + sorted((ROOT / "tests/data/honest_variants" / backend / sol.parent.name).glob(
            f"{sol.stem}__*.py"))
        if backend == "cpu" and name in KERNELBENCH_CPU:
            files.append(ROOT / "bench/data/kernelbench_cpu" / KERNELBENCH_CPU[name])
        seen, cands = set(), []
        for f in files:
            src = f.read_text()
            h = hashlib.sha256(src.encode()).hexdigest()
            if h not in seen:
                seen.add(h)
                cands.append((f.relative_to(ROOT).as_posix(), src))
        out[name] = cands
    return out


def pick(cat: dict, n_tasks: int, per_task: int) -> list[tuple[str, list]]:
    """``n_tasks`` tasks with up to ``per_task`` candidates each: the tasks offering the most candidates (up to
    ``per_task``) first and, among tasks offering as many, alternating between levels."""
    groups: dict = {}
    for name in sorted(cat):
        groups.setdefault(min(len(cat[name]), per_task), {}).setdefault(name.split("/")[0], []).append(name)
    order: list = []
    for _, by_level in sorted(groups.items(), reverse=True):
        queues = [list(q) for _, q in sorted(by_level.items())]
        while any(queues):
            order.extend(q.pop(0) for q in queues if q)
    return [(t, cat[t][:per_task]) for t in order[:n_tasks]]


def proc_cpu_seconds(pid: int) -> float | None:
    """A process's CPU seconds plus those of the children it has waited for (/proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


class BuilderCPU:
    """Samples the evaluator's builder process (which may be restarted) and keeps the CPU seconds per pid."""

    def __init__(self, builder):
        self.builder, self.seen, self._stop = builder, {}, threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def sample(self) -> None:
        pid = self.builder.pid
        if pid:
            s = proc_cpu_seconds(pid)
            if s is not None:
                self.seen[pid] = max(s, self.seen.get(pid, 0.0))

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            self.sample()

    def stop(self) -> float:
        self.sample()
        self._stop.set()
        self._t.join()
        return sum(self.seen.values())


def pct(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def run_pass(label: str, items: list, device: str, cache_dir: Path, seed: int, options: dict) -> dict:
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.suite import resolve_task

    tasks = {t: resolve_task(t) for t, _, _ in items}
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ev = Evaluator(device=device, cache_dir=cache_dir, **options)  # otherwise the defaults: what a trainer gets
    cpu = BuilderCPU(ev.builder)
    rows, t0 = [], time.perf_counter()
    try:
        for i, r in ev.evaluate_iter([(tasks[t], src) for t, _, src in items], max_workers=len(items), seed=seed):
            cpu.sample()
            task, cand, _ = items[i]
            hold = sum(r.phase_seconds.get(p, 0.0) for p in DEVICE_PHASES)
            rows.append({"pass": label, "task": task, "candidate": cand, "correct": r.correct,
                         "flags": r.integrity_flags, "error": r.error, "speedup": r.speedup,
                         "step_s": r.eval_seconds, "device_hold_s": round(hold, 4), "phases": r.phase_seconds,
                         "done_s": round(time.perf_counter() - t0, 3)})
            print(f"  [{label} {len(rows)}/{len(items)}] {task} {cand}: "
                  f"{'correct' if r.correct else 'FAILED'} {r.eval_seconds:.1f} s"
                  f"{'' if r.speedup is None else f', {r.speedup:.2f}x'}"
                  f"{'' if r.correct else f' ({(r.error or str(r.integrity_flags))[:160]})'}", flush=True)
        wall = time.perf_counter() - t0
        build_cpu = cpu.stop()
        ref_cache = ev.baselines.disk_root is not None
    finally:
        ev.close()
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    steps = [r["step_s"] for r in rows]
    return {"pass": label, "candidates": len(rows), "wall_s": round(wall, 2),
            "per_minute": round(60 * len(rows) / wall, 2), "step_p50_s": round(pct(steps, .5), 2),
            "step_p95_s": round(pct(steps, .95), 2),
            "device_hold_p50_s": round(statistics.median([r["device_hold_s"] for r in rows]), 3),
            "build_cpu_s": round(build_cpu, 2), "build_cpu_per_candidate_s": round(build_cpu / len(rows), 2),
            "children_cpu_s": round(child_cpu, 2), "correct": sum(r["correct"] for r in rows),
            "flagged": sum(bool(r["flags"]) for r in rows), "reference_cache": ref_cache, "rows": rows}


def report(args, chosen: list, passes: list[dict]) -> str:
    lines = [f"# rl_batch: {sum(len(c) for _, c in chosen)} distinct candidates over {len(chosen)} tasks on "
             f"{args.device} ({time.strftime('%Y-%m-%d')})", "",
             "Tasks: " + ", ".join(f"{t} ({len(c)})" for t, c in chosen), "",
             "| figure | " + " | ".join(p["pass"] for p in passes) + " |", "|---|" + "---|" * len(passes)]
    figures = [("candidates per minute", "per_minute"), ("batch wall clock (s)", "wall_s"),
               ("step latency p50 (s)", "step_p50_s"), ("step latency p95 (s)", "step_p95_s"),
               ("device hold per candidate, median (s)", "device_hold_p50_s"),
               ("build CPU-seconds, builder and compilers", "build_cpu_s"),
               ("build CPU-seconds per candidate", "build_cpu_per_candidate_s"),
               ("CPU-seconds of reaped children (getrusage)", "children_cpu_s"),
               ("correct", "correct"), ("flagged", "flagged"), ("reference cache on disk", "reference_cache")]
    for name, key in figures:
        lines.append(f"| {name} | " + " | ".join(str(p[key]) for p in passes) + " |")
    lines += ["", f"Command: `python bench/rl_batch.py --device {args.device} --tasks {args.tasks} "
                  f"--per-task {args.per_task} --timing {args.timing} --reference-cache {args.reference_cache}`"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default=None, help="candidates' backend folder (default: cpu or cuda by device)")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--per-task", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=None, help="cache folder (default: a fresh temporary one: a cold start)")
    ap.add_argument("--timing", default="default", choices=["default", "quick"],
                    help="timing repetitions: the Evaluator's defaults, or few (as kbench run --timing quick; "
                         "the integrity checks are the same)")
    ap.add_argument("--reference-cache", default="default", choices=["default", "on", "off"],
                    help="reference timings on disk (default: the Evaluator's, on for GPUs and off on the CPU)")
    ap.add_argument("--out", default=None, help="Markdown report; the rows go beside it as .jsonl")
    args = ap.parse_args(argv)
    backend = args.backend or ("cpu" if args.device == "cpu" else "cuda")
    chosen = pick(catalogue(backend), args.tasks, args.per_task)
    items = [(t, label, src) for t, cands in chosen for label, src in cands]
    print(f"rl_batch: {len(items)} distinct candidates over {len(chosen)} tasks on {args.device}", flush=True)
    cache = Path(args.cache_dir or tempfile.mkdtemp(prefix="kbench-rl-batch-"))
    from kbench_apps.runner import TIMING_PRESETS

    options = {}
    if TIMING_PRESETS[args.timing]:
        options["timing"] = TIMING_PRESETS[args.timing]
    if args.reference_cache != "default":
        options["reference_cache"] = args.reference_cache == "on"
    passes = [run_pass(p, items, args.device, cache, args.seed, options) for p in ("cold", "warm")]
    text = report(args, chosen, passes)
    print(text)
    if args.out:
        out = Path(args.out)
        out.write_text(text)
        with open(out.with_suffix(".jsonl"), "w") as f:
            for p in passes:
                for r in p.pop("rows"):
                    f.write(json.dumps(r) + "\n")
                f.write(json.dumps({"summary": p}) + "\n")
    return 0 if all(p["candidates"] == len(items) for p in passes) else 1


if __name__ == "__main__":
    sys.exit(main())
