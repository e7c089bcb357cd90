"""Issue 36 probe: what the torch.compile reference costs the host, per task and configuration, on a GPU: each
configuration's reference made as a reference worker makes it (the task's module, its init seed, its dtype) and
compiled with the compile gate's inductor options (one compile thread), its first call's wall and CPU seconds (this
process and its children: ptxas) and dynamo's frame and graph counts, one configuration after another in one
process (as a run ahead compiles them), nothing else on the host.

    python bench/probes/compile_cost.py level1/relu,level2/linear_relu [--out rows.jsonl]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

from kbench_env.pipeline.context import Prepared  # noqa: E402
from kbench_env.tasks.suite import resolve_task  # noqa: E402
from kbench_env.tasks.task import DTYPES  # noqa: E402
from kbench_env.worker.compile_gate import OPTIONS  # noqa: E402


def cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def median_ms(model, inputs: list, task, calls: int) -> float | None:
    """The median of ``calls`` calls' device times (events), after two warm-up calls; None without calls or a GPU."""
    if not calls or not torch.cuda.is_available():
        return None
    times = []
    with torch.set_grad_enabled(bool(task.backward)):
        for i in range(calls + 2):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            end.synchronize()
            if i >= 2:
                times.append(start.elapsed_time(end))
    return round(sorted(times)[len(times) // 2], 5)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--static", action="store_true", help="torch.compile(dynamic=False): every shape its own graph")
    ap.add_argument("--calls", type=int, default=0, help="then time this many calls (device events, median ms)")
    args = ap.parse_args()
    out = open(args.out, "a") if args.out else None
    for name in args.tasks.split(","):
        task = resolve_task(name)
        mod = types.ModuleType("reference")
        exec(compile(task.source, name, "exec"), mod.__dict__)  # noqa: S102 - the task's own reference program
        for i, cfg in enumerate(task.configs_for(args.device)):
            p = Prepared.made(task, cfg, 0, i, args.device)
            torch.manual_seed(p.init_seed)
            model = mod.Model(*p.init_inputs).to(device=args.device, dtype=DTYPES[cfg.dtype]).eval()
            compiled = torch.compile(model, options=dict(OPTIONS), **({"dynamic": False} if args.static else {}))
            frames = dict(torch._dynamo.utils.counters["frames"])
            c0, t0 = cpu_seconds(), time.perf_counter()
            with torch.set_grad_enabled(bool(task.backward)):
                compiled(*p.inputs)
            if args.device != "cpu":
                torch.cuda.synchronize()
            row = {"task": name, "config": cfg.name, "dtype": cfg.dtype,
                   "wall_s": round(time.perf_counter() - t0, 3), "cpu_s": round(cpu_seconds() - c0, 3),
                   "frames": {k: v - frames.get(k, 0) for k, v in torch._dynamo.utils.counters["frames"].items()},
                   "shapes": [list(x.shape) for x in p.inputs if isinstance(x, torch.Tensor)],
                   "static": args.static, "call_ms": median_ms(compiled, p.inputs, task, args.calls)}
            print(json.dumps(row), flush=True)
            if out:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
