"""How much of KernelBench and robust-kbench kbench takes unchanged, from local checkouts of both:

    python bench/compat.py --kernelbench /path/to/KernelBench --robust-kbench /path/to/robust-kbench

For every KernelBench level folder (KernelBench/level1..level4) and every robust-kbench task group: how many files
(task folders) load; how many have, for the CPU and for a GPU ("cuda"), a shown configuration and a held-out one
whose input shapes differ from every shown one (the GPU's by shapes on the meta device: no GPU needed); which were
skipped and why; the load time with an empty derivation cache (cold) and again with it filled (warm); and
``kbench tasks --suite <level folder>`` end to end, cold and warm. Then a small sample of honest CPU solutions
(``--solutions``, KernelBench-format ModelNew files named after KernelBench level-1 files) is evaluated on the CPU.

Appends one JSON record per row to ``<out>.jsonl`` (append-only) and writes ``<out>.md`` for this run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEVICES = ("cpu", "cuda")


def _distinct(task, device: str) -> dict:
    """Whether ``task`` has a shown and a distinct held-out configuration on ``device``."""
    cfgs = task.configs_for(device)
    shown = [c for c in cfgs if not c.held_out]
    held = [c for c in cfgs if c.held_out]
    shapes = {c.name: tuple(task.input_shapes(c)) for c in cfgs}
    seen = {shapes[c.name] for c in shown}
    return {"shown": bool(shown), "held_out": bool(held),
            "distinct": bool(shown) and any(shapes[c.name] not in seen for c in held)}


def _survey(label: str, loader, items: list, progress) -> dict:
    """Load every item (``loader(item) -> [Task]``), derive its configurations and check them per device."""
    from kbench_env.tasks.task import TaskError

    row = {"row": label, "items": len(items), "loaded": 0, "tasks": 0, "skipped": [],
           **{f"{d}_{k}": 0 for d in DEVICES for k in ("shown", "distinct")}}
    bar = progress.add_task(label, total=len(items))
    t0 = time.perf_counter()
    for item in items:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tasks = loader(item)
                for t in tasks:
                    t.configs  # noqa: B018 - derive now: a derivation error is this item's
            row["loaded"] += 1
        except (TaskError, ValueError, OSError) as exc:
            row["skipped"].append({"item": str(item), "why": str(exc).splitlines()[0][:300]})
            progress.advance(bar)
            continue
        for t in tasks:
            row["tasks"] += 1
            for d in DEVICES:
                r = _distinct(t, d)
                row[f"{d}_shown"] += r["shown"]
                row[f"{d}_distinct"] += r["distinct"]
                if not r["distinct"]:
                    row.setdefault(f"{d}_missing", []).append(t.name)
        progress.advance(bar)
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def _kbench_tasks_seconds(folder: Path, cache: str) -> tuple[float, int]:
    env = dict(os.environ, KBENCH_CACHE=cache)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "kbench_apps.cli", "tasks", "--suite", str(folder)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=1800)
    return round(time.perf_counter() - t0, 2), p.returncode


def _evaluate(solutions: Path, kb: Path, progress) -> list[dict]:
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.loading import load_task

    items = []
    for sol in sorted(solutions.glob("*.py")):
        ref = kb / "KernelBench" / "level1" / sol.name
        if ref.is_file():
            items.append((sol, load_task(ref)))
    ev = Evaluator(device="cpu")
    bar = progress.add_task("honest CPU solutions", total=len(items))
    out = []
    try:
        results = ev.evaluate_many([(t, s.read_text()) for s, t in items], max_workers=2, seed=1234,
                                   progress=lambda *_: progress.advance(bar))
    finally:
        ev.close()
    for (sol, task), r in zip(items, results):
        out.append({"row": "eval", "task": task.name, "solution": str(sol.relative_to(ROOT)), "correct": r.correct,
                    "speedup": r.speedup, "reward": r.reward, "error": (r.error or "")[:300],
                    "configs": [f"{c.name}{'*' if c.held_out else ''}" for c in r.configs]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, required=True, help="KernelBench checkout (holds KernelBench/level*)")
    ap.add_argument("--robust-kbench", type=Path, default=None, help="robust-kbench checkout (holds tasks/)")
    ap.add_argument("--solutions", type=Path, default=ROOT / "bench/data/kernelbench_cpu")
    ap.add_argument("--no-eval", action="store_true", help="skip evaluating the honest solutions")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/compat_cpu")
    args = ap.parse_args()

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kbench_env.tasks.loaders.robust_kbench import load_robust_tasks
    from kbench_env.tasks.loading import load_task

    def kb_commit(path: Path) -> str:
        p = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return (p.stdout.strip() or "?") + (" (with uncommitted changes)" if dirty else "")

    import torch

    run = {"time": time.strftime("%Y-%m-%d %H:%M:%S"), "kbench": kb_commit(ROOT),
           "kernelbench": kb_commit(args.kernelbench), "torch": torch.__version__, "cores": os.cpu_count(),
           "machine": platform.machine()}
    if args.robust_kbench:
        run["robust_kbench"] = kb_commit(args.robust_kbench)
    rows: list[dict] = []
    console = Console(stderr=True)
    levels = sorted((args.kernelbench / "KernelBench").glob("level[0-9]*"))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        for folder in levels:
            files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
            with tempfile.TemporaryDirectory() as cache:
                os.environ["KBENCH_CACHE"] = cache  # the derivation cache: empty (cold), then filled (warm)
                row = _survey(f"KernelBench/{folder.name}", lambda f: [load_task(f)], files, progress)
                warm = _survey(f"KernelBench/{folder.name} (warm)", lambda f: [load_task(f)], files, progress)
                row["seconds_warm"] = warm["seconds"]
            os.environ.pop("KBENCH_CACHE", None)
            with tempfile.TemporaryDirectory() as cache:
                row["kbench_tasks_cold"], rc_cold = _kbench_tasks_seconds(folder, cache)
                row["kbench_tasks_warm"], rc_warm = _kbench_tasks_seconds(folder, cache)
                row["kbench_tasks_rc"] = [rc_cold, rc_warm]
            rows.append(row)
        if args.robust_kbench:
            root = args.robust_kbench / "tasks"
            folders = sorted({p.parent for p in root.rglob("func_forward.py")
                              if not any(s.startswith((".", "__")) for s in p.parent.relative_to(root).parts)})
            groups: dict = {}
            for f in folders:
                rel = f.relative_to(root).parts
                groups.setdefault("/".join(rel[:2]) if rel[0] == "kernelbench" else "other groups", []).append(f)
            for group, items in groups.items():
                rows.append(_survey(f"robust-kbench/{group}",
                                    lambda f: load_robust_tasks(f, name=f.relative_to(root).as_posix()),
                                    items, progress))
        if not args.no_eval:
            rows += _evaluate(args.solutions, args.kernelbench, progress)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out.with_suffix(".jsonl"), "a") as f:
        for r in rows:
            f.write(json.dumps({**run, **r}) + "\n")
    args.out.with_suffix(".md").write_text(_markdown(run, rows))
    print(args.out.with_suffix(".md").read_text())
    return 0


def _markdown(run: dict, rows: list[dict]) -> str:
    lines = [f"# kbench on KernelBench and robust-kbench, unchanged ({run['time']}, {run['cores']} cores, "
             f"torch {run['torch']})", "",
             f"`bench/compat.py` at kbench {run['kbench']}, KernelBench {run['kernelbench']}"
             + (f", robust-kbench {run['robust_kbench']}" if run.get("robust_kbench") else "")
             + "; raw records: `compat_cpu.jsonl` (append-only).", "",
             "Distinct: a shown configuration and a held-out one whose input shapes differ from every shown one "
             "(cuda: by shapes on the meta device). Load: every file loaded and its configurations derived, with "
             "an empty derivation cache (cold) and a filled one (warm). `kbench tasks`: the command end to end on "
             "the level folder (a fresh process: interpreter and torch import included).", "",
             "| set | files | load | tasks | cpu distinct | cuda distinct | load cold / warm | `kbench tasks` cold / "
             "warm |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["row"] == "eval":
            continue
        kt = (f"{r['kbench_tasks_cold']} s / {r['kbench_tasks_warm']} s" if "kbench_tasks_cold" in r else "")
        warm = f" / {r['seconds_warm']} s" if "seconds_warm" in r else ""
        lines.append(f"| {r['row']} | {r['items']} | {r['loaded']} | {r['tasks']} | {r['cpu_distinct']} | "
                     f"{r['cuda_distinct']} | {r['seconds']} s{warm} | {kt} |")
    skipped = [(r["row"], s) for r in rows if r["row"] != "eval" for s in r["skipped"]]
    if skipped:
        lines += ["", "## Skipped, with the reason kbench gives", ""]
        lines += [f"- {row}: `{Path(s['item']).name}`: {s['why'].replace(s['item'] + ': ', '')}"
                  for row, s in skipped]
    missing = [(r["row"], d, r[f"{d}_missing"]) for r in rows if r["row"] != "eval" for d in DEVICES
               if r.get(f"{d}_missing")]
    if missing:
        lines += ["", "## Loaded, but without a shown and a distinct held-out configuration", ""]
        lines += [f"- {row} ({d}): {len(names)} tasks: {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
                  for row, d, names in missing]
    evals = [r for r in rows if r["row"] == "eval"]
    if evals:
        lines += ["", "## Honest CPU solutions (bench/data/kernelbench_cpu) on KernelBench level-1 files", "",
                  "| task | correct | speedup | reward | configurations (* held out) | error |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for r in evals:
            sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
            lines.append(f"| {r['task']} | {r['correct']} | {sp} | {r['reward']:.2f} | {', '.join(r['configs'])} | "
                         f"{r['error'].replace('|', '/')[:120]} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
