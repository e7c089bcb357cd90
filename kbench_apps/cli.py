"""The ``kbench`` command: ``tasks`` (list the suite), ``eval`` (one candidate), ``run`` (an agent over a suite),
``report`` (tables, plots and a Markdown report from run results), ``baseline`` (a suite's reference timings
precomputed into the reference cache), ``serve`` (the environment over HTTP), ``doctor``.

The CLI composes the public pieces (suite, Evaluator, env, agents); it holds no evaluation logic of its own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kbench_apps.cli_output import HelpFormatter, is_terminal, plural, quiet_closed_pipe, require_device
from kbench_apps.reference_timings import add_parser as add_baseline_parser
from kbench_apps.report import main as report_main
from kbench_apps.runlog import RunLog
from kbench_apps.runner import add_remote_builds, run_suite
from kbench_apps.serve import add_parser as add_serve_parser
from kbench_env.pipeline.evaluator import Evaluator
from kbench_env.pipeline.formats import FORMATS
from kbench_env.pipeline.reward import PRESETS
from kbench_env.pipeline.rules import RULES
from kbench_env.sandbox.doctor import doctor, format_doctor
from kbench_env.sandbox.confine.policy import Limits
from kbench_env.tasks.suite import load_suite, resolve_task


def _device_help() -> str:
    return "cpu, cuda, cuda:N or auto (cuda when a GPU is present)"


def _add_rules(p, auto_format: bool = False) -> None:
    p.add_argument("--rules", default="strict", choices=RULES,
                   help="strict: only the candidate's own kernels and glue (allocation, views, copies) in forward; "
                        "kernelbench: PyTorch operators allowed beside at least one own kernel that runs. Kernel "
                        "coverage (share of forward's time in own kernels) is reported under both")
    _add_format(p, auto_format)  # where the rules are chosen (eval, run), the action format is too, and builds
    add_remote_builds(p)


def _add_format(p, auto: bool = False) -> None:
    p.add_argument("--format", default="auto" if auto else "kernelbench", choices=(("auto",) if auto else ()) + FORMATS,
                   help="action format the prompt asks for and the evaluation holds candidates to: kernelbench "
                        "(load_inline), fast (extern \"C\" kernels through kbench_env.fastpath: ~1 s builds, no "
                        "cpp_extension) or triton (@triton.jit, GPU only); fast and triton fix the backend"
                        + ("; auto (the default): fast on a CUDA device when the agent replays or tunes shipped "
                           "solutions and every task has a fast one, else kernelbench (kbench_apps/run_format.py)"
                           if auto else ""))


def cmd_tasks(args) -> int:
    tasks = load_suite(args.suite, dtype=args.dtype)
    if args.json:  # JSON Lines: one task object per line, whole
        for t in tasks:
            print(json.dumps(_task_dict(t)))
        return 0
    header = ("task", "level", "pass", "configurations (* held out)", "dtypes")
    rows = [_task_row(t) for t in tasks]
    if not is_terminal():  # a pipe or a file: tab-separated lines, nothing cut
        print("\t".join(header))
        for row in rows:
            print("\t".join(row))
        return 0
    table = Table(title=escape(f"kbench suite {args.suite!r}: {plural(len(tasks), 'task')}"))
    for col in header:
        table.add_column(col, no_wrap=col == "task", overflow="fold")
    for row in rows:
        table.add_row(*map(escape, row))
    Console().print(table)
    return 0


def _task_row(t) -> tuple[str, ...]:
    try:
        cfgs = ", ".join(f"{c.name}{'*' if c.held_out else ''}[{'/'.join(c.devices)}]" for c in t.configs)
        dtypes = ", ".join(sorted({c.dtype for c in t.configs}))
    except ValueError as exc:  # a configuration derivation that failed: this task's row says why
        cfgs, dtypes = f"error: {exc}", ""
    return t.name, str(t.level), "backward" if t.backward else "forward", cfgs, dtypes


def _task_dict(task) -> dict:
    try:
        return task.to_dict(shapes=True)
    except ValueError as exc:  # a configuration derivation that failed
        return {"name": task.name, "level": task.level, "backward": task.backward, "path": task.path,
                "configs": [], "error": str(exc)}


def cmd_eval(args) -> int:
    require_device(args.device)
    task = resolve_task(args.task, dtype=args.dtype, suite=args.suite)
    source = _read_solution(args.solution)
    ev = Evaluator(device=args.device, backend=args.backend, reward=args.reward, rules=args.rules,
                   format=args.format, remote_builds=args.remote_builds, limits=_limits(args.timeout, args.build_timeout))
    task.require_configs(ev.device)  # the task's error (exit 2), not the candidate's
    result = ev.evaluate(task, source, seed=args.seed)
    if args.json:
        print(result.to_json())
    else:
        print(result.feedback())
    return 0 if result.correct else 1


def _limits(timeout: float | None, build_timeout: float | None) -> Limits:
    """The sandbox limits with ``--timeout`` (the wall-clock limit of each correctness run and of the timing, the
    reference's runs included) and ``--build-timeout`` (building and importing the candidate: its module-level
    code runs there)."""
    for flag, value in (("--timeout", timeout), ("--build-timeout", build_timeout)):
        if value is not None and not value > 0:
            raise ValueError(f"{flag} must be a positive number of seconds, not {value}")
    limits = Limits()
    if timeout is not None:
        limits.run_timeout = limits.time_timeout = timeout
    if build_timeout is not None:
        limits.build_timeout = build_timeout
    return limits


def _read_solution(path: str) -> str:
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--solution {path} is a folder; give the file that holds the ModelNew source (or the "
                         f"LLM reply holding it)")
    if not p.is_file():
        raise ValueError(f"--solution {path}: no such file")
    return p.read_text(encoding="utf-8", errors="replace")


def cmd_run(args) -> int:
    require_device(args.device)
    return run_suite(args)


def cmd_report(args) -> int:
    return report_main(args)


def cmd_doctor(args) -> int:
    report = doctor()
    print(json.dumps(report, indent=2) if args.json else format_doctor(report))
    return 0


_DTYPE_ARG = {"default": None, "choices": ["float32", "float16", "bfloat16"],
              "help": "dtype of plain KernelBench files' configurations (KernelBench's precision switch; default "
                      "float32); files with a KBENCH block keep their own"}


def _add_eval_parser(sub) -> None:
    e = sub.add_parser("eval", formatter_class=HelpFormatter, help="evaluate one solution file on one task")
    e.add_argument("--task", required=True, help="task name (level1/relu; with --suite, a name `kbench tasks --suite` "
                                                 "lists), path to a KernelBench-format file, or a robust-kbench "
                                                 "task folder's form (<folder>/forward, <folder>/backward)")
    e.add_argument("--suite", default=None, help="look the task name up in this suite first (a folder, as `kbench "
                                                 "tasks --suite` was given)")
    e.add_argument("--timeout", type=float, default=None,
                   help=f"seconds each stage that runs code may take before the candidate is stopped and answered "
                        f"'timed out': correctness runs (default {Limits.run_timeout:g} s) and timing (default "
                        f"{Limits.time_timeout:g} s)")
    e.add_argument("--build-timeout", type=float, default=None,
                   help=f"seconds the build and import of the candidate may take (its module-level code runs "
                        f"there; default {Limits.build_timeout:g} s)")
    e.add_argument("--solution", required=True, help="file with the ModelNew source (or an LLM reply)")
    e.add_argument("--device", default="auto", help=_device_help())
    e.add_argument("--backend", default=None, help="cpu, cuda or triton (default: from the device)")
    e.add_argument("--reward", default="tiered", choices=sorted(PRESETS), help="reward preset (see README)")
    e.add_argument("--seed", type=int, default=None, help="fix the evaluation's random inputs (default: fresh)")
    e.add_argument("--dtype", **_DTYPE_ARG)
    e.add_argument("--json", action="store_true", help="print the EvalResult as one JSON object")
    _add_rules(e)
    e.set_defaults(fn=cmd_eval)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kbench", description="KBench-v0: kernels as actions, verified speedup as reward")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tasks", formatter_class=HelpFormatter, help="list the tasks of a suite")
    t.add_argument("--suite", default="all", help="suite name (all, default, level1..3, robust), folder or file")
    t.add_argument("--json", action="store_true", help="print JSON Lines: one JSON object per task and line "
                                                         "(without it: a table on a terminal, tab-separated "
                                                         "lines with a header when piped)")
    t.add_argument("--dtype", **_DTYPE_ARG)
    t.set_defaults(fn=cmd_tasks)

    _add_eval_parser(sub)

    r = sub.add_parser("run", formatter_class=HelpFormatter, help="run an agent over a suite; results go to an append-only JSONL file")
    r.add_argument("--suite", default="default", help="suite name, level, folder, file or comma list")
    r.add_argument("--agent", default="auto", help="auto (evolutionary with the offline proposer when available, "
                                                   "else shipped), shipped, evolutionary, single_shot, best_of_n, "
                                                   "refine, or any agent installed in the kbench.agents "
                                                   "entry-point group")
    r.add_argument("--device", default="auto", help=_device_help())
    r.add_argument("--backend", default=None, help="cpu, cuda or triton (default: from the device)")
    r.add_argument("--reward", default="tiered", choices=sorted(PRESETS), help="reward preset (see README)")
    r.add_argument("--budget", type=int, default=6, help="evaluations per task (best_of_n: samples; refine: turns)")
    r.add_argument("--max-turns", type=int, default=None, help="env turns per episode (default: the budget)")
    r.add_argument("--out", default="runs/run.jsonl", help="results file (appended; a rerun resumes)")
    r.add_argument("--fresh", action="store_true", help="start the results file anew instead of resuming")
    r.add_argument("--seed", type=int, default=0, help="seed of each episode (the evaluations' random inputs "
                                                       "and the agent's choices)")
    r.add_argument("--dtype", **_DTYPE_ARG)
    r.add_argument("--timing", default="default", choices=["default", "quick"],
                   help="timing repetitions: the Evaluator's defaults, or few (smoke runs)")
    _add_rules(r, auto_format=True)
    g = r.add_argument_group("evolutionary agent")
    g.add_argument("--proposer", default="offline", choices=["offline", "llm"],
                   help="offline: mutate the shipped solution's kbench-tune constants; llm: a model writes candidates")
    g.add_argument("--population", type=int, default=None, help="population size (survivors per generation)")
    g.add_argument("--batch-size", type=int, default=None, help="candidates proposed and evaluated per generation")
    g.add_argument("--time-budget", type=float, default=None, help="seconds per task (on top of --budget)")
    g.add_argument("--workers", type=int, default=None, help="candidates in flight at once in evaluate_many")
    g.add_argument("--soft-verify", action="store_true",
                   help="filter candidates with LLM soft verifiers (compile, memory, numerics) before evaluation")
    m = r.add_argument_group("LLM (proposer llm, single_shot, best_of_n, refine)")
    m.add_argument("--llm", default="openai", choices=["openai", "transformers", "offline"],
                   help="openai: an OpenAI-compatible endpoint; transformers: a local model; offline: deterministic")
    m.add_argument("--llm-base-url", default=None, help="endpoint, e.g. http://localhost:8000/v1 "
                                                        "(default $KBENCH_LLM_BASE_URL)")
    m.add_argument("--llm-model", default=None, help="model name (default $KBENCH_LLM_MODEL); key: $OPENAI_API_KEY")
    m.add_argument("--llm-path", default=None, help="local model folder for --llm transformers")
    m.add_argument("--llm-temperature", type=float, default=None, help="sampling temperature (default: the agent's)")
    m.add_argument("--llm-max-tokens", type=int, default=None, help="longest reply in tokens (default: the agent's)")
    m.add_argument("--llm-concurrency", type=int, default=None, help="requests in flight at once (default 4)")
    m.add_argument("--llm-timeout", type=float, default=None, help="seconds per request (default 300)")
    m.add_argument("--llm-retries", type=int, default=None, help="retries per request (default 3)")
    m.add_argument("--llm-price-in", type=float, default=None, help="USD per million prompt tokens (cost report)")
    m.add_argument("--llm-price-out", type=float, default=None, help="USD per million completion tokens")
    r.set_defaults(fn=cmd_run)

    rp = sub.add_parser("report", formatter_class=HelpFormatter, help="fast_p, correctness and speedup tables, plots and a Markdown report from run results")
    rp.add_argument("results", nargs="+", help="JSONL results files of kbench run (several agents side by side)")
    rp.add_argument("--out-dir", default="reports/latest", help="where report.md and the PNG plots go")
    rp.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    rp.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    rp.set_defaults(fn=cmd_report)
    add_baseline_parser(sub, _device_help(), _DTYPE_ARG, HelpFormatter)
    add_serve_parser(sub, _device_help(), _DTYPE_ARG, HelpFormatter)
    d = sub.add_parser("doctor", formatter_class=HelpFormatter, help="which sandbox protections are active here")
    d.add_argument("--json", action="store_true", help="print the report as one JSON object")
    d.set_defaults(fn=cmd_doctor)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:  # the reader closed the pipe (| head): it has what it wanted
        return quiet_closed_pipe()
    except KeyboardInterrupt:
        print("interrupted; finished results are in the results file", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError) as exc:
        print(f"kbench: {exc}", file=sys.stderr)
        return 2


__all__ = ["main", "build_parser", "RunLog"]


if __name__ == "__main__":
    sys.exit(main())
