"""Evaluate every shipped CUDA and Triton sample solution on the GPU and record the outcome.

    python bench/gpu_validate.py                       # all of tasks/solutions/{cuda,triton}
    python bench/gpu_validate.py --backends cuda --only level2 --workers 8 --compile none

Writes ``bench/results/gpu_solutions.md`` (a table per backend) and ``bench/results/gpu_solutions.jsonl`` (one
record per solution: GPU name, date, correctness, speedup per configuration, speedup against torch.compile,
integrity flags, errors). One failing task does not stop the others.

Cost on an H100 host: a cold CUDA ``load_inline`` build takes ~60 s, so ``--workers`` evaluations (both backends
together) are in flight at once: their builds overlap while the device runs one candidate at a time (one device
lock shared by the evaluators). torch.compile costs ~5-30 s per configuration, so by default (``--compile
primary``) it is measured on each task's main GPU configuration only, queued as soon as the task's main result is
in (its build is cached by then), and none starts after ``--compile-deadline`` seconds; ``--compile all`` measures
it on every configuration in the main evaluation (slow), ``none`` skips it.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIMING = {"warmup": 1, "min_reps": 5, "max_reps": 50, "min_seconds": 0.05}


def solutions(backend: str, only: list[str]) -> list[Path]:
    paths = sorted((ROOT / "tasks/solutions" / backend).glob("*/*.py"))
    return [p for p in paths if not only or any(o in f"{p.parent.name}/{p.stem}" for o in only)]


def primary_config(task, device: str = "cuda"):
    """The configuration the torch.compile comparison uses: the first shown GPU-only one, else the first GPU one."""
    gpu = task.configs_for(device)
    for c in gpu:
        if tuple(c.devices) == (device,) and not c.held_out:
            return c
    return gpu[0] if gpu else None


def _evaluator(backend: str, compile_baseline: bool, args):
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits

    return Evaluator(device=args.device, backend=backend, compile_baseline=compile_baseline, timing=dict(TIMING),
                     limits=Limits(build_timeout=args.build_timeout, run_timeout=120, time_timeout=300),
                     build_workers=args.workers)


def _line(t0: float, label: str, r) -> None:
    status = "ok" if r.correct and not r.integrity_flags else ("FLAGGED" if r.integrity_flags else "FAIL")
    speed = f"{r.speedup:.3g}x" if r.speedup else "-"
    phases = " ".join(f"{k}={v:.1f}" for k, v in (r.phase_seconds or {}).items())
    print(f"[{time.perf_counter() - t0:6.0f} s] {label} {r.task}: {status} {speed}  ({phases})", flush=True)


def run(plan: dict, args, t0: float, on_progress=None) -> list[dict]:
    """Evaluate ``{backend: [solution paths]}`` in one pipeline: every backend's evaluations in one pool (builds
    overlap), the GPU's lock taken by every evaluator (one candidate on the device at a time, whatever its
    backend; kbench_env/machine/device_lock.py), and each correct solution's torch.compile comparison queued as soon as its result arrives, until
    ``--compile-deadline`` seconds after the start."""
    from concurrent.futures import ThreadPoolExecutor, wait

    from kbench_env.tasks.suite import resolve_task

    evaluators, compilers = {}, {}
    for backend in plan:  # on a GPU every evaluator takes the same per-GPU lock (kbench_env/machine/device_lock.py)
        evaluators[backend] = _evaluator(backend, args.compile == "all", args)
        if args.compile == "primary":
            compilers[backend] = _evaluator(backend, True, args)
    records = []
    jobs = []
    for backend, paths in plan.items():
        for p in paths:
            rec = {"backend": backend, "task": f"{p.parent.name}/{p.stem}", "file": str(p.relative_to(ROOT))}
            records.append(rec)
            try:
                jobs.append((rec, resolve_task(rec["task"]), p.read_text()))
            except Exception as exc:  # noqa: BLE001 - a missing task is a row, not a crash
                rec.update(correct=False, error=f"task not loadable: {type(exc).__name__}: {exc}", error_stage="task")

    def main_job(rec, task, src):
        try:
            r = evaluators[rec["backend"]].evaluate(task, src)
        except Exception:  # noqa: BLE001 - evaluate() reports candidate failures itself; this is a harness bug
            rec.update(correct=False, error=traceback.format_exc(limit=3), error_stage="internal")
            return
        rec.update(_summarise(r))
        _line(t0, rec["backend"], r)
        if args.compile == "primary" and r.correct and not r.integrity_flags:
            cfg = primary_config(task, args.device.split(":")[0])
            if cfg is not None:
                rec["compile_config"] = cfg.name
                futures.append(compile_pool.submit(compile_job, rec, dataclasses.replace(task, configs=[cfg]), src))

    def compile_job(rec, task, src):
        if time.perf_counter() - t0 > args.compile_deadline:
            rec["compile_pass_error"] = f"not measured: past --compile-deadline {args.compile_deadline:.0f} s"
            return
        try:
            r = compilers[rec["backend"]].evaluate(task, src)
            _line(t0, rec["backend"] + "+compile", r)
            c = r.configs[0] if r.configs else None
            rec["speedup_compile"] = (c.compile_ms / c.candidate_ms) if c and c.compile_ms and c.candidate_ms else None
            rec["compile_ms"] = c.compile_ms if c else None
            if not r.correct:
                rec["compile_pass_error"] = (r.error or "; ".join(r.integrity_flags))[:300]
        except Exception:  # noqa: BLE001
            rec["compile_pass_error"] = traceback.format_exc(limit=2)[-300:]

    futures: list = []
    pool = ThreadPoolExecutor(max_workers=max(1, args.workers))
    compile_pool = ThreadPoolExecutor(max_workers=2)
    futures += [pool.submit(main_job, *job) for job in jobs]
    while True:  # compile jobs are added while main jobs finish
        pending = [f for f in futures if not f.done()]
        if not pending:
            break
        left = args.deadline - (time.perf_counter() - t0) if args.deadline else None
        if left is not None and left <= 0:
            for rec in records:  # what did not finish is a row saying so, not a silent gap
                if "correct" not in rec:
                    rec.update(correct=False, error=f"not finished within --deadline {args.deadline:.0f} s",
                               error_stage="deadline")
            break
        wait(pending, timeout=None if left is None else min(left, 30))
        if on_progress is not None:
            on_progress(records)
    pool.shutdown(wait=False, cancel_futures=True)
    compile_pool.shutdown(wait=False, cancel_futures=True)
    return records


def _summarise(r) -> dict:
    return {
        "correct": bool(r.correct),
        "reward": r.reward,
        "speedup": r.speedup,
        "speedup_compile": r.speedup_compile,
        "integrity_flags": list(r.integrity_flags),
        "error": (r.error or "")[:2000] or None,
        "error_stage": r.error_stage,
        "log_tail": (r.log_tail or "")[-1500:] or None if not r.correct else None,
        "build_seconds": r.build_seconds,
        "cached_build": r.cached_build,
        "eval_seconds": r.eval_seconds,
        "phase_seconds": r.phase_seconds,
        "configs": [{"name": c.name, "dtype": c.dtype, "held_out": c.held_out, "correct": c.correct,
                     "norm_err": c.norm_err, "candidate_ms": c.candidate_ms, "reference_ms": c.reference_ms,
                     "compile_ms": c.compile_ms, "speedup": c.speedup} for c in r.configs],
    }


def _fmt(x, spec=".3g", suffix="x") -> str:
    return "-" if x is None else f"{x:{spec}}{suffix}"


def write_report(records: list[dict], meta: dict, out: Path) -> None:
    from kbench_env.protocol.integrity_flags import kinds

    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".jsonl"), "w") as f:
        for rec in records:
            f.write(json.dumps({**meta, **rec}, default=str) + "\n")
    lines = [f"# GPU validation of the sample solutions", "",
             f"- GPU: {meta['gpu']}", f"- date: {meta['date']}", f"- torch {meta['torch']}, triton {meta['triton']}",
             f"- timing: {meta['timing']}; torch.compile baseline: {meta['compile']}",
             f"- wall time: {meta['wall_seconds']:.0f} s", ""]
    for backend in sorted({r["backend"] for r in records}):
        rows = [r for r in records if r["backend"] == backend]
        ok = sum(1 for r in rows if r.get("correct") and not r.get("integrity_flags"))
        lines += [f"## {backend}: {ok}/{len(rows)} correct and unflagged", "",
                  "| task | correct | speedup (geomean) | per configuration (speedup vs eager) | vs torch.compile | flags / error |",
                  "|---|---|---|---|---|---|"]
        for r in rows:
            per = ", ".join(f"{c['name']}{'*' if c['held_out'] else ''} ({c['dtype']}): {_fmt(c['speedup'])}"
                            for c in r.get("configs", []))
            comp = _fmt(r.get("speedup_compile"))
            if r.get("compile_config") and r.get("speedup_compile") is not None:
                comp += f" ({r['compile_config']})"
            elif r.get("compile_pass_error"):
                comp += " (" + r["compile_pass_error"].replace("|", "/").replace("internal evaluator error: ", "").splitlines()[0][:90] + ")"
            issue = "; ".join(kinds(r.get("integrity_flags", []))) or (
                (r.get("error_stage") or "") + ": " + (r.get("error") or "").splitlines()[0][:160] if r.get("error") else "")
            lines.append(f"| {r['task']} | {'yes' if r.get('correct') else 'NO'} | {_fmt(r.get('speedup'))} | {per} | "
                         f"{comp} | {issue.replace('|', '/')} |")
        lines.append("")
    lines.append("`*` held-out configuration. Speedups are eager-PyTorch time over candidate time, per call, "
                 "CUDA-graph timed with the L2 flushed (see kbench_env/backends/cuda.py).")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="cuda,triton")
    ap.add_argument("--only", default="", help="comma-separated substrings of level/task names")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--compile", choices=["primary", "all", "none"], default="primary")
    ap.add_argument("--compile-deadline", type=float, default=330,
                    help="seconds after the start past which no torch.compile comparison starts (--compile primary)")
    ap.add_argument("--build-timeout", type=float, default=900)
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds after which the report is written with unfinished rows marked (0: wait for all)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/gpu_solutions")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script with the Triton interpreter")
    args = ap.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA GPU: nothing to validate")
        return 2
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    t0 = time.perf_counter()
    only = [o for o in args.only.split(",") if o]
    plan = {}
    for backend in [b for b in args.backends.split(",") if b]:
        if backend == "triton" and triton_version is None:
            print("triton is not installed: skipping the Triton solutions")
            continue
        plan[backend] = solutions(backend, only)
        print(f"{backend}: {len(plan[backend])} solutions", flush=True)
    def make_meta() -> dict:
        return {"gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu", "date": dt.datetime.now().isoformat(timespec="seconds"),
            "torch": torch.__version__, "triton": triton_version, "timing": TIMING, "compile": args.compile if args.compile != "primary" else f"primary (until {args.compile_deadline:.0f} s)",
            "wall_seconds": time.perf_counter() - t0}

    def partial(records):  # the report so far, rewritten as results come in (a killed run keeps them)
        write_report([r for r in records if "correct" in r], make_meta(), args.out)

    try:
        records = run(plan, args, t0, on_progress=partial)
    except Exception:  # noqa: BLE001 - still write what can be written
        records = [{"backend": "*", "task": "*", "correct": False, "error": traceback.format_exc(limit=4),
                    "error_stage": "internal"}]
    meta = make_meta()
    write_report(records, meta, args.out)
    bad = [r for r in records if not r.get("correct") or r.get("integrity_flags")]
    print(f"{len(records) - len(bad)}/{len(records)} correct and unflagged in {meta['wall_seconds']:.0f} s; "
          f"wrote {args.out.with_suffix('.md')} and .jsonl")
    for r in bad:
        print(f"  {r['backend']} {r['task']}: {r.get('integrity_flags') or (r.get('error') or '')[:300]}")
    tails = [r for r in bad if r.get("log_tail")]
    if tails:
        print(f"--- worker log of {tails[0]['task']} ---\n{tails[0]['log_tail']}")
    sys.stdout.flush()
    os._exit(0 if not bad else 1)  # evaluations still running past --deadline are abandoned, not awaited


if __name__ == "__main__":
    sys.exit(main())
