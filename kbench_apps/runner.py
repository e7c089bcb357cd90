"""``kbench run``: an agent over a suite, with a live progress bar, a resumable JSONL log and a final table.

An agent is any object with ``name``, ``has_solution(task)`` and ``run_episode(env, task, seed)`` yielding ``(turn,
info)`` with ``info["eval"]`` an EvalResult dict (see ``agents/shipped.py``), and returning, where it stops short of
the budget, why (the ``task_done`` record's ``stopped_early`` and the table's note say so). Each yield is appended
to the results file at once (``kind: "attempt"``; ``"filtered"`` for a candidate a soft verifier kept from the
hardware), and a ``task_done`` record closes each task. A killed run resumes: finished tasks are skipped, and an
unfinished task's recorded attempts are handed back to an agent whose ``run_episode`` takes ``resume=`` (the
evolutionary agent and the baselines do), so that finished attempts are not evaluated again.

It also holds what ``kbench eval``, ``run`` and ``serve`` share: the timing presets and ``--remote-builds``.
"""

from __future__ import annotations

import argparse
import inspect
import time
from importlib.metadata import EntryPoint, entry_points

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kbench_apps.cli_output import console as make_console, is_terminal, plural
from kbench_apps.run_format import run_format
from kbench_apps.runlog import RunLog
from kbench_env.config import EvaluatorConfig
from kbench_env.env.env import KBenchEnv
from kbench_env.tasks.suite import load_suite
from kbench_env.tasks.task import geomean

#: The entry-point group agents register in (pyproject.toml, ``[project.entry-points."kbench.agents"]``): each
#: name maps to a factory called as ``factory(backend, options)`` (see agents/factories.py).
AGENT_GROUP = "kbench.agents"

#: ``--timing quick``: few repetitions (smoke tests, CI); ``default``: the Evaluator's own settings.
TIMING_PRESETS = {"default": None, "quick": {"warmup": 1, "min_reps": 5, "max_reps": 30, "min_seconds": 0.05}}

_ATTEMPT_FIELDS = ("source", "origin", "parents", "candidate", "generation", "verifier", "audited")


def _opt(args, name, default=None):
    v = getattr(args, name, None) if args is not None else None
    return default if v is None else v


def add_remote_builds(p) -> None:
    """``--remote-builds`` on the parser ``p`` (kbench eval, run and serve)."""
    p.add_argument("--remote-builds", default=None, metavar="ray[:ADDRESS]",
                   help="build candidates as Ray tasks on a cluster's CPU nodes (ray: the cluster running here; "
                        "ray:ADDRESS: that one); running and timing stay here. Default: builds on this host")


def installed_agents() -> dict[str, EntryPoint]:
    """The agents installed in the ``kbench.agents`` group, by name (not yet imported)."""
    return {ep.name: ep for ep in entry_points(group=AGENT_GROUP)}


def make_agent(name: str, backend: str, args=None):
    """The agent registered as ``name``, built by its factory from the run's arguments. "auto": the evolutionary
    agent with the offline proposer (no model) where it is installed, else the shipped solutions."""
    agents = installed_agents()
    if name == "auto":
        if "evolutionary" in agents:
            name, args = "evolutionary", argparse.Namespace(**{**vars(args or argparse.Namespace()),
                                                               "proposer": "offline", "soft_verify": False})
        else:
            name = "shipped"
    if name not in agents:
        raise ValueError(f"no agent named {name!r} is installed in the {AGENT_GROUP!r} entry-point group; installed: "
                         f"{', '.join(sorted(agents)) or 'none'}. An agent registers under "
                         f'[project.entry-points."{AGENT_GROUP}"] in its package\'s pyproject.toml; kbench\'s own are listed '
                         f"once kbench is installed (pip install -e . in its checkout)")
    try:
        factory = agents[name].load()
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"agent {name!r} is registered as {agents[name].value!r}, which cannot be loaded: "
                         f"{exc}") from exc
    return factory(backend, args)


def _takes_resume(agent) -> bool:
    try:
        return "resume" in inspect.signature(agent.run_episode).parameters
    except (TypeError, ValueError):
        return False


def _valid(ev: dict | None) -> bool:
    return bool(ev and ev.get("correct") and ev.get("speedup") is not None and not ev.get("integrity_flags"))


def run_suite(args) -> int:
    console = make_console()  # piped: whole lines and tables, not cut at 80 columns
    budget = _opt(args, "budget", 4)
    max_turns = _opt(args, "max_turns", None) or max(1, budget)
    timing = TIMING_PRESETS.get(_opt(args, "timing", "default"))
    dtype = _opt(args, "dtype", None)
    all_tasks = load_suite(args.suite, dtype=dtype)
    args.format, why_format = run_format(_opt(args, "format", "auto"), _opt(args, "agent", "auto"),
                                         _opt(args, "proposer", None), args.device, args.backend,
                                         all_tasks)  # the agent's factory reads args.format too
    env = KBenchEnv(suite=args.suite, device=args.device, backend=args.backend, max_turns=max_turns,
                    reward=args.reward, rules=_opt(args, "rules", "strict"),
                    format=args.format, dtype=dtype,
                    config=EvaluatorConfig.from_options(timing=timing or None,
                                                        remote_builds=_opt(args, "remote_builds", None)))
    backend = env.evaluator.backend_name
    agent = make_agent(args.agent, backend, args)
    runnable = []
    for t in all_tasks:  # a task without configurations for this device is reported, not run
        try:
            t.require_configs(env.evaluator.device)
        except ValueError as exc:
            console.print(f"[yellow]skipped[/] {escape(str(exc))}")
            continue
        runnable.append(t)
    tasks = [t for t in runnable if getattr(agent, "has_solution", lambda _t: True)(t)]
    log = RunLog(args.out, fresh=args.fresh)
    records = log.records()
    done = {(r["agent"], r["task"]): r for r in records if r.get("kind") == "task_done"}
    todo = [t for t in tasks if (agent.name, t.name) not in done]
    partial = {}
    for r in records:
        if r.get("kind") == "attempt" and r.get("agent") == agent.name and (agent.name, r["task"]) not in done:
            partial.setdefault(r["task"], []).append(r)
    skipped = len(runnable) - len(tasks)
    console.print(f"kbench run: agent [bold]{escape(agent.name)}[/], {plural(len(tasks), 'task')} on "
                  f"{env.evaluator.device} "
                  f"({backend} backend, {env.evaluator.format} format ({escape(why_format)}), {env.evaluator.rules} rules), budget {plural(budget, 'evaluation')} per task; "
                  f"{len(tasks) - len(todo)} already done"
                  f"{f', {len(partial)} partly done' if partial else ''} in {log.path}"
                  f"{_skipped_note(skipped)}")
    best_overall = max([r.get("best_speedup") or 0 for r in done.values() if r.get("agent") == agent.name] or [0])
    _run_tasks(console, env, agent, log, [t.name for t in tasks], todo, partial, budget, args.seed, best_overall)
    print_table(console, log, agent.name, [t.name for t in tasks])
    return 0


def _run_tasks(console, env, agent, log: RunLog, names: list[str], todo: list, partial: dict, budget: int, seed,
               best_overall: float) -> None:
    """Runs the tasks still to do, with a live bar on a terminal and a plain line per attempt and task elsewhere."""
    resumable = _takes_resume(agent)
    plain = not console.is_terminal  # a log file or a pipe: a line per event instead of a bar's last frame
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[status]}"), console=console, disable=plain) as progress:
        bar = progress.add_task("tasks", total=len(names), completed=len(names) - len(todo), status="")
        current = ""

        def status(attempts: int, ev: dict, best: dict | None) -> None:
            nonlocal best_overall
            if _valid(ev):
                best_overall = max(best_overall, ev["speedup"])
            progress.update(bar, status=f"attempt {attempts}/{budget}, best {_fmt(best and best['speedup'])}, "
                                        f"run best {best_overall:.2f}x")
            if plain:
                print(f"{current}: attempt {attempts}/{budget}: {_outcome(ev)}; task best "
                      f"{_fmt(best and best['speedup'])}", flush=True)

        for i, task in enumerate(todo, start=len(names) - len(todo) + 1):
            current = task.name
            progress.update(bar, description=task.name)
            prior = partial.get(task.name, []) if resumable else []
            rec = _run_task(env, agent, task, prior, log, budget, seed, resumable, status)
            log.append(rec)
            progress.advance(bar)
            if plain:
                print(f"{task.name}: done ({i}/{len(names)}): {_task_outcome(rec)}, "
                      f"{plural(rec['attempts'], 'attempt')} in {rec['seconds']:.1f} s; run best "
                      f"{best_overall:.2f}x", flush=True)


def _run_task(env, agent, task, prior: list[dict], log: RunLog, budget: int, seed, resumable: bool,
              status) -> dict:
    """One task's episode: appends each attempt (and each filtered candidate) to ``log`` as it comes, calls
    ``status(attempts, eval, best)`` after each attempt, and returns the task's ``task_done`` record. ``prior``:
    the task's attempts recorded by an earlier, killed run, handed back to a resumable agent."""
    t0 = time.time()
    backend, device = env.evaluator.backend_name, env.evaluator.device
    usage0 = agent.usage() if hasattr(agent, "usage") else None
    best = first = last = None
    for r in prior:
        last = r["eval"]
        if _valid(r["eval"]):
            first = first or r["eval"]
            if best is None or r["eval"]["speedup"] > best["speedup"]:
                best = r["eval"]
    attempts, filtered = len(prior), 0
    kwargs = {"resume": prior} if resumable else {}
    end: dict = {}
    for turn, info in _episode(agent.run_episode(env, task, seed=seed, **kwargs), end):
        ev = info.get("eval")
        extra = {k: info[k] for k in _ATTEMPT_FIELDS if info.get(k) is not None}
        base = {"agent": agent.name, "task": task.name, "level": task.level, "turn": turn,
                "backend": backend, "device": device}
        if ev is None:
            filtered += 1
            log.append({"kind": "filtered", **base, **extra, "time": time.time()})
            continue
        attempts += 1
        last = ev
        log.append({"kind": "attempt", **base, "eval": ev, **extra, "time": time.time()})
        if _valid(ev):
            first = first or ev
            if best is None or ev["speedup"] > best["speedup"]:
                best = ev
        status(attempts, ev, best)
    rec = {"kind": "task_done", "agent": agent.name, "task": task.name, "level": task.level,
           "backend": backend, "device": device, "attempts": attempts, "filtered": filtered,
           "budget": budget, "correct": best is not None, "best_speedup": best and best["speedup"],
           "first_speedup": first and first["speedup"], "rules": env.evaluator.rules,
           "format": env.evaluator.format,
           "best_coverage": best and best.get("kernel_coverage"),
           "best_reward": max([ev["reward"] for ev in [best, last] if ev] or [None]),
           "error": None if best else (last or {}).get("error"), "seconds": time.time() - t0,
           "stopped_early": _stopped_early(attempts, budget, end.get("reason")), "time": time.time()}
    usage = agent.usage() if hasattr(agent, "usage") else None
    if usage:
        rec["llm_usage"] = {k: round(v - (usage0 or {}).get(k, 0), 6) for k, v in usage.items()}
    return rec


def _episode(episode, end: dict):
    """The agent's ``(turn, info)`` items; what its ``run_episode`` returns (why it stopped) goes to
    ``end["reason"]``."""
    end["reason"] = yield from episode


def _stopped_early(attempts: int, budget: int, reason) -> str | None:
    """Why a task got fewer attempts than the budget (None when it got them all)."""
    if attempts >= budget:
        return None
    why = str(reason) if reason else "the agent gave no reason"
    return f"stopped after {attempts} of {budget} attempts: {why}"


def _skipped_note(skipped: int) -> str:
    return f" ({plural(skipped, 'task')} skipped: the agent has no starting point for them)" if skipped else ""


def _outcome(ev: dict) -> str:
    """One attempt's outcome in a few words, for the plain log lines."""
    if _valid(ev):
        return f"correct, {_fmt(ev['speedup'])}"
    if ev.get("correct"):
        return f"correct but flagged ({', '.join(ev.get('integrity_flags') or [])})"
    first = (ev.get("error") or "").strip().splitlines()
    return f"failed at {ev.get('error_stage') or 'evaluation'}" + (f": {first[0][:100]}" if first else "")


def _task_outcome(rec: dict) -> str:
    return f"correct, best {_fmt(rec['best_speedup'])}" if rec["correct"] else "no correct attempt"


def _fmt(s) -> str:
    return "-" if s is None else f"{s:.2f}x"


def _pct(c) -> str:
    """A kernel coverage (the best attempt's share of forward's time in its own kernels), where recorded."""
    return "-" if c is None else f"{c:.0%}"


def print_table(console, log: RunLog, agent: str, task_names: list[str]) -> None:
    done = log.done()
    table = Table(title=escape(f"kbench run: {agent} ({log.path})"))
    for col, just in (("task", "left"), ("correct", "center"), ("first", "right"), ("best", "right"),
                      ("coverage", "right"), ("attempts", "right"), ("seconds", "right"), ("note", "left")):
        table.add_column(col, justify=just)
    rows = [done[(agent, n)] for n in task_names if (agent, n) in done]
    for r in rows:
        notes = [(r.get("error") or "").splitlines()[0][:60]] if not r["correct"] and r.get("error") else []
        note = escape("; ".join(notes + ([r["stopped_early"]] if r.get("stopped_early") else [])))
        table.add_row(escape(r["task"]), "yes" if r["correct"] else "no", _fmt(r.get("first_speedup")),
                      _fmt(r.get("best_speedup")), _pct(r.get("best_coverage")), str(r["attempts"]),
                      f"{r['seconds']:.1f}", note)
    n = len(rows)
    ok = [r for r in rows if r["correct"]]
    gm = geomean([r["best_speedup"] for r in ok])
    faster = sum(1 for r in ok if (r["best_speedup"] or 0) > 1.0)
    console.print(table)
    rate = "" if n == 0 else f" = {faster / n:.2f}"
    console.print(f"correct {len(ok)}/{n}; fast_1 (correct and faster than eager) {faster}/{n}{rate}; "
                  f"geometric-mean speedup of correct {_fmt(gm)}", markup=False)
    console.print(f"more: kbench report {log.path}", markup=False)
