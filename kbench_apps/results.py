"""Run records (the JSONL lines ``kbench run`` writes) into per-task outcomes, metrics and the report's summary.

Metrics, per agent and per level, side by side (KernelBench's definitions):

- ``fast_p``: the fraction of ALL tasks the agent ran that are correct *and* faster than ``p`` times the baseline
  (``speedup > p``), for p in ``P_VALUES``; ``fast_0`` is the correctness rate;
- correctness rate, geometric-mean speedup over the correct tasks, attempts, LLM tokens and cost when recorded;
- kernel coverage, where the records have it: the best attempt's share of forward's time in its own kernels
  (``EvalResult.kernel_coverage``), per task and as the mean over correct tasks, so that a mostly-PyTorch answer
  (allowed under ``rules="kernelbench"``) shows as such;
- soft-verifier precision and recall, when the records hold predictions (``verifier_metrics``).

A task's result is its best valid attempt (correct, timed, no integrity flag). This module reads records only; it
never evaluates anything.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from kbench_apps.verifier_metrics import verifier_accuracy
from kbench_env.tasks.task import geomean


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
        "fast_p": {p_key(p): fast_p(outs, p) for p in p_values},
        "geomean_speedup": geomean([o.best_speedup for o in outs if o.correct]),
        "max_speedup": max([o.best_speedup for o in outs if o.correct] or [None], key=lambda x: x or 0),
        "mean_coverage": _mean([o.best_coverage for o in outs if o.correct and o.best_coverage is not None]),
        "llm_usage": usage or None,
    }


def _mean(xs) -> float | None:
    return sum(xs) / len(xs) if xs else None


def p_key(p: float) -> str:
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
    for a in agents:
        acc = verifier_accuracy([r for r in records if r["agent"] == a])
        if acc:
            summary["verifier"][a] = acc
    return summary
