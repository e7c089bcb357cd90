"""Whether a GPU configuration's timed-output checks can all wait for judging outside the timing's exclusive hold
(pipeline/deferred_checks.py), computed from the tasks' shapes alone, on the CPU.

A GPU timing reads ``check_calls`` calls' outputs after each timed block and keeps them, with copies of those calls'
inputs, to judge after its exclusive hold; what does not fit in the process's pool (DEFER_SHARE of the device's
memory, shared by every timing in flight) is judged at once, inside the hold. A timing runs at least
``stats.gpu_blocks_done``'s five blocks, so a configuration keeps at least 5 x min(check_calls, block) x (its
outputs + its inputs) bytes. The block size needs the reference's time (the device), so this takes the least
possible, blocks of ``check_calls`` calls or more (the worker's byte bound allows 15 calls of the largest; a
configuration whose call takes over a quarter of the 5 ms block target has fewer, and keeps that much less:
matmul_square's calls of 5-41 ms make blocks of one call); the real count of blocks is that or more. One JSON line per GPU
configuration of the tasks in ``bench/data/rl_batch/<format>`` and ``tasks/solutions/<format>`` (the trainer's
batch), largest first, then a summary line: per task, the least its configurations keep together (one candidate's
timing), and which configurations cannot keep their checks out of the hold even alone on the device; each also
with the inputs kept as seeds (``_seeded``: a perturbed, floating input made again when judged, not copied;
bench/wip/kept_inputs.patch): the outputs and the integer inputs kept only.

    python bench/probes/deferred_pool.py [--format fast_cuda] [--device-gib 139.8] > rows.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kbench_env.config.evaluator_config import TimingConfig  # noqa: E402
from kbench_env.measure.compare import flatten_outputs  # noqa: E402
from kbench_env.pipeline.deferred_checks import DEFER_SHARE  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402
from kbench_env.tasks.task import DTYPES, cast_input, meta_inputs  # noqa: E402

MIN_BLOCKS = 5  # measure/stats.py gpu_blocks_done: at least five blocks


def _nbytes(values) -> int:
    return sum(x.numel() * x.element_size() for x in flatten_outputs(values) if isinstance(x, torch.Tensor))


def config_bytes(task, cfg) -> tuple[int, int, int]:
    """(input bytes, of them the floating inputs', output bytes) of one call of ``cfg``, from meta tensors."""
    mod, dtype = task.module(cfg), DTYPES[cfg.dtype]
    inputs = [cast_input(x, dtype, x.device) if isinstance(x, torch.Tensor) else x for x in meta_inputs(mod)]
    model = task.make_model(mod, list(mod.get_init_inputs()), 0, dtype, "meta")
    with torch.no_grad():
        out = model(*inputs)
    floating = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    return _nbytes(inputs), _nbytes(floating), _nbytes(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", default="fast_cuda", help="a folder under bench/data/rl_batch")
    ap.add_argument("--device-gib", type=float, default=139.8, help="the device's memory (an H200: 139.8 GiB)")
    args = ap.parse_args()
    check_calls = TimingConfig().check_calls
    pool = DEFER_SHARE * args.device_gib * (1 << 30)
    found = [*(ROOT / "bench/data/rl_batch" / args.format).glob("*/*.py"),
             *(ROOT / "tasks/solutions" / args.format).glob("*/*.py")]
    names = sorted({f"{p.parent.name}/{p.stem.split('__')[0]}" for p in found})
    rows = []
    for name in names:
        task = resolve_task(name)
        for cfg in task.configs:
            if not cfg.runs_on("cuda") or cfg.runs_on("cpu"):
                continue
            inp, floating, out = config_bytes(task, cfg)
            least = MIN_BLOCKS * check_calls * (inp + out)
            seeded = MIN_BLOCKS * check_calls * (inp - floating + out)
            rows.append({"task": name, "config": cfg.name, "input_mb": round(inp / 1e6, 1),
                         "output_mb": round(out / 1e6, 1), "kept_per_check_mb": round((inp + out) / 1e6, 1),
                         "least_kept_gb": round(least / 1e9, 2), "pool_share": round(least / pool, 3),
                         "pool_share_seeded": round(seeded / pool, 3)})
    rows.sort(key=lambda r: -r["least_kept_gb"])
    for r in rows:
        print(json.dumps(r))
    def over(key: str) -> list:
        return [f"{r['task']} {r['config']}" for r in rows if r[key] > 1.0]

    per_task = {name: [round(sum(r[key] for r in rows if r["task"] == name), 3)
                       for key in ("pool_share", "pool_share_seeded")] for name in names}
    print(json.dumps({"summary": True, "pool_gb": round(pool / 1e9, 2), "check_calls": check_calls,
                      "min_blocks": MIN_BLOCKS, "configs": len(rows), "over_the_pool_alone": over("pool_share"),
                      "over_the_pool_alone_seeded": over("pool_share_seeded"),
                      "task_pool_share": dict(sorted(per_task.items(), key=lambda kv: -kv[1][0]))}))


if __name__ == "__main__":
    main()
