"""How often a float32 kernel's ReLU derivative disagrees with PyTorch's, on ``robust/linear_relu_backward``'s float32
configurations: the figure behind ``pipeline/nearby.py`` (a close miss judged again at nearby inputs).

    python bench/relu_flip_rate.py                      # 10000 calls per configuration, seed 0
    python bench/relu_flip_rate.py --calls 500 --out /tmp/flips

The task's backward masks ``grad_out`` with the ReLU's derivative, ``z > 0`` for the pre-activation
``z = x W^T + b``. Where ``z`` lies within rounding of zero, the side it falls on depends on how it was summed.
Each call draws the task's inputs and model as the Evaluator does (``Task.instantiate`` with the call's seed,
``Task.make_model`` with its init seed: ``x`` ~ N(0, 1), ``nn.Linear``'s uniform weights and bias) and computes
``z`` five ways:

- ``torch``: PyTorch's float32 ``F.linear`` (what the task's own float32 backward masks with);
- ``sequential``: float32, the bias first, then the K products added one at a time in order, each product and
  each sum rounded (a plain loop without fused multiply-add; the shipped CPU kernel's order);
- ``fma``: the same order with each step ``acc + x_k w_k`` rounded once (a fused multiply-add, emulated in
  float64 and rounded to float32: a double rounding, which differs from a true FMA far more rarely than flips);
- ``rounded64``: ``z`` computed in float64 and rounded to float32 (a correctly rounded kernel);
- ``float64``: ``z`` in float64 (the Evaluator's reference computes float32 configurations in float64).

A call counts as flipped for a pair when the two masks differ at any element. The headline rows are each float32
kernel against PyTorch's float32 mask; the rows against ``float64`` are what the Evaluator's check meets (its
reference is float64), PyTorch's own float32 backward included. torch runs on one thread (the BLAS's summation
order fixed). Writes ``<out>.jsonl`` (one row per configuration and pair, with the flipped calls' seeds) and
``<out>.md`` (machine, date, commit, command, the table).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kbench_env.machine.hardware import cpu_description  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402

TASK = "robust/linear_relu_backward"
KERNELS = ("sequential", "fma", "rounded64")
#: (kernel, against): every float32 kernel against PyTorch's float32 mask, then each against the float64 one
PAIRS = tuple((k, "torch") for k in KERNELS) + tuple((k, "float64") for k in ("torch", *KERNELS))
INIT_SEED_OFFSET = 1_000_003  # a call's model seed: its input seed plus this


def pre_activations(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> dict[str, torch.Tensor]:
    """``z = x W^T + b`` summed each way of the module docstring (float32 ``x``, ``w``, ``b``)."""
    x64, w64, b64 = x.double(), w.double(), b.double()
    z64 = F.linear(x64, w64, b64)
    seq = b.expand(x.shape[0], -1).clone()
    fma = seq.clone()
    for k in range(x.shape[1]):
        seq = seq + x[:, k : k + 1] * w[:, k]  # the product rounded, then the sum
        fma = (fma.double() + x64[:, k : k + 1] * w64[:, k]).float()  # the float32 product is exact in float64
    return {"torch": F.linear(x, w, b), "sequential": seq, "fma": fma, "rounded64": z64.float(), "float64": z64}


def one_call(task, config, seed: int) -> dict[tuple[str, str], tuple[int, float]]:
    """For each pair that disagrees on this call: (elements whose mask differs, the largest |z| among them, z the
    float64 pre-activation)."""
    mod, init_inputs, inputs = task.instantiate(config, seed)
    model = task.make_model(mod, init_inputs, seed + INIT_SEED_OFFSET, torch.float32, "cpu")
    with torch.no_grad():
        z = pre_activations(inputs[0], model.linear.weight, model.linear.bias)
    masks = {name: v > 0 for name, v in z.items()}
    out = {}
    for kernel, against in PAIRS:
        differ = masks[kernel] != masks[against]
        n = int(differ.sum())
        if n:
            out[(kernel, against)] = (n, float(z["float64"][differ].abs().max()))
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson interval of a rate ``k / n``."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def measure(calls: int, seed: int, progress: bool = True) -> list[dict]:
    """One row per float32 configuration and pair: calls, flipped calls (and their seeds), elements flipped."""
    task = resolve_task(TASK)
    rows = []
    for config in [c for c in task.configs_for("cpu") if c.dtype == "float32"]:
        flips: dict[tuple[str, str], list] = {pair: [] for pair in PAIRS}
        elements = config.sizes["batch_size"] * config.sizes["out_features"]
        start = time.monotonic()
        for i in range(calls):
            s = seed + i
            for pair, (n, zmax) in one_call(task, config, s).items():
                flips[pair].append((s, n, zmax))
            if progress and (i + 1) % 1000 == 0:
                print(f"  {config.name}: {i + 1}/{calls} calls, {time.monotonic() - start:.0f} s", flush=True)
        for (kernel, against), found in flips.items():
            low, high = wilson(len(found), calls)
            rows.append({"config": config.name, "sizes": config.sizes, "elements_per_call": elements,
                         "kernel": kernel, "against": against, "calls": calls, "flipped_calls": len(found),
                         "rate": len(found) / calls, "rate_95": [low, high],
                         "elements_flipped": sum(n for _, n, _ in found),
                         "max_abs_z_flipped": max((zmax for _, _, zmax in found), default=None),
                         "seeds": [s for s, _, _ in found]})
    return rows


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=30)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return out.stdout.strip() + (" (uncommitted changes)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _pooled(rows: list[dict], kernel: str, against: str) -> tuple[int, int]:
    chosen = [r for r in rows if r["kernel"] == kernel and r["against"] == against]
    return sum(r["flipped_calls"] for r in chosen), sum(r["calls"] for r in chosen)


def summary_markdown(rows: list[dict], meta: dict) -> str:
    lines = ["# How often a float32 kernel's ReLU derivative disagrees with PyTorch's (`robust/linear_relu_backward`)",
             "", f"- machine: {meta['machine']}; Python {meta['python']}, torch {meta['torch']} (1 thread)",
             f"- date (UTC): {meta['start']} - {meta['end']}", f"- commit: {meta['commit']}",
             f"- command: `{meta['command']}`", "",
             "What was computed and why: bench/relu_flip_rate.py's docstring. A call is flipped for a pair when the two "
             "ReLU derivative masks (`z > 0`) differ at any element; the interval is Wilson's 95 %.", "",
             "| configuration (float32) | kernel | against | flipped calls | rate | 95 % interval | elements flipped "
             "| largest \\|z\\| flipped |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        low, high = r["rate_95"]
        zmax = "-" if r["max_abs_z_flipped"] is None else f"{r['max_abs_z_flipped']:.1e}"
        sizes = "x".join(str(r["sizes"][k]) for k in ("batch_size", "in_features", "out_features"))
        lines.append(f"| {r['config']} ({sizes}) | {r['kernel']} | {r['against']} | {r['flipped_calls']} / "
                     f"{r['calls']} | {r['rate']:.2e} | {low:.1e} - {high:.1e} | {r['elements_flipped']} | {zmax} |")
    lines += ["", "Both configurations pooled:", "", "| kernel | against | flipped calls | about one call in |",
              "|---|---|---|---|"]
    for kernel, against in PAIRS:
        k, n = _pooled(rows, kernel, against)
        lines.append(f"| {kernel} | {against} | {k} / {n} | {round(n / k) if k else '-'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=10000, help="calls per float32 configuration")
    ap.add_argument("--seed", type=int, default=0, help="the first call's input seed (call i: seed + i)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "relu_flip_rate_cpu"),
                    help="writes <out>.jsonl and <out>.md")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    start = datetime.datetime.now(datetime.timezone.utc)
    rows = measure(args.calls, args.seed)
    end = datetime.datetime.now(datetime.timezone.utc)
    meta = {"machine": f"{cpu_description()} ({platform.machine()})", "python": platform.python_version(),
            "torch": torch.__version__, "start": start.strftime("%Y-%m-%d %H:%M"), "end": end.strftime("%H:%M"),
            "commit": _commit(),
            "command": " ".join(["python bench/relu_flip_rate.py", *(sys.argv[1:] if argv is None else argv)])}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps({**r, **{k: meta[k] for k in ("commit", "start")}}) + "\n")
    text = summary_markdown(rows, meta)
    out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
