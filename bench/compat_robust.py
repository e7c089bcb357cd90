"""robust-kbench on the CPU: every task folder of a robust-kbench checkout loads, builds its reference on each CPU
configuration, and evaluates an honest candidate through the real Evaluator.

    python bench/compat_robust.py --robust-kbench /path/to/robust-kbench            # every task
    python bench/compat_robust.py --robust-kbench ... --only layernorm,level_2/task_3 --limit 5
    python bench/compat_robust.py --robust-kbench ... --rules kernelbench

The honest candidate is made for each task from the task itself (robust-kbench's own solutions are CUDA):
robust-kbench's ``forward_fn`` computes the result, and the candidate's own C++ kernel (a copy, built with the fast
path, ``kbench_env.fastpath.cpp_kernel``, in well under a second: the build cache is keyed by the candidate's whole
source, so a ``load_inline`` build, ~8 s here, would be paid again for every task) copies it into the output; the backward
form differentiates ``forward_fn`` with autograd and passes each gradient through that kernel. It is correct by
construction, so a task whose candidate is not correct is a harness failure (inputs, references, backward
handling, dtypes, comparison, tolerances, timing). Under the strict rules it is flagged for PyTorch compute in
forward, as it should be; ``--rules kernelbench`` (PyTorch operators beside an own kernel that runs) passes
through to ``Evaluator(rules=...)``.

Per task this records whether the reference was built on every CPU configuration (and why not), whether the
candidate was correct, its integrity flags and its error text, appended to a JSONL file as each task finishes; a
run started again skips the tasks already there for the same harness code (a hash of ``kbench_env``), task source,
candidate, rules and seed. The Markdown record (``--record``) gives the loading figures (folders, tasks, folders
skipped and why, whether names are unique), the counts, failures by cause, and a row per task.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import hashlib
import json
import os
import platform
import socket
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.false_positives import _commit, harness_hash, load_records  # noqa: E402

DEFAULT_CHECKOUT = os.environ.get("ROBUST_KBENCH", "/work/ext/SakanaAI+robust-kbench")
#: Short timing (bench/false_positives.py's reasoning): every timed call still gets fresh inputs and sampled outputs
#: are still checked; what this sweep measures is whether evaluation works, not the speedup.
TIMING = {"warmup": 1, "min_reps": 3, "max_reps": 10, "min_seconds": 0.02}
ERROR_CHARS = 600

HONEST_CPP = r'''
#include <cstdint>
#include <cstring>

// The candidate's own kernel: a copy of nbytes bytes (any dtype).
extern "C" void own_copy(const char* x, char* y, int64_t nbytes) { std::memcpy(y, x, (size_t)nbytes); }
'''


def honest_candidate(task) -> str:
    """A correct CPU candidate (``ModelNew`` source) for a robust-kbench task (see the module docstring)."""
    from kbench_env.tasks.loaders.robust_kbench.source import _model_class, _rk_block, _string_literal
    from kbench_env.tasks.loaders.robust_kbench.submission import _rk_meta, _rk_source_of

    meta = _rk_meta(task)
    plan = {"form": meta["form"], "init_keys": list(meta["init_settings"]),
            "const_of_init": dict(meta["init_settings"]), "input_names": list(meta["input_names"])}
    args = list(meta["input_names"]) + (["grad_out"] if meta["form"] == "backward" else [])
    reference = _model_class(plan, "_Reference", "_rk_forward_fn", "robust-kbench's Model with fn=forward_fn")
    return "\n".join([
        f'"""Honest CPU candidate for {task.name}: robust-kbench\'s forward_fn, then the own C++ copy kernel."""\n',
        _rk_block(meta["file"], _rk_source_of(task)),
        "import torch\nimport torch.nn as nn\nfrom kbench_env.fastpath import cpp_kernel\n",
        f"HONEST_CPP = {_string_literal(HONEST_CPP)}\n",
        'own_copy = cpp_kernel(HONEST_CPP, "own_copy", flags=["-O3"])\n',
        (f"GRAD_INPUTS = {tuple(meta['grad_inputs'])!r}\n" if meta["form"] == "backward" else ""),
        reference,
        "",
        "def _own(out):",
        "    if isinstance(out, (tuple, list)):",
        "        return type(out)(_own(o) for o in out)",
        "    src = out.contiguous()",
        "    dst = torch.empty_like(src)",
        "    own_copy(src, dst, src.numel() * src.element_size())",
        "    return dst",
        "",
        "",
        "class ModelNew(_Reference):",
        f"    def forward(self, {', '.join(args)}):",
        f"        return _own(super().forward({', '.join(args)}))",
        "",
    ])


def build_references(task, seed: int) -> list[dict]:
    """The task's reference on each CPU configuration, in this process: per configuration whether it was built
    (inputs, model, output) and why not."""
    import torch

    out = []
    for cfg in task.configs_for("cpu"):
        t0 = time.perf_counter()
        rec = {"config": cfg.name, "held_out": cfg.held_out, "ok": True, "error": None}
        try:
            _, y = task.reference(cfg, seed=seed, init_seed=seed + 1, device="cpu")
            ys = y if isinstance(y, (tuple, list)) else (y,)
            if not all(isinstance(t, torch.Tensor) for t in ys):
                raise TypeError(f"the reference returned {type(y).__name__}, not tensors")
            rec["nonfinite"] = any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in ys)
        except Exception as exc:  # noqa: BLE001 - recorded, with the reason
            rec["ok"], rec["error"] = False, f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        out.append(rec)
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def key(rec: dict) -> tuple:
    return rec["harness"], rec["task"], rec["task_sha"], rec["candidate_sha"], rec["rules"], rec["seed"]


def evaluator_rules(rules: str) -> tuple[dict, str]:
    """(keyword arguments for Evaluator, the rules the run uses)."""
    return {"rules": rules}, rules


def record_of(task, refs: list, r, cand_sha: str, harness: str, rules: str, seed: int) -> dict:
    return {
        "harness": harness, "task": task.name, "task_sha": task.source_hash, "candidate_sha": cand_sha,
        "rules": rules, "seed": seed, "form": "backward" if task.backward else "forward",
        "cpu_configs": [c.name for c in task.configs_for("cpu")],
        "references": refs, "reference_ok": bool(refs) and all(x["ok"] for x in refs),
        # values: every CPU configuration checked and equal to the reference; accepted: the Evaluator's verdict
        # (also false when flagged)
        "correct": bool(r.configs) and len(r.configs) == len(task.configs_for("cpu")) and all(c.correct for c in r.configs)
        and r.error is None,
        "accepted": bool(r.correct), "integrity_flags": list(r.integrity_flags), "stage": r.stage,
        "error_stage": r.error_stage, "error": (r.error or "")[:ERROR_CHARS] or None, "speedup": r.speedup,
        "eval_seconds": r.eval_seconds, "cached_build": r.cached_build, "phase_seconds": dict(r.phase_seconds or {}),
        "configs": [{"name": c.name, "correct": c.correct, "norm_err": c.norm_err, "max_err": c.max_err}
                    for c in r.configs],
        "time": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------------- summary


_KINDS = (("norm-wise relative error", "output values differ from the reference"),
          ("shape", "output shape differs"), ("dtype", "output dtype differs"), ("timed out", "timed out"),
          ("not finite", "non-finite output"), ("NaN", "non-finite output"))


def _cause(text: str | None) -> str:
    """A failure's kind, for counting: a known kind of mismatch, else the exception's name or first words."""
    text = (text or "").strip()
    if not text:
        return "no message"
    for needle, kind in _KINDS:
        if needle in text:
            return kind
    first = text.splitlines()[0]
    return (first.split(":")[0] if ":" in first[:60] else first)[:80]


def summarise(records: list[dict]) -> dict:
    refs_bad = [r for r in records if not r["reference_ok"]]
    wrong = [r for r in records if not r["correct"]]
    from kbench_env.protocol.integrity_flags import kinds
    flags = collections.Counter(k for r in records for k in kinds(r["integrity_flags"]))
    ref_causes = collections.Counter(_cause(x["error"]) for r in records for x in r["references"] if not x["ok"])
    if any(not r["references"] for r in records):
        ref_causes["no CPU configuration"] = sum(not r["references"] for r in records)
    wrong_causes = collections.Counter(f"{r['error_stage'] or 'incorrect'}: {_cause(r['error'])}" for r in wrong)
    return {"tasks": len(records), "reference_ok": len(records) - len(refs_bad), "correct": len(records) - len(wrong),
            "flagged": sum(bool(r["integrity_flags"]) for r in records), "flag_counts": dict(flags),
            "ref_causes": dict(ref_causes), "wrong_causes": dict(wrong_causes),
            "accepted": sum(r["accepted"] for r in records), "timed": sum(r["speedup"] is not None for r in records),
            "nonfinite": sum(any(x.get("nonfinite") for x in r["references"]) for r in records),
            "forms": collections.Counter(r["form"] for r in records)}


def markdown(s: dict, records: list[dict], meta: dict) -> str:
    import torch

    from kbench_env.protocol.integrity_flags import kinds

    lines = [
        "# robust-kbench on the CPU: references and an honest candidate per task", "",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {socket.gethostname()}, {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, torch {torch.__version__}",
        f"- code: commit {meta['commit']}, harness hash {meta['harness']}; robust-kbench checkout "
        f"`{meta['checkout']}` (commit {meta['checkout_commit']})",
        f"- command: `{meta['command']}`",
        f"- rules: {meta['rules']}; timing {TIMING}; seed {meta['seed']}",
        f"- loading: {meta['folders']} task folders, {meta['loaded']} tasks loaded in {meta['load_s']:.0f} s "
        f"({meta['skipped_n']} folder(s) skipped); names unique: {meta['unique']}"
        + (f" (repeated: {', '.join(meta['repeated'][:10])})" if meta["repeated"] else ""),
        f"- CPU configurations: {meta['cpu_stats']['with_cpu']} of {meta['loaded']} tasks have one, "
        f"{meta['cpu_stats']['distinct_held_out']} a held-out one whose input shapes no shown one has (on a GPU: "
        f"{meta['cpu_stats'].get('distinct_held_out_cuda', '-')}, by shapes on the meta device; a held-out "
        f"configuration that changes only settings the inputs do not see does not count); "
        f"{meta['cpu_stats']['derived']} have configurations derived by kbench for the CPU (robust-kbench's own "
        f"are sized for a GPU, or give the CPU only one)",
        f"- selection: {s['tasks']} of {meta['loaded']} tasks ({dict(s['forms'])})"
        + (f" (`--only {meta['only']}`)" if meta["only"] else "") + (f" (`--limit {meta['limit']}`)" if meta["limit"] else ""),
        f"- elapsed: {meta['elapsed_s']:.0f} s for {meta['ran']} tasks run now ({meta['resumed']} taken from "
        f"`{meta['jsonl']}`)",
        "",
        f"**{s['reference_ok']}/{s['tasks']} build their reference on every CPU configuration; "
        f"{s['correct']}/{s['tasks']} honest candidates correct (every CPU configuration equal to the reference, no "
        f"error); {s['flagged']} flagged; {s['accepted']} accepted by the Evaluator; {s['timed']} timed.**",
    ]
    if meta["skipped"]:
        lines += ["", "## Folders skipped at loading", ""]
        lines += [f"- `{p}`: {why[:ERROR_CHARS]}" for p, why in meta["skipped"]]
    lines += ["", "## Failures by cause", ""]
    if not (s["ref_causes"] or s["wrong_causes"]):
        lines += ["No failures: every reference built and every honest candidate was correct."]
    if s["ref_causes"]:
        lines += ["References not built: " + ", ".join(f"{k} x{v}" for k, v in sorted(s["ref_causes"].items()))]
    if s["wrong_causes"]:
        lines += ["Candidates not correct: " + ", ".join(f"{k} x{v}" for k, v in sorted(s["wrong_causes"].items()))]
    if s["flag_counts"]:
        lines += ["Integrity flags (expected under the strict rules: the candidate computes with PyTorch): "
                  + ", ".join(f"`{k}` x{v}" for k, v in sorted(s["flag_counts"].items()))]
    if s["nonfinite"]:
        lines += [f"References with non-finite values on some configuration: {s['nonfinite']}"]
    lines += ["", "## Per task", "", "| task | CPU configs | reference | correct | flagged | speedup | error |",
              "| --- | ---: | --- | --- | --- | ---: | --- |"]
    for r in records:
        bad = [x for x in r["references"] if not x["ok"]]
        ref = "y" if r["reference_ok"] else ("n: no CPU configuration" if not r["references"] else
                                             f"n: {bad[0]['config']}: {bad[0]['error'][:160]}")
        flag = ", ".join(kinds(r["integrity_flags"])) or "-"
        err = "-" if r["correct"] else f"{r['error_stage'] or 'incorrect'}: {(r['error'] or '').strip()[:200]}"
        speed = "-" if r["speedup"] is None else f"{r['speedup']:.2f}"
        lines.append(f"| {r['task']} | {len(r['cpu_configs'])} | {_md(ref)} | {'y' if r['correct'] else 'n'} | "
                     f"{flag} | {speed} | {_md(err)} |")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


# ---------------------------------------------------------------------- the run


def tasks_root(checkout: Path) -> Path:
    return checkout / "tasks" if (checkout / "tasks").is_dir() else checkout


def _parts(only: str | None) -> list:
    return [p.strip() for p in (only or "").split(",") if p.strip()]


def distinct_held_out(t, device: str) -> bool:
    """Whether ``t`` is shown a configuration on ``device`` and holds out one whose input shapes differ from every
    shown one's (settings the inputs do not see, an ``init_method``, do not count; a GPU's shapes are taken on
    the meta device: no GPU needed)."""
    cfgs = t.configs_for(device)
    shown = {tuple(t.input_shapes(c)) for c in cfgs if not c.held_out}
    return bool(shown) and any(tuple(t.input_shapes(c)) not in shown for c in cfgs if c.held_out)


def config_stats(tasks: list) -> dict:
    """How the loaded tasks stand: with a CPU configuration at all, with a held-out one whose input shapes differ
    from every shown one's on the CPU and on a GPU, and with configurations derived by kbench for the CPU."""
    return {"with_cpu": sum(bool(t.configs_for("cpu")) for t in tasks),
            "distinct_held_out": sum(distinct_held_out(t, "cpu") for t in tasks),
            "distinct_held_out_cuda": sum(distinct_held_out(t, "cuda") for t in tasks),
            "derived": sum(any(tuple(c.devices) == ("cpu",) for c in t.configs) for t in tasks)}


def select(tasks: list, only: str | None, limit: int | None) -> list:
    parts = _parts(only)
    chosen = [t for t in tasks if not parts or any(p in t.name for p in parts)]
    return chosen[:limit] if limit else chosen


def run(args) -> int:
    from tqdm import tqdm

    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.tasks.loaders.robust_kbench import load_robust_tree
    from kbench_env.sandbox.confine.policy import Limits

    checkout = Path(args.robust_kbench)
    root = tasks_root(checkout)
    if not root.is_dir():
        print(f"no robust-kbench checkout at {checkout} (give --robust-kbench or set ROBUST_KBENCH)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # with --only, only the folders whose path has one of its strings are loaded (the figures are theirs)
        folders_of = [p.removeprefix("robust-kbench/").removesuffix("/forward").removesuffix("/backward")
                      for p in _parts(args.only)]
        tasks, skipped = load_robust_tree(root, only=folders_of or None)
    load_s = time.perf_counter() - t0
    names = [t.name for t in tasks]
    repeated = sorted(n for n, c in collections.Counter(names).items() if c > 1)
    folders = len({p.parent for p in root.rglob("func_forward.py")})
    print(f"{folders} folders, {len(tasks)} tasks loaded in {load_s:.0f} s, {len(skipped)} skipped"
          + "".join(f"\n  skipped {p}: {why[:300]}" for p, why in skipped), flush=True)
    cpu_stats = config_stats(tasks)
    chosen = select(tasks, args.only, args.limit)
    if args.list:
        for t in chosen:
            print(f"{t.name}  ({len(t.configs_for('cpu'))} CPU configurations)")
        return 0
    ev_kw, rules = evaluator_rules(args.rules)
    harness = harness_hash()
    jsonl = Path(args.jsonl)
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    candidates = {t.name: honest_candidate(t) for t in chosen}
    done = {key(r): r for r in load_records(jsonl) if r.get("harness") == harness}
    keys = {t.name: (harness, t.name, t.source_hash, _sha(candidates[t.name]), rules, args.seed) for t in chosen}
    todo = [t for t in chosen if keys[t.name] not in done]
    resumed = len(chosen) - len(todo)
    print(f"{len(chosen)} tasks selected; {resumed} already in {jsonl}, {len(todo)} to run (rules: {rules})",
          flush=True)
    ev = None
    if todo:
        ev = Evaluator(device="cpu", backend="cpu", timing=dict(TIMING), compile_baseline=False,
                       limits=Limits(build_timeout=args.build_timeout, run_timeout=300, time_timeout=300),
                       cache_dir=args.cache_dir, build_workers=args.workers, **ev_kw)
    t1 = time.perf_counter()
    bar = tqdm(total=len(todo), unit="task", dynamic_ncols=True, file=sys.stdout, disable=not todo)
    bad = 0
    with open(jsonl, "a") as log:
        for k in range(0, len(todo), max(1, args.workers)):
            batch = todo[k:k + max(1, args.workers)]
            refs = [build_references(t, args.seed) for t in batch]
            pairs = [(t, candidates[t.name]) for t in batch]
            for i, r in ev.evaluate_iter(pairs, max_workers=args.workers, seed=args.seed):
                t = batch[i]
                rec = record_of(t, refs[i], r, _sha(candidates[t.name]), harness, rules, args.seed)
                log.write(json.dumps(rec) + "\n")
                log.flush()
                done[key(rec)] = rec
                if not rec["correct"] or not rec["reference_ok"]:
                    bad += 1
                    why = rec["error"] or "incorrect"
                    if not rec["reference_ok"]:
                        why = "reference: " + next((x["error"] or "" for x in rec["references"] if not x["ok"]),
                                                   "no CPU configuration")
                    tqdm.write(f"FAIL {t.name}: {why[:300]}", file=sys.stdout)
                bar.set_postfix(failed=bad, last=f"{t.name.split('/', 1)[1]} {r.eval_seconds or 0:.1f}s")
                bar.update(1)
    bar.close()
    if ev is not None:
        ev.close()
    records = [done[keys[t.name]] for t in chosen if keys[t.name] in done]
    s = summarise(records)
    meta = {"commit": _commit(), "harness": harness, "checkout": str(checkout),
            "checkout_commit": _git_head(checkout), "rules": rules, "seed": args.seed,
            "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (args.argv or [])),
            "folders": folders, "loaded": len(tasks), "load_s": load_s, "skipped_n": len(skipped),
            "skipped": [(os.path.relpath(p, root), why) for p, why in skipped], "unique": not repeated,
            "repeated": repeated, "cpu_stats": cpu_stats, "only": args.only, "limit": args.limit, "elapsed_s": time.perf_counter() - t1,
            "ran": len(todo), "resumed": resumed,
            "jsonl": os.path.relpath(jsonl, ROOT) if jsonl.resolve().is_relative_to(ROOT) else str(jsonl)}
    text = markdown(s, records, meta)
    Path(args.record).parent.mkdir(parents=True, exist_ok=True)
    Path(args.record).write_text(text)
    print(text.split("## Per task")[0])
    return 0 if s["reference_ok"] == s["correct"] == s["tasks"] and not repeated else 1


def _git_head(path: Path) -> str:
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--robust-kbench", default=DEFAULT_CHECKOUT,
                   help="a robust-kbench checkout or its tasks folder (default $ROBUST_KBENCH)")
    p.add_argument("--rules", choices=("strict", "kernelbench"), default="strict",
                   help="Evaluator rules (default strict)")
    p.add_argument("--only", default=None, help="comma-separated substrings of task names")
    p.add_argument("--limit", type=int, default=None, help="at most this many tasks (after --only)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=1, help="evaluations in flight")
    p.add_argument("--jsonl", default=str(ROOT / "bench/results/compat_robust_cpu.jsonl"))
    p.add_argument("--record", default=str(ROOT / "bench/results/compat_robust_cpu.md"))
    p.add_argument("--build-timeout", type=float, default=900)
    p.add_argument("--cache-dir", default=None, help="build cache (default $KBENCH_CACHE or ~/.cache/kbench)")
    p.add_argument("--list", action="store_true", help="print the selection and exit")
    args = p.parse_args(argv)
    args.argv = argv
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
