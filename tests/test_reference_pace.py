"""A CPU pairing whose reference ran disturbed is timed again once (pipeline/reference_pace.py): the reference's
own pace, against this evaluator's recent pairings of the configuration, says the machine was in a slow stretch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import ROOT, read
from kbench_env.pipeline import paired
from kbench_env.pipeline.reference_pace import DISTURBED, RECENT, ReferencePace, paired_again_if_disturbed
from kbench_env.tasks.suite import resolve_task


def _pt(ref_ms, speedup=2.0, wrong=None):
    return SimpleNamespace(wrong=wrong, reference=None if wrong else SimpleNamespace(median_ms=ref_ms),
                           speedup=speedup)


def _timer(*pts):
    calls = list(pts)
    made = []

    def once():
        made.append(calls.pop(0))
        return made[-1]

    return once, made


def test_the_pace_is_the_recent_median_and_a_lasting_change_becomes_it():
    pace = ReferencePace()
    assert not pace.disturbed("k", 100.0)  # nothing recent: never disturbed
    for ms in (1.0, 1.1, 0.9):
        pace.record("k", ms)
    assert pace.disturbed("k", DISTURBED * 1.0 + 0.01) and not pace.disturbed("k", DISTURBED * 1.0 - 0.01)
    assert not pace.disturbed("other", 100.0)
    for _ in range(RECENT):  # the machine slower for good: the recent median follows it
        pace.record("k", 3.0)
    assert not pace.disturbed("k", 3.5)


def test_a_disturbed_pairing_is_timed_again_once_and_the_faster_reference_counts():
    pace = ReferencePace()
    for _ in range(3):
        pace.record("k", 1.0)
    once, made = _timer(_pt(3.0, speedup=1.01), _pt(1.1, speedup=1.8), _pt(1.0))
    pt, again = paired_again_if_disturbed(once, pace, "k")
    assert len(made) == 2 and pt.speedup == 1.8 and again > 0.0
    once, made = _timer(_pt(3.0, speedup=1.01), _pt(3.5, speedup=1.7))  # the second ran slower still: the first
    pt, _ = paired_again_if_disturbed(once, pace, "k")
    assert len(made) == 2 and pt.speedup == 1.01
    once, made = _timer(_pt(3.0), _pt(None, wrong="output 3 wrong"))  # a wrong output in either fails it
    pt, _ = paired_again_if_disturbed(once, pace, "k")
    assert pt.wrong == "output 3 wrong"
    once, made = _timer(_pt(1.05, speedup=0.5), _pt(1.0))  # a slow candidate beside a steady reference: once
    pt, again = paired_again_if_disturbed(once, pace, "k")
    assert len(made) == 1 and pt.speedup == 0.5 and again == 0.0


def test_an_evaluation_whose_pairing_ran_disturbed_times_it_again(evaluator, monkeypatch):
    """Through the evaluator: a pairing made to look disturbed (its reference far slower a call than any recorded,
    its speedup pulled to 1) after an evaluation that set the configuration's pace is timed again, and the second
    pairing counts; the first evaluation, with no pace yet, times each configuration once."""
    task, honest = resolve_task("level1/relu"), read(ROOT / "tasks/solutions/cpu/level1/relu.py")
    monkeypatch.setattr(evaluator.baselines, "pace", ReferencePace())
    real, calls, disturb = paired.time_paired, [], []

    def time_paired(candidate, reference, config, *a, **k):
        pt = real(candidate, reference, config, *a, **k)
        calls.append(config)
        if config in disturb:
            disturb.remove(config)
            pt.reference.median_ms = 1000 * max(max(r) for r in evaluator.baselines.pace._recent.values())
            pt.speedup, pt.ci = 1.0, (0.99, 1.01)
        return pt

    monkeypatch.setattr(paired, "time_paired", time_paired)
    first = evaluator.evaluate(task, honest, seed=3)
    assert first.correct and len(calls) == len(first.configs), first.feedback()
    name = first.configs[0].name
    calls.clear()
    disturb.append(name)
    second = evaluator.evaluate(task, honest, seed=4)
    assert second.correct, second.feedback()
    assert calls.count(name) == 2 and len(calls) == len(second.configs) + 1, (calls, evaluator.baselines.pace._recent)
    assert second.configs[0].speedup != 1.0 and second.configs[0].speedup_ci != [0.99, 1.01]
