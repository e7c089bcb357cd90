"""How much a CPU speedup moves when nothing about the candidate changes, idle and under load, and what a burner
gains (issue 37's measure of paired timing: pipeline/paired.py).

    python bench/cpu_noise.py                      # idle, then loaded; 10 evaluations per task, 4 default tasks
    python bench/cpu_noise.py --load loaded        # only with the two busy background processes
    python bench/cpu_noise.py --quick              # 4 evaluations per task, 3 burner rounds (a few minutes)

For each load condition: the shipped solution of each task of the default suite evaluated ``--evals`` times in
one Evaluator (one at a time, default timing); the spread of its speedups is (max - min) / median. Then the
burner (tests/burner_candidate.py: the shipped ReLU with native threads that burn the CPU and thrash the caches)
against the same ReLU without them, alternating, ``--burner-rounds`` times each, each in an Evaluator of its own
(its reference timed while the candidate's worker lives): the burner's gain is the median of its speedups over the
median of the plain kernel's, minus one. ``--evals 0``: the burner alone. "loaded" starts ``--busy`` processes that spin
(each a Python ``while True`` loop) for the condition's length and stops them after.

Targets on a 2-core machine (issue 37): spread <= 5 % idle and <= 15 % loaded; the burner gains <= 5 %.
Writes ``<out>.jsonl`` (one row per evaluation) and ``<out>.md`` (machine, date, commit, the table).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from burner_candidate import burning  # noqa: E402  (tests/burner_candidate.py)

from kbench_env.machine.hardware import cpu_description  # noqa: E402
from kbench_env.pipeline.evaluator import Evaluator  # noqa: E402
from kbench_env.tasks.suite import load_suite, resolve_task, solution_path  # noqa: E402

TARGETS = {"idle": 0.05, "loaded": 0.15}
BURNER_TARGET = 0.05
SPIN = ("import sys, time\nend = time.monotonic() + float(sys.argv[1])\n"
        "while time.monotonic() < end:\n    pass\n")


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) if xs else float("nan")


class Busy:
    """``n`` spinning processes, each ending by itself after ``seconds`` (killed at exit of the block first)."""

    def __init__(self, n: int, seconds: float):
        self.n, self.seconds, self.procs = n, seconds, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", SPIN, str(self.seconds)]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait(timeout=10)


def row(condition: str, task: str, kind: str, i: int, r) -> dict:
    return {"condition": condition, "task": task, "kind": kind, "i": i, "correct": r.correct,
            "speedup": r.speedup, "speedup_ci": getattr(r, "speedup_ci", None), "reward": r.reward,
            "flags": r.integrity_flags, "error": r.error, "eval_seconds": r.eval_seconds,
            "timing_seconds": r.phase_seconds.get("timing"),
            "pairs": [getattr(c, "timed_pairs", None) for c in r.configs],  # (getattr: also runs on unpaired code)
            # each configuration's own figures: where an evaluation's speedup moved (which side, which shape)
            "configs": [{"name": c.name, "speedup": c.speedup, "ci": getattr(c, "speedup_ci", None),
                         "candidate_ms": c.candidate_ms, "reference_ms": c.reference_ms} for c in r.configs]}


def run_condition(ev: Evaluator, condition: str, tasks: list, evals: int, rounds: int, out,
                  options: dict | None = None) -> list[dict]:
    rows = []

    def keep(rw):
        rows.append(rw)
        out.write(json.dumps(rw) + "\n")
        out.flush()
        ci = rw["speedup_ci"]
        print(f"  {condition:6s} {rw['task']:22s} {rw['kind']:6s} #{rw['i']}: {rw['speedup'] or 0:.3f}x"
              + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else "") + f" reward {rw['reward']:.3f}"
              + (f" ERROR {rw['error'][:200]}" if rw["error"] else "") + f" [{rw['eval_seconds']:.1f} s]",
              flush=True)

    for task in tasks:
        src = solution_path(task, "cpu").read_text()
        for i in range(evals):
            keep(row(condition, task.name, "honest", i, ev.evaluate(task, src)))
    relu = resolve_task("level1/relu")
    plain = solution_path(relu, "cpu").read_text()
    for i in range(rounds):
        for kind, src in (("plain", plain), ("burner", burning(plain))):
            # A fresh evaluator each: its reference is timed while this candidate's worker lives, as for the first
            # candidate of a task before paired timing (the case that paid the burner 1.77x).
            fresh = Evaluator(device="cpu", **(options or {}))
            try:
                keep(row(condition, relu.name, kind, i, fresh.evaluate(relu, src)))
            finally:
                fresh.close()
    return rows


def summary(rows: list[dict], condition: str) -> tuple[list[str], dict]:
    lines, figures = [], {}
    mine = [r for r in rows if r["condition"] == condition]
    for task in dict.fromkeys(r["task"] for r in mine if r["kind"] == "honest"):
        xs = [r["speedup"] for r in mine if r["task"] == task and r["kind"] == "honest" and r["speedup"]]
        cis = [r["speedup_ci"] for r in mine if r["task"] == task and r["kind"] == "honest" and r["speedup_ci"]]
        width = statistics.median(hi / lo - 1 for lo, hi in cis) if cis else float("nan")
        secs = statistics.median(r["eval_seconds"] for r in mine if r["task"] == task and r["kind"] == "honest")
        figures[task] = spread(xs)
        lines.append(f"| {condition} | {task} | {len(xs)} | {statistics.median(xs):.3f} | {min(xs):.3f} | "
                     f"{max(xs):.3f} | {100 * spread(xs):.1f} % | {100 * width:.1f} % | {secs:.1f} |")
    plain = [r["speedup"] for r in mine if r["kind"] == "plain" and r["speedup"]]
    burner = [r["speedup"] for r in mine if r["kind"] == "burner" and r["speedup"]]
    if plain and burner:
        figures["burner_gain"] = statistics.median(burner) / statistics.median(plain) - 1
    return lines, figures


def record(path: Path, args, rows: list[dict], wall: dict) -> str:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    head = ["# CPU timing noise: the same source evaluated again and again (bench/cpu_noise.py)", "",
            f"- machine: {cpu_description()}; load average (1 min) at the start {args.load_at_start:.2f}, at the "
            f"end {os.getloadavg()[0]:.2f}",
            f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; commit {commit}"
            + (" (with uncommitted changes)" if dirty else ""),
            f"- command: `python bench/cpu_noise.py {' '.join(sys.argv[1:])}`; {args.evals} evaluations per task, "
            f"{args.burner_rounds} burner rounds; loaded = {args.busy} spinning processes",
            f"- wall time per condition: {', '.join(f'{k} {v:.0f} s' for k, v in wall.items())}", "",
            "| load | task | n | median speedup | min | max | spread | median CI width | s per evaluation |",
            "|---|---|---|---|---|---|---|---|---|"]
    verdict = []
    for condition in wall:
        lines, figures = summary(rows, condition)
        head += lines
        worst = max((v for k, v in figures.items() if k != "burner_gain"), default=float("nan"))
        verdict.append(f"- {condition}: worst spread {100 * worst:.1f} % (target <= {100 * TARGETS[condition]:.0f} %)"
                       + (f"; burner gain {100 * figures['burner_gain']:+.1f} % (target <= "
                          f"{100 * BURNER_TARGET:.0f} %)" if "burner_gain" in figures else ""))
    text = "\n".join(head + ["", *verdict, ""])
    path.write_text(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load", choices=("idle", "loaded", "both"), default="both")
    ap.add_argument("--evals", type=int, default=10, help="evaluations per task and condition")
    ap.add_argument("--burner-rounds", type=int, default=5, help="burner and plain evaluations, each")
    ap.add_argument("--busy", type=int, default=2, help="spinning processes in the loaded condition")
    ap.add_argument("--tasks", default="default", help="a suite name or comma list of tasks")
    ap.add_argument("--quick", action="store_true", help="4 evaluations per task, 3 burner rounds")
    ap.add_argument("--timing", action="append", default=[], metavar="KEY=VALUE",
                    help="a timing parameter for the Evaluator (e.g. pair_seconds=4.5, block_seconds=0.01): "
                         "an experiment against the defaults")
    ap.add_argument("--boost", type=int, default=None, help="the nice value of a timed block's threads "
                    "(sandbox/placement.BOOST; default: the library's): an experiment against the default")
    ap.add_argument("--out", default=str(ROOT / "bench/results/cpu_noise_cpu"), help="path without extension")
    args = ap.parse_args()
    if args.boost is not None:
        from kbench_env.sandbox import placement

        placement.BOOST = args.boost
    args.load_at_start = os.getloadavg()[0]
    if args.quick:
        args.evals, args.burner_rounds = 4, 3
    tasks = load_suite(args.tasks) if "," not in args.tasks else [resolve_task(t) for t in args.tasks.split(",")]
    conditions = ("idle", "loaded") if args.load == "both" else (args.load,)
    timing = {k: float(v) for k, v in (kv.split("=", 1) for kv in args.timing)}
    options = {"timing": timing} if timing else {}  # (the burner's evaluators get the same)
    ev = Evaluator(device="cpu", **options)
    rows, wall = [], {}
    out = Path(args.out)
    with open(out.parent / (out.name + ".jsonl"), "w") as f:
        for condition in conditions:
            t0 = time.monotonic()
            if condition == "loaded":
                with Busy(args.busy, 3600):
                    rows += run_condition(ev, condition, tasks, args.evals, args.burner_rounds, f, options)
            else:
                rows += run_condition(ev, condition, tasks, args.evals, args.burner_rounds, f, options)
            wall[condition] = time.monotonic() - t0
    print(record(out.parent / (out.name + ".md"), args, rows, wall))
    ev.close()


if __name__ == "__main__":
    main()
