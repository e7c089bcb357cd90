"""Other frameworks driving KBench-v0 end to end (issue #39), one subcommand per framework; a summary under --out.

    python bench/integrations_gpu.py inspect --out runs/integrations --device cuda        # on a GPU machine
    python bench/integrations_gpu.py inspect --out /tmp/integrations --device cpu         # anywhere
    python bench/integrations_gpu.py verl --device cuda --out bench/results/verl_reward_gpu.md  # bench/integrations_verl.py

``inspect``: the Inspect task (kbench_apps/integrations/inspect_task.py) on the device's backend, twice:

1. ``tiny``: a tiny random Qwen2 built here with no download (training/tiny.py), loaded by Inspect's ``hf/``
   provider from its folder, plays ``--turns`` turns on each of ``--tasks`` (it writes no kernel: what this run
   measures is the loop: generation, env steps, feedback turns, scoring);
2. ``shipped``: Inspect's mock model answers each task with its shipped solution for the backend, so the scores
   show a correct kernel built, checked and timed on the device through Inspect.

Writes ``<out>/inspect.json`` (each run's metrics, per-sample scores, turns and seconds), ``<out>/inspect.md`` (the
same as tables) and Inspect's logs under ``<out>/inspect_logs/``.

On the GPU image (no package registry), the packages it lacks come as wheels: here, ``bash bench/fetch_wheels.sh
.carry/wheels-inspect inspect``; there, carry ``.carry/wheels-inspect`` (``--wheels``): the wheels of distributions
the interpreter does not have are installed into ``--site`` and put on ``sys.path`` before anything imports them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tiny model is a local folder: never ask the hub


def install_carried_wheels(folder: Path, site: Path) -> list[str]:
    """Install (no index, no dependencies) the wheels in ``folder`` whose distribution the interpreter lacks or has
    at an older version, into ``site``, and put ``site`` first on ``sys.path``; returns the wheels installed."""
    from packaging.version import Version

    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    missing = []
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        try:
            if Version(importlib.metadata.version(name)) < Version(version):
                missing.append(wheel)
        except importlib.metadata.PackageNotFoundError:
            missing.append(wheel)
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--upgrade", "--target", str(site), *map(str, missing)], check=True, timeout=600)
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
    return [w.name for w in missing]


# ---------------------------------------------------------------------------------------------------- inspect


def inspect_parser(sub) -> None:
    p = sub.add_parser("inspect", help="the Inspect task with a local tiny model and with the shipped solutions")
    p.add_argument("--out", required=True, help="folder for inspect.json, inspect.md and inspect_logs/")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--tasks", default="level1/relu,level1/softmax_rows,level1/rms_norm",
                   help="comma list of tasks (the Inspect task's suite)")
    p.add_argument("--turns", type=int, default=2, help="turns per episode of the tiny model")
    p.add_argument("--max-tokens", type=int, default=64, help="tokens the tiny model writes per turn")
    p.add_argument("--hidden", type=int, default=64, help="the tiny model's hidden size")
    p.add_argument("--layers", type=int, default=2, help="the tiny model's layers")
    p.add_argument("--work", default="/tmp/kbench-integrations", help="folder for the tiny model")
    p.add_argument("--wheels", default=str(ROOT / ".carry" / "wheels-inspect"), help="carried wheels (GPU image)")
    p.add_argument("--site", default="/tmp/site-inspect", help="where the carried wheels are installed")
    p.add_argument("--no-shipped", action="store_true", help="skip the run with the shipped solutions")


def _build_tiny(folder: Path, hidden: int, layers: int) -> float:
    from kbench_training.tiny import build_model, build_tokenizer

    t0 = time.perf_counter()
    tok = build_tokenizer(vocab_size=2048)
    build_model(tok, hidden=hidden, layers=layers, heads=4, kv_heads=2).save_pretrained(folder)
    tok.save_pretrained(folder)
    return time.perf_counter() - t0


def _shipped_replies(backend: str, format: str):
    """Inspect's mock model, answering each task prompt with the task's shipped solution for ``backend``."""
    from inspect_ai.model import ModelOutput, ModelUsage

    from kbench_env.tasks.suite import resolve_task, solution_path

    def reply(messages, tools, tool_choice, config):
        prompt = next(m.text for m in messages if m.role == "user")
        name = re.match(r"Task (\S+):", prompt).group(1)
        path = solution_path(resolve_task(name), backend, format)
        out = ModelOutput.from_content("mockllm/model", f"```python\n{path.read_text()}```\n" if path else "none")
        out.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)  # no tiktoken download
        return out

    return reply


def _summary(run: str, log, seconds: float) -> dict:
    metrics = {f"{s.name}/{m.name}": m.value for s in (log.results.scores if log.results else [])
               for m in s.metrics.values()}
    samples = []
    for s in log.samples or []:
        score = s.scores["kbench_scorer"] if s.scores else None
        samples.append({"task": s.id, **(score.value if score else {}),
                        "turns": score.metadata["turns"] if score else [],
                        "seconds": round(s.total_time or 0.0, 2), "working_seconds": round(s.working_time or 0.0, 2),
                        "error": str(s.error.message)[:300] if s.error else None})
    return {"run": run, "model": log.eval.model, "status": log.status, "seconds": round(seconds, 2),
            "metrics": metrics, "samples": samples,
            "error": str(log.error.message)[:500] if log.error else None}


def _markdown(report: dict) -> str:
    lines = [f"# The Inspect task on {report['device']} ({report['backend']} backend)", "",
             f"inspect-ai {report['inspect_ai']}, torch {report['torch']}; tasks {report['tasks']}; the tiny model "
             f"built in {report['tiny_build_seconds']} s.", ""]
    for run in report["runs"]:
        lines += [f"## {run['run']}: {run['model']}, {run['status']}, {run['seconds']} s", ""]
        lines += ["metrics: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(run["metrics"].items())), ""]
        lines += ["| task | correct | speedup | fast_p | reward | turns | seconds |", "|---|---|---|---|---|---|---|"]
        for s in run["samples"]:
            lines.append(f"| {s['task']} | {s.get('correct')} | {s.get('speedup', 0):.3f} | {s.get('fast_p')} | "
                         f"{s.get('reward', 0):.3f} | {len(s['turns'])} | {s['seconds']} |")
        lines.append("")
    return "\n".join(lines)


def run_inspect(args) -> int:
    installed = install_carried_wheels(Path(args.wheels), Path(args.site))
    import inspect_ai
    import torch
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelInfo, set_model_info

    from kbench_apps.integrations.inspect_task import kbench
    from kbench_env.machine.device import resolve_device
    from kbench_env.pipeline import formats

    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = work / "tiny"
    build_s = _build_tiny(model_dir, args.hidden, args.layers)
    format, backend = formats.resolve("kernelbench", None, resolve_device(args.device))  # the task's env's
    report = {"device": args.device, "backend": backend, "tasks": args.tasks, "inspect_ai": inspect_ai.__version__,
              "torch": torch.__version__, "wheels_installed": installed, "tiny_build_seconds": round(build_s, 1),
              "runs": []}
    # Known to Inspect's model-info lookup, which otherwise loads a second copy of a local hf/ model to name it
    set_model_info(f"hf/{model_dir}", ModelInfo(context_length=32768, output_tokens=args.max_tokens))
    runs = [("tiny", args.turns, f"hf/{model_dir}", {})]
    if not args.no_shipped:
        runs.append(("shipped", 1, "mockllm/model", {"custom_outputs": _shipped_replies(backend, format)}))
    for name, turns, model, model_args in runs:
        t0 = time.perf_counter()
        (log,) = inspect_eval(kbench(suite=args.tasks, device=args.device, max_turns=turns), model=model,
                              model_args=model_args, max_tokens=args.max_tokens, log_dir=str(out / "inspect_logs"),
                              display="none")
        report["runs"].append(_summary(name, log, time.perf_counter() - t0))
        print(json.dumps({k: v for k, v in report["runs"][-1].items() if k != "samples"}), flush=True)
    (out / "inspect.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "inspect.md").write_text(_markdown(report))
    print(_markdown(report))
    return 0 if all(r["status"] == "success" for r in report["runs"]) else 1


# ---------------------------------------------------------------------------------------------------- main

PARSERS = {"inspect": inspect_parser}
RUNNERS = {"inspect": run_inspect}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["verl"]:  # bench/integrations_verl.py; imported only here: it imports kbench_env, which must
        from integrations_verl import main as verl_main  # not load before ``inspect`` installs carried gymnasium

        return verl_main(argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="framework", required=True)
    for add in PARSERS.values():
        add(sub)
    args = ap.parse_args(argv)
    return RUNNERS[args.framework](args)


if __name__ == "__main__":
    sys.exit(main())
