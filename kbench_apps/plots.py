"""The report's PNG plots (matplotlib, the ``[plot]`` extra): fast_p curves, the speedup distribution, and the
best speedup over evaluations, drawn from the per-task outcomes of ``kbench_apps.results``."""

from __future__ import annotations

import math
import random
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # noqa: E402

from kbench_apps.results import P_VALUES, TaskOutcome, fast_p, outcomes, summarize  # noqa: E402
from kbench_env.tasks.task import geomean  # noqa: E402

TIMES = FuncFormatter(lambda v, _pos: f"{v:g}x")

#: Tick mantissas per decade, coarse to fine: the finest that keeps a log speedup axis to ``_MAX_TICKS`` labels is
#: used, so that a run whose best is 1.3x still gets labels between 1x and its best.
_MANTISSAS = ((1,), (1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8),
              (1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 9))
_MAX_TICKS = 12


def speedup_ticks(lo: float, hi: float) -> list[float]:
    """Labelled ticks for a log speedup axis from ``lo`` to ``hi``: 1x and round values, as many as fit."""
    lo, hi = max(lo, 1e-6), max(hi, lo * 1.01)
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    best = [1.0] if lo <= 1 <= hi else []
    for mantissas in _MANTISSAS:
        ticks = sorted({round(m * 10.0 ** d, 6) for d in decades for m in mantissas} | {1.0})
        ticks = [t for t in ticks if lo <= t <= hi]
        if len(ticks) > _MAX_TICKS:
            break
        best = ticks
    return best


def _speedup_axis(axis) -> None:
    """A log speedup axis labelled at round values within its current limits (set them first)."""
    lo, hi = sorted(axis.get_view_interval())
    axis.set_major_locator(FixedLocator(speedup_ticks(lo, hi)))
    axis.set_major_formatter(TIMES)
    axis.set_minor_formatter(NullFormatter())


def make_plots(records: list[dict], out_dir: Path, p_values=P_VALUES) -> dict:
    """Writes fast_p.png, speedup_distribution.png and best_over_evaluations.png; returns {name: path}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    outs = outcomes(records)
    agents = list(summarize(records, p_values)["agents"])
    colors = {a: plt.cm.tab10(i % 10) for i, a in enumerate(agents)}
    mine = {a: [o for (ag, _), o in outs.items() if ag == a] for a in agents}
    paths = {}
    for name, draw in (("fast_p", _fast_p), ("speedup_distribution", _speedup_distribution),
                       ("best_over_evaluations", _best_over_evaluations)):
        fig = draw(mine, colors, p_values)
        fig.tight_layout()
        paths[name] = out_dir / f"{name}.png"
        fig.savefig(paths[name], dpi=110)
        plt.close(fig)
    return paths


def _fast_p(mine: dict[str, list[TaskOutcome]], colors: dict, p_values):
    """fast_p against the threshold p, one step curve per agent, dots at the report's p values."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    top = max([o.best_speedup for outs in mine.values() for o in outs if o.correct] + [2.5])
    xs = [top * 1.1 * i / 400 for i in range(401)]
    for a, outs in mine.items():
        ax.step(xs, [fast_p(outs, x) for x in xs], where="post", color=colors[a], lw=2,
                label=f"{a} ({len(outs)} tasks)")
        ax.plot(p_values, [fast_p(outs, p) for p in p_values], "o", color=colors[a], ms=5)
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.set_xlabel("speedup threshold p (vs. baseline)")
    ax.set_ylabel("fast_p: fraction of tasks correct and > p")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(0, xs[-1])
    ax.set_title("fast_p")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _speedup_distribution(mine: dict[str, list[TaskOutcome]], colors: dict, _p_values):
    """Every valid attempt (light) and each task's best (dark), log scale, one row per agent."""
    agents = list(mine)
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.8 * max(1, len(agents))))
    jitter = random.Random(0)  # the same picture for the same records
    for row, a in enumerate(agents):
        every = [s for o in mine[a] for s in o.speedups]
        best = [o.best_speedup for o in mine[a] if o.correct]
        ax.scatter(every, [row + jitter.uniform(-0.25, 0.25) for _ in every], s=14, color=colors[a], alpha=0.3,
                   label="valid attempts" if row == 0 else None)
        ax.scatter(best, [row] * len(best), s=60, marker="D", color=colors[a], edgecolor="black",
                   label="best per task" if row == 0 else None)
        gm = geomean(best)
        if gm:
            ax.plot([gm, gm], [row - 0.35, row + 0.35], color="black", lw=2)
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    _speedup_axis(ax.xaxis)
    ax.set_yticks(range(len(agents)))
    ax.set_yticklabels(agents, fontsize=8)
    ax.set_ylim(-0.6, len(agents) - 0.4)
    ax.set_xlabel("speedup vs. baseline (log scale; black bar: geometric mean of per-task bests)")
    ax.set_title("speedup distribution")
    ax.grid(alpha=0.3, axis="x")
    if agents:
        ax.legend(fontsize=8, loc="best")
    return fig


#: Up to this many tasks per agent, each thin line gets its own legend entry (told apart by line style).
_NAMED_TASK_LINES = 8
_STYLES = ("-", "--", "-.", ":")


def _best_over_evaluations(mine: dict[str, list[TaskOutcome]], colors: dict, _p_values):
    """Left: best speedup so far per task (thin) and its geomean (thick); right: share of tasks correct so far."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for a, outs in mine.items():
        curves = [o.curve for o in outs if o.curve]
        if not curves:
            continue
        n = max(len(c) for c in curves)
        ext = [c + [c[-1]] * (n - len(c)) for c in curves]  # a task that stopped keeps its last best
        evals = range(1, n + 1)
        named = [o.task for o in outs if o.curve]
        for i, (task, c) in enumerate(zip(named, ext)):
            # few tasks: each line named; many: one legend entry stands for the agent's thin lines
            label = f"{a}: {task}" if len(ext) <= _NAMED_TASK_LINES else (f"{a}: each task" if i == 0 else None)
            ax1.plot(evals, [v if v is not None else float("nan") for v in c], color=colors[a], alpha=0.35, lw=1,
                     ls=_STYLES[i % len(_STYLES)] if len(ext) <= _NAMED_TASK_LINES else "-", label=label)
        gm = [geomean([c[k] for c in ext]) for k in range(n)]
        ax1.plot(evals, [g if g is not None else float("nan") for g in gm], color=colors[a], lw=2.5,
                 marker="o", ms=3, label=f"{a}: geomean")
        ax2.plot(evals, [sum(1 for c in ext if c[k] is not None) / len(ext) for k in range(n)],
                 color=colors[a], lw=2.5, marker="o", ms=3, label=a)
    ax1.axhline(1.0, color="grey", ls=":", lw=1)
    ax1.set_yscale("log")
    _speedup_axis(ax1.yaxis)
    ax1.set_xlabel("evaluations spent on the task")
    ax1.set_ylabel("best speedup so far (thin: tasks; thick: geomean)")
    ax1.set_title("best speedup over evaluations")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=7, loc="best")
    ax2.set_xlabel("evaluations spent on the task")
    ax2.set_ylabel("fraction of tasks with a correct kernel")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set_title("correct so far")
    ax2.grid(alpha=0.3)
    return fig
