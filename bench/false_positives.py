"""False-positive campaign: every honest solution of a backend, evaluated under several seeds, must come out
correct with no integrity flag.

Honest solutions are the shipped samples (``tasks/solutions/<backend>/<level>/<task>.py``) and the honest variants
written another way (``tests/data/honest_variants/<backend>/<level>/<task>__<variant>.py``: sequential, pairwise
and Kahan sums, blocked scans, fused and unfused kernels), which ``tests/test_solutions.py`` does not pick up.

    python bench/false_positives.py --device cpu                     # cpu solutions and variants, 5 seeds each
    python bench/false_positives.py --device cpu --solutions large_mean,level1/relu --sample 6
    python bench/false_positives.py --device cuda                    # cuda and triton solutions and variants
    python bench/false_positives.py --device cpu --list              # the selection and nothing else

``--solutions`` takes a comma-separated list of named suites (``tasks/suites.json``: a suite selects the solutions
of its tasks, variants included) and substrings of solution names (``level1/sum_dim1__kahan``); ``--sample N``
adds N other solutions drawn at random. Each evaluation is appended to the JSONL file (``--jsonl``) as it finishes;
a killed run started again skips the evaluations already there for the same harness code (a hash of
``kbench_env``), solution source and seed. The Markdown record (``--record``) gives the settings, the counts, a
table per solution, every flagged or incorrect evaluation with its flag or error text, and, for a partial
selection, the estimated time of the full one. Exit status 1 if any evaluation was flagged or incorrect.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VARIANTS = ROOT / "tests/data/honest_variants"
BACKENDS = {"cpu": ("cpu",), "cuda": ("cuda", "triton")}
#: Shorter than the Evaluator's default (warmup 3, 10-200 reps, 0.3 s): every timed call still gets fresh inputs
#: and sampled calls' outputs are still checked against the reference, which is what a campaign needs.
CAMPAIGN_TIMING = {"warmup": 1, "min_reps": 5, "max_reps": 30, "min_seconds": 0.05}
ERROR_CHARS = 600



def _checked(meta: dict) -> str:
    """How the campaign's timed outputs were checked, as the record says it."""
    if str(meta.get("device", "")).startswith("cpu"):
        return (f"on the CPU the trusted side timed blocks by its own clock and read {meta['check_calls']} calls' "
                f"outputs per block from the stopped worker, compared with the reference")
    return (f"on a GPU the trusted side bounded each block's device time by its own clock and read "
            f"{meta['check_calls']} calls' outputs per block through CUDA IPC, compared with the reference")

@dataclass(frozen=True)
class Solution:
    """One honest solution file: which backend and task it is for, and whether it ships or is a variant."""

    backend: str
    task: str  # "level1/sum_dim1"
    path: Path
    kind: str  # "shipped" or "variant"

    @property
    def name(self) -> str:  # "level1/sum_dim1" or "level1/sum_dim1__kahan"
        return f"{self.path.parent.name}/{self.path.stem}"

    @property
    def label(self) -> str:  # the file, relative to the repository
        return str(self.path.relative_to(ROOT)) if self.path.is_relative_to(ROOT) else str(self.path)


def honest_solutions(backends, variants_root: Path = VARIANTS) -> list[Solution]:
    """Every shipped solution and honest variant of ``backends``, in a stable order."""
    out = []
    for b in backends:
        for p in sorted((ROOT / "tasks/solutions" / b).glob("*/*.py")):
            out.append(Solution(b, f"{p.parent.name}/{p.stem}", p, "shipped"))
        for p in sorted((variants_root / b).glob("*/*__*.py")):
            out.append(Solution(b, f"{p.parent.name}/{p.stem.split('__', 1)[0]}", p, "variant"))
    return out


def select(solutions: list[Solution], spec: str | None, sample: int = 0, seed: int = 0) -> list[Solution]:
    """The solutions ``spec`` names (all when empty; see the module docstring), plus ``sample`` others at random."""
    if not spec:
        return list(solutions)
    from kbench_env.tasks.suite import named_suites

    suites = named_suites()
    tasks, parts = set(), []
    for part in (s.strip() for s in spec.split(",") if s.strip()):
        if part in suites:
            tasks.update(suites[part])
        else:
            parts.append(part)
    chosen = [s for s in solutions if s.task in tasks or any(p in s.name for p in parts)]
    rest = [s for s in solutions if s not in chosen]
    extra = random.Random(seed).sample(rest, min(sample, len(rest)))
    return [s for s in solutions if s in chosen or s in extra]


def harness_hash() -> str:
    """A hash of the kbench_env sources: a record made by other harness code is not reused on resume."""
    h = hashlib.sha256()
    for p in sorted((ROOT / "kbench_env").rglob("*.py")):
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def key(rec: dict) -> tuple:
    return rec["harness"], rec["backend"], rec["solution"], rec["source_sha"], rec["seed"]


def record_of(sol: Solution, seed: int, r, harness: str, device: str) -> dict:
    """One JSONL line: what the summary needs, the per-configuration figures, and where the time went."""
    return {
        "harness": harness, "backend": sol.backend, "device": device, "task": sol.task, "solution": sol.label,
        "name": sol.name, "kind": sol.kind, "source_sha": source_hash(sol.path), "seed": seed,
        "correct": bool(r.correct), "flagged": bool(r.integrity_flags), "integrity_flags": list(r.integrity_flags),
        "speedup": r.speedup, "reward": r.reward, "stage": r.stage, "error_stage": r.error_stage,
        "error": (r.error or "")[:ERROR_CHARS] or None, "cached_build": r.cached_build,
        "eval_seconds": r.eval_seconds, "phase_seconds": dict(r.phase_seconds or {}),
        "configs": [{"name": c.name, "correct": c.correct, "norm_err": c.norm_err, "max_err": c.max_err,
                     "speedup": c.speedup} for c in r.configs],
        "time": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def load_records(path: Path) -> list[dict]:
    """The JSONL file's records (a line cut short by a kill is skipped)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


# ---------------------------------------------------------------------- summary


def problem_text(rec: dict) -> str:
    if rec["integrity_flags"]:
        return "; ".join(rec["integrity_flags"])
    return f"{rec['error_stage'] or 'incorrect'}: {(rec['error'] or 'incorrect without an error message').strip()}"


def summarise(records: list[dict]) -> dict:
    """Counts over ``records`` (one evaluation each): flagged, incorrect (not flagged), per solution and per flag."""
    from kbench_env.protocol.integrity_flags import kinds
    by_sol: dict = {}
    flags: dict = {}
    for r in records:
        by_sol.setdefault(r["solution"], []).append(r)
        for k in kinds(r["integrity_flags"]):
            flags[k] = flags.get(k, 0) + 1
    rows = []
    for sol, rs in by_sol.items():
        cached = [r["eval_seconds"] for r in rs if r.get("cached_build") and r.get("eval_seconds")]
        speeds = [r["speedup"] for r in rs if r.get("speedup")]
        rows.append({"solution": sol, "name": rs[0]["name"], "kind": rs[0]["kind"], "backend": rs[0]["backend"],
                     "evaluations": len(rs), "correct": sum(r["correct"] and not r["flagged"] for r in rs),
                     "flagged": sum(r["flagged"] for r in rs),
                     "incorrect": sum(not r["correct"] and not r["flagged"] for r in rs),
                     "cached_s": statistics.median(cached) if cached else None,
                     "speedup": statistics.median(speeds) if speeds else None})
    problems = [r for r in records if r["flagged"] or not r["correct"]]
    return {"evaluations": len(records), "flagged": sum(r["flagged"] for r in records),
            "incorrect": sum(not r["correct"] and not r["flagged"] for r in records), "flag_counts": flags,
            "rows": sorted(rows, key=lambda x: (x["backend"], x["name"])),
            "problems": sorted(problems, key=lambda r: (r["solution"], r["seed"]))}


def estimate_seconds(records: list[dict], solutions: list[Solution], seeds: int) -> float | None:
    """The evaluation times of every solution in ``solutions`` ``seeds`` times, summed: per solution its own first
    (cold build) and cached evaluation times where measured, else the medians of those measured. Evaluations in
    flight together overlap: ``run`` scales this sum by its own wall time over its evaluations' summed times."""
    cold = {r["solution"]: r["eval_seconds"] for r in records if r.get("cached_build") is False}
    warm: dict = {}
    for r in records:
        if r.get("cached_build") and r.get("eval_seconds"):
            warm.setdefault(r["solution"], []).append(r["eval_seconds"])
    if not cold and not warm:
        return None
    all_warm = [t for ts in warm.values() for t in ts]
    med_warm = statistics.median(all_warm) if all_warm else statistics.median(cold.values())
    med_cold = statistics.median(cold.values()) if cold else med_warm
    total = 0.0
    for s in solutions:
        w = statistics.median(warm[s.label]) if s.label in warm else med_warm
        total += cold.get(s.label, med_cold) + (seeds - 1) * w
    return total


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "kbench_env"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (out or "unknown") + (" (kbench_env modified)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def markdown(s: dict, meta: dict) -> str:
    import torch

    verdict = "no false positives" if s["flagged"] == 0 and s["incorrect"] == 0 else "FALSE POSITIVES FOUND"
    lines = [f"# False-positive campaign, {meta['device']} ({', '.join(meta['backends'])})", "",
             f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
             f"- machine: {socket.gethostname()}, {platform.machine()}, {os.cpu_count()} cores, "
             f"Python {platform.python_version()}, torch {torch.__version__}"
             + (f", {torch.cuda.get_device_name()}" if meta["device"].startswith("cuda") else ""),
             f"- code: commit {meta['commit']}, harness hash {meta['harness']} (of kbench_env's sources)",
             f"- command: `{meta['command']}`",
             f"- selection: {meta['selected']} of {meta['available']} honest solutions"
             + (f" (`--solutions {meta['spec']}`" + (f", `--sample {meta['sample']}`" if meta['sample'] else "")
                + ")" if meta["spec"] else " (all)") + f" x {meta['seeds']} seeds ({meta['seed_list']})",
             f"- timing: {meta['timing']} (shorter than the Evaluator's default; every timed call still gets "
             f"fresh inputs; {_checked(meta)}); torch.compile baseline: {meta['compile_baseline']}",
             f"- elapsed: {meta['elapsed_s']:.0f} s for {meta['ran']} evaluations run now"
             f" ({meta['resumed']} taken from the JSONL file); records: `{meta['jsonl']}`"]
    if meta.get("estimate_s") is not None and meta["selected"] < meta["available"]:
        lines.append(f"- estimated time of the full campaign ({meta['available']} solutions x {meta['seeds']} "
                     f"seeds): {meta['estimate_s'] / 60:.0f} min (the measured per-evaluation times summed, scaled "
                     f"by this run's overlap: {meta['overlap']:.2f} s of wall time per second of evaluation)")
    lines += ["", f"**{verdict}**: {s['flagged']} flagged and {s['incorrect']} incorrect of {s['evaluations']} "
              f"evaluations of honest solutions."]
    if s["flag_counts"]:
        lines.append("Flags: " + ", ".join(f"`{k}` x{v}" for k, v in sorted(s["flag_counts"].items())) + ".")
    lines += ["", "## Per solution", "", "| solution | kind | backend | evaluations | correct | flagged | incorrect "
              "| cached eval s (median) | speedup (median) |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in s["rows"]:
        lines.append(f"| {r['name']} | {r['kind']} | {r['backend']} | {r['evaluations']} | {r['correct']} | "
                     f"{r['flagged']} | {r['incorrect']} | {_f(r['cached_s'], '.1f')} | {_f(r['speedup'], '.2f')} |")
    lines += ["", "## Flagged or incorrect evaluations", ""]
    if not s["problems"]:
        lines.append("None.")
    for r in s["problems"]:
        worst = [f"{c['name']} norm {_f(c['norm_err'], '.1e')}" for c in r["configs"] if c.get("norm_err") is not None]
        lines.append(f"- `{r['name']}` ({r['backend']}) seed {r['seed']}: {problem_text(r)[:ERROR_CHARS]}"
                     + (f" [correctness run errors: {', '.join(worst)}]" if worst else ""))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the run


def _evaluators(device: str, backends, args) -> dict:
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits

    limits = Limits(build_timeout=args.build_timeout, run_timeout=120, time_timeout=300)
    return {b: Evaluator(device=device, backend=b, limits=limits, timing=dict(CAMPAIGN_TIMING),
                         check_calls=args.check_calls, compile_baseline=args.compile_baseline,
                         cache_dir=args.cache_dir, build_workers=args.workers) for b in backends}


def _backends(device: str) -> tuple:
    backends = BACKENDS["cpu" if device.startswith("cpu") else "cuda"]
    if "triton" in backends:
        try:
            import triton  # noqa: F401
        except ImportError:
            print("triton is not installed: the Triton solutions are left out", flush=True)
            backends = tuple(b for b in backends if b != "triton")
    return backends


def run(args) -> int:
    from tqdm import tqdm

    from kbench_env.tasks.suite import resolve_task

    backends = _backends(args.device)
    available = honest_solutions(backends, Path(args.variants))
    chosen = select(available, args.solutions, args.sample, args.sample_seed)
    seeds = list(range(args.seed_base, args.seed_base + args.seeds))
    if args.list:
        for s in chosen:
            print(f"{s.backend:7s} {s.kind:8s} {s.name}")
        print(f"{len(chosen)} of {len(available)} solutions x {len(seeds)} seeds")
        return 0
    if not chosen:
        print(f"no solution matches --solutions {args.solutions!r}", file=sys.stderr)
        return 2
    jsonl = Path(args.jsonl)
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    harness = harness_hash()
    done = {key(r): r for r in load_records(jsonl) if r.get("harness") == harness}
    todo = [(seed, s) for seed in seeds for s in chosen  # seed-major: builds happen in the first round
            if (harness, s.backend, s.label, source_hash(s.path), seed) not in done]
    resumed = len(seeds) * len(chosen) - len(todo)
    print(f"{len(chosen)} solutions x {len(seeds)} seeds on {args.device} ({', '.join(backends)}); "
          f"{resumed} evaluations already in {jsonl}, {len(todo)} to run", flush=True)
    evaluators = _evaluators(args.device, backends, args) if todo else {}
    t0 = time.perf_counter()
    bad = [r for r in done.values() if r["solution"] in {s.label for s in chosen} and r["seed"] in seeds
           and (r["flagged"] or not r["correct"])]
    new: list = []  # this run's records
    bar = tqdm(total=len(todo), unit="eval", dynamic_ncols=True, file=sys.stdout, disable=not todo)
    with open(jsonl, "a") as log:
        for seed in seeds:
            for backend, ev in evaluators.items():
                items = [s for sd, s in todo if sd == seed and s.backend == backend]
                pairs = [(resolve_task(s.task), s.path.read_text()) for s in items]
                for i, r in ev.evaluate_iter(pairs, seed=seed):
                    rec = record_of(items[i], seed, r, harness, args.device)
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                    done[key(rec)] = rec
                    new.append(rec)
                    if rec["flagged"] or not rec["correct"]:
                        bad.append(rec)
                        tqdm.write(f"{'FLAGGED' if rec['flagged'] else 'WRONG'} {rec['name']} seed {seed}: "
                                   f"{problem_text(rec)[:240]}", file=sys.stdout)
                    bar.set_postfix(flagged=sum(b["flagged"] for b in bad),
                                    wrong=sum(not b["flagged"] for b in bad),
                                    last=f"{rec['name']} {rec['eval_seconds'] or 0:.1f}s")
                    bar.update(1)
    bar.close()
    for ev in evaluators.values():
        ev.close()
    elapsed = time.perf_counter() - t0
    labels = {s.label for s in chosen}
    records = [r for r in done.values() if r["solution"] in labels and r["seed"] in seeds]
    s = summarise(records)
    own = sum(r.get("eval_seconds") or 0 for r in new)
    overlap = min(1.0, elapsed / own) if own else 1.0
    meta = {"device": args.device, "backends": backends, "commit": _commit(), "harness": harness,
            "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (args.argv or [])),
            "selected": len(chosen), "available": len(available), "spec": args.solutions, "sample": args.sample,
            "seeds": len(seeds), "seed_list": ", ".join(map(str, seeds)), "timing": CAMPAIGN_TIMING,
            "check_calls": args.check_calls, "compile_baseline": bool(args.compile_baseline),
            "elapsed_s": elapsed, "ran": len(todo), "resumed": resumed,
            "jsonl": os.path.relpath(jsonl, ROOT) if jsonl.resolve().is_relative_to(ROOT) else str(jsonl),
            "overlap": overlap, "estimate_s": None}
    summed = estimate_seconds(records, available, len(seeds))
    meta["estimate_s"] = summed * overlap if summed is not None else None
    text = markdown(s, meta)
    Path(args.record).parent.mkdir(parents=True, exist_ok=True)
    Path(args.record).write_text(text)
    print(text)
    return 1 if s["flagged"] or s["incorrect"] else 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (cuda runs the cuda and triton solutions)")
    p.add_argument("--seeds", type=int, default=5, help="evaluations of each solution, each with its own seed")
    p.add_argument("--seed-base", type=int, default=1, help="the first seed (seeds are consecutive)")
    p.add_argument("--solutions", default=None, help="named suites and name substrings, comma-separated")
    p.add_argument("--sample", type=int, default=0, help="add this many other solutions, drawn at random")
    p.add_argument("--sample-seed", type=int, default=0)
    p.add_argument("--variants", default=str(VARIANTS), help="folder of honest variants (<backend>/<level>/...)")
    p.add_argument("--jsonl", default=None, help="default bench/results/false_positives_<device>.jsonl")
    p.add_argument("--record", default=None, help="default bench/results/false_positives_<device>.md")
    p.add_argument("--workers", type=int, default=None, help="evaluations in flight (default: the CPU count)")
    p.add_argument("--check-calls", type=int, default=4, help="timed calls whose outputs are checked, at random")
    p.add_argument("--compile-baseline", action="store_true", help="also time torch.compile (slow; no flag uses it)")
    p.add_argument("--build-timeout", type=float, default=900)
    p.add_argument("--cache-dir", default=None, help="build cache (default $KBENCH_CACHE or ~/.cache/kbench)")
    p.add_argument("--list", action="store_true", help="print the selection and exit")
    args = p.parse_args(argv)
    args.argv = argv
    kind = "cpu" if args.device.startswith("cpu") else "cuda"
    args.jsonl = args.jsonl or str(ROOT / f"bench/results/false_positives_{kind}.jsonl")
    args.record = args.record or str(ROOT / f"bench/results/false_positives_{kind}.md")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
