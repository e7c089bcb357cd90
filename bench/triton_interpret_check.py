"""Checks the Triton candidates of bench/data/rl_batch/triton on the CPU, in Triton's interpreter (TRITON_INTERPRET=1).

For each candidate, the task's ``Model`` and the candidate's ``ModelNew`` are built under the same init seed (as the
worker does), fed the same inputs, and their outputs compared with the evaluator's own rule
(``compare.compare_outputs``: the reference computed in higher precision, the task's tolerances per dtype) on every
configuration of the task: CPU, CUDA-only and held-out ones, in their dtypes. CUDA configurations too large for the
interpreter are shrunk (``SHRINK``) to sizes of the same structure: odd sizes, rows longer than one block, the same
dtype; the table marks them with ``*``. This checks numerics and masks. The strict rules (no PyTorch compute in
``forward``) are the evaluator's to judge: ``--evaluator`` also runs every candidate through
``Evaluator(device="cpu", backend="triton")`` on the task's CPU configurations and reports its verdict and flags.

    python bench/triton_interpret_check.py                      # every candidate, every configuration
    python bench/triton_interpret_check.py level1/relu          # one task's candidates
    python bench/triton_interpret_check.py --evaluator          # and the evaluator's verdict
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # read when a kernel is decorated: before any candidate is imported

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kbench_env.measure.compare import compare_outputs  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402
from kbench_env.tasks.task import DTYPES, Config, seeded  # noqa: E402

CANDIDATES = ROOT / "bench/data/rl_batch/triton"

#: (task, CUDA config) -> interpreter-sized sizes of the same structure (odd sizes stay odd, long rows stay long).
SHRINK = {
    ("level1/gelu", "gpu"): {"batch_size": 3, "dim": 65536},
    ("level1/gelu", "gpu-bf16"): {"batch_size": 2, "dim": 98304},
    ("level1/relu", "gpu"): {"batch_size": 3, "dim": 65536},
    ("level1/relu", "gpu-bf16"): {"batch_size": 3, "dim": 65536},
    ("level1/softmax_rows", "gpu"): {"batch_size": 5, "dim": 16384},
    ("level1/softmax_rows", "gpu-bf16"): {"batch_size": 3, "dim": 50257},
    ("level1/layer_norm", "gpu"): {"batch_size": 1, "seq_len": 6, "hidden": 4096},
    ("level1/layer_norm", "gpu-bf16"): {"batch_size": 1, "seq_len": 5, "hidden": 5120},
    ("level1/sum_dim1", "gpu"): {"batch_size": 2, "dim1": 4096, "dim2": 256},
    ("level1/sum_dim1", "gpu-odd"): {"batch_size": 2, "dim1": 7777, "dim2": 129},
    ("level2/linear_relu", "gpu"): {"batch_size": 33, "in_features": 4096, "out_features": 80},
    ("level2/linear_relu", "gpu-bf16"): {"batch_size": 40, "in_features": 2048, "out_features": 136},
    ("robust/layernorm_forward", "gpu"): {"batch_size": 1, "seq_len": 5, "hidden": 4096},
    ("robust/layernorm_forward", "gpu-odd"): {"batch_size": 1, "seq_len": 7, "hidden": 5123},
    ("robust/rmsnorm_forward", "gpu"): {"batch_size": 1, "seq_len": 5, "hidden": 4096},
    ("robust/rmsnorm_forward", "gpu-odd"): {"batch_size": 1, "seq_len": 5, "hidden": 8187},
}


def candidates(only: list[str]) -> list[tuple[str, Path]]:
    """(task name, candidate file) for every candidate, or those of the tasks named in ``only``."""
    out = []
    for f in sorted(CANDIDATES.glob("*/*__*.py")):
        task = f"{f.parent.name}/{f.stem.split('__')[0]}"
        if not only or task in only:
            out.append((task, f))
    return out


def load_candidate(path: Path):
    """The candidate's module, imported from its file (``@triton.jit`` reads the kernel's source from it)."""
    spec = importlib.util.spec_from_file_location(f"cand_{path.parent.name}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def configs(task) -> list[tuple[Config, bool]]:
    """Every configuration of ``task`` as checked here, and whether it was shrunk."""
    out = []
    for c in task.configs:
        sizes = SHRINK.get((task.name, c.name))
        if sizes is None and "cpu" not in c.devices:
            raise SystemExit(f"{task.name}: CUDA config {c.name!r} has no interpreter size in SHRINK "
                             f"(bench/triton_interpret_check.py)")
        out.append((Config(c.name, sizes or c.sizes, c.dtype, c.held_out, ("cpu",)), sizes is not None))
    return out


def check_config(task, cand_mod, cfg: Config, seed: int = 1234, init_seed: int = 99) -> tuple[bool, str]:
    """(passed, figures or the mismatch) of one candidate on one configuration."""
    mod, init_inputs, inputs = task.instantiate(cfg, seed, "cpu")
    ref = task.reference_output(mod, init_inputs, inputs, cfg, init_seed, "cpu")
    dtype = DTYPES[cfg.dtype]
    with seeded(init_seed):
        model = cand_mod.ModelNew(*init_inputs)
    model = model.to(dtype=dtype).eval()
    with torch.no_grad():
        out = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    mismatch, fig = compare_outputs(out, ref, dtype, task.tolerance)
    if mismatch is not None:
        return False, str(mismatch)
    return True, f"norm {fig['norm_err']:.1e} max {fig['max_err']:.1e}"


def evaluator_verdicts(items: list[tuple[str, Path]]) -> dict:
    """Candidate file -> the CPU evaluator's verdict (correct and unflagged, or its flags and first error)."""
    from kbench_env.pipeline.evaluator import Evaluator
    from kbench_env.sandbox.confine.policy import Limits

    ev = Evaluator(device="cpu", backend="triton", limits=Limits(build_timeout=600, run_timeout=600, time_timeout=600),
                   timing={"warmup": 0, "min_reps": 2, "max_reps": 2, "min_seconds": 0})
    results = ev.evaluate_many([(resolve_task(t), f.read_text()) for t, f in items], max_workers=1, seed=4321)
    out = {}
    for (_, f), r in zip(items, results):
        ok = r.correct and not r.integrity_flags
        out[f] = "ok" if ok else f"FAIL {r.integrity_flags} {(r.error or '')[:200]}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="*", help="task names (level1/relu ...); default: every task with candidates")
    ap.add_argument("--evaluator", action="store_true", help="also run each candidate through the CPU evaluator")
    args = ap.parse_args(argv)
    items = candidates(args.tasks)
    if not items:
        raise SystemExit(f"no candidates under {CANDIDATES} for {args.tasks or 'any task'}")
    failures = 0
    for name, f in items:
        task = resolve_task(name)  # cached by the suite loader
        cand = load_candidate(f)
        cells = []
        for cfg, shrunk in configs(task):
            t0 = time.time()
            try:
                ok, msg = check_config(task, cand, cfg)
            except Exception as exc:  # a crash is this candidate's failure on this configuration
                ok, msg = False, f"{type(exc).__name__}: {str(exc)[:300]}"
            failures += not ok
            label = f"{cfg.name}{'*' if shrunk else ''}[{cfg.dtype}]"
            cells.append(f"{label} {'ok' if ok else 'FAIL'}")
            if not ok:
                print(f"  FAIL {f.relative_to(ROOT)} {label}: {msg}", flush=True)
            else:
                print(f"  ok   {f.relative_to(ROOT)} {label}: {msg} ({time.time() - t0:.1f}s)", flush=True)
        print(f"| {name} | {f.stem.split('__')[1]} | {' | '.join(cells)} |", flush=True)
    if args.evaluator:
        for f, verdict in evaluator_verdicts(items).items():
            failures += verdict != "ok"
            print(f"evaluator {f.relative_to(ROOT)}: {verdict}", flush=True)
    print(f"{len(items)} candidates, {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
