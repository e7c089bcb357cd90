"""``kbench report``: metrics, plots and a Markdown report from the JSONL results of ``kbench run``.

Metrics, per agent and per level, side by side (KernelBench's definitions):

- ``fast_p``: the fraction of ALL tasks the agent ran that are correct *and* faster than ``p`` times the baseline
  (``speedup > p``), for p in ``P_VALUES``; ``fast_0`` is the correctness rate;
- correctness rate, geometric-mean speedup over the correct tasks, attempts, LLM tokens and cost when recorded;
- kernel coverage, where the records have it: the best attempt's share of forward's time in its own kernels
  (``EvalResult.kernel_coverage``), per task and as the mean over correct tasks, so that a mostly-PyTorch answer
  (allowed under ``rules="kernelbench"``) shows as such;
- soft-verifier precision and recall, when the records hold predictions (``agents.soft_verify``).

A task's result is its best valid attempt (correct, timed, no integrity flag). Plots (matplotlib, PNG): fast_p
curves, the speedup distribution, and the best speedup over evaluations. This module reads records only; it
never evaluates anything.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

P_VALUES = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


# ====================================================================== reading
def load_records(paths) -> list[dict]:
    """All records of the given JSONL files (lines cut by a kill are skipped), each tagged with its file."""
    out = []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and rec.get("agent") and rec.get("task"):
                    rec.setdefault("_file", str(path))
                    out.append(rec)
    files_of: dict = {}
    for rec in out:
        files_of.setdefault(rec["agent"], set()).add(rec["_file"])
    for rec in out:  # one agent name in several files: keep the runs apart (e.g. two models, two seeds)
        if len(files_of[rec["agent"]]) > 1:
            rec["agent"] = f"{rec['agent']} ({Path(rec['_file']).stem})"
    return out


def level_of(rec: dict):
    lv = rec.get("level")
    if lv is not None:
        return lv
    head = str(rec.get("task", "")).split("/", 1)[0]
    return int(head[5:]) if head.startswith("level") and head[5:].isdigit() else (head or "?")


def _valid(ev: dict | None) -> bool:
    return bool(ev and ev.get("correct") and not ev.get("integrity_flags") and _num(ev.get("speedup")) is not None)


def _num(v):
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


@dataclass
class TaskOutcome:
    """One agent on one task: its best valid speedup and its history."""

    agent: str
    task: str
    level: object
    finished: bool = False
    attempts: int = 0
    filtered: int = 0
    best_speedup: float | None = None  # of the best valid attempt; None if none was valid
    curve: list = field(default_factory=list)  # best valid speedup so far after each evaluation (None before one)
    speedups: list = field(default_factory=list)  # every valid attempt's speedup
    llm_usage: dict | None = None
    best_coverage: float | None = None  # kernel coverage of the best valid attempt, where recorded

    @property
    def correct(self) -> bool:
        return self.best_speedup is not None


def outcomes(records: list[dict]) -> dict:
    """``{(agent, task): TaskOutcome}`` from run records (attempts, filtered, task_done)."""
    out: dict = {}

    def get(r) -> TaskOutcome:
        key = (r["agent"], r["task"])
        if key not in out:
            out[key] = TaskOutcome(agent=r["agent"], task=r["task"], level=level_of(r))
        return out[key]

    for r in sorted(records, key=lambda r: r.get("time") or 0):
        kind = r.get("kind")
        if kind == "attempt":
            o = get(r)
            o.attempts += 1
            ev = r.get("eval") or {}
            if _valid(ev):
                s = _num(ev["speedup"])
                o.speedups.append(s)
                if o.best_speedup is None or s > o.best_speedup:
                    o.best_speedup, o.best_coverage = s, _num(ev.get("kernel_coverage"))
            o.curve.append(o.best_speedup)
        elif kind == "filtered":
            get(r).filtered += 1
        elif kind == "task_done":
            o = get(r)
            o.finished = True
            o.level = level_of(r)
            s = _num(r.get("best_speedup"))
            if r.get("correct") and s is not None and not o.attempts:  # a log without attempt records
                o.best_speedup, o.attempts, o.curve, o.speedups = s, r.get("attempts") or 1, [s], [s]
                o.best_coverage = _num(r.get("best_coverage"))
            if r.get("llm_usage"):
                o.llm_usage = r["llm_usage"]
    return out


# ====================================================================== metrics
def geomean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fast_p(outs: list[TaskOutcome], p: float) -> float | None:
    """Fraction of all tasks in ``outs`` that are correct with speedup > p (KernelBench's fast_p)."""
    if not outs:
        return None
    return sum(1 for o in outs if o.correct and o.best_speedup > p) / len(outs)


def metrics(outs: list[TaskOutcome], p_values=P_VALUES) -> dict:
    usage: dict = {}
    for o in outs:
        for k, v in (o.llm_usage or {}).items():
            if isinstance(v, (int, float)):
                usage[k] = usage.get(k, 0) + v
    return {
        "tasks": len(outs),
        "unfinished": sum(1 for o in outs if not o.finished),
        "attempts": sum(o.attempts for o in outs),
        "filtered": sum(o.filtered for o in outs),
        "correct": sum(1 for o in outs if o.correct),
        "correct_rate": (sum(1 for o in outs if o.correct) / len(outs)) if outs else None,
        "fast_p": {_pkey(p): fast_p(outs, p) for p in p_values},
        "geomean_speedup": geomean([o.best_speedup for o in outs if o.correct]),
        "max_speedup": max([o.best_speedup for o in outs if o.correct] or [None], key=lambda x: x or 0),
        "mean_coverage": _mean([o.best_coverage for o in outs if o.correct and o.best_coverage is not None]),
        "llm_usage": usage or None,
    }


def _mean(xs) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _pkey(p: float) -> str:
    return f"{p:g}"


def summarize(records: list[dict], p_values=P_VALUES) -> dict:
    """Everything the report shows, as plain data."""
    outs = outcomes(records)
    agents = list(dict.fromkeys(r["agent"] for r in records))  # in order of appearance: files as given
    levels = sorted({o.level for o in outs.values()}, key=lambda lv: (isinstance(lv, str), str(lv)))
    summary = {"p_values": list(p_values), "agents": {}, "levels": {}, "tasks": {}, "verifier": {}}
    for a in agents:
        mine = [o for (ag, _), o in outs.items() if ag == a]
        summary["agents"][a] = metrics(mine, p_values)
        for lv in levels:
            sub = [o for o in mine if o.level == lv]
            if sub:
                summary["levels"].setdefault(str(lv), {})[a] = metrics(sub, p_values)
    for (a, t), o in sorted(outs.items(), key=lambda kv: kv[0][1]):
        summary["tasks"].setdefault(t, {})[a] = {"correct": o.correct, "best_speedup": o.best_speedup,
                                                 "attempts": o.attempts, "finished": o.finished,
                                                 "coverage": o.best_coverage}
    try:
        from agents.soft_verify import verifier_accuracy
    except ImportError:  # the report works without the agents package
        verifier_accuracy = None
    if verifier_accuracy is not None:
        for a in agents:
            acc = verifier_accuracy([r for r in records if r["agent"] == a])
            if acc:
                summary["verifier"][a] = acc
    return summary


# ====================================================================== plots
def make_plots(records: list[dict], out_dir: Path, p_values=P_VALUES) -> dict:
    """Writes fast_p.png, speedup_distribution.png and best_over_evaluations.png; returns {name: path}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.ticker import FuncFormatter

    times = FuncFormatter(lambda v, _pos: f"{v:g}x")
    out_dir.mkdir(parents=True, exist_ok=True)
    outs = outcomes(records)
    agents = list(summarize(records, p_values)["agents"])
    colors = {a: plt.cm.tab10(i % 10) for i, a in enumerate(agents)}
    paths = {}

    # fast_p curves
    fig, ax = plt.subplots(figsize=(7, 4.2))
    top = max([o.best_speedup for o in outs.values() if o.correct] + [2.5])
    xs = [top * 1.1 * i / 400 for i in range(401)]
    for a in agents:
        mine = [o for (ag, _), o in outs.items() if ag == a]
        ax.step(xs, [fast_p(mine, x) for x in xs], where="post", color=colors[a], lw=2, label=f"{a} ({len(mine)} tasks)")
        ax.plot(p_values, [fast_p(mine, p) for p in p_values], "o", color=colors[a], ms=5)
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.set_xlabel("speedup threshold p (vs. baseline)")
    ax.set_ylabel("fast_p: fraction of tasks correct and > p")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(0, xs[-1])
    ax.set_title("fast_p")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths["fast_p"] = out_dir / "fast_p.png"
    fig.savefig(paths["fast_p"], dpi=110)
    plt.close(fig)

    # speedup distribution: every valid attempt (light) and each task's best (dark), log scale
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.8 * max(1, len(agents))))
    import random as _random

    jitter = _random.Random(0)
    for row, a in enumerate(agents):
        mine = [o for (ag, _), o in outs.items() if ag == a]
        every = [s for o in mine for s in o.speedups]
        best = [o.best_speedup for o in mine if o.correct]
        ax.scatter(every, [row + jitter.uniform(-0.25, 0.25) for _ in every], s=14, color=colors[a], alpha=0.3,
                   label="valid attempts" if row == 0 else None)
        ax.scatter(best, [row] * len(best), s=60, marker="D", color=colors[a], edgecolor="black",
                   label="best per task" if row == 0 else None)
        gm = geomean(best)
        if gm:
            ax.plot([gm, gm], [row - 0.35, row + 0.35], color="black", lw=2)
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(times)
    ax.xaxis.set_minor_formatter(times)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_yticks(range(len(agents)))
    ax.set_yticklabels(agents, fontsize=8)
    ax.set_ylim(-0.6, len(agents) - 0.4)
    ax.set_xlabel("speedup vs. baseline (log scale; black bar: geometric mean of per-task bests)")
    ax.set_title("speedup distribution")
    ax.grid(alpha=0.3, axis="x")
    if agents:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    paths["speedup_distribution"] = out_dir / "speedup_distribution.png"
    fig.savefig(paths["speedup_distribution"], dpi=110)
    plt.close(fig)

    # best speedup over evaluations
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for a in agents:
        mine = [o for (ag, _), o in outs.items() if ag == a and o.curve]
        if not mine:
            continue
        n = max(len(o.curve) for o in mine)
        ext = [o.curve + [o.curve[-1]] * (n - len(o.curve)) for o in mine]
        for o, c in zip(mine, ext):
            ax1.plot(range(1, n + 1), [v if v is not None else float("nan") for v in c], color=colors[a], alpha=0.25,
                     lw=1)
        gm = [geomean([c[k] for c in ext]) for k in range(n)]
        ax1.plot(range(1, n + 1), [g if g is not None else float("nan") for g in gm], color=colors[a], lw=2.5,
                 marker="o", ms=3, label=a)
        ax2.plot(range(1, n + 1), [sum(1 for c in ext if c[k] is not None) / len(ext) for k in range(n)],
                 color=colors[a], lw=2.5, marker="o", ms=3, label=a)
    ax1.axhline(1.0, color="grey", ls=":", lw=1)
    ax1.set_yscale("log")
    ax1.yaxis.set_major_formatter(times)
    ax1.yaxis.set_minor_formatter(times)
    ax1.tick_params(axis="y", which="minor", labelsize=7)
    ax1.set_xlabel("evaluations spent on the task")
    ax1.set_ylabel("best speedup so far (thin: tasks; thick: geomean)")
    ax1.set_title("best speedup over evaluations")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="best")
    ax2.set_xlabel("evaluations spent on the task")
    ax2.set_ylabel("fraction of tasks with a correct kernel")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set_title("correct so far")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    paths["best_over_evaluations"] = out_dir / "best_over_evaluations.png"
    fig.savefig(paths["best_over_evaluations"], dpi=110)
    plt.close(fig)
    return paths


# ====================================================================== text
def _f(v, fmt=".2f", suffix="") -> str:
    return "-" if v is None else format(v, fmt) + suffix


def metric_columns(p_values=P_VALUES) -> list[tuple[str, callable]]:
    cols = [("tasks", lambda m: str(m["tasks"]) + (f" ({m['unfinished']} unfinished)" if m["unfinished"] else "")),
            ("attempts", lambda m: str(m["attempts"]) + (f" (+{m['filtered']} filtered)" if m["filtered"] else "")),
            ("correct", lambda m: _f(m["correct_rate"]))]
    cols += [(f"fast_{_pkey(p)}", (lambda k: lambda m: _f(m["fast_p"][k]))(_pkey(p))) for p in p_values]
    cols += [("geomean speedup", lambda m: _f(m["geomean_speedup"], ".3f", "x")),
             ("max", lambda m: _f(m["max_speedup"], ".2f", "x")),
             ("kernel coverage", lambda m: _f(m.get("mean_coverage"), ".0%"))]
    return cols


def _usage_text(u: dict | None) -> str:
    if not u:
        return "-"
    return (f"{int(u.get('calls', 0))} calls, {int(u.get('prompt_tokens', 0)):,} in / "
            f"{int(u.get('completion_tokens', 0)):,} out tokens, ${u.get('cost_usd', 0):.4f}")


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(summary: dict, sources: list[str], plots: dict | None, out_dir: Path) -> str:
    cols = metric_columns(summary["p_values"])
    parts = ["# kbench report", "", "Results: " + ", ".join(f"`{s}`" for s in sources), "",
             "fast_p: fraction of all tasks an agent ran that are correct with speedup > p over the baseline "
             "(KernelBench's definition; fast_0 = correctness rate). Geometric mean over correct tasks. A task's "
             "result is its best valid attempt.", "", "## Summary", ""]
    agents = list(summary["agents"])
    parts.append(_md_table(["agent"] + [c for c, _ in cols],
                           [[a] + [fn(summary["agents"][a]) for _, fn in cols] for a in agents]))
    if any(summary["agents"][a]["llm_usage"] for a in agents):
        parts += ["", _md_table(["agent", "LLM usage"], [[a, _usage_text(summary["agents"][a]["llm_usage"])]
                                                         for a in agents])]
    parts += ["", "## Per level", ""]
    for lv, per in summary["levels"].items():
        parts += [f"### level {lv}", "", _md_table(["agent"] + [c for c, _ in cols],
                                                   [[a] + [fn(m) for _, fn in cols] for a, m in per.items()]), ""]
    parts += ["## Per task (best speedup, with its kernel coverage where recorded; `fail`: no correct attempt)", ""]
    rows = []
    for t, per in summary["tasks"].items():
        row = [t]
        for a in agents:
            x = per.get(a)
            row.append("not run" if x is None else (_f(x["best_speedup"], ".3f", "x") if x["correct"] else "fail")
                       + ("" if x is None or x.get("coverage") is None else f" (cov {x['coverage']:.0%})")
                       + ("" if x is None or x["finished"] else " (unfinished)"))
        rows.append(row)
    parts += [_md_table(["task"] + agents, rows), ""]
    if summary["verifier"]:
        parts += ["## Soft verifiers", "", "Predictions against real outcomes of evaluated candidates (filtered "
                  "candidates that were not audited have no outcome). `any`: the filter as a whole (a failure "
                  "predicted vs. the candidate not correct).", ""]
        vrows = []
        for a, acc in summary["verifier"].items():
            for check, m in acc.items():
                vrows.append([a, check, str(m["n"]), f"{m['tp']}/{m['fp']}/{m['fn']}/{m['tn']}", _f(m["precision"]),
                              _f(m["recall"]), _f(m["accuracy"])])
        parts += [_md_table(["agent", "check", "n", "tp/fp/fn/tn", "precision", "recall", "accuracy"], vrows), ""]
    if plots:
        parts += ["## Plots", ""]
        titles = {"fast_p": "fast_p curves", "speedup_distribution": "Speedup distribution",
                  "best_over_evaluations": "Best speedup over evaluations"}
        for name, path in plots.items():
            rel = Path(path).resolve().relative_to(out_dir.resolve()) if Path(path).resolve().is_relative_to(
                out_dir.resolve()) else Path(path)
            parts += [f"### {titles.get(name, name)}", "", f"![{name}]({rel.as_posix()})", ""]
    return "\n".join(parts).rstrip() + "\n"


def print_summary(summary: dict, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    cols = metric_columns(summary["p_values"])

    def table(title, per):  # metrics as rows, agents side by side as columns
        t = Table(title=title)
        t.add_column("metric")
        for a in per:
            t.add_column(escape(a), justify="right", overflow="fold")
        for c, fn in cols:
            t.add_row(c, *[fn(m) for m in per.values()])
        console.print(t)

    table("kbench report: all tasks", summary["agents"])
    if len(summary["levels"]) > 1:
        for lv, per in summary["levels"].items():
            table(f"level {lv}", per)
    for a, acc in summary["verifier"].items():
        t = Table(title=f"soft verifiers: {escape(a)}")
        for c in ("check", "n", "precision", "recall", "accuracy"):
            t.add_column(c, justify="right")
        for check, m in acc.items():
            t.add_row(check, str(m["n"]), _f(m["precision"]), _f(m["recall"]), _f(m["accuracy"]))
        console.print(t)


def write_report(paths, out_dir, plots: bool = True, p_values=P_VALUES) -> tuple[dict, Path]:
    """Summary, plots and ``report.md`` in ``out_dir``; returns ``(summary, report path)``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = [str(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    records = load_records(sources)
    if not records:
        raise ValueError(f"no run records in {', '.join(sources)}")
    summary = summarize(records, p_values)
    figs = make_plots(records, out_dir, p_values) if plots else None
    if figs:
        summary["plots"] = {k: str(v) for k, v in figs.items()}
    report = out_dir / "report.md"
    report.write_text(markdown(summary, sources, figs, out_dir), encoding="utf-8")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    return summary, report


def main(args) -> int:
    for p in args.results:
        if not Path(p).is_file():
            raise FileNotFoundError(f"no results file {p}")
    summary, report = write_report(args.results, args.out_dir, plots=not args.no_plots)
    if args.json:
        print(json.dumps(summary, default=str))
        return 0
    print_summary(summary)
    print(f"report: {report}" + ("" if args.no_plots else f" (plots: {', '.join(Path(p).name for p in summary['plots'].values())})"))
    return 0
