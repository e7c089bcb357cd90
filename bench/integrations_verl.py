"""verl's part of bench/integrations_gpu.py (its ``verl`` subcommand; this file runs it alone too).

``verl``: a batch of verl samples scored through ``verl_reward.compute_score``: every task's shipped solution and a
wrong variant of it (its first output value everywhere, by views and copies only: judged wrong, not flagged), each
as a policy's reply (a fenced code block), with the prompt settings ``verl_data`` writes. Scored twice on one evaluator, in verl's two forms: batched (``BatchRewardManager``: one
call, one ``evaluate_many``), then per sample from a thread each, as verl's reward loop calls it (its builds are
cached by then). Needs no verl (nor gymnasium or pyarrow). Writes a markdown table and the rows as JSON; exit status 1 when a verdict is not
the expected one (a shipped solution not correct, or a wrong variant correct).

    python bench/integrations_gpu.py verl --device cuda --out bench/results/verl_reward_gpu.md
    python bench/integrations_gpu.py verl --device cpu --out bench/results/verl_reward_cpu.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kbench_apps.integrations import verl_reward  # noqa: E402
from kbench_env.tasks.suite import resolve_task, solution_path  # noqa: E402

#: tasks with a shipped solution for both the CPU and CUDA backends, levels 1 and 2
VERL_TASKS = ("level1/relu", "level1/softmax_rows", "level1/rms_norm", "level1/matmul_square", "level1/gelu",
              "level1/layer_norm", "level2/linear_relu", "level2/linear_gelu_scale")
WRONG_TAIL = '''

_Shipped = ModelNew


class ModelNew(_Shipped):
    def forward(self, *args):
        out = super().forward(*args)
        return out.reshape(-1)[:1].expand(out.numel()).reshape(out.shape)  # the first value everywhere
'''


def verl_samples(tasks: list[str], settings: dict) -> list[dict]:
    """``{"task", "variant", "solution_str", "extra_info"}`` for each task's shipped solution and wrong variant."""
    samples = []
    for name in tasks:
        task = resolve_task(name)
        path = solution_path(task, settings["backend"], settings["format"])
        if path is None or not task.configs_for(settings["device"]):
            raise SystemExit(f"{name}: no shipped {settings['backend']} solution or no {settings['device']} "
                             f"configuration")
        extra = {"split": "bench", "index": len(samples) // 2, "task": name, "kbench": dict(settings)}
        for variant, source in (("shipped", path.read_text()), ("wrong", path.read_text() + WRONG_TAIL)):
            samples.append({"task": name, "variant": variant, "solution_str": f"```python\n{source}```",
                            "extra_info": extra})
    return samples


def _batched(samples: list[dict], device: str) -> list[dict]:
    return verl_reward.compute_score(data_sources=["kbench"] * len(samples),
                                     solution_strs=[s["solution_str"] for s in samples],
                                     ground_truths=[s["task"] for s in samples],
                                     extra_infos=[s["extra_info"] for s in samples], device=device)


def _per_sample(samples: list[dict], device: str) -> list[dict]:
    with ThreadPoolExecutor(max_workers=len(samples)) as pool:
        return list(pool.map(lambda s: verl_reward.compute_score(
            data_source="kbench", solution_str=s["solution_str"], ground_truth=s["task"],
            extra_info=dict(s["extra_info"]), device=device), samples))


def _markdown(args, passes: list[dict], ok: bool) -> str:
    lines = [f"# verl reward function on {args.device}: {len(passes[0]['rows'])} samples", "",
             f"`python bench/integrations_gpu.py verl --device {args.device} --limit {args.limit}`", "",
             f"Verdicts as expected (shipped correct, wrong variant not): **{'yes' if ok else 'NO'}**", ""]
    for p in passes:
        rows = p["rows"]
        lines += [f"## {p['form']}: {p['seconds']:.1f} s wall for {len(rows)} samples "
                  f"({len(rows) / p['seconds'] * 60:.1f} per minute; builds this pass: {p['builds']})", "",
                  "| task | variant | score | acc | flagged | speedup | stage | eval s |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            speedup = "" if r["speedup"] is None else f"{r['speedup']:.2f}x"
            lines.append(f"| {r['task']} | {r['variant']} | {r['score']:.3f} | {r['acc']:.0f} | {r['flagged']:.0f} | "
                         f"{speedup} | {r['stage']} | {r['eval_seconds']:.1f} |")
        lines.append("")
    return "\n".join(lines)


def run_verl(args) -> int:
    settings = verl_reward.prompt_settings(args.device)
    tasks = [t for t in args.tasks.split(",") if t][: args.limit]
    samples = verl_samples(tasks, settings)
    passes = []
    for form, score in (("batched", _batched), ("per-sample", _per_sample))[: 2 if args.per_sample else 1]:
        t0 = time.perf_counter()
        scores = score(samples, args.device)
        seconds = time.perf_counter() - t0
        rows = [{"task": s["task"], "variant": s["variant"], **sc} for s, sc in zip(samples, scores)]
        passes.append({"form": form, "seconds": seconds, "rows": rows,
                       "builds": "cached by the pass before" if passes else "as the cache had them"})
        print(f"{form}: {len(rows)} samples in {seconds:.1f} s", flush=True)
    verl_reward.close_evaluators()
    ok = all((r["acc"] == 1.0) == (r["variant"] == "shipped") for p in passes for r in p["rows"])
    text = _markdown(args, passes, ok)
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
        out.with_suffix(".json").write_text(json.dumps({"device": args.device, "settings": settings,
                                                         "passes": passes}, indent=1) + "\n")
    return 0 if ok else 1


def add_verl_parser(sub) -> None:
    p = sub.add_parser("verl", help="score shipped and wrong solutions through verl_reward.compute_score")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default: cuda)")
    p.add_argument("--tasks", default=",".join(VERL_TASKS), help="comma-separated task names")
    p.add_argument("--limit", type=int, default=8, help="the first N of --tasks (default 8)")
    p.add_argument("--no-per-sample", dest="per_sample", action="store_false",
                   help="score the batched form only (default: the per-sample form too, after it)")
    p.add_argument("--out", default=None, help="markdown record here, the rows as JSON beside it")
    p.set_defaults(run=run_verl)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_verl_parser(sub)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
